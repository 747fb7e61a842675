"""cocotb testbench of the TVC on its generated Verilog, against the golden model.

One coroutine does everything, once per clock cycle: it drives the command and write ports
and ``ans.ready`` after the falling edge, then samples in ``ReadOnly`` (see
``harness/tb.py``). Random traffic: presets and ``N_max`` writes, ``LEARN`` (rarely with
``length == 0``), ``NPU_START``/``NPU_DONE`` and ``ASK`` with log-uniform values so that every
outcome occurs (no NPU task, no room, empty PVCT, clamp, quotient, saturated quotient).
Commands are often presented while the block is busy (they must wait, not vanish), writes
collide with commands, and the answer port stalls at random. Directed sequences, spread over
the run, aim at the corners random values rarely reach: an ``ASK`` accepted in the very cycle
its ``C_left`` is -1, 0 and +1 (with ``sum(PVCT)`` zero and not), a saturated ``C_npu``, a
``LEARN`` that saturates and one with ``length == 0``. Functional coverage
(``harness/coverage.py``) counts those bins and every answer outcome; a run that leaves a
bin below its required count fails naming it.

Every accepted write and command is applied to ``ahasd.golden.tvc.TVC`` at its acceptance
cycle, in acceptance order. Checked: each answer (``n`` and ``C_left``) against the golden
``terms`` of that ``ASK``; the table entries and ``N_max`` through the read port in every idle
cycle (round robin); ``ncr``, ``npu_busy`` and ``error`` against the golden model whenever no
``LEARN`` is in progress (the RTL raises ``error`` for a bad ``LEARN`` when the ``LEARN``
completes, the golden model at once); ready low while busy; the ``ASK`` latency (acceptance
to answer valid) and the ``LEARN`` latency (acceptance to the entry being in its table)
against the 40-cycle targets.

Environment: ``AHASD_TB_PARAMS`` (TVCParams as JSON), ``AHASD_TB_SEED``, ``AHASD_COMMANDS``
(commands on the command port, default 50,000).
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time
from harness.coverage import Coverage
from harness.tb import params_from_env, report, rng_from_env

from ahasd.golden.tvc import TABLES
from ahasd.golden.tvc import TVC as GoldenTVC
from ahasd.hw.tvc import Op, Table, answer_layout, command_layout, write_layout
from ahasd.params import TVCParams

COMMANDS = int(os.environ.get("AHASD_COMMANDS", "50000"))
LATENCY_TARGET = 40
CLOCK_NS = 10
TABLE_OF_NAME = {"nvct": Table.NVCT, "pdct": Table.PDCT, "pvct": Table.PVCT}


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
            value = rng.randrange(1 << p.n_bits) if rng.random() < 0.5 else rng.randrange(12)
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


class TB:
    def __init__(self, dut, params: TVCParams):
        self.dut = dut
        self.params = params
        self.rng = rng_from_env("tvc")
        self.traffic = Traffic(params, rng_from_env("tvc-values"))
        self.packer = Packer(params)
        self.golden = GoldenTVC(params)
        self.errors: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.ask_latency: Counter[int] = Counter()
        self.learn_latency: Counter[int] = Counter()
        self.cycle = 0
        self.history: deque[tuple[int, tuple]] = deque(maxlen=32)
        self.read_slots = [(t, i) for t in TABLES for i in range(params.depth)] + [("n_max", 0)]
        self.script: deque[tuple] = deque()  # a directed sequence in progress (see scenario)
        self.coverage = Coverage("tvc", coverage_bins(params))

    def error(self, message: str) -> None:
        if not self.errors:  # the story so far, for the first error
            self.errors += [f"  accepted at {cycle}: {item}" for cycle, item in self.history]
        if len(self.errors) < 60:
            self.errors.append(f"cycle {self.cycle}: {message}")

    async def reset(self) -> None:
        dut = self.dut
        Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
        dut.rst.value = 1
        dut.cmd__valid.value = 0
        dut.wr__valid.value = 0
        dut.ans__ready.value = 0
        dut.rd_table.value = 0
        dut.rd_index.value = 0
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        self.first_cycle = self.cycle_now()

    # -- golden side --------------------------------------------------------------------------

    def apply_write(self, item: tuple) -> None:
        if item[0] == "n_max":
            self.golden.n_max = item[1]
        else:
            _, table, index, value = item
            self.golden.write(table, index, value)

    def apply_command(self, item: tuple) -> dict | None:
        """Apply an accepted command to the golden model; the expected answer of an ASK."""
        golden, cycle = self.golden, self.cycle
        kind = item[0]
        if kind == "learn":
            _, table, cycles, length = item
            golden.learn(table, cycles, length)
            self.outcomes["learn error" if length == 0 else "learn"] += 1
            if (
                length
                and (cycles << self.params.frac_bits) // length >= 1 << self.params.ratio_bits
            ):
                self.outcomes["learn saturated"] += 1
                self.coverage.sample("learn saturated")
            self.coverage.sample("learn error" if length == 0 else "learn")
            return None
        if kind == "npu_start":
            golden.npu_start(item[1], cycle)
            return None
        if kind == "npu_done":
            golden.npu_done(cycle)
            return None
        p = item[1]
        terms = golden.terms(p, cycle)
        n = golden.ask(p, cycle)
        outcome = self.classify(terms)
        self.outcomes[outcome] += 1
        self.coverage.sample(outcome)
        if terms["busy"] and -1 <= terms["C_left"] <= 1:
            pvct = "zero" if terms["sum_PVCT"] == 0 else "nonzero"
            self.coverage.sample(f"C_left {terms['C_left']:+d}, sum(PVCT) {pvct}")
        if terms["C_npu_unsaturated"] > terms["C_npu"]:
            self.coverage.sample("C_npu saturated")
        return {"n": n, "c_left": terms["C_left"], "terms": terms}

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

    # -- the cycle loop -----------------------------------------------------------------------

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

    def check_read_slot(self, slot: tuple, value: int) -> None:
        name, index = slot
        want = self.golden.n_max if name == "n_max" else self.golden.tables[name][index]
        if value != want:
            self.error(f"{name}[{index}] reads {value}, golden {want}")

    async def run(self, commands: int) -> None:
        dut, rng = self.dut, self.rng
        cmd_item = wr_item = None
        commands_accepted = 0
        pending_ask = None  # (accepted cycle, expected dict, valid-cycle or None)
        pending_learn = None  # accepted cycle
        slot_index = 0
        slot = self.read_slots[0]
        # Traffic phases change the pressure: back-to-back, sparse, slow answer reader.
        idle, stall, write_rate = 0.0, 0.2, 0.05
        # Directed sequences, spread evenly over the run, aim at the corners that random
        # values reach rarely or never (the coverage bins): each scenario several times.
        scenarios = [*directed_scenarios(self.params)] * SCENARIO_REPEATS
        self.traffic.rng.shuffle(scenarios)
        spacing = max(1, commands // (len(scenarios) + 1))
        next_scenario = spacing
        while (
            commands_accepted < commands
            or pending_ask
            or pending_learn is not None
            or wr_item is not None
            or self.script
        ):
            await FallingEdge(dut.clk)
            self.cycle = self.cycle_now()
            if rng.random() < 0.002:
                idle = rng.choice([0.0, 0.0, 0.3, 0.9])
                stall = rng.choice([0.0, 0.2, 0.7])
                write_rate = rng.choice([0.0, 0.05, 0.3])
            quiet = pending_ask is None and pending_learn is None
            if scenarios and commands_accepted >= next_scenario and quiet and not self.script:
                self.script.extend(self.scenario(scenarios.pop()))
                next_scenario += spacing
            # Items taken at the last edge are gone; the others stay presented (stream rule).
            if self.script:
                cmd_item, wr_item = self.scripted(cmd_item, wr_item, quiet)
            else:
                if cmd_item is None:
                    if commands_accepted < commands and rng.random() >= idle:
                        cmd_item = self.traffic.command()
                        dut.cmd__payload.value = self.pack(cmd_item, "cmd")
                    dut.cmd__valid.value = int(cmd_item is not None)
                if wr_item is None:
                    if commands_accepted < commands and rng.random() < write_rate:
                        wr_item = self.traffic.write()
                        dut.wr__payload.value = self.pack(wr_item, "wr")
                    dut.wr__valid.value = int(wr_item is not None)
            ans_ready = rng.random() >= stall
            dut.ans__ready.value = int(ans_ready)
            name, index = slot
            dut.rd_table.value = self.table_code(name)
            dut.rd_index.value = index
            await ReadOnly()

            busy = int(dut.busy.value)
            if not busy:
                self.check_read_slot(slot, int(dut.rd_value.value))
                if pending_learn is not None:
                    latency = self.cycle - pending_learn
                    self.learn_latency[latency] += 1
                    if latency > LATENCY_TARGET:
                        self.error(f"LEARN took {latency} cycles")
                    pending_learn = None
            if pending_ask is not None and int(dut.ans__valid.value):
                accepted, expected, valid_cycle = pending_ask
                if valid_cycle is None:
                    latency = self.cycle - accepted
                    self.ask_latency[latency] += 1
                    if latency > LATENCY_TARGET:
                        self.error(f"ASK answered after {latency} cycles")
                    pending_ask = (accepted, expected, self.cycle)
                if ans_ready:
                    n, c_left = self.packer.answer(int(dut.ans__payload.value))
                    if (n, c_left) != (expected["n"], expected["c_left"]):
                        self.error(
                            f"ASK accepted at {accepted}: RTL n={n} C_left={c_left}, golden "
                            f"n={expected['n']} C_left={expected['c_left']} ({expected['terms']})"
                        )
                    pending_ask = None
            elif int(dut.ans__valid.value):
                self.error("an answer without an ASK")

            wr_taken = wr_item is not None and int(dut.wr__ready.value)
            cmd_taken = cmd_item is not None and int(dut.cmd__ready.value)
            if busy and (wr_taken or cmd_taken):
                self.error("a port is ready while the block is busy")
            if wr_taken and cmd_taken:
                self.error("a write and a command accepted in the same cycle")
            if (wr_taken or cmd_taken) and (pending_ask or pending_learn is not None):
                self.error("accepted while a command is in progress")
            # The RTL flags a bad LEARN when it completes, the golden model when it is
            # applied: the two agree on the status only while no LEARN is in progress.
            if (self.cycle % 16 == 0 and pending_learn is None) or cmd_taken:
                self.check_status()
            if wr_taken:
                self.history.append((self.cycle, wr_item))
                self.apply_write(wr_item)
                wr_item = None
            if cmd_taken:
                self.history.append((self.cycle, cmd_item))
                commands_accepted += 1
                expected = self.apply_command(cmd_item)
                if cmd_item[0] == "ask":
                    pending_ask = (self.cycle, expected, None)
                elif cmd_item[0] == "learn":
                    pending_learn = self.cycle
                cmd_item = None
            if not busy:
                slot_index = (slot_index + 1) % len(self.read_slots)
                slot = self.read_slots[slot_index]
            # Most busy periods are skipped in one wait (the simulator runs them without
            # Python); the rest are watched cycle by cycle with a command held at the port.
            if (pending_ask or pending_learn is not None) and rng.random() < 0.9:
                if pending_learn is not None:
                    await FallingEdge(dut.busy)
                elif pending_ask[2] is None:
                    await RisingEdge(dut.ans__valid)

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
        one = 1 << p.frac_bits
        d1 = rng.randrange(0, 9)
        steps = [("wr", ("write", "nvct", i, one)) for i in range(p.depth)]
        steps += [("wr", ("write", "pdct", i, d1 * one)) for i in range(p.depth)]
        for i in range(p.depth):
            ratio = 0 if pvct_zero or (i and rng.random() < 0.5) else rng.randrange(1, 64 * one)
            steps.append(("wr", ("write", "pvct", i, ratio)))
        # N_max and P at least 1, so that an answer of 0 is the formula's, not a clamp's.
        steps.append(("wr", ("n_max", rng.randrange(1, min(16, 1 << p.n_bits)))))
        steps.append(("cmd", ("npu_start", 24 + d1 + rng.randrange(8))))
        steps.append(("ask_at", target, rng.randrange(1, 16)))
        return steps

    def scripted(self, cmd_item, wr_item, quiet: bool) -> tuple:
        """Present the script's next step (writes and commands in script order)."""
        dut = self.dut
        step = self.script[0]
        if step[0] == "wr" and wr_item is None and cmd_item is None:
            wr_item = step[1]
            dut.wr__payload.value = self.pack(wr_item, "wr")
            self.script.popleft()
        elif step[0] == "cmd" and wr_item is None and cmd_item is None and quiet:
            cmd_item = step[1]
            dut.cmd__payload.value = self.pack(cmd_item, "cmd")
            self.script.popleft()
        elif step[0] == "ask_at" and wr_item is None and cmd_item is None and quiet:
            _, target, asked = step
            if not int(dut.busy.value):  # idle, no write: presented now, accepted now
                c_left = self.golden.terms(asked, self.cycle)["C_left"]
                if c_left == target:
                    cmd_item = ("ask", asked)
                    dut.cmd__payload.value = self.pack(cmd_item, "cmd")
                    self.script.popleft()
                elif c_left < target:  # missed (cannot happen: C_left starts above it)
                    self.error(f"directed ASK missed C_left = {target} (now {c_left})")
                    self.script.popleft()
        dut.cmd__valid.value = int(cmd_item is not None)
        dut.wr__valid.value = int(wr_item is not None)
        return cmd_item, wr_item

    def cycle_now(self) -> int:
        """The cycle index from the simulation time (one falling edge per 10 ns)."""
        return round(get_sim_time("ns")) // CLOCK_NS  # round: the ns value is a float

    @staticmethod
    def table_code(name: str) -> int:
        return Table.N_MAX.value if name == "n_max" else TABLE_OF_NAME[name].value

    def check_status(self) -> None:
        dut, golden = self.dut, self.golden
        status = (int(dut.ncr.value), int(dut.npu_busy.value), int(dut.error.value))
        want = (golden.ncr(self.cycle), int(golden.busy), int(golden.error))
        if status != want:
            self.error(f"(ncr, npu_busy, error) = {status}, golden {want}")

    async def final_tables(self) -> None:
        """Read every entry once more at the end."""
        dut = self.dut
        for slot in self.read_slots:
            await FallingEdge(dut.clk)
            # The last items were taken at the edge before: withdraw them before the next.
            dut.cmd__valid.value = 0
            dut.wr__valid.value = 0
            name, index = slot
            dut.rd_table.value = self.table_code(name)
            dut.rd_index.value = index
            await ReadOnly()
            self.check_read_slot(slot, int(dut.rd_value.value))


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_commands(dut):
    """COMMANDS random commands compared answer by answer with the golden model."""
    params = params_from_env(TVCParams)
    tb = TB(dut, params)
    await tb.reset()
    started = time.perf_counter()
    await tb.run(COMMANDS)
    await tb.final_tables()
    wall = time.perf_counter() - started
    assert not tb.errors, f"{len(tb.errors)}+ error(s):\n" + "\n".join(tb.errors)

    asks = sum(tb.ask_latency.values())
    cycles = tb.cycle - tb.first_cycle
    report(
        dut,
        f"{params.tag()}: {COMMANDS} commands ({asks} ASK, {sum(tb.learn_latency.values())} "
        f"LEARN) in {cycles} cycles, {wall:.1f} s = {cycles / wall:.0f} cycles/s",
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
