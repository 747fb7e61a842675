"""cocotb testbench of the GTSU on its generated Verilog, against the golden model.

One coroutine does everything, once per clock cycle: it drives the requests and the register
write port just after the falling edge, samples every output in ``ReadOnly`` (see
``harness/tb.py``), compares them with ``ahasd.golden.gtsu.GTSU.outputs()`` of the same cycle,
then steps the golden model with the cycle's requests and applies the cycle's register write
to it (the golden docstring: a register assigned between two steps holds the value from the
current cycle on, which is where an RTL write strobed in the previous cycle lands).

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
from ahasd.hw.gtsu import Reg, default_masks, write_layout
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
GOLDEN_NAME = {"current_task": "task"}  # the golden dict says "task"
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
    """Random request levels and register writes."""

    def __init__(self, params: GTSUParams, rng):
        self.p = params
        self.rng = rng
        self.flip = 0.05
        self.write_rate = 0.0
        self.overlaps_left = 2
        self.want_draft = 0
        self.want_preverify = 0

    def requests(self) -> tuple[int, int]:
        rng = self.rng
        if rng.random() < 0.002:
            self.flip = rng.choice([0.3, 0.05, 0.02, 0.005])
        if rng.random() < self.flip:
            self.want_draft ^= 1
        if rng.random() < self.flip * 0.7:
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
        rng, ranks = self.rng, self.p.ranks
        # Both waits zero at once is rare by chance, so it gets a window of its own: two
        # scripted writes, then no timer writes for a while (zero-latency switches).
        # Likewise the longest waits, whose sum saturates the latency report.
        zero_window = int(CYCLES * 0.7)
        long_window = int(CYCLES * 0.4)
        for window, value in ((zero_window, 0), (long_window, (1 << self.p.timer_bits) - 1)):
            if cycle in (window, window + 1):
                return (Reg.T_OFF if cycle == window else Reg.T_ON), value
        # And one overlap of the masks for certain (rank 0 in both: the sticky error).
        overlap = int(CYCLES * 0.85)
        if cycle in (overlap, overlap + 1):
            return (Reg.TLM_MASK if cycle == overlap else Reg.DLM_MASK), 1
        if cycle < QUIET or rng.random() >= 0.004:
            return None
        reg = rng.choice(list(Reg))
        if reg in (Reg.T_OFF, Reg.T_ON):
            for window in (zero_window, long_window):
                if window <= cycle < window + CYCLES // 10:
                    return None
            return reg, self.wait()
        if self.overlaps_left and cycle > CYCLES // 2 and rng.random() < 0.05:
            self.overlaps_left -= 1
            return reg, rng.randrange(1 << ranks)  # anything, likely overlapping
        return reg, -1  # a disjoint mask, completed by the testbench from the other mask


class TB:
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
        self.errors: list[str] = []
        self.history: deque[str] = deque(maxlen=24)
        self.cycle = 0
        self.latency: Counter[tuple[int, int, str]] = Counter()  # (measured, expected, kind)
        self.switch_kinds: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.max_latency = 0
        self.switch_max = (1 << COUNTER_BITS) - 1
        self.coverage = Coverage("gtsu", coverage_bins(params, CYCLES))

    def error(self, message: str) -> None:
        if not self.errors:
            self.errors += [f"  {line}" for line in self.history]
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

    async def run(self, cycles: int) -> None:
        dut, golden, traffic = self.dut, self.golden, self.traffic
        decision = None  # (cycle, expected latency, kind) of the switch in progress
        waits = {}  # per request kind: (armed-from cycle, bound)
        config_error = 0
        for self.cycle in range(cycles):
            await FallingEdge(dut.clk)
            want_draft, want_preverify = traffic.requests()
            write = traffic.write(self.cycle)
            dut.want_draft.value = want_draft
            dut.want_preverify.value = want_preverify
            if write is not None:
                reg, value = write
                if reg in (Reg.DLM_MASK, Reg.TLM_MASK):
                    value = self.mask_write(reg, value)
                    write = (reg, value)
                dut.wr__payload.value = (reg.value << self.reg_at) | (value << self.value_at)
            dut.wr__valid.value = int(write is not None)
            await ReadOnly()

            rtl = {name: int(getattr(dut, name).value) for name in OUTPUTS}
            want = golden.outputs()
            counted = want["switches"]
            want["switches"] = min(counted, self.switch_max)
            for name in OUTPUTS:
                if rtl[name] != want[GOLDEN_NAME.get(name, name)]:
                    self.error(f"{name} = {rtl[name]}, golden {want[GOLDEN_NAME.get(name, name)]}")
            self.history.append(
                f"cycle {self.cycle}: in draft={want_draft} preverify={want_preverify} "
                f"write={write} out {rtl}"
            )
            if self.cycle % 64 == 0:
                for name in self.regs:
                    if int(getattr(dut, name).value) != self.regs[name]:
                        self.error(f"register {name} reads back {int(getattr(dut, name).value)}")

            task, ready = rtl["current_task"], rtl["ready"]
            if rtl["config_error"] and not config_error:
                self.coverage.sample("config_error raised")
            config_error = rtl["config_error"]
            self.check_invariants(rtl)

            # Switch latency, measured from the ports.
            if decision is not None and ready:
                started, expected, kind = decision
                measured = self.cycle - started - 1
                self.latency[(measured, expected, kind)] += 1
                self.max_latency = max(self.max_latency, measured)
                if measured != expected:
                    self.error(f"{kind} switch took {measured} cycles, expected {expected}")
                self.cover_switch(measured, kind, counted)
                decision = None
            target = PREVERIFY if want_preverify else DRAFT if want_draft else IDLE
            if ready and target != task:
                t_off, t_on = self.regs["t_off"], self.regs["t_on"]
                expected = t_off if target == IDLE else t_off + t_on
                kind = f"{NAMES[task]}->{NAMES[target]}"
                self.switch_kinds[kind] += 1
                self.coverage.sample(kind)
                decision = (self.cycle, expected, kind)

            # Service bound: a request held high from a ready cycle.
            for kind, held in (
                (PREVERIFY, want_preverify),
                (DRAFT, want_draft and not want_preverify),
            ):
                if not held:
                    waits.pop(kind, None)
                    continue
                if kind not in waits and ready:
                    waits[kind] = (self.cycle, self.regs["t_off"] + self.regs["t_on"] + 1)
                if kind in waits:
                    since, bound = waits[kind]
                    if ready and task == kind:
                        self.served[NAMES[kind]] += 1
                    elif self.cycle - since >= bound:
                        self.error(f"{NAMES[kind]} held since cycle {since} not served")

            golden.step(want_draft, want_preverify)
            if write is not None:
                name = REGISTERS[write[0]]
                value = write[1] & ((1 << len(getattr(dut, name))) - 1)
                setattr(golden, name, value)
                self.regs[name] = value

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

    def check_invariants(self, rtl: dict) -> None:
        dlm, tlm = rtl["dlm_enable"], rtl["tlm_enable"]
        if dlm & tlm:
            self.error(f"ranks {dlm & tlm:#x} enabled for both roles")
        if rtl["gating"] and (dlm or tlm):
            self.error("ranks enabled while gating")
        if rtl["ready"] and rtl["gating"]:
            self.error("ready while gating")
        task = rtl["current_task"]
        if (dlm and task != DRAFT) or (tlm and task != PREVERIFY):
            self.error("ranks enabled for a role the task does not have")


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_requests(dut):
    """CYCLES cycles of random requests and register writes against the golden model."""
    params = params_from_env(GTSUParams)
    tb = TB(dut, params)
    await tb.reset()
    started = time.perf_counter()
    await tb.run(CYCLES)
    wall = time.perf_counter() - started
    assert not tb.errors, f"{len(tb.errors)}+ error(s):\n" + "\n".join(tb.errors)

    switches = sum(tb.switch_kinds.values())
    ns_per_cycle = 1000 / PIM_MHZ
    report(
        dut,
        f"{params.tag()}: {CYCLES} cycles, {switches} switches in {wall:.1f} s "
        f"= {CYCLES / wall:.0f} cycles/s",
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
