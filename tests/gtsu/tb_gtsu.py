"""cocotb testbench of the GTSU on its generated Verilog, against the golden model.

One coroutine does everything, once per clock cycle: it drives the requests and the register
write port just after the falling edge, samples every output, compares them with the golden
model of the same cycle (``ahasd.golden.gtsu.GTSU``), then steps the golden model with the
cycle's requests and applies the cycle's register write to it (the golden docstring: a
register assigned between two steps holds the value from the current cycle on, which is
where an RTL write strobed in the previous cycle lands).

Traffic: ``want_draft`` and ``want_preverify`` are levels that flip at random, in phases of
different flip rates (chattering, about one switch latency, slow) so that requests change
during switches, while ready, and not at all; register writes at random cycles (during
switches too): disjoint random masks, occasionally overlapping ones (the sticky error), waits
drawn mostly small, often zero, sometimes large enough to saturate ``last_switch_cycles``.
The first ``QUIET`` cycles have no writes, so the latency with the reset values is measured.

Checked every cycle, besides the golden comparison, from the ports alone: no rank enabled
for both roles; none while gating; enables only for the current task; ``ready`` and
``gating`` never together; the register read-back equals what the testbench wrote; a request
held high from a ready cycle is the task within ``t_off + t_on + 1`` cycles (pre-verification,
or drafting with no pre-verification request). The testbench measures each switch's latency
itself (decision cycle to the ready cycle, minus one) and compares it with the registers of
the decision cycle.

Functional coverage (``harness/coverage.py``): every switch kind (5 each), zero-latency
switches, a switch with the reset registers, a latency report saturated at
``2**timer_bits - 1``, the sticky ``config_error`` raised, and, when the run can reach it
(a narrow ``counter_bits``), the switch counter at its saturation value and held there by
further switches; a run that leaves a bin below its required count fails naming it.

How it stays fast (``docs/performance.md``, "Testbenches"): every port is read and written
through a :class:`~ahasd.hw.tb.pins.Pin`, an input only when its value changes (the write
port's payload only with a write). A cycle that changes no input costs one wake-up, at the
falling edge: the design has no falling-edge logic, so what it shows there are the
registers of this cycle, decoded, from inputs that have not changed since the rising edge,
which is exactly what ``ReadOnly`` would show. A cycle that changes an input also waits for
``ReadOnly`` before it samples, as every cycle did before, so a path from an input to an
output would show as it always did (``hw/gtsu.py`` has none: every output is a register or
decoded from registers). The outputs are read once per cycle into a tuple and compared with
a tuple of the golden model's attributes (the values ``GTSU.outputs()`` puts in a dict); the
port invariants are evaluated again only when the outputs differ from the last ones that
passed them (the same outputs pass the same checks); the history kept for an error report
is stored as tuples and formatted only when an error is reported. The traffic draws from
its generator exactly as before, so a seed gives the same cycles, switches and coverage.

Environment: ``AHASD_TB_PARAMS`` (GTSUParams as JSON), ``AHASD_TB_SEED``, ``AHASD_CYCLES``
(default 20,000), ``AHASD_COUNTER_BITS`` (the unit's ``counter_bits``, default 32: the
golden model counts switches in 32 bits, the testbench saturates its count at this width).
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from harness.coverage import Coverage
from harness.tb import params_from_env, report, rng_from_env

from ahasd.golden.gtsu import GTSU as GoldenGTSU
from ahasd.golden.gtsu import TASK_CODES
from ahasd.hw.gtsu import Reg, default_masks, write_layout
from ahasd.hw.tb.pins import Pin, pins
from ahasd.params import GTSUParams

CYCLES = int(os.environ.get("AHASD_CYCLES", "20000"))
COUNTER_BITS = int(os.environ.get("AHASD_COUNTER_BITS", "32"))
QUIET = 2000
CLOCK_NS = 10  # simulation period; latencies are reported at the PIM clock below
PIM_MHZ = 800
IDLE, DRAFT, PREVERIFY = 0, 1, 2
NAMES = {IDLE: "IDLE", DRAFT: "DRAFT", PREVERIFY: "PREVERIFY"}
OUTPUTS = (
    "current_task",
    "ready",
    "dlm_enable",
    "tlm_enable",
    "gating",
    "last_switch_cycles",
    "switches",
    "config_error",
)
AS_BOOL = (False, True)  # a 0/1 level as the golden model's step checks it fastest
REGISTER_CHOICES = list(Reg)  # what a random write picks from
SWITCH_KINDS = [
    "IDLE->DRAFT",
    "IDLE->PREVERIFY",
    "DRAFT->PREVERIFY",
    "PREVERIFY->DRAFT",
    "DRAFT->IDLE",
    "PREVERIFY->IDLE",
]


def coverage_bins(params: GTSUParams, cycles: int) -> dict[str, int]:
    """Every bin and its required count: each switch kind, zero-latency switches, a switch
    with the reset registers, the latency report saturated, the sticky configuration error,
    and the switch counter saturated (and held) when ``2**counter_bits - 1`` switches fit
    in the run (about one switch in 40 cycles)."""
    bins = dict.fromkeys(SWITCH_KINDS, 5)
    bins |= {
        "zero-latency switch": 3,
        "switch with the reset registers": 1,
        "last_switch_cycles saturated": 1,
        "config_error raised": 1,
    }
    if cycles // 80 > (1 << COUNTER_BITS) - 1:
        bins |= {"switches saturated": 1, "switches held at saturation": 3}
    return bins


REGISTERS = {
    Reg.DLM_MASK: "dlm_mask",
    Reg.TLM_MASK: "tlm_mask",
    Reg.T_OFF: "t_off",
    Reg.T_ON: "t_on",
}


class Traffic:
    """Random request levels and register writes.

    Every draw from ``rng`` happens in the order and under the conditions it always did, so
    a seed gives the same traffic as before the testbench was made faster.
    """

    def __init__(self, params: GTSUParams, rng):
        self.p = params
        self.rng = rng
        self.random = rng.random
        self.flip = 0.05
        self.write_rate = 0.0
        self.overlaps_left = 2
        self.want_draft = 0
        self.want_preverify = 0
        limit = (1 << params.timer_bits) - 1
        # Both waits zero at once is rare by chance, so it gets a window of its own: two
        # scripted writes, then no timer writes for a while (zero-latency switches).
        # Likewise the longest waits, whose sum saturates the latency report. And one
        # overlap of the masks for certain (rank 0 in both: the sticky error).
        self.zero_window = int(CYCLES * 0.7)
        self.long_window = int(CYCLES * 0.4)
        overlap = int(CYCLES * 0.85)
        self.scripted: dict[int, tuple[Reg, int]] = {}
        # Inserted from the lowest priority up, so that where two windows fall on one cycle
        # (a very short run) the zero window wins, then the long one, as they always did.
        for window, first, second in (
            (overlap, (Reg.TLM_MASK, 1), (Reg.DLM_MASK, 1)),
            (self.long_window, (Reg.T_OFF, limit), (Reg.T_ON, limit)),
            (self.zero_window, (Reg.T_OFF, 0), (Reg.T_ON, 0)),
        ):
            self.scripted[window], self.scripted[window + 1] = first, second

    def requests(self) -> tuple[int, int]:
        random = self.random
        if random() < 0.002:
            self.flip = self.rng.choice([0.3, 0.05, 0.02, 0.005])
        if random() < self.flip:
            self.want_draft ^= 1
        if random() < self.flip * 0.7:
            self.want_preverify ^= 1
        return self.want_draft, self.want_preverify

    def wait(self) -> int:
        rng, limit = self.rng, (1 << self.p.timer_bits) - 1
        roll = rng.random()
        if roll < 0.25:
            return 0
        if roll < 0.8:
            return min(limit, rng.randrange(1, 9))
        if roll < 0.94:
            return min(limit, rng.randrange(9, 65))
        return rng.randrange(limit // 2, limit + 1)  # long: sum may saturate the report

    def write(self, cycle: int) -> tuple[Reg, int] | None:
        scripted = self.scripted.get(cycle)
        if scripted is not None:
            return scripted
        if cycle < QUIET or self.random() >= 0.004:
            return None
        rng = self.rng
        reg = rng.choice(REGISTER_CHOICES)
        if reg in (Reg.T_OFF, Reg.T_ON):
            for window in (self.zero_window, self.long_window):
                if window <= cycle < window + CYCLES // 10:
                    return None
            return reg, self.wait()
        if self.overlaps_left and cycle > CYCLES // 2 and rng.random() < 0.05:
            self.overlaps_left -= 1
            return reg, rng.randrange(1 << self.p.ranks)  # anything, likely overlapping
        return reg, -1  # a disjoint mask, completed by the testbench from the other mask


class TB:
    """The GTSU's ports as Pins, the golden model and the checks (module docstring)."""

    def __init__(self, dut, params: GTSUParams):
        self.dut = dut
        self.p = params
        self.traffic = Traffic(params, rng_from_env("gtsu"))
        self.golden = GoldenGTSU(params)
        self.layout = write_layout(params)
        self.reg_at = self.layout["reg"].offset
        self.value_at = self.layout["value"].offset
        dlm, tlm = default_masks(params)
        self.regs = {"dlm_mask": dlm, "tlm_mask": tlm, "t_off": params.t_off, "t_on": params.t_on}
        self.inputs = pins(dut, "want_draft", "want_preverify", "wr__valid", "wr__payload")
        self.outputs = pins(dut, *OUTPUTS)
        self.register_pins = tuple((name, Pin(getattr(dut, name))) for name in self.regs)
        self.register_max = {name: pin.max for name, pin in self.register_pins}
        self.errors: list[str] = []
        # (cycle, want_draft, want_preverify, write, outputs): formatted only for a report
        self.history: deque[tuple] = deque(maxlen=24)
        self.cycle = 0
        self.latency: Counter[tuple[int, int, str]] = Counter()  # (measured, expected, kind)
        self.switch_kinds: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.max_latency = 0
        self.read_only_waits = 0
        self.switch_max = (1 << COUNTER_BITS) - 1
        self.coverage = Coverage("gtsu", coverage_bins(params, CYCLES))

    def error(self, message: str) -> None:
        if not self.errors:
            self.errors += [
                f"  cycle {cycle}: in draft={draft} preverify={preverify} write={write} "
                f"out {dict(zip(OUTPUTS, outputs, strict=True))}"
                for cycle, draft, preverify, write, outputs in self.history
            ]
        if len(self.errors) < 60:
            self.errors.append(f"cycle {self.cycle}: {message}")

    async def reset(self) -> None:
        dut = self.dut
        Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
        dut.rst.value = 1
        dut.want_draft.value = 0
        dut.want_preverify.value = 0
        dut.wr__valid.value = 0
        dut.wr__payload.value = 0
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    def mask_write(self, reg: Reg, value: int) -> int:
        """A value of -1 asks for a random mask disjoint from the other one."""
        if value >= 0:
            return value
        other = self.regs["tlm_mask" if reg == Reg.DLM_MASK else "dlm_mask"]
        rng = self.traffic.rng
        return sum(1 << r for r in range(self.p.ranks) if not other >> r & 1 and rng.random() < 0.6)

    def compare_outputs(self, rtl: tuple[int, ...], want: tuple[int, ...]) -> None:
        """One error per output that differs from the golden model's."""
        for name, got, expected in zip(OUTPUTS, rtl, want, strict=True):
            if got != expected:
                self.error(f"{name} = {got}, golden {int(expected)}")

    def check_registers(self) -> None:
        """The register read-back equals what the testbench wrote."""
        for name, pin in self.register_pins:
            value = pin.read()
            if value != self.regs[name]:
                self.error(f"register {name} reads back {value}")

    async def run(self, cycles: int) -> None:
        golden, traffic, regs = self.golden, self.traffic, self.regs
        requests, next_write = traffic.requests, traffic.write
        draft_pin, preverify_pin, valid_pin, payload_pin = self.inputs
        (
            read_task,
            read_ready,
            read_dlm_enable,
            read_tlm_enable,
            read_gating,
            read_last_switch_cycles,
            read_switches,
            read_config_error,
        ) = (pin.read for pin in self.outputs)
        falling, read_only = FallingEdge(self.dut.clk), ReadOnly()
        remember = self.history.append
        switch_max = self.switch_max
        decision = None  # (cycle, expected latency, kind) of the switch in progress
        waits = {}  # per request kind: (armed-from cycle, bound)
        config_error = 0
        clean = None  # the last outputs whose invariants held (they hold for equal ones)
        driven = [0, 0, 0]  # want_draft, want_preverify, wr.valid as reset() left them
        for cycle in range(cycles):
            self.cycle = cycle
            await falling
            want_draft, want_preverify = requests()
            write = next_write(cycle)
            changed = False
            if want_draft != driven[0]:
                draft_pin.write(want_draft)
                driven[0], changed = want_draft, True
            if want_preverify != driven[1]:
                preverify_pin.write(want_preverify)
                driven[1], changed = want_preverify, True
            if write is not None:
                reg, value = write
                if reg in (Reg.DLM_MASK, Reg.TLM_MASK):
                    value = self.mask_write(reg, value)
                    write = (reg, value)
                payload_pin.write((reg.value << self.reg_at) | (value << self.value_at))
                changed = True
            valid = int(write is not None)
            if valid != driven[2]:
                valid_pin.write(valid)
                driven[2], changed = valid, True
            # Here at the falling edge the design shows this cycle's registers, decoded,
            # and the inputs as they were at the last rising edge (it has no falling-edge
            # logic). With no input changed, that is exactly what ReadOnly would show, so
            # the wake-up is saved. An input changed: wait for ReadOnly, so that a path from
            # an input to an output (hw/gtsu.py has none: every output is a register or
            # decoded from registers) would show as it always did.
            if changed:
                self.read_only_waits += 1
                await read_only

            rtl = (
                read_task(),
                read_ready(),
                read_dlm_enable(),
                read_tlm_enable(),
                read_gating(),
                read_last_switch_cycles(),
                read_switches(),
                read_config_error(),
            )
            counted = golden.switches
            want = (
                TASK_CODES[golden.task],
                golden.ready,
                golden.dlm_enable,
                golden.tlm_enable,
                golden.gating,
                golden.last_switch_cycles,
                counted if counted < switch_max else switch_max,
                golden.config_error,
            )  # GTSU.outputs() without the dict (its bools equal the ports' 0 and 1)
            if rtl != want:
                self.compare_outputs(rtl, want)
            remember((cycle, want_draft, want_preverify, write, rtl))
            if not cycle & 63:
                self.check_registers()

            task, ready = rtl[0], rtl[1]
            if rtl[7] and not config_error:
                self.coverage.sample("config_error raised")
            config_error = rtl[7]
            if rtl != clean and self.check_invariants(rtl):
                clean = rtl

            # Switch latency, measured from the ports.
            if decision is not None and ready:
                started, expected, kind = decision
                measured = cycle - started - 1
                self.latency[(measured, expected, kind)] += 1
                self.max_latency = max(self.max_latency, measured)
                if measured != expected:
                    self.error(f"{kind} switch took {measured} cycles, expected {expected}")
                self.cover_switch(measured, kind, counted)
                decision = None
            target = PREVERIFY if want_preverify else DRAFT if want_draft else IDLE
            if ready and target != task:
                t_off, t_on = regs["t_off"], regs["t_on"]
                expected = t_off if target == IDLE else t_off + t_on
                kind = f"{NAMES[task]}->{NAMES[target]}"
                self.switch_kinds[kind] += 1
                self.coverage.sample(kind)
                decision = (cycle, expected, kind)

            # Service bound: a request held high from a ready cycle.
            for kind, held in (
                (PREVERIFY, want_preverify),
                (DRAFT, want_draft and not want_preverify),
            ):
                if not held:
                    if waits:
                        waits.pop(kind, None)
                    continue
                if kind not in waits and ready:
                    waits[kind] = (cycle, regs["t_off"] + regs["t_on"] + 1)
                if kind in waits:
                    since, bound = waits[kind]
                    if ready and task == kind:
                        self.served[NAMES[kind]] += 1
                    elif cycle - since >= bound:
                        self.error(f"{NAMES[kind]} held since cycle {since} not served")

            golden.step(AS_BOOL[want_draft], AS_BOOL[want_preverify])
            if write is not None:
                name = REGISTERS[write[0]]
                value = write[1] & self.register_max[name]
                setattr(golden, name, value)
                regs[name] = value

    def cover_switch(self, measured: int, kind: str, counted: int) -> None:
        """The bins of a switch that has just completed (``counted``: the golden model's
        count of switches, this one included)."""
        p = self.p
        if measured == 0:
            self.coverage.sample("zero-latency switch")
        if measured == p.t_off + p.t_on and not kind.endswith("IDLE"):
            self.coverage.sample("switch with the reset registers")
        if measured > (1 << p.timer_bits) - 1:
            self.coverage.sample("last_switch_cycles saturated")
        if counted == self.switch_max:
            self.coverage.sample("switches saturated")
        elif counted > self.switch_max:
            self.coverage.sample("switches held at saturation")

    def check_invariants(self, rtl: tuple[int, ...]) -> bool:
        """The port invariants of one cycle's outputs (``OUTPUTS`` order); True if they hold."""
        task, ready, dlm, tlm, gating = rtl[:5]
        violated = []
        if dlm & tlm:
            violated.append(f"ranks {dlm & tlm:#x} enabled for both roles")
        if gating and (dlm or tlm):
            violated.append("ranks enabled while gating")
        if ready and gating:
            violated.append("ready while gating")
        if (dlm and task != DRAFT) or (tlm and task != PREVERIFY):
            violated.append("ranks enabled for a role the task does not have")
        for message in violated:
            self.error(message)
        return not violated


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_requests(dut):
    """CYCLES cycles of random requests and register writes against the golden model."""
    params = params_from_env(GTSUParams)
    tb = TB(dut, params)
    await tb.reset()
    started, cpu_started = time.perf_counter(), time.process_time()
    await tb.run(CYCLES)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert not tb.errors, f"{len(tb.errors)}+ error(s):\n" + "\n".join(tb.errors)

    switches = sum(tb.switch_kinds.values())
    ns_per_cycle = 1000 / PIM_MHZ
    report(
        dut,
        f"{params.tag()}: {CYCLES} cycles, {switches} switches in {CYCLES} cycles, "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU = {CYCLES / wall:.0f} clock edges/s, "
        f"{CYCLES / cpu:.0f} per CPU-second",
    )
    report(
        dut,
        f"wake-ups: {CYCLES} falling edges, {tb.read_only_waits} ReadOnly (the cycles that "
        f"changed an input)",
    )
    report(dut, f"switches by kind {dict(sorted(tb.switch_kinds.items()))}")
    report(dut, f"cycles a held request was served in, within the bound {dict(tb.served)}")
    distinct = len({measured for measured, _expected, _kind in tb.latency})
    timer_max = (1 << params.timer_bits) - 1
    saturated = sum(n for (measured, _e, _k), n in tb.latency.items() if measured > timer_max)
    default = params.t_off + params.t_on
    quiet = [m for (m, _e, kind) in tb.latency if m == default and not kind.endswith("IDLE")]
    report(
        dut,
        f"switch latency with the reset registers (t_off={params.t_off}, t_on={params.t_on}): "
        f"{default} cycles = {default * ns_per_cycle:.1f} ns at {PIM_MHZ} MHz "
        f"({'measured' if quiet else 'NOT measured'}); to IDLE {params.t_off} cycles "
        f"= {params.t_off * ns_per_cycle:.1f} ns",
    )
    report(
        dut,
        f"longest switch measured: {tb.max_latency} cycles = "
        f"{tb.max_latency * ns_per_cycle:.1f} ns ({distinct} distinct latencies; {saturated} "
        f"above {timer_max}, reported saturated)",
    )
    # The traffic reached what it claims to: every bin its required number of times.
    tb.coverage.write()
    report(dut, tb.coverage.summary())
    tb.coverage.check()
