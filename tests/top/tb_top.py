"""cocotb integration test of the controller top against the golden controller.

Three free-running clocks: ``pim`` 1250 ps (800 MHz), ``npu`` 1000 ps, ``cpu`` 1500 ps. One
loop per clock, each doing all of its domain's work once per cycle (drive after the falling
edge, sample in ``ReadOnly``: :mod:`ahasd.hw.tb.clocking`), run by the simulator's callbacks
(:class:`~ahasd.hw.tb.clocking.EdgeLoop`, no cocotb task; the test body polls them). The NPU
and CPU sides sample at the falling edge itself where what they read is a function of their
domain's registers (:meth:`TB.npu_drive`, :meth:`TB.cpu_drive`), and the CPU side sleeps
between its orders. The testbench has the usual four parts:

driver
    :class:`Stimulus`, random traffic through the testbench library's drivers of the top
    (:class:`ahasd.hw.tb.top.ControllerTopDriver`, the ones ``ahasd cosim`` uses). ``pim``:
    the scripted CPU on the register bus (presets first, then random reads and occasional
    writes and soft resets during the traffic), EDC events, TVC commands, the GTSU's
    ``want_draft`` level, the draft queue's writer, the ready of the EDC decisions, TVC
    answers and the feedback and pre-verification queues' readers. The CPU is a coroutine on
    the AXI4-Lite port (the library's ``RegisterPort``), stepped in the PIM loop's phases by
    a :class:`~ahasd.hw.tb.clocking.LoopTask`: it holds EDC events (and TVC commands) while
    its access depends on them. ``npu``: the draft
    queue's reader (random stalls, random epoch bumps = rejections) and the feedback
    queue's writer. ``cpu``: the pre-verification queue's writer.
monitor
    :class:`ahasd.hw.tb.top.ControllerTopMonitor`: every transfer and output of a domain in
    one cycle, from the top's ports alone; the register accesses rebuilt from the AXI4-Lite
    handshakes (a read at the edge that takes it, a write at its B response, the cycle
    after). ``AHASD_CROSS_CHECK_ACCESSES=1`` also watches the register file's access port
    inside the top and asserts that both saw the same accesses at the same edges
    (:class:`AccessCrossCheck`; not on the mutation campaign's flattened netlist).
model
    :class:`ahasd.golden.top.GoldenTop`. Per PIM cycle the scoreboard applies, in the model's
    order: the bus write taken at the last edge, the reads issued, the events and queue
    transfers taken at the edge, then ``step`` (the GTSU with the ``want_preverify`` the RTL
    shows, since the queue's synchroniser latency is not modelled).
checker
    :class:`Scoreboard`: every EDC decision (all fields) and every TVC answer (``n`` and
    ``C_left``) in order, every entry out of every queue and every squash, the GTSU's outputs
    in every cycle, ``want_preverify`` in both directions (never high with no order pending,
    high within the synchroniser's 4 PIM cycles of one becoming pending), every register
    access's AXI response (read data, ``RRESP``/``BRESP``) against the golden model at the
    edge the register file takes it, and the interrupt output. Reads of EDC registers
    and of the interrupt causes are compared when the EDC has settled (no event for 4
    cycles), of TVC registers when the TVC has been idle for 3: the golden EDC and TVC apply
    an event at once, the RTL a few cycles later (``ahasd.golden.top``). Queue levels read through
    the bus are compared with the level ports of the same cycle (the golden queues have no
    synchroniser lag). The test ends asserting that no error was seen and that nothing
    expected is left: no decision or answer outstanding, every golden queue empty.

Register-visible effects: :class:`ChangeRecord` notes, for every event (EDC event, TVC
command, queue transfer, GTSU switch, soft reset, bus write), the registers whose golden
value it changed (a static map from event kind to the registers it can touch, built from
the register map); the CPU reads a changed register first (the one whose bin has the
fewest hits) once the ``settled`` rules allow, so each change is compared through the bus
before the next one overwrites it where the traffic allows. The bins ``"kind -> register"``
count reads that saw the golden value the event left; the everyday events' effects on their
own registers need 10 each, the rarer pairs (a soft reset's, an error's, an interrupt
cause's) are counted and reported, not required (see :func:`coverage_bins`).

Queue entries are packed with the golden model's bit order (``ahasd.golden.queues.pack``),
not the RTL's layouts, so the test also checks that the RTL lays entries out as the spec says.

Environment: ``AHASD_TB_PARAMS`` (TopParams as nested JSON), ``AHASD_TB_SEED``, ``AHASD_EVENTS``
(default 20,000: EDC events + TVC commands + queue entries written).
"""

from __future__ import annotations

import gc
import json
import math
import os
import time
from collections import deque
from dataclasses import dataclass

import cocotb
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time
from harness.coverage import Coverage
from harness.tb import report, rng_from_env

from ahasd.golden.edc import COUNTER_NAMES
from ahasd.golden.gtsu import TASK_CODES
from ahasd.golden.queues import DraftEntry, FeedbackEntry, PreverifyEntry, pack, unpack
from ahasd.golden.top import GoldenTop
from ahasd.hw.axi_lite import Resp
from ahasd.hw.tb.checker import ErrorLog, InOrderChecker
from ahasd.hw.tb.clocking import EdgeLoop, LoopTask, wait_until
from ahasd.hw.tb.pins import Pin, write_immediately
from ahasd.hw.tb.top import (
    TABLE_CODES,
    WORD_SHIFT,
    ControllerTopDriver,
    ControllerTopMonitor,
    CpuCycle,
    NpuCycle,
    PimCycle,
)
from ahasd.hw.tvc import Op, Table
from ahasd.params import TopParams

EVENTS = int(os.environ.get("AHASD_EVENTS", "20000"))
# Compare the accesses the monitor rebuilds from the AXI port with the register file's
# access port inside the top (the generated Verilog has it, the mutation netlist does not).
CROSS_CHECK_ACCESSES = os.environ.get("AHASD_CROSS_CHECK_ACCESSES") == "1"
OKAY, SLVERR = Resp.OKAY.value, Resp.SLVERR.value
PERIODS_PS = {"pim": 1250, "npu": 1000, "cpu": 1500}
COUNTS = (
    "edc_events",
    "tvc_commands",
    "draft_written",
    "feedback_written",
    "preverify_written",
    "decisions",
    "answers",
    "nonzero_answers",
    "draft_read",
    "feedback_read",
    "preverify_read",
    "reads_checked",
    "reads_unchecked",
    "slverr",
    "irq_checked",
    "irq_high",
    "writes",
    "soft_resets",
    "refusals",
    "squashed",
    "epoch_bumps",
    "preverify_cycles",
    "preverify_wanted",
)
# PIM cycles the pre-verification queue's pointer synchroniser may take to show an order
# the CPU wrote (``Queue``: visible to the reader 3 to 4 read-clock edges after the write).
PREVERIFY_LAG = 4
# The CPU writes a pre-verification order in this share of the CPU cycles it may.
PREVERIFY_RATE = 0.03


def depends_on_edc(name: str) -> bool:
    return name.startswith("EDC_") or name in ("ERROR", "IRQ_STATUS")


def depends_on_tvc(name: str) -> bool:
    return (name.startswith("TVC_") and name != "TVC_NCR") or name in (
        "ERROR",
        "STATUS",
        "IRQ_STATUS",
    )


LEVELS = {
    "DRAFT_QUEUE_LEVEL": "draft_w",
    "FEEDBACK_QUEUE_LEVEL": "feedback_r",
    "PREVERIFY_QUEUE_LEVEL": "preverify_r",
}


# The test body looks at the loops' progress every POLL_CYCLES PIM cycles.
POLL_CYCLES = 64
SOFT_RESET_EVERY = 500  # CPU accesses between two scheduled soft resets
# A random write's W this many cycles before its AW (negative: AW first).
WRITE_SKEWS = (0, 0, 1, -1, 2, -3)
FILL_EVERY = 1500  # EDC events between two directed fills (see Stimulus.filling)


@dataclass
class EdcEvent:
    """An EDC event being presented; ``probes`` > 0: a DRAFT against a full EDC, withdrawn
    after that many refused cycles."""

    kind: str
    args: tuple
    bits: int
    probes: int


@dataclass
class ReadTaken:
    """A read the register file took, waiting for its R response: the golden answer, whether
    it is compared (the blocks it shows had settled), and the pending change of the register
    it would observe with the register's golden view then (``change`` None: none)."""

    name: str
    expected: tuple[int, bool]  # (value, ok)
    check: bool
    change: tuple | None
    view: object


# -- which registers each event changed (the register-visible effects) ---------------------

_TABLE_GROUPS = ("TVC_NVCT", "TVC_PDCT", "TVC_PVCT")
_GTSU_LIVE = ("GTSU_LAST_SWITCH", "GTSU_SWITCHES", "GTSU_DLM_ENABLE", "GTSU_TLM_ENABLE")
# The event kind that raised an interrupt cause (the causes of the errors follow ERROR's
# bits, whichever event set the flag: ChangeRecord.error_source).
CAUSE_SOURCES = {"preverify": "preverify write", "edc_backpressure": "EDC refused DRAFT"}
ERROR_CAUSES = (("edc", "edc_error"), ("tvc", "tvc_error"), ("gtsu_config", "gtsu_error"))


def event_registers(regmap) -> dict[str, tuple[str, ...]]:
    """The registers each event kind can change, per the register map's descriptions.

    The kinds: the EDC's events (a DRAFT refused for backpressure only raises a cause), the
    TVC's commands (``ASK`` changes no register), each queue transfer on its side, a GTSU
    edge that switches, a soft reset, and any other bus write (the register written, and
    ERROR: ``EDC_HMAX`` written 0, overlapping masks). ``IRQ_STATUS`` is recorded with the
    event that made its cause rise (:data:`CAUSE_SOURCES`), at the edge that sets it.
    """
    tables = tuple(reg.name for reg in regmap if reg.group in _TABLE_GROUPS)
    blocks = ("EDC_HMAX", "EDC_LLR", *(f"EDC_{name.upper()}" for name in COUNTER_NAMES))
    blocks += ("TVC_N_MAX", "TVC_NCR", *tables, "GTSU_DLM_MASK", "GTSU_TLM_MASK")
    blocks += ("GTSU_T_OFF", "GTSU_T_ON", *_GTSU_LIVE)
    return {
        "EDC DRAFT": ("EDC_LLR", "EDC_DRAFTS", "EDC_CONTINUES", "EDC_SUPPRESSIONS", "ERROR"),
        "EDC VERIFY": ("EDC_LLR", "EDC_VERIFIES", "EDC_ROLLBACKS", "ERROR"),
        "TVC LEARN": (*tables, "ERROR"),
        "TVC NPU_START": ("STATUS", "TVC_NCR"),
        "TVC NPU_DONE": ("STATUS", "TVC_NCR"),
        "draft write": ("DRAFT_QUEUE_LEVEL",),
        "draft read": ("DRAFT_QUEUE_LEVEL",),  # a squashed entry too
        "feedback write": ("FEEDBACK_QUEUE_LEVEL",),
        "feedback read": ("FEEDBACK_QUEUE_LEVEL",),
        "preverify write": ("PREVERIFY_QUEUE_LEVEL",),
        "preverify read": ("PREVERIFY_QUEUE_LEVEL",),
        "GTSU switch": ("STATUS", *_GTSU_LIVE),
        "SOFT_RESET": ("ERROR", "STATUS", *blocks),
        "write": (*(reg.name for reg in regmap if reg.writable and reg.readable), "ERROR"),
    }


def coverage_bins(regmap) -> dict[str, int]:
    """One bin per (event kind, register) an event of that kind can change, ``"kind ->
    register"``, each needing a read that observed the change (:class:`ChangeRecord`)."""
    kinds = event_registers(regmap)
    pairs = [(kind, name) for kind in kinds if kind != "write" for name in kinds[kind]]
    # IRQ_STATUS, by the events that raise its causes. An error cause rises only when its
    # sticky ERROR flag does, so at most once between two soft resets of its block.
    pairs += [(kind, "IRQ_STATUS") for kind in (*CAUSE_SOURCES.values(), "EDC DRAFT")]
    pairs += [("EDC VERIFY", "IRQ_STATUS"), ("TVC LEARN", "IRQ_STATUS")]
    # Bus writes: what they change besides the register written (which the random reads
    # check like any other): ERROR and the causes its flags raise (the presets write
    # EDC_HMAX 0 and read both back), and IRQ_STATUS cleared.
    pairs += [("write", "ERROR"), ("write", "IRQ_STATUS")]
    # The everyday events' effects on their own registers: many times (the CPU reads the
    # least observed change first, so they come in tens per run).
    often = ("EDC", "TVC LEARN", "draft", "feedback", "preverify", "GTSU")
    frequent = {
        (kind, name)
        for kind, name in pairs
        if kind.startswith(often) and name not in ("ERROR", "IRQ_STATUS")
    }
    # The other pairs need a soft reset, an error or an interrupt cause rising in a window the
    # random traffic reaches on some seeds only (a 20-seed run missed 18 of them at least
    # once: SOFT_RESET -> GTSU_DLM_ENABLE on 13 seeds, EDC DRAFT -> IRQ_STATUS on 12): they
    # are counted and reported (0 = not required) until directed sequences aim at them.
    # A GTSU switch's bins need 3: a TLM-set switch needs a pre-verification order (seed
    # 377838126 saw 7 of 10 on GTSU_TLM_ENABLE), and a switch changes GTSU_LAST_SWITCH only
    # when its latency differs from the last one's (seed 1854156209: 8 of 10).
    required = {(kind, name): 3 if kind == "GTSU switch" else 10 for kind, name in frequent}
    return {f"{kind} -> {name}": required.get((kind, name), 0) for kind, name in pairs}


def register_views(golden: GoldenTop) -> dict[str, object]:
    """A cheap view of each register an event can change: equal views, equal register
    values (TVC_NCR: its counting origin or its frozen value, so a running count is one
    view)."""
    edc, tvc, gtsu, irq = golden.edc, golden.tvc, golden.gtsu, golden.irq_status

    def ncr():
        if tvc.busy:
            return ("counting", golden.cycle - tvc.ncr(golden.cycle))
        return ("frozen", tvc.ncr(golden.cycle))

    def table(group, index):
        name = group[4:].lower()
        return lambda: tvc.tables[name][index]

    def counter(name):
        return lambda: edc.counters[name]

    views = {
        "ERROR": lambda: (edc.error, tvc.error, gtsu.config_error),
        "STATUS": lambda: (gtsu.task, gtsu.ready, gtsu.gating, tvc.busy),
        "IRQ_STATUS": lambda: tuple(irq.values()),
        "IRQ_ENABLE": lambda: tuple(golden.irq_enable.values()),
        "DRAFT_QUEUE_LEVEL": lambda: golden.draft_queue.level,
        "FEEDBACK_QUEUE_LEVEL": lambda: golden.feedback_queue.level,
        "PREVERIFY_QUEUE_LEVEL": lambda: golden.preverify_queue.level,
        "EDC_HMAX": lambda: edc.hmax,
        "EDC_LLR": lambda: edc.llr,
        "TVC_N_MAX": lambda: tvc.n_max,
        "TVC_NCR": ncr,
        "GTSU_DLM_MASK": lambda: gtsu.dlm_mask,
        "GTSU_TLM_MASK": lambda: gtsu.tlm_mask,
        "GTSU_T_OFF": lambda: gtsu.t_off,
        "GTSU_T_ON": lambda: gtsu.t_on,
        "GTSU_LAST_SWITCH": lambda: gtsu.last_switch_cycles,
        "GTSU_SWITCHES": lambda: gtsu.switches,
        "GTSU_DLM_ENABLE": lambda: gtsu.dlm_enable,
        "GTSU_TLM_ENABLE": lambda: gtsu.tlm_enable,
    }
    views.update({f"EDC_{name.upper()}": counter(name) for name in COUNTER_NAMES})
    for reg in golden.regmap:
        if reg.group in _TABLE_GROUPS:
            views[reg.name] = table(reg.group, reg.index)
    return views


class ChangeRecord:
    """The registers the golden model's events changed and the CPU has not read since.

    ``pending[register] = (kinds, view)``: the event kinds of the register's last change and
    its view after it. A checked bus read of the register whose golden view is still that
    one observed the change: the bins ``"kind -> register"`` count it and the entry goes.
    """

    def __init__(self, golden: GoldenTop, coverage: Coverage, bins: dict[str, int]) -> None:
        self.golden = golden
        self.coverage = coverage
        self.kinds = event_registers(golden.regmap)
        self.views = register_views(golden)
        self.pending: dict[str, tuple[tuple[str, ...], object]] = {}
        self.error_source: dict[str, str] = {}  # interrupt cause -> the kind that raised it
        self.hits = dict.fromkeys(bins, 0)  # observed changes per bin, required or not
        self.observed = self.overwritten = 0

    def before(self, names) -> list:
        views = self.views
        return [views[name]() for name in names]

    def after(self, kind: str, names, before: list) -> None:
        """Record the registers of ``names`` whose view is not ``before`` any more."""
        views = self.views
        for name, old in zip(names, before, strict=True):
            new = views[name]()
            if new != old:
                if name == "ERROR":
                    for (_, cause), was, now in zip(ERROR_CAUSES, old, new, strict=True):
                        if now and not was:
                            self.error_source[cause] = kind
                self.changed((kind,), name, new)

    def changed(self, kinds: tuple[str, ...], name: str, view) -> None:
        self.overwritten += name in self.pending
        self.pending[name] = (kinds, view)

    def causes_risen(self, before: tuple) -> None:
        """After the edge: the causes set at it, recorded with the events that raised them."""
        now = self.views["IRQ_STATUS"]()
        if now == before:
            return
        kinds = []
        for cause, was, value in zip(self.golden.irq_status, before, now, strict=True):
            if value and not was:
                kinds.append(CAUSE_SOURCES.get(cause) or self.error_source.get(cause, "write"))
        self.changed(tuple(kinds), "IRQ_STATUS", now)

    def rarest(self) -> str:
        """The pending register whose change counts in the bin with the fewest hits."""
        hits, best, fewest = self.hits, None, None
        for name, (kinds, _) in self.pending.items():
            count = min(hits.get(f"{kind} -> {name}", 1 << 30) for kind in kinds)
            if fewest is None or count < fewest:
                best, fewest = name, count
        return best

    def observe(self, name: str, change: tuple, view_then) -> bool:
        """A checked read of ``name`` (its low word), taken when ``change`` was its pending
        change and its golden view ``view_then``, showed the golden value; False if the
        register had changed without a recorded event (a testbench fault). The answer comes
        a cycle after the read: a change recorded meanwhile stays pending."""
        kinds, view = change
        if self.pending.get(name) is change:
            del self.pending[name]
        if view_then != view:
            return False
        self.observed += 1
        for kind in kinds:
            label = f"{kind} -> {name}"
            if label in self.hits:
                self.hits[label] += 1
                if label in self.coverage.required:
                    self.coverage.sample(label)
        return True


# -- checker (with the model) --------------------------------------------------------------


class Scoreboard:
    """Applies what the monitor saw to the golden model and checks the RTL against it."""

    def __init__(self, params: TopParams, where) -> None:
        self.p = params
        self.golden = GoldenTop(params)
        self.errors = ErrorLog(where)
        self.decisions = InOrderChecker("EDC decision", self.errors)
        self.answers = InOrderChecker("TVC answer", self.errors)
        self.queue_outputs = {
            name: InOrderChecker(f"{name} queue", self.errors)
            for name in ("draft", "feedback", "pre-verification")
        }
        self.snapshot_checked: dict[str, bool] = {}  # 64-bit registers: low word checked
        # Reads taken, waiting for their R response (the next cycle's).
        self.reads_taken: deque[ReadTaken] = deque()
        self.switches_before_resets = 0  # GTSU switches counted before soft resets
        self.counts = dict.fromkeys(COUNTS, 0)
        self.preverify_unseen = 0  # PIM cycles an order has been pending with want low
        bins = coverage_bins(self.golden.regmap)
        self.coverage = Coverage("top", {name: count for name, count in bins.items() if count})
        self.record = ChangeRecord(self.golden, self.coverage, bins)
        gtsu = self.golden.gtsu
        self.gtsu_state = lambda: (
            gtsu.task,
            gtsu.ready,
            gtsu.gating,
            gtsu.last_switch_cycles,
            gtsu.switches,
            gtsu.dlm_enable,
            gtsu.tlm_enable,
        )

    @property
    def events(self) -> int:
        """EDC events, TVC commands and queue entries written so far."""
        c = self.counts
        return (
            c["edc_events"]
            + c["tvc_commands"]
            + c["draft_written"]
            + c["feedback_written"]
            + c["preverify_written"]
        )

    # register accesses
    def register_read(self, address: int, settled, levels) -> None:
        """A read of the word at ``address`` taken at this edge: what it must answer, from
        the golden model before the edge (:meth:`read_answered` compares)."""
        golden = self.golden
        found = golden.regmap.at(address)
        name = found[0].name if found else None
        expected = golden.bus_read(address)  # always: it keeps the golden snapshots in step
        caught_up = True  # a level: the RTL's shows the golden queue's
        if name in LEVELS:
            caught_up = expected[0] == levels[LEVELS[name]]
            expected = (levels[LEVELS[name]], True)
        check = settled(name) if name else True
        if found and found[0].buffer_reads:
            if found[1] == 0:
                self.snapshot_checked[name] = check
            else:
                check = check and self.snapshot_checked.get(name, False)
        change = view = None
        if found and found[1] == 0 and caught_up and name in self.record.pending:
            change = self.record.pending[name]
            view = self.record.views[name]()
        self.reads_taken.append(ReadTaken(name or hex(address), expected, check, change, view))

    def read_answered(self, rdata: int, rresp: int) -> None:
        """The R response of the read taken at the last edge."""
        read = self.reads_taken.popleft()
        if not read.check:
            self.counts["reads_unchecked"] += 1
            return
        value, ok = read.expected
        self.counts["reads_checked"] += 1
        self.counts["slverr"] += not ok
        if (rdata, rresp) != (value if ok else 0, OKAY if ok else SLVERR):
            self.errors.add(
                f"read {read.name}: RTL {rdata:#x} RRESP {rresp}, golden {value:#x} ok={ok}"
            )
        elif read.change is not None and not self.record.observe(read.name, read.change, read.view):
            self.errors.add(f"{read.name} changed in the golden model with no event recorded")

    def register_write(self, address: int, data: int, strobe: int, bresp: int) -> None:
        """A write taken at the last edge (its B response is this cycle's), applied before
        anything of this cycle."""
        golden = self.golden
        switches = golden.gtsu.switches
        record = self.record
        found = golden.regmap.at(address)
        name = found[0].name if found else hex(address)
        kind = "SOFT_RESET" if name == "SOFT_RESET" else "write"
        if kind == "SOFT_RESET":
            names = record.kinds[kind]
        else:
            names = (name, "ERROR") if name in record.views else ("ERROR",)
        before = record.before(names)
        ok = golden.bus_write(address, data, strobe)
        record.after(kind, names, before)
        if golden.gtsu.switches < switches:  # a soft reset of the GTSU clears its count
            self.switches_before_resets += switches
        if bresp != (OKAY if ok else SLVERR):
            self.errors.add(f"write {name}: RTL BRESP {bresp}, golden ok={ok}")
        self.counts["soft_resets" if name == "SOFT_RESET" else "writes"] += 1
        self.counts["slverr"] += not ok

    def check_irq(self, irq: bool) -> None:
        self.counts["irq_checked"] += 1
        self.counts["irq_high"] += irq
        if irq != self.golden.irq:
            self.errors.add(f"irq: RTL {irq}, golden {self.golden.irq} {self.golden.irq_status}")

    # the PIM side
    def check_gtsu(self, sample: PimCycle) -> None:
        gtsu = self.golden.gtsu
        rtl = sample.gtsu  # in hw.tb.top.GTSU_OUTPUTS order
        # The golden GTSU's outputs() as a tuple, from its state (no dict per cycle).
        golden = (
            TASK_CODES[gtsu.task],
            int(gtsu.ready),
            int(gtsu.gating),
            gtsu.dlm_enable,
            gtsu.tlm_enable,
        )
        if rtl != golden:
            outputs = self.golden.gtsu_outputs()
            if rtl[:3] != golden[:3]:
                self.errors.add(f"GTSU task/ready/gating: RTL {list(rtl[:3])}, golden {outputs}")
            if rtl[3:] != golden[3:]:
                self.errors.add(f"GTSU enables: RTL {rtl[3:]}, golden {outputs}")
        # want_preverify in both directions: never high with no order pending, and high
        # within the synchroniser's latency of an order becoming pending.
        pending = self.golden.want_preverify()
        if sample.want_preverify and not pending:
            self.errors.add("want_preverify high with the golden pre-verification queue empty")
        self.preverify_unseen = (
            self.preverify_unseen + 1 if pending and not sample.want_preverify else 0
        )
        if self.preverify_unseen == PREVERIFY_LAG + 1:
            self.errors.add(
                f"want_preverify low for {PREVERIFY_LAG + 1} PIM cycles with an order pending"
            )
        self.counts["preverify_wanted"] += bool(sample.want_preverify)
        self.counts["preverify_cycles"] += golden[0] == TASK_CODES["PREVERIFY"]

    def edc_event(self, event: EdcEvent) -> None:
        golden, record = self.golden, self.record
        self.counts["edc_events"] += 1
        kind = "EDC DRAFT" if event.kind == "draft" else "EDC VERIFY"
        names = record.kinds[kind]
        before = record.before(names)
        if event.kind == "draft":
            if golden.edc_refuses_draft():
                self.errors.add("EDC took a DRAFT while full")
                return
            decision = golden.edc_draft(*event.args)
            if decision is not None:
                self.decisions.expect(decision)
        else:
            golden.edc_verify(*event.args)
        record.after(kind, names, before)

    def edc_decision(self, decision: dict[str, int]) -> None:
        self.decisions.check(decision)
        self.counts["decisions"] += 1

    def tvc_command(self, op: Op, args: dict) -> None:
        record = self.record
        self.counts["tvc_commands"] += 1
        kind = f"TVC {op.name}"
        names = record.kinds.get(kind, ())  # ASK changes no register
        before = record.before(names)
        self.apply_tvc(op, args)
        record.after(kind, names, before)

    def apply_tvc(self, op: Op, args: dict) -> None:
        golden = self.golden
        if op == Op.LEARN:
            table = "n_max" if args["table"] == Table.N_MAX else args["table"].name.lower()
            golden.tvc_learn(table, args["cycles"], args["length"])
        elif op == Op.NPU_START:
            golden.tvc_npu_start(args["l_kv"])
        elif op == Op.NPU_DONE:
            golden.tvc_npu_done()
        else:
            self.answers.expect(golden.tvc_ask(args["p"]))

    def tvc_answer(self, answer: dict[str, int]) -> None:
        self.answers.check(answer)
        self.counts["answers"] += 1
        self.counts["nonzero_answers"] += answer["n"] > 0

    def level_changed(self, kind: str, name: str, before: int) -> None:
        level = self.record.views[name]()
        if level != before:
            self.record.changed((kind,), name, level)

    def draft_written(self, entry: tuple) -> None:
        queue = self.golden.draft_queue
        before = queue.level
        if not self.golden.draft_push(entry):
            self.errors.add("draft queue took an entry with the golden queue full")
        self.level_changed("draft write", "DRAFT_QUEUE_LEVEL", before)
        self.counts["draft_written"] += 1

    def feedback_read(self, bits: int) -> None:
        checker = self.queue_outputs["feedback"]
        before = self.golden.feedback_queue.level
        checker.expect(self.golden.feedback_pop())
        self.level_changed("feedback read", "FEEDBACK_QUEUE_LEVEL", before)
        checker.check(unpack("feedback", bits, self.p.queues))
        self.counts["feedback_read"] += 1

    def preverify_read(self, bits: int) -> None:
        checker = self.queue_outputs["pre-verification"]
        before = self.golden.preverify_queue.level
        checker.expect(self.golden.preverify_pop())
        self.level_changed("preverify read", "PREVERIFY_QUEUE_LEVEL", before)
        checker.check(unpack("preverify", bits, self.p.queues))
        self.counts["preverify_read"] += 1

    def edge(self, want_draft: int, want_preverify: bool) -> None:
        record, gtsu_state = self.record, self.gtsu_state
        causes, state = record.views["IRQ_STATUS"](), gtsu_state()
        # The GTSU's sticky config error rises at the edge after a cycle with overlapping
        # masks, switch or not (golden/gtsu.py): the write that made them overlap came
        # earlier, so the edge is the event that changes ERROR.
        config_error = self.golden.gtsu.config_error
        error_view = record.views["ERROR"]() if not config_error else None
        self.golden.step(want_draft, want_preverify)
        if error_view is not None and self.golden.gtsu.config_error:
            record.after("write", ("ERROR",), [error_view])
        record.causes_risen(causes)
        if gtsu_state() != state:
            busy = self.golden.tvc.busy
            before = [(*state[:3], busy), *state[3:]]
            record.after("GTSU switch", record.kinds["GTSU switch"], before)

    # the NPU and CPU sides
    def npu(self, sample: NpuCycle, epoch: int, feedback_entry: tuple | None) -> None:
        golden = self.golden
        before = golden.draft_queue.level
        if sample.draft_read is not None:
            checker = self.queue_outputs["draft"]
            checker.expect(golden.draft_pop(epoch))
            checker.check(unpack("draft", sample.draft_read, self.p.queues))
            self.counts["draft_read"] += 1
        if sample.squashed:
            self.counts["squashed"] += 1
            if golden.draft_squash_one(epoch) is None:
                self.errors.add(f"draft queue squashed a live entry: {golden.draft_queue.peek()}")
        self.level_changed("draft read", "DRAFT_QUEUE_LEVEL", before)
        if sample.feedback_written is not None:
            before = golden.feedback_queue.level
            if not golden.feedback_push(feedback_entry):
                self.errors.add("feedback queue took an entry with the golden queue full")
            self.level_changed("feedback write", "FEEDBACK_QUEUE_LEVEL", before)
            self.counts["feedback_written"] += 1

    def cpu(self, sample: CpuCycle, preverify_entry: tuple | None) -> None:
        if sample.preverify_written is not None:
            before = self.golden.preverify_queue.level
            if not self.golden.preverify_push(preverify_entry):
                self.errors.add("pre-verification queue took an entry with the golden queue full")
            self.level_changed("preverify write", "PREVERIFY_QUEUE_LEVEL", before)
            self.counts["preverify_written"] += 1

    # the end
    def leftovers(self, squashed: int) -> list[str]:
        """What was expected and never checked (empty when the run is complete)."""
        golden = self.golden
        errors = []
        if self.decisions.pending or self.answers.pending:
            errors.append(
                f"{self.decisions.pending} decisions, {self.answers.pending} answers never came"
            )
        for name in ("draft", "feedback", "preverify"):
            level = getattr(golden, f"{name}_queue").level
            if level:
                errors.append(f"{level} entries left in the golden {name} queue")
        golden_squashed = len(golden.draft_queue.dropped)
        if squashed != golden_squashed:
            errors.append(f"squashed: RTL {squashed}, golden {golden_squashed}")
        return errors


# -- driver --------------------------------------------------------------------------------


class Stimulus:
    """The random traffic of the three domains; reads the golden state to stay legal."""

    def __init__(self, driver: ControllerTopDriver, board: Scoreboard) -> None:
        self.driver = driver
        self.board = board
        self.p = driver.params
        self.golden = board.golden
        self.readable = [reg.name for reg in self.golden.regmap if reg.readable]
        self.rng = rng_from_env("top-pim")
        self.cycle = 0
        self.stop = False  # no new traffic (drain)
        self.hold_edc = False  # the CPU's access depends on the EDC: no new event
        self.hold_tvc = False  # ... on the TVC: no new command
        self.pinned = False  # both held across accesses (reading what a soft reset changed)
        self.hold_queues = False  # no new queue transfer: a level read waits for its change
        self.tvc_idle_run = 0  # cycles the TVC has been idle in a row
        # Pending work.
        self.edc_event: EdcEvent | None = None
        self.tvc_cmd: tuple | None = None  # (op, args)
        self.draft_entry: tuple | None = None  # a golden queue entry
        self.feedback_entry: tuple | None = None  # a golden queue entry
        self.preverify_entry: tuple | None = None  # a golden queue entry
        self.last_edc_accept = -10
        # Traffic state.
        self.want_draft = 0
        self.edc_rate = 0.5
        # Every FILL_EVERY EDC events the PIM drafts until the EDC is full and then probes
        # it, so each seed sees refused DRAFTs (the random walk of the LLR may never reach
        # full on its own).
        self.edc_events_made = 0
        self.filling = False
        self.decision_stall = 0.1
        self.answer_stall = 0.2
        self.preverify_take = 0.05
        self.npu_busy_until = 0
        self.reader_epoch = 0
        self.writer_epoch = 0
        self.live_epochs: deque[int] = deque()
        self.reader_stall = 0.2

    @property
    def idle(self) -> bool:
        """Nothing presented and nothing expected (the drain is over on this side)."""
        pending = [self.edc_event, self.tvc_cmd, self.draft_entry, self.feedback_entry]
        pending += [self.preverify_entry]
        return (
            not any(pending)
            and not self.board.decisions.pending
            and not (self.board.answers.pending)
        )

    # -- register traffic (the CPU coroutine, TB.cpu_loop) -----------------------------------

    def random_write(self) -> tuple[str, int]:
        rng, p = self.rng, self.p
        roll = rng.random()
        ranks = p.gtsu.ranks
        if roll < 0.3:
            # Disjoint masks mostly; sometimes an overlap (the sticky config error).
            if rng.random() < 0.05:
                return rng.choice(["GTSU_DLM_MASK", "GTSU_TLM_MASK"]), rng.randrange(1 << ranks)
            split = rng.randrange(1, ranks)
            dlm = rng.randrange(1 << split)
            tlm = rng.randrange(1 << (ranks - split)) << split
            if rng.random() < 0.5:
                return "GTSU_DLM_MASK", dlm
            return "GTSU_TLM_MASK", tlm & ~self.golden.gtsu.dlm_mask
        if roll < 0.5:
            return rng.choice(["GTSU_T_OFF", "GTSU_T_ON"]), rng.choice(
                [0, 0, 1, 2, *(rng.randrange(3, 40) for _ in range(5)), rng.randrange(1 << 32)]
            )
        if roll < 0.6:
            return "EDC_HMAX", 0 if rng.random() < 0.05 else rng.randrange(8000, 65536)
        if roll < 0.7:
            return "TVC_N_MAX", rng.choice([rng.randrange(0, 17), rng.randrange(1 << 32)])
        if roll < 0.8:
            return "IRQ_ENABLE", rng.randrange(32)
        table = rng.choice(list(TABLE_CODES))
        return f"TVC_{table.upper()}[{rng.randrange(p.tvc.depth)}]", self.ratio(table)

    def ratio(self, table: str) -> int:
        """A plausible table entry (cycles per token, UQ.8), sometimes past 32 bits."""
        low, high = {"nvct": (4, 40), "pdct": (30, 200), "pvct": (60, 400)}[table]
        if self.rng.random() < 0.1:
            return self.rng.randrange(1 << self.p.tvc.ratio_bits)
        return self.rng.randrange(low << 8, high << 8)

    def edc_settled(self) -> bool:
        """The RTL EDC has executed every event and its flags and causes have followed: none
        presented, no decision outstanding, the last one taken 4 or more cycles ago."""
        return (
            self.edc_event is None
            and self.last_edc_accept < self.cycle - 3
            and not self.board.decisions.pending
        )

    def tvc_settled(self) -> bool:
        return self.tvc_cmd is None and self.tvc_idle_run >= 3 and not self.board.answers.pending

    def settled(self, name: str) -> bool:
        """Whether a read of ``name`` now can be compared with the golden controller."""
        if depends_on_edc(name) and not self.edc_settled():
            return False
        return not (depends_on_tvc(name) and not self.tvc_settled())

    # -- traffic generators ----------------------------------------------------------------

    def new_edc_event(self) -> EdcEvent:
        rng, p, golden, edc = self.rng, self.p.edc, self.golden, self.driver.edc
        max_length = (1 << p.length_bits) - 1
        hmax = golden.edc.hmax
        llr = golden.edc.llr
        full = golden.edc_refuses_draft()
        self.edc_events_made += 1
        if self.edc_events_made % FILL_EVERY == 0:
            self.filling = True
        if full and (self.filling or rng.random() < 0.5) and self.edc_settled():
            self.filling = False
            # A DRAFT against a full EDC: it must be refused for a few cycles (then it is
            # withdrawn and the VERIFY that frees a slot goes first).
            length = rng.randrange(1, max_length + 1)
            return EdcEvent("draft", (0, length), edc.draft_bits(0, length), rng.randrange(1, 5))
        verify_share = 0.2 + 0.6 * llr / p.llr_max
        # Full and not probing: a VERIFY, never a DRAFT (a DRAFT that is not a probe would
        # wait for a slot that only a later event can free).
        if full or (not self.filling and rng.random() < verify_share):
            if llr == 0 and rng.random() < 0.9:
                pass  # mostly avoid the protocol error; draft instead
            else:
                n_acc = rng.randrange(0, max_length + 1)
                full_accept = rng.random() < 0.7
                s_acc = min((1 << p.sum_bits) - 1, n_acc * rng.randrange(0, hmax + hmax // 4))
                args = (full_accept, s_acc, n_acc)
                return EdcEvent("verify", args, edc.verify_bits(*args), 0)
        length = 0 if rng.random() < 0.002 else rng.randrange(1, max_length + 1)
        # Entropy sums spread over every bucket (and past the top one).
        per_token = rng.randrange(0, hmax + hmax // 4)
        s = min((1 << p.sum_bits) - 1, max(1, length) * per_token)
        return EdcEvent("draft", (s, length), edc.draft_bits(s, length), 0)

    def new_tvc_command(self) -> tuple:
        rng, p = self.rng, self.p.tvc
        npu_busy = self.golden.tvc.busy
        if not npu_busy and rng.random() < 0.3:
            self.npu_busy_until = self.cycle + rng.randrange(200, 12000)
            args = {"l_kv": rng.randrange(16, 2048)}
            return (Op.NPU_START, args)
        if npu_busy and self.cycle >= self.npu_busy_until:
            return (Op.NPU_DONE, {})
        if rng.random() < 0.4:
            roll = rng.random()
            if roll < 0.003:
                args = {"table": Table.N_MAX, "cycles": 5, "length": 1}
            elif roll < 0.006:
                args = {"table": Table.PDCT, "cycles": 5, "length": 0}
            else:
                table = rng.choice(list(TABLE_CODES))
                length = rng.randrange(1, 64)
                cycles = (length * self.ratio(table)) >> 8
                cycles = min((1 << p.cycle_bits) - 1, cycles + rng.randrange(0, 50))
                args = {"table": TABLE_CODES[table], "cycles": cycles, "length": length}
            return (Op.LEARN, args)
        return (Op.ASK, {"p": rng.randrange(0, 40)})

    def random_draft_entry(self) -> tuple:
        rng, q = self.rng, self.p.queues
        if rng.random() < 0.1:
            self.writer_epoch = self.reader_epoch  # learned through the feedback path
        # Built as the golden queue's entry type (the fields in the spec's order, each
        # drawn inside its width), so the golden model takes it without normalising it.
        return DraftEntry(
            batch_id=rng.randrange(1 << q.batch_id_bits),
            epoch=self.writer_epoch & ((1 << q.epoch_bits) - 1),
            first_pos=rng.randrange(1 << q.pos_bits),
            length=rng.randrange(1 << q.length_bits),
            bucket=rng.randrange(8),
        )

    # -- one PIM cycle ---------------------------------------------------------------------

    def drive_pim(self) -> None:
        """Drive every PIM-side input but the AXI port for this cycle (after the falling
        edge)."""
        rng, stop = self.rng, self.stop
        random = rng.random
        edc, tvc, queues = self.driver.edc, self.driver.tvc, self.driver.queues
        hold_edc, hold_tvc = self.hold_edc or self.pinned, self.hold_tvc or self.pinned
        hold_queues = self.hold_queues
        if self.edc_event is None and not hold_edc and not stop:
            if random() < 0.002:
                self.edc_rate = rng.choice([0.1, 0.5, 0.9])
            if self.filling and self.golden.edc_refuses_draft() and not self.edc_settled():
                pass  # full: wait until it settles, so the probe's refusals can be checked
            elif random() < self.edc_rate:
                self.edc_event = self.new_edc_event()
        if self.edc_event is not None:
            edc.event.present(self.edc_event.bits)
        else:
            edc.event.withdraw()
        if random() < 0.002:
            self.decision_stall = rng.choice([0.0, 0.3, 0.9])
        edc.decision.accept(stop or random() >= self.decision_stall)

        if self.tvc_cmd is None and not hold_tvc and not stop and random() < 0.12:
            self.tvc_cmd = self.new_tvc_command()
            tvc.command.present(tvc.command_bits(*self.tvc_cmd))
        elif self.tvc_cmd is None:
            tvc.command.withdraw()
        tvc.answer.accept(stop or random() >= self.answer_stall)

        if random() < 0.01:
            self.want_draft ^= 1
        self.driver.gtsu.request_draft(self.want_draft and not self.pinned)

        if self.draft_entry is None and not stop and random() < 0.25 and not hold_queues:
            self.draft_entry = self.random_draft_entry()
            queues.draft_w.present(pack("draft", self.draft_entry, self.p.queues))
        elif self.draft_entry is None:
            queues.draft_w.withdraw()
        queues.feedback_r.accept((stop or random() < 0.4) and not hold_queues)
        if random() < 0.001:
            self.preverify_take = rng.choice([0.01, 0.05, 0.3])
        queues.preverify_r.accept((stop or random() < self.preverify_take) and not hold_queues)

    def pim_taken(self, sample: PimCycle) -> None:
        """Apply this cycle's transfers (sampled in ``ReadOnly``) to the scoreboard, then
        the edge and the register write taken at it."""
        board, golden, d = self.board, self.golden, self.driver
        if sample.write is not None:
            word, data, strobe, bresp = sample.write
            board.register_write(word << WORD_SHIFT, data, strobe, bresp)
            if golden.regmap.at(word << WORD_SHIFT) == (golden.regmap.get("SOFT_RESET"), 0):
                self.tvc_idle_run = 0
        if sample.read_answer is not None:
            board.read_answered(*sample.read_answer)
        if self.edc_settled() and self.tvc_settled():
            board.check_irq(sample.irq)
        if sample.read is not None:
            levels = {port: d.queues.level(port) for port in LEVELS.values()}
            board.register_read(sample.read << WORD_SHIFT, self.settled, levels)
        board.check_gtsu(sample)
        if (
            self.edc_event is not None
            and self.edc_event.kind == "draft"
            and sample.edc_event is None
        ):
            golden.edc_draft_held()

        event = self.edc_event
        if event is not None:
            if sample.edc_event is not None:
                board.edc_event(event)
                self.edc_event = None
                self.last_edc_accept = self.cycle
            elif event.kind == "draft" and golden.edc_refuses_draft():
                board.counts["refusals"] += 1
                if event.probes:
                    event.probes -= 1
                    if event.probes == 0:
                        self.edc_event = None  # withdrawn (see new_edc_event)
        if sample.edc_decision is not None:
            board.edc_decision(d.edc.decode_decision(sample.edc_decision))

        if self.tvc_cmd is not None and sample.tvc_command is not None:
            board.tvc_command(*self.tvc_cmd)
            self.tvc_cmd = None
            self.tvc_idle_run = 0
        elif sample.tvc_ready and not self.board.answers.pending:
            self.tvc_idle_run += 1
        else:
            self.tvc_idle_run = 0
        if sample.tvc_answer is not None:
            board.tvc_answer(d.tvc.decode_answer(sample.tvc_answer))

        if self.draft_entry is not None and sample.draft_written is not None:
            board.draft_written(self.draft_entry)
            self.live_epochs.append(self.writer_epoch)
            self.draft_entry = None
        if sample.feedback_read is not None:
            board.feedback_read(sample.feedback_read)
        if sample.preverify_read is not None:
            board.preverify_read(sample.preverify_read)

        board.edge(self.want_draft and not self.pinned, sample.want_preverify)
        self.cycle += 1

    # -- the NPU and CPU sides -------------------------------------------------------------

    def drive_npu(self, rng) -> None:
        d, q = self.driver, self.p.queues
        mask = (1 << q.epoch_bits) - 1
        if rng.random() < 0.002:
            self.reader_stall = rng.choice([0.0, 0.3, 0.95])
        if not self.stop and rng.random() < 0.004 and self.bump_is_unambiguous(mask):
            self.reader_epoch += 1
            self.board.counts["epoch_bumps"] += 1
        d.queues.set_reader_epoch(self.reader_epoch & mask)
        held = self.hold_queues
        d.queues.draft_r.accept(int((self.stop or rng.random() >= self.reader_stall) and not held))
        if self.feedback_entry is None and not self.stop and rng.random() < 0.2 and not held:
            self.feedback_entry = FeedbackEntry(
                batch_id=rng.randrange(1 << q.batch_id_bits),
                n_accepted=rng.randrange(1 << q.length_bits),
                full=rng.randrange(2),
            )
            d.queues.feedback_w.present(pack("feedback", self.feedback_entry, q))
        elif self.feedback_entry is None:
            d.queues.feedback_w.withdraw()

    def npu_taken(self, sample: NpuCycle) -> None:
        if sample.draft_read is None and not sample.squashed and sample.feedback_written is None:
            return  # nothing moved: the scoreboard and the golden queues stay as they are
        mask = (1 << self.p.queues.epoch_bits) - 1
        self.board.npu(sample, self.reader_epoch & mask, self.feedback_entry)
        while len(self.live_epochs) > self.golden.draft_queue.level:
            self.live_epochs.popleft()
        if sample.feedback_written is not None:
            self.feedback_entry = None

    def bump_is_unambiguous(self, mask: int) -> bool:
        """One more bump keeps every live epoch distinct from the reader's after wrapping."""
        oldest = self.writer_epoch
        if self.live_epochs:
            oldest = min(oldest, self.live_epochs[0])
        return self.reader_epoch + 1 - oldest <= mask

    def cpu_gap(self, rng) -> int:
        """CPU cycles from now to the next pre-verification order the CPU writes: a
        geometric draw, the failures before the first success of one PREVERIFY_RATE trial per
        cycle (one draw instead of one per cycle, so the CPU loop can sleep through them)."""
        return int(math.log(1.0 - rng.random()) / math.log(1.0 - PREVERIFY_RATE))

    def offer_preverify(self, rng) -> bool:
        """Present a new pre-verification order, unless new traffic is held or stopped;
        whether one is presented."""
        if self.stop or self.hold_queues:
            return False
        q = self.p.queues
        self.preverify_entry = PreverifyEntry(
            batch_id=rng.randrange(1 << q.batch_id_bits),
            n_tokens=rng.randrange(1 << q.length_bits),
        )
        self.driver.queues.preverify_w.present(pack("preverify", self.preverify_entry, q))
        return True

    def cpu_taken(self, sample: CpuCycle) -> None:
        self.board.cpu(sample, self.preverify_entry)
        if sample.preverify_written is not None:
            self.preverify_entry = None

    # -- the scripted CPU's presets --------------------------------------------------------

    def preset_script(self) -> list[tuple[str, str, int, int]]:
        """Read every register (reset values), program every preset, read them back:
        ``(kind, name, value, skew)`` (``skew``: :meth:`RegisterPort.write_word`'s)."""
        p, rng = self.p, self.rng
        script = [("read", name, 0) for name in self.readable]
        script += [("write", "EDC_HMAX", 0), ("read", "ERROR", 0), ("write", "SOFT_RESET", 1)]
        script += [("read", "IRQ_STATUS", 0), ("write", "IRQ_STATUS", 0b11111)]
        # Every table entry with all its bits set, W a cycle before AW (the bridge holds the
        # beat a cycle longer than with both together), read back; then its preset, AW first.
        ones = (1 << p.tvc.ratio_bits) - 1
        for table in TABLE_CODES:
            for index in range(p.tvc.depth):
                name = f"TVC_{table.upper()}[{index}]"
                script += [("write", name, ones, 1), ("read", name, 0)]
                script.append(("write", name, self.ratio(table), -1))
        half = p.gtsu.ranks // 2
        script += [
            ("write", "TVC_N_MAX", 6),
            ("write", "EDC_HMAX", rng.randrange(30000, 50000)),
            ("write", "GTSU_DLM_MASK", rng.randrange(1, 1 << half)),
            ("write", "GTSU_TLM_MASK", rng.randrange(1, 1 << (p.gtsu.ranks - half)) << half),
            ("write", "GTSU_T_OFF", rng.randrange(1, 20)),
            ("write", "GTSU_T_ON", rng.randrange(1, 40)),
            ("write", "IRQ_ENABLE", 0b11111),
        ]
        script += [("read", name, 0) for name in self.readable]
        return [step if len(step) == 4 else (*step, 0) for step in script]


class AccessCrossCheck:
    """The monitor's register accesses (rebuilt from the AXI port) against the register
    file's access port inside the top (``registers.access__*``), edge by edge.

    Each side lists ``(pim cycle the access is taken at, write, word address, WDATA, WSTRB,
    RDATA, refused)`` (WDATA/WSTRB 0 for a read, RDATA 0 for a write or a refused read).
    """

    def __init__(self, dut) -> None:
        regs = dut.registers
        self._valid, self._ready = Pin(regs.access__valid), Pin(regs.access__ready)
        self._fields = tuple(
            Pin(getattr(regs, f"access__{name}"))
            for name in ("write", "addr", "wdata", "wstrb", "rdata", "error")
        )
        self.inside: list[tuple] = []
        self.port: list[tuple] = []
        self._read: tuple[int, int] | None = None  # (cycle, word) waiting for its R response

    def sample(self, cycle: int, sample: PimCycle) -> None:
        """Both views of pim cycle ``cycle`` (``ReadOnly``)."""
        if self._valid.read() and self._ready.read():
            write, word, wdata, wstrb, rdata, error = (pin.read() for pin in self._fields)
            if write:
                self.inside.append((cycle, True, word, wdata, wstrb, 0, bool(error)))
            else:
                self.inside.append((cycle, False, word, 0, 0, 0 if error else rdata, bool(error)))
        if sample.write is not None:
            word, wdata, wstrb, bresp = sample.write
            self.port.append((cycle - 1, True, word, wdata, wstrb, 0, bresp != OKAY))
        if sample.read_answer is not None:
            rdata, rresp = sample.read_answer
            cycle_taken, word = self._read
            self.port.append((cycle_taken, False, word, 0, 0, rdata, rresp != OKAY))
            self._read = None
        if sample.read is not None:
            self._read = (cycle, sample.read)

    def check(self) -> int:
        """Assert that both sides saw the same accesses; returns how many."""
        for number, (port, inside) in enumerate(zip(self.port, self.inside, strict=False)):
            if port != inside:
                raise AssertionError(
                    f"access {number}: rebuilt from the AXI port {port}, inside the top {inside}"
                )
        if len(self.port) != len(self.inside):
            raise AssertionError(
                f"{len(self.port)} accesses rebuilt from the AXI port, {len(self.inside)} "
                "inside the top"
            )
        return len(self.port)


class TB:
    """Driver, monitor, model and checker of the top, and one loop per clock domain.

    The three domains' loops are :class:`ahasd.hw.tb.clocking.EdgeLoop` s, run by the
    simulator's callbacks with no cocotb task between; the test body polls them
    (:meth:`wait_until`), which also raises the first error any of them stopped on.
    """

    def __init__(self, dut, params: TopParams) -> None:
        self.dut = dut
        self.driver = ControllerTopDriver(dut, params)
        self.monitor = ControllerTopMonitor(self.driver)
        self.cross_check = AccessCrossCheck(dut) if CROSS_CHECK_ACCESSES else None
        self.board = Scoreboard(params, lambda: f"pim cycle {self.stimulus.cycle}")
        self.stimulus = Stimulus(self.driver, self.board)
        # The CPU's coroutine is stepped by the PIM loop, in its phases (it drives first, so
        # the holds it sets apply to the same cycle's traffic, and samples after the
        # scoreboard): its accesses cost no scheduler wake-ups of their own.
        self.cpu = LoopTask()
        self.clock = self.cpu.clock
        self.script_done = False
        # Set by the PIM loop once the traffic has its events (or an error).
        self.traffic_done = False
        self.events_wanted: int | None = None
        self.random_accesses = 0
        self.npu_rng, self.cpu_rng = rng_from_env("top-npu"), rng_from_env("top-cpu")
        self.cpu_slept = False  # the CPU loop's next call is the end of a sleep
        self.pim = EdgeLoop(dut.pim_clk, PERIODS_PS["pim"], self.pim_drive, self.pim_sample)
        self.npu = EdgeLoop(dut.npu_clk, PERIODS_PS["npu"], self.npu_drive, self.npu_sample)
        self.cpu_side = EdgeLoop(dut.cpu_clk, PERIODS_PS["cpu"], self.cpu_drive)
        self.loops = (self.pim, self.npu, self.cpu_side)
        self.poll = Timer(POLL_CYCLES * PERIODS_PS["pim"], unit="ps")

    async def start(self) -> None:
        self.driver.start_clocks(PERIODS_PS)
        self.driver.hold_reset(1)
        self.driver.quiet_inputs()
        await Timer(8 * max(PERIODS_PS.values()), unit="ps")
        self.driver.hold_reset(0)
        await Timer(4 * max(PERIODS_PS.values()), unit="ps")

    async def wait_until(self, condition) -> None:
        """Poll until ``condition()`` holds; raise the error a domain's loop stopped on."""
        await wait_until(condition, self.loops, self.poll)

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop()

    def pim_drive(self) -> bool:
        board = self.board
        wanted = self.events_wanted
        if wanted is not None and (board.events >= wanted or board.errors):
            self.events_wanted = None
            self.traffic_done = True
        self.cpu.drive()
        self.stimulus.drive_pim()
        return True

    def pim_sample(self) -> None:
        sample = self.monitor.pim()
        if self.cross_check is not None:
            self.cross_check.sample(self.stimulus.cycle, sample)
        self.stimulus.pim_taken(sample)
        self.cpu.sample()

    def npu_drive(self) -> bool:
        """The NPU side, sampled at the falling edge unless the reader's epoch changed.

        What the monitor reads there (the draft queue's ``valid``, payload and squash flag,
        the feedback queue's ``ready``) is a function of NPU-domain registers (the FIFOs'
        empty and full flags, the synchronous read port's data, ``hw/queues.py``) and of the
        reader's epoch alone, so with the epoch unchanged it is at the falling edge what
        ``ReadOnly`` would show after the other inputs written here; a new epoch changes which
        head entry is stale, combinationally, so that cycle waits for ``ReadOnly``.
        """
        stimulus = self.stimulus
        epoch = stimulus.reader_epoch
        stimulus.drive_npu(self.npu_rng)
        if stimulus.reader_epoch != epoch:
            return True
        stimulus.npu_taken(self.monitor.npu())
        return False

    def npu_sample(self) -> None:
        self.stimulus.npu_taken(self.monitor.npu())

    def cpu_drive(self) -> bool:
        """The CPU's pre-verification orders, sampled at the falling edge, asleep between.

        The queue's ``ready`` on the CPU side is a function of CPU-domain registers alone (the
        FIFO's full flag), so a transfer at the coming edge is known at the falling edge.
        Between orders the loop sleeps through the cycles of the geometric draw
        (:meth:`Stimulus.cpu_gap`) and offers one when it wakes.
        """
        stimulus, rng = self.stimulus, self.cpu_rng
        if self.cpu_slept:
            self.cpu_slept = False
            if not stimulus.offer_preverify(rng):
                return False
        elif stimulus.preverify_entry is None:
            self.driver.queues.preverify_w.withdraw()
            gap = stimulus.cpu_gap(rng)
            if gap:
                self.cpu_slept = True
                self.cpu_side.sleep(gap)
                return False
            if not stimulus.offer_preverify(rng):
                return False
        stimulus.cpu_taken(self.monitor.cpu())
        return False

    # -- the CPU on the AXI4-Lite port ------------------------------------------------------

    async def _settle(self, edc: bool, tvc: bool) -> None:
        """Hold new EDC events / TVC commands and wait until those blocks have settled."""
        stimulus = self.stimulus
        stimulus.hold_edc, stimulus.hold_tvc = edc, tvc

        def settled() -> bool:
            return (not edc or stimulus.edc_settled()) and (not tvc or stimulus.tvc_settled())

        if settled():
            return
        if not await self.clock.until(settled, 20000):
            raise AssertionError("the blocks never settled for a register access")

    async def _level_settle(self, name: str) -> None:
        """Hold the queue traffic until the RTL's level of ``name`` shows the golden one
        (the synchronisers' latency), for a few cycles at most (an entry presented to a
        full queue keeps waiting)."""
        self.stimulus.hold_queues = True
        port, view = LEVELS[name], self.board.record.views[name]

        def caught_up() -> bool:
            return self.driver.queues.level(port) == view()

        if not caught_up():
            await self.clock.until(caught_up, 12)

    async def access(
        self,
        kind: str,
        name: str,
        value: int = 0,
        strobe: int = 0xF,
        settle: bool = False,
        skew: int = 0,
    ) -> int:
        """One register access of the CPU (a 64-bit register: its words, low first), holding
        the blocks it depends on; SOFT_RESET and IRQ_STATUS writes wait for them to settle,
        and so does a read with ``settle``; a write's W and AW ``skew`` cycles apart
        (:meth:`RegisterPort.write_word`). Returns the data read."""
        bus, regmap = self.driver.bus, self.board.golden.regmap
        reg = regmap.get(name) if isinstance(name, str) else None
        addresses = reg.word_addresses if reg else (name,)
        label = reg.name if reg else hex(name)
        if kind == "write" and label in ("SOFT_RESET", "IRQ_STATUS"):
            await self._settle(edc=True, tvc=True)
        elif kind == "read" and (settle or self.stimulus.rng.random() < 0.8):
            # Mostly let the blocks it shows settle first, so that the read can be compared.
            await self._settle(edc=depends_on_edc(label), tvc=depends_on_tvc(label))
            if settle and label in LEVELS:
                await self._level_settle(label)
        else:
            self.stimulus.hold_edc = depends_on_edc(label)
        total = 0
        for word, address in enumerate(addresses):
            if kind == "read":
                data, _ = await bus.read_word(self.clock, address, 20000)
                total |= data << (32 * word)
            else:
                data = (value >> (32 * word)) & 0xFFFF_FFFF
                await bus.write_word(self.clock, address, data, 20000, strobe, skew)
        self.stimulus.hold_edc = self.stimulus.hold_tvc = self.stimulus.hold_queues = False
        return total

    async def soft_reset(self, value: int) -> None:
        """A soft reset, then a read of every register it changed, the blocks held until
        the last (a later event would overwrite the reset values before they are seen)."""
        stimulus, pending = self.stimulus, self.board.record.pending
        await self.access("write", "SOFT_RESET", value)
        stimulus.pinned = True
        # The GTSU's first: it moves on its own (held idle: want_draft low meanwhile).
        names = [name for name, (kinds, _) in pending.items() if "SOFT_RESET" in kinds]
        names.sort(key=lambda name: not name.startswith(("STATUS", "GTSU_")))
        for name in names:
            if name in pending and "SOFT_RESET" in pending[name][0]:
                await self.access("read", name, settle=True)
        stimulus.pinned = False

    async def read_changes(self) -> None:
        """Read a register an event changed (once settled), and, as an interrupt handler
        would, clear the causes IRQ_STATUS showed: an error cause rises again only then."""
        stimulus, record = self.stimulus, self.board.record
        # Mostly the change in the least observed bin (a rare event's is overwritten soon).
        rare = stimulus.rng.random() < 0.7
        name = record.rarest() if rare else stimulus.rng.choice(list(record.pending))
        data = await self.access("read", name, settle=True)
        if name == "IRQ_STATUS" and data and stimulus.rng.random() < 0.5:
            await self.access("write", "IRQ_STATUS", data)

    async def random_access(self) -> None:
        rng, stimulus = self.stimulus.rng, self.stimulus
        self.random_accesses += 1
        roll = rng.random()
        if self.random_accesses % SOFT_RESET_EVERY == 0:
            # Besides the random ones: every seed resets during the traffic a few times.
            await self.soft_reset(rng.randrange(1, 8))
        elif roll < 0.03:
            name, value = stimulus.random_write()
            strobe = rng.choice([0xF, 0xF, 0xF, rng.randrange(16)])
            await self.access("write", name, value, strobe, skew=rng.choice(WRITE_SKEWS))
        elif roll < 0.04:
            # A wide register's words out of the rule's order, or a high word alone.
            reg = self.board.golden.regmap.get(rng.choice(["TVC_NVCT[0]", "TVC_PVCT[1]"]))
            address = rng.choice(reg.word_addresses)
            value, strobe = rng.randrange(1 << 32), rng.randrange(16)
            await self.access("write", address, value, strobe, skew=rng.choice(WRITE_SKEWS))
        elif roll < 0.045:
            await self.access("write", "IRQ_STATUS", rng.randrange(32))
        elif roll < 0.047:
            await self.soft_reset(rng.randrange(1, 8))
        elif roll < 0.06:
            # Refused: an unmapped word, a write to a read-only register.
            if rng.random() < 0.5:
                await self.access("read", rng.choice([0x01C, 0x084, 0x620, 0xFFC]))
            else:
                await self.access("write", rng.choice(["ID", "EDC_LLR", "TVC_NCR"]), 1)
        elif roll < 0.3 or not self.board.record.pending:
            await self.access("read", rng.choice(stimulus.readable))
        else:
            # What the events changed, in preference to any register, so that each change
            # is seen through the bus before the next event overwrites it.
            await self.read_changes()

    async def register_loop(self, script: list[tuple[str, str, int, int]]) -> None:
        """The presets (``script``), then random accesses until the traffic stops."""
        for kind, name, value, skew in script:
            await self.access(kind, name, value, skew=skew)
        self.script_done = True
        while self.stimulus.stop:  # until the test starts the traffic
            await self.clock.next()
        while not self.stimulus.stop:
            await self.random_access()
            await self.clock.next(self.stimulus.rng.choice([0, 0, 1, 3, 10]) or 1)

    async def read_every_register(self) -> None:
        for name in self.stimulus.readable:
            await self.access("read", name)


# 20,000 events take about 35 us of simulated time: a mutant that stalls the traffic fails
# at 2 ms (the campaign's time limit per mutant would otherwise be spent on it).
@cocotb.test(timeout_time=2, timeout_unit="ms")
async def integration(dut):
    """Presets through the bus, then random PIM/NPU/CPU traffic checked against the golden."""
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    write_immediately()  # every agent drives after its own clock's falling edge
    tb = TB(dut, params)
    # What exists now (the design's handles, the golden model, the register map) lives until
    # the end: the collector's full passes need not walk it again (a twentieth of the run's
    # instructions went there).
    gc.freeze()
    stimulus, board, golden = tb.stimulus, tb.board, tb.board.golden
    await tb.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    start_ps = get_sim_time("ps")
    stimulus.stop = True  # no traffic while presetting
    tb.cpu.start(tb.register_loop(stimulus.preset_script()))
    tb.pim.start()
    try:
        await tb.wait_until(lambda: tb.script_done)
        stimulus.stop = False
        assert not board.errors, "preset phase:\n" + "\n".join(board.errors.messages)
        tb.npu.start()
        tb.cpu_side.start()
        tb.events_wanted = EVENTS
        await tb.wait_until(lambda: tb.traffic_done)
        # Drain: no new traffic, every sink ready; the NPU reader squashes what is stale.
        stimulus.stop = True
        await tb.wait_until(lambda: tb.cpu.done)
        give_up = stimulus.cycle + 20000

        def drained() -> bool:
            levels = [golden.draft_queue.level, golden.feedback_queue.level]
            busy = not stimulus.idle or any(levels) or golden.preverify_queue.level
            quiet = not busy and not tb.driver.queues.level("draft_r")
            return quiet or stimulus.cycle >= give_up

        await tb.wait_until(drained)
        await Timer(16 * PERIODS_PS["pim"], unit="ps")
        # Final register check, everything quiet (the traffic stays stopped).
        tb.cpu.start(tb.read_every_register())
        await tb.wait_until(lambda: tb.cpu.done)
        await FallingEdge(dut.pim_clk)
    finally:
        tb.stop()
    wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    edges = sum((get_sim_time("ps") - start_ps) / period for period in PERIODS_PS.values())

    c = board.counts
    errors = board.errors.messages + board.leftovers(c["squashed"])
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:40])
    # The traffic did what it claims.
    assert board.events >= EVENTS, c
    minimums = {
        "decisions": 1000,
        "nonzero_answers": 50,
        "refusals": 1,
        "squashed": 1,
        "soft_resets": 3,  # the preset's and some during the traffic
        "preverify_cycles": 1,
        "preverify_wanted": 100,
        "reads_checked": 1000,
        "slverr": 10,
        # The CPU now clears the causes an IRQ_STATUS read shows half the time (so the sticky
        # causes rise again), and the output is high for fewer of the checked cycles: seed
        # 817639482 saw it high in 52 of 1,709. Checked high at all is what counts.
        "irq_high": 20,
    }
    too_few = {name: c[name] for name, low in minimums.items() if c[name] < low}
    assert not too_few, f"traffic too thin: {too_few} (all counts: {c})"
    switches = board.switches_before_resets + golden.gtsu.switches
    assert switches > 10, f"only {switches} GTSU switches"
    if tb.cross_check is not None:
        agreed = tb.cross_check.check()
        report(dut, f"{agreed} register accesses: the AXI port's and the access port's agree")
    report(
        dut,
        f"{board.events} events ({c['edc_events']} EDC, {c['tvc_commands']} TVC, "
        f"{c['draft_written']}/{c['feedback_written']}/{c['preverify_written']} queue entries) "
        f"in {stimulus.cycle} pim cycles, {wall:.1f} s wall = {board.events / wall:.0f} "
        f"events/s, {stimulus.cycle / wall:.0f} pim cycles/s, {edges / wall:.0f} clock edges/s "
        f"(rising, three clocks), {edges / cpu_s:.0f} per CPU-second; {c['decisions']} decisions, "
        f"{c['answers']} answers ({c['nonzero_answers']} nonzero), {c['reads_checked']} reads "
        f"checked ({c['reads_unchecked']} skipped: EDC or TVC busy), {c['slverr']} SLVERR, "
        f"{c['irq_checked']} cycles of irq checked ({c['irq_high']} high), {c['writes']} writes, "
        f"{c['soft_resets']} soft resets, {c['refusals']} refused DRAFT cycles, "
        f"{c['squashed']} squashed drafts, {switches} GTSU switches",
    )
    record, coverage = board.record, board.coverage
    report(
        dut,
        f"{record.observed} event changes observed through the bus, {record.overwritten} "
        "overwritten before a read; bins: "
        + ", ".join(
            f"{name} {hits}{'' if name in coverage.required else ' (not required)'}"
            for name, hits in record.hits.items()
        ),
    )
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()
