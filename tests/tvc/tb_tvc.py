"""cocotb testbench of the TVC on its generated Verilog, against the golden model.

Random traffic: presets and ``N_max`` writes, ``LEARN`` (rarely with ``length == 0``),
``NPU_START``/``NPU_DONE`` and ``ASK`` with log-uniform values so that every outcome occurs
(no NPU task, no room, empty PVCT, clamp, quotient, saturated quotient). Commands are often
presented while the block is busy (they must wait, not vanish), writes collide with
commands, and the answer port stalls at random. Directed sequences, spread over the run,
aim at the corners random values rarely reach: an ``ASK`` accepted in the very cycle its
``C_left`` is -1, 0 and +1 (with ``sum(PVCT)`` zero and not), a saturated ``C_npu``, a
``LEARN`` that saturates and one with ``length == 0``. Functional coverage
(``harness/coverage.py``) counts those bins and every answer outcome; a run that leaves a
bin below its required count fails naming it.

Every accepted write and command is applied to ``ahasd.golden.tvc.TVC`` at its acceptance
cycle, in acceptance order. Checked: each answer (``n`` and ``C_left``) against the golden
``terms`` of that ``ASK``; the table entries and ``N_max`` through the read port in every
idle cycle (round robin); ``ncr``, ``npu_busy`` and ``error`` against the golden model
whenever no ``LEARN`` is in progress (the RTL raises ``error`` for a bad ``LEARN`` when the
``LEARN`` completes, the golden model at once): at every accepted command, in every idle
cycle whose number is a multiple of 16 and right after every ``LEARN``; ``cmd.ready`` and
``wr.ready`` low in every cycle while the block is busy; ``busy`` low whenever no ``LEARN``
or ``ASK`` is in progress; no answer without an ``ASK``, and the answer held until it is
taken; the ``ASK`` latency (acceptance to answer valid) and the ``LEARN`` latency
(acceptance to the entry being in its table) against the 40-cycle target and against the
exact latency ``hw/tvc.py`` documents (``4`` or ``4 + divider_cycles["ask"]``; ``2`` or
``2 + divider_cycles["learn"]``), which the Amaranth tier asserts too: a late answer well
within 40 cycles is still a bug.

How it stays fast (``docs/performance.md``, "Testbenches"): one coroutine drives and
samples, through :class:`~ahasd.hw.tb.pins.Pin` s, and writes a port only when its value
changes. An idle cycle in which nothing is presented costs one wake-up, at the falling
edge: the state it reads there (``busy``, the status registers, ``rd_value`` of the slot
driven a cycle before) is that of registers and of inputs that stay put until the testbench
writes again, so it is what ``ReadOnly`` would have shown. A cycle that presents a write or
a command also waits for ``ReadOnly`` to see the handshake. A ``LEARN`` or ``ASK`` in
progress is not visited cycle by cycle: after its first busy cycle the testbench waits for
``busy`` to fall (``LEARN``) or ``ans.valid`` to rise (``ASK``) with one trigger and counts
the cycles from the simulation time, and an answer stalled for ``s`` cycles is one timer.
Three monitor coroutines, woken only when ``cmd.ready``, ``wr.ready`` or ``ans.valid`` rises,
note the cycle of each rise; a ready that is high in a busy cycle was either high in the
first busy cycle (read directly) or rose in a busy cycle (noted), so the ready check still
sees every busy cycle, and a rise of ``ans.valid`` that no ``ASK`` is waiting for is noted
whenever it happens. (``First(...)`` over several triggers would do the same from the main
coroutine, at about fifteen times the cost of one wake-up.) A watchdog fails the test if
the main coroutine waits more than ``WATCHDOG_CYCLES`` for a trigger that does not come.

Environment: ``AHASD_TB_PARAMS`` (TVCParams as JSON), ``AHASD_TB_SEED``, ``AHASD_COMMANDS``
(commands on the command port, default 50,000).
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time
from harness.coverage import Coverage
from harness.tb import params_from_env, report, rng_from_env

from ahasd.golden.tvc import TABLES
from ahasd.golden.tvc import TVC as GoldenTVC
from ahasd.hw.tb.pins import Pin, pins
from ahasd.hw.tvc import Op, Table, answer_layout, command_layout, divider_cycles, write_layout
from ahasd.params import TVCParams

COMMANDS = int(os.environ.get("AHASD_COMMANDS", "50000"))
LATENCY_TARGET = 40
CLOCK_NS = 10
TABLE_OF_NAME = {"nvct": Table.NVCT, "pdct": Table.PDCT, "pvct": Table.PVCT}
MAX_ERRORS = 60  # the run stops here: the first errors tell the story
# Longer than any legal wait (40 cycles of latency plus an answer stall that is geometric
# with at most a 0.7 stall probability), far shorter than the test's timeout.
WATCHDOG_CYCLES = 1000


SCENARIO_REPEATS = 4  # each directed scenario per run
C_LEFT_BINS = [
    f"C_left {c_left:+d}, sum(PVCT) {pvct}" for c_left in (-1, 0, 1) for pvct in ("zero", "nonzero")
]


def directed_scenarios(params: TVCParams) -> list[tuple]:
    """``("ask", C_left, PVCT empty?)`` for C_left in {-1, 0, 1}; ``("learn", length)``: a
    LEARN with length 0 (the protocol error) and one that saturates (when it can); and an
    ASK whose C_npu saturates (NVCT full, the longest KV cache)."""
    scenarios = [("ask", c_left, zero) for c_left in (-1, 0, 1) for zero in (True, False)]
    scenarios += [("learn", 0), ("c_npu saturated",)]
    if params.cycle_bits + params.frac_bits > params.ratio_bits:
        scenarios.append(("learn", 1))
    return scenarios


def coverage_bins(params: TVCParams) -> dict[str, int]:
    """Every bin and its required count: the C_left boundary of spec 2.2 (-1, 0, +1, with
    sum(PVCT) zero and not), every answer outcome, LEARN (plain, saturated at the table's
    largest entry, length 0) and C_npu saturated at 2**cycle_bits - 1."""
    bins = dict.fromkeys(C_LEFT_BINS, SCENARIO_REPEATS)
    bins |= dict.fromkeys(
        [
            "ask: no NPU task",
            "ask: C_left <= 0",
            "ask: sum(PVCT) == 0",
            "ask: quotient saturated",
            "ask: quotient decides",
            "ask: min(P, N_max) decides",
            "learn",
        ],
        3,
    )
    bins["C_npu saturated"] = SCENARIO_REPEATS
    bins["learn error"] = SCENARIO_REPEATS
    if params.cycle_bits + params.frac_bits > params.ratio_bits:  # else it cannot saturate
        bins["learn saturated"] = SCENARIO_REPEATS
    return bins


class Packer:
    """Field offsets of the block's payload layouts, looked up once (packing per command
    through ``layout.const`` would cost more than the simulation)."""

    def __init__(self, params: TVCParams):
        cmd = command_layout(params)
        self.op_at = cmd["op"].offset
        args_at = cmd["args"].offset
        args = cmd["args"].shape
        learn = args["learn"].shape
        self.learn_at = {
            name: args_at + learn[name].offset for name in ("table", "cycles", "length")
        }
        self.l_kv_at = args_at + args["npu_start"].shape["l_kv"].offset
        self.p_at = args_at + args["ask"].shape["p"].offset
        wr = write_layout(params)
        self.wr_at = {name: wr[name].offset for name in ("table", "index", "value")}
        ans = answer_layout(params)
        self.n_at, self.n_mask = ans["n"].offset, (1 << params.n_bits) - 1
        self.c_left_at = ans["c_left"].offset
        self.c_left_bits = ans["c_left"].shape.width

    def command(self, op: Op, **args: int) -> int:
        bits = op.value << self.op_at
        if op == Op.LEARN:
            for name, value in args.items():
                bits |= int(value) << self.learn_at[name]
        elif op == Op.NPU_START:
            bits |= args["l_kv"] << self.l_kv_at
        elif op == Op.ASK:
            bits |= args["p"] << self.p_at
        return bits

    def write(self, table: Table, index: int, value: int) -> int:
        at = self.wr_at
        return (table.value << at["table"]) | (index << at["index"]) | (value << at["value"])

    def answer(self, bits: int) -> tuple[int, int]:
        n = (bits >> self.n_at) & self.n_mask
        c_left = (bits >> self.c_left_at) & ((1 << self.c_left_bits) - 1)
        if c_left >> (self.c_left_bits - 1):
            c_left -= 1 << self.c_left_bits
        return n, c_left


class Traffic:
    """Random writes and commands, with values spread over every outcome."""

    def __init__(self, params: TVCParams, rng):
        self.p = params
        self.rng = rng
        self.burst: list[tuple] = []

    def log_uniform(self, bits: int, low: int = 0) -> int:
        return max(low, self.rng.randrange(1 << self.rng.randrange(bits + 1)))

    def ratio(self) -> int:
        roll = self.rng.random()
        if roll < 0.08:
            return 0
        if roll < 0.16:
            return self.rng.randrange(1 << self.p.ratio_bits)
        return self.log_uniform(self.p.ratio_bits)

    def write(self) -> tuple:
        rng, p = self.rng, self.p
        if self.burst:
            return self.burst.pop()
        if rng.random() < 0.05:  # empty a whole table again (sum(PVCT) == 0 and friends)
            table = rng.choice(TABLES)
            self.burst = [("write", table, index, 0) for index in range(p.depth)]
            return self.burst.pop()
        if rng.random() < 0.1:
            value = rng.randrange(1 << p.n_bits if rng.random() < 0.5 else min(12, 1 << p.n_bits))
            return ("n_max", value)
        return ("write", rng.choice(TABLES), rng.randrange(p.depth), self.ratio())

    def command(self) -> tuple:
        rng, p = self.rng, self.p
        roll = rng.random()
        if roll < 0.15:
            length = 0 if rng.random() < 0.002 else self.log_uniform(p.length_bits, low=1)
            return ("learn", rng.choice(TABLES), self.log_uniform(p.cycle_bits), length)
        if roll < 0.25:
            return ("npu_start", self.log_uniform(p.length_bits))
        if roll < 0.30:
            return ("npu_done",)
        small = rng.random() < 0.7
        return ("ask", rng.randrange(16) if small else self.log_uniform(p.length_bits))


class Port:
    """A :class:`~ahasd.hw.tb.pins.Pin` written only when its value changes (each write is a
    call into the simulator; most cycles change none of the inputs)."""

    __slots__ = ("level", "pin")

    def __init__(self, pin: Pin, level: int = 0):
        self.pin = pin
        self.level = level
        pin.write(level)

    def set(self, value: int) -> None:
        if value != self.level:
            self.pin.write(value)
            self.level = value


def state_cycle() -> int:
    """The cycle whose register state the design shows now: the falling edge at ``10 k`` ns
    starts cycle ``k``, and the rising edge at ``10 k + 5`` ns ends it (its new state is
    cycle ``k + 1``'s)."""
    return (round(get_sim_time("ns")) + CLOCK_NS // 2) // CLOCK_NS


async def note_rises(handle, rises: list[int]) -> None:
    """Append the cycle of every rise of ``handle`` to ``rises`` (runs until the test ends)."""
    rising = RisingEdge(handle)
    while True:
        await rising
        rises.append(state_cycle())


class TB:
    def __init__(self, dut, params: TVCParams):
        self.dut = dut
        self.params = params
        self.rng = rng_from_env("tvc")
        self.traffic = Traffic(params, rng_from_env("tvc-values"))
        self.packer = Packer(params)
        self.golden = GoldenTVC(params)
        self.divider = divider_cycles(params)
        self.errors: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.ask_latency: Counter[int] = Counter()
        self.learn_latency: Counter[int] = Counter()
        self.cycle = 0
        self.history: deque[tuple[int, tuple]] = deque(maxlen=32)
        self.read_slots = [(t, i) for t in TABLES for i in range(params.depth)] + [("n_max", 0)]
        self.script: deque[tuple] = deque()  # a directed sequence in progress (see scenario)
        self.ask_at_cycle = 0  # the cycle a directed ASK waits for (see scripted)
        self.coverage = Coverage("tvc", coverage_bins(params))
        # Traffic state, shared by the idle cycles and the first cycle of a busy stretch.
        self.cmd_item: tuple | None = None
        self.wr_item: tuple | None = None
        self.accepted = 0
        self.commands = 0
        # Traffic phases change the pressure: back-to-back, sparse, slow answer reader.
        self.idle, self.stall, self.write_rate = 0.0, 0.2, 0.05
        self.scenarios: list[tuple] = []
        self.spacing = self.next_scenario = 1
        # Cycles in which cmd.ready, wr.ready, ans.valid rose (note_rises), and the busy
        # cycles (first, last) of the last LEARN or ASK, whose ready rises are yet to check.
        self.cmd_rises: list[int] = []
        self.wr_rises: list[int] = []
        self.ans_rises: list[int] = []
        self.watch: tuple[int, int] | None = None
        self.status_due = False

    def error(self, message: str) -> None:
        if not self.errors:  # the story so far, for the first error
            self.errors += [f"  accepted at {cycle}: {item}" for cycle, item in self.history]
        if len(self.errors) < MAX_ERRORS + 32:
            self.errors.append(f"cycle {self.cycle}: {message}")

    async def reset(self) -> None:
        dut = self.dut
        Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
        dut.rst.value = 1
        (
            cmd_valid,
            self.cmd_ready,
            cmd_payload,
            wr_valid,
            self.wr_ready,
            wr_payload,
            self.ans_valid,
            ans_ready,
            self.ans_payload,
            rd_table,
            rd_index,
            self.rd_value,
            self.busy,
            self.npu_busy,
            self.ncr,
            self.error_flag,
        ) = pins(
            dut,
            "cmd__valid",
            "cmd__ready",
            "cmd__payload",
            "wr__valid",
            "wr__ready",
            "wr__payload",
            "ans__valid",
            "ans__ready",
            "ans__payload",
            "rd_table",
            "rd_index",
            "rd_value",
            "busy",
            "npu_busy",
            "ncr",
            "error",
        )
        # Payloads defined too: four-state simulators start every input at X.
        self.cmd_valid, self.cmd_payload = Port(cmd_valid), Port(cmd_payload)
        self.wr_valid, self.wr_payload = Port(wr_valid), Port(wr_payload)
        self.ans_ready, self.rd_table, self.rd_index = (
            Port(ans_ready),
            Port(rd_table),
            Port(rd_index),
        )
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        for handle, rises in (
            (dut.cmd__ready, self.cmd_rises),
            (dut.wr__ready, self.wr_rises),
            (dut.ans__valid, self.ans_rises),
        ):
            cocotb.start_soon(note_rises(handle, rises))
        self.first_cycle = self.cycle = state_cycle() - 1

    async def watchdog(self) -> None:
        """Fail the test, with the story so far, when the main coroutine has not moved on
        for WATCHDOG_CYCLES (a busy that never falls, an answer that never comes)."""
        while True:
            await Timer(WATCHDOG_CYCLES // 2 * CLOCK_NS, "ns")
            if state_cycle() - self.cycle > WATCHDOG_CYCLES:
                self.error(
                    f"nothing happened for {WATCHDOG_CYCLES} cycles (busy={self.busy.read()}, "
                    f"ans.valid={self.ans_valid.read()}, last accepted {list(self.history)[-1:]})"
                )
                raise AssertionError("\n".join(self.errors))

    # -- golden side --------------------------------------------------------------------------

    def apply_write(self, item: tuple) -> None:
        if item[0] == "n_max":
            self.golden.n_max = item[1]
        else:
            _, table, index, value = item
            self.golden.write(table, index, value)

    def apply_command(self, item: tuple) -> dict | None:
        """Apply an accepted command to the golden model; what to expect of a LEARN (its
        latency) or an ASK (its answer and latency)."""
        golden, cycle, p = self.golden, self.cycle, self.params
        kind = item[0]
        if kind == "learn":
            _, table, cycles, length = item
            golden.learn(table, cycles, length)
            self.outcomes["learn error" if length == 0 else "learn"] += 1
            saturated = length and (cycles << p.frac_bits) // length >= 1 << p.ratio_bits
            if saturated:
                self.outcomes["learn saturated"] += 1
                self.coverage.sample("learn saturated")
            self.coverage.sample("learn error" if length == 0 else "learn")
            # A rejected or saturated LEARN needs no division.
            return {"latency": 2 if not length or saturated else 2 + self.divider["learn"]}
        if kind == "npu_start":
            golden.npu_start(item[1], cycle)
            return None
        if kind == "npu_done":
            golden.npu_done(cycle)
            return None
        # An ASK changes nothing in the model: its terms are the answer (golden.ask would
        # work them out a second time, for n alone).
        terms = golden.terms(item[1], cycle)
        outcome = self.classify(terms)
        self.outcomes[outcome] += 1
        self.coverage.sample(outcome)
        if terms["busy"] and -1 <= terms["C_left"] <= 1:
            pvct = "zero" if terms["sum_PVCT"] == 0 else "nonzero"
            self.coverage.sample(f"C_left {terms['C_left']:+d}, sum(PVCT) {pvct}")
        if terms["C_npu_unsaturated"] > terms["C_npu"]:
            self.coverage.sample("C_npu saturated")
        # Only a quotient below 2**n_bits is divided out; the others are decided at once.
        divides = outcome in ("ask: quotient decides", "ask: min(P, N_max) decides")
        return {
            "n": terms["n"],
            "c_left": terms["C_left"],
            "terms": terms,
            "latency": 4 + self.divider["ask"] if divides else 4,
        }

    def classify(self, terms: dict) -> str:
        if not terms["busy"]:
            return "ask: no NPU task"
        if terms["C_left"] <= 0:
            return "ask: C_left <= 0"
        if terms["sum_PVCT"] == 0:
            return "ask: sum(PVCT) == 0"
        limit = min(terms["P"], terms["N_max"])
        if terms["quotient"] >= 1 << self.params.n_bits:
            return "ask: quotient saturated"
        if terms["n"] < limit:
            return "ask: quotient decides"
        return "ask: min(P, N_max) decides"

    # -- traffic ------------------------------------------------------------------------------

    def pack(self, item: tuple, port: str) -> int:
        packer = self.packer
        if port == "wr":
            if item[0] == "n_max":
                return packer.write(Table.N_MAX, 0, item[1])
            _, table, index, value = item
            return packer.write(TABLE_OF_NAME[table], index, value)
        kind = item[0]
        if kind == "learn":
            _, table, cycles, length = item
            return packer.command(
                Op.LEARN, table=TABLE_OF_NAME[table].value, cycles=cycles, length=length
            )
        if kind == "npu_start":
            return packer.command(Op.NPU_START, l_kv=item[1])
        if kind == "npu_done":
            return packer.command(Op.NPU_DONE)
        return packer.command(Op.ASK, p=item[1])

    def present(self, quiet: bool) -> None:
        """This cycle's traffic decisions (a woken cycle: an idle one, or the first cycle of
        a LEARN or ASK): a new phase, a directed scenario, the next write and command."""
        rng = self.rng
        # A new phase with probability 0.002 per cycle visited, as when the testbench
        # visited idle cycles and skipped most busy ones (phases as long in commands).
        if rng.random() < 0.002:
            self.idle = rng.choice([0.0, 0.0, 0.3, 0.9])
            self.stall = rng.choice([0.0, 0.2, 0.7])
            self.write_rate = rng.choice([0.0, 0.05, 0.3])
        if self.scenarios and self.accepted >= self.next_scenario and quiet and not self.script:
            self.script.extend(self.scenario(self.scenarios.pop()))
            self.next_scenario += self.spacing
        # Items taken at the last edge are gone; the others stay presented (stream rule).
        if self.script:
            self.scripted(quiet)
        else:
            more = self.accepted < self.commands
            if self.cmd_item is None and more and rng.random() >= self.idle:
                self.cmd_item = self.traffic.command()
                self.cmd_payload.set(self.pack(self.cmd_item, "cmd"))
            if self.wr_item is None and more and rng.random() < self.write_rate:
                self.wr_item = self.traffic.write()
                self.wr_payload.set(self.pack(self.wr_item, "wr"))
        self.cmd_valid.set(int(self.cmd_item is not None))
        self.wr_valid.set(int(self.wr_item is not None))

    def scenario(self, name: tuple) -> list[tuple]:
        """The steps of a directed scenario: ``("wr", item)``, ``("cmd", item)`` or
        ``("ask_at", C_left, P)`` (an ``ASK(P)`` accepted in the cycle its ``C_left`` is
        exactly the target, found from the golden model as NCR counts)."""
        p, rng = self.params, self.traffic.rng
        kind = name[0]
        if kind == "learn":
            _, length = name
            cycles = (1 << p.cycle_bits) - 1 if length else rng.randrange(1 << p.cycle_bits)
            return [("cmd", ("learn", rng.choice(TABLES), cycles, length))]
        if kind == "c_npu saturated":
            largest = (1 << p.ratio_bits) - 1
            steps = [("wr", ("write", "nvct", i, largest)) for i in range(p.depth)]
            return [
                *steps,
                ("cmd", ("npu_start", (1 << p.length_bits) - 1)),
                ("cmd", ("ask", rng.randrange(16))),
            ]
        _, target, pvct_zero = name
        # NVCT one cycle per token (C_npu = L_kv), PDCT k cycles per batch (C_d1 = k),
        # PVCT empty or not; then C_left = L_kv - NCR - k falls by one a cycle.
        # (Narrow lengths keep L_kv and C_d1 small enough for C_left to start above 1.)
        one = 1 << p.frac_bits
        longest = (1 << p.length_bits) - 1
        d1 = rng.randrange(0, min(9, longest // 3 + 1))
        steps = [("wr", ("write", "nvct", i, one)) for i in range(p.depth)]
        steps += [("wr", ("write", "pdct", i, d1 * one)) for i in range(p.depth)]
        for i in range(p.depth):
            largest = min(64 * one, 1 << p.ratio_bits)
            ratio = 0 if pvct_zero or (i and rng.random() < 0.5) else rng.randrange(1, largest)
            steps.append(("wr", ("write", "pvct", i, ratio)))
        # N_max and P at least 1, so that an answer of 0 is the formula's, not a clamp's.
        steps.append(("wr", ("n_max", rng.randrange(1, min(16, 1 << p.n_bits)))))
        steps.append(("cmd", ("npu_start", min(longest, 24 + d1 + rng.randrange(8)))))
        steps.append(("ask_at", target, rng.randrange(1, 16)))
        return steps

    def scripted(self, quiet: bool) -> None:
        """Present the script's next step (writes and commands in script order). ``quiet``:
        the block is idle (read this cycle) and no LEARN or ASK is in progress."""
        step = self.script[0]
        if self.wr_item is not None or self.cmd_item is not None:
            return
        if step[0] == "wr":
            self.wr_item = step[1]
            self.wr_payload.set(self.pack(self.wr_item, "wr"))
            self.script.popleft()
        elif step[0] == "cmd" and quiet:
            self.cmd_item = step[1]
            self.cmd_payload.set(self.pack(self.cmd_item, "cmd"))
            self.script.popleft()
        elif step[0] == "ask_at" and quiet and self.cycle >= self.ask_at_cycle:
            # Idle and no write: presented now, accepted now. C_left falls by one a cycle
            # (NCR counts), so the golden model is asked once, for the cycle to wait for.
            _, target, asked = step
            c_left = self.golden.terms(asked, self.cycle)["C_left"]
            if c_left == target:
                self.cmd_item = ("ask", asked)
                self.cmd_payload.set(self.pack(self.cmd_item, "cmd"))
                self.script.popleft()
            elif c_left > target:
                self.ask_at_cycle = self.cycle + c_left - target
            else:  # missed (cannot happen: C_left starts above it)
                self.error(f"directed ASK missed C_left = {target} (now {c_left})")
                self.script.popleft()

    # -- checks -------------------------------------------------------------------------------

    def check_read_slot(self, slot: tuple, value: int) -> None:
        name, index = slot
        want = self.golden.n_max if name == "n_max" else self.golden.tables[name][index]
        if value != want:
            self.error(f"{name}[{index}] reads {value}, golden {want}")

    def check_status(self, cycle: int) -> None:
        golden = self.golden
        status = (self.ncr.read(), self.npu_busy.read(), self.error_flag.read())
        want = (golden.ncr(cycle), int(golden.busy), int(golden.error))
        if status != want:
            self.error(f"(ncr, npu_busy, error) = {status}, golden {want}")

    def check_rises(self) -> None:
        """Rises noted since the last idle cycle: a ready that rose in a busy cycle of the
        last LEARN or ASK, an answer that no ASK was waiting for."""
        if self.watch is not None:
            first, last = self.watch
            for name, rises in (("cmd.ready", self.cmd_rises), ("wr.ready", self.wr_rises)):
                for cycle in rises:
                    if first <= cycle <= last:
                        self.error(f"{name} rose in cycle {cycle}, busy from {first} to {last}")
            self.watch = None
        self.cmd_rises.clear()
        self.wr_rises.clear()
        if self.ans_rises:
            self.error(f"ans.valid rose in cycle(s) {self.ans_rises} with no ASK waiting")
            self.ans_rises.clear()

    def first_busy_cycle(self, accepted: int, what: str) -> bool:
        """In the first cycle after a LEARN or ASK was accepted: busy, neither port ready
        (read before this cycle's inputs change: any later rise is noted). Then this cycle's
        traffic (presented while busy: it must wait)."""
        self.cycle = accepted + 1
        busy = self.busy.read()
        if not busy:
            self.error(f"busy low in the cycle after the {what} accepted in cycle {accepted}")
        elif self.cmd_ready.read() or self.wr_ready.read():
            self.error(
                f"ready (cmd {self.cmd_ready.read()}, wr {self.wr_ready.read()}) in the cycle "
                f"after the {what} accepted in cycle {accepted}"
            )
        self.present(quiet=False)
        return bool(busy)

    def check_latency(self, what: str, latency: int, expected: int, accepted: int) -> None:
        if latency > LATENCY_TARGET:
            self.error(f"{what} accepted in cycle {accepted} took {latency} cycles")
        elif latency != expected:
            self.error(
                f"{what} accepted in cycle {accepted} took {latency} cycles, hw/tvc.py "
                f"documents {expected}"
            )

    # -- the run ------------------------------------------------------------------------------

    async def learn_stretch(self, accepted: int, expected: dict) -> None:
        """From the acceptance of a LEARN (ReadOnly of that cycle) to the last busy cycle."""
        await self.falling
        if self.first_busy_cycle(accepted, "LEARN"):
            await self.busy_fall
            done = state_cycle()
        else:
            done = accepted + 1
        latency = done - accepted
        self.learn_latency[latency] += 1
        self.check_latency("LEARN", latency, expected["latency"], accepted)
        self.watch = (accepted + 1, done - 1)
        self.status_due = True  # the error flag of a bad LEARN is up now
        self.cycle = done - 1

    async def ask_stretch(self, accepted: int, expected: dict) -> None:
        """From the acceptance of an ASK (ReadOnly of that cycle) to the cycle its answer is
        taken."""
        await self.falling
        self.first_busy_cycle(accepted, "ASK")
        if self.ans_valid.read():
            valid = accepted + 1
        else:
            await self.ans_rise
            valid = state_cycle()
            await self.falling
        self.cycle = valid
        latency = valid - accepted
        self.ask_latency[latency] += 1
        self.check_latency("ASK", latency, expected["latency"], accepted)
        if self.ans_rises != [valid]:  # noted by now: the rise was at the edge before
            self.error(f"ans.valid rose in cycle(s) {self.ans_rises}, expected {valid} alone")
        self.ans_rises.clear()
        # The reader stalls with probability `stall` in each cycle the answer waits.
        rng, stall, stalled = self.rng, self.stall, 0
        while rng.random() < stall:
            stalled += 1
        if stalled:
            self.ans_ready.set(0)
            if stalled > 1:  # to just before the last stalled cycle's falling edge
                await Timer(stalled * CLOCK_NS - 2, "ns")
            await self.falling
            self.cycle = valid + stalled
        self.ans_ready.set(1)
        if not self.ans_valid.read():
            self.error(f"the answer to the ASK accepted in cycle {accepted} was withdrawn")
        n, c_left = self.packer.answer(self.ans_payload.read())
        if (n, c_left) != (expected["n"], expected["c_left"]):
            self.error(
                f"ASK accepted at {accepted}: RTL n={n} C_left={c_left}, golden "
                f"n={expected['n']} C_left={expected['c_left']} ({expected['terms']})"
            )
        self.watch = (accepted + 1, self.cycle)  # taken at this cycle's edge

    async def run(self, commands: int) -> None:
        self.falling = FallingEdge(self.dut.clk)
        self.busy_fall = FallingEdge(self.dut.busy)
        self.ans_rise = RisingEdge(self.dut.ans__valid)
        read_only = ReadOnly()
        busy, rd_value = self.busy.read, self.rd_value.read
        cmd_ready, wr_ready = self.cmd_ready.read, self.wr_ready.read
        slots = [
            (TABLE_OF_NAME.get(name, Table.N_MAX).value, index) for name, index in self.read_slots
        ]
        slot_index = 0
        unread = None  # the slot driven in the last idle cycle that presented nothing
        self.commands = commands
        # Directed sequences, spread evenly over the run, aim at the corners that random
        # values reach rarely or never (the coverage bins): each scenario several times.
        self.scenarios = [*directed_scenarios(self.params)] * SCENARIO_REPEATS
        self.traffic.rng.shuffle(self.scenarios)
        self.spacing = self.next_scenario = max(1, commands // (len(self.scenarios) + 1))
        while (self.accepted < commands or self.cmd_item or self.wr_item or self.script) and len(
            self.errors
        ) < MAX_ERRORS:
            await self.falling
            self.cycle += 1
            cycle = self.cycle
            if self.watch or self.cmd_rises or self.wr_rises or self.ans_rises:
                self.check_rises()
            # The slot driven a cycle ago: tables and inputs have not changed since.
            if unread is not None:
                self.check_read_slot(unread, rd_value())
                unread = None
            if busy():
                self.error("busy with no LEARN or ASK in progress")
                continue
            if self.status_due or cycle % 16 == 0:
                self.check_status(cycle)
                self.status_due = False
            self.present(quiet=True)
            slot = self.read_slots[slot_index]
            table, index = slots[slot_index]
            self.rd_table.set(table)
            self.rd_index.set(index)
            slot_index = (slot_index + 1) % len(slots)
            if self.cmd_item is None and self.wr_item is None:
                unread = slot
                continue

            await read_only
            self.check_read_slot(slot, rd_value())
            wr_taken = self.wr_item is not None and wr_ready()
            cmd_taken = self.cmd_item is not None and cmd_ready()
            if wr_taken and cmd_taken:
                self.error("a write and a command accepted in the same cycle")
            if wr_taken:
                self.history.append((cycle, self.wr_item))
                self.apply_write(self.wr_item)
                self.wr_item = None
            if cmd_taken:
                item, self.cmd_item = self.cmd_item, None
                self.history.append((cycle, item))
                self.accepted += 1
                self.check_status(cycle)
                expected = self.apply_command(item)
                if item[0] == "ask":
                    await self.ask_stretch(cycle, expected)
                elif item[0] == "learn":
                    await self.learn_stretch(cycle, expected)
        await self.falling  # the last rises, noted by now
        self.cycle += 1
        self.check_rises()

    async def final_tables(self) -> None:
        """Read every entry once more at the end."""
        # The last items were taken at the edge before: withdraw them before the next.
        self.cmd_valid.set(0)
        self.wr_valid.set(0)
        for slot in self.read_slots:
            name, index = slot
            self.rd_table.set(TABLE_OF_NAME.get(name, Table.N_MAX).value)
            self.rd_index.set(index)
            await ReadOnly()
            self.check_read_slot(slot, self.rd_value.read())
            await self.falling
            self.cycle += 1


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_commands(dut):
    """COMMANDS random commands compared answer by answer with the golden model."""
    params = params_from_env(TVCParams)
    tb = TB(dut, params)
    await tb.reset()
    watchdog = cocotb.start_soon(tb.watchdog())
    started, cpu_started = time.perf_counter(), time.process_time()
    await tb.run(COMMANDS)
    await tb.final_tables()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    watchdog.cancel()
    assert not tb.errors, f"{len(tb.errors)}+ error(s):\n" + "\n".join(tb.errors)

    asks = sum(tb.ask_latency.values())
    cycles = tb.cycle - tb.first_cycle
    report(
        dut,
        f"{params.tag()}: {COMMANDS} commands ({asks} ASK, {sum(tb.learn_latency.values())} "
        f"LEARN) in {cycles} cycles, {wall:.1f} s wall, {cpu:.1f} s CPU = "
        f"{cycles / wall:.0f} clock edges/s, {cycles / cpu:.0f} per CPU-second",
    )
    report(dut, f"ASK latency (cycles: count) {dict(sorted(tb.ask_latency.items()))}")
    report(dut, f"LEARN latency (cycles: count) {dict(sorted(tb.learn_latency.items()))}")
    report(dut, f"outcomes {dict(sorted(tb.outcomes.items()))}")
    assert max(tb.ask_latency) <= LATENCY_TARGET
    assert max(tb.learn_latency) <= LATENCY_TARGET
    # The traffic reached what it claims to: every bin its required number of times.
    tb.coverage.write()
    report(dut, tb.coverage.summary())
    tb.coverage.check()
