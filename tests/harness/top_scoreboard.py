"""The controller top's scoreboard: the golden controller fed what the monitors saw, and
the checks of the RTL against it.

Shared by the top's integration testbench (``tests/top/tb_top.py``, whose docstring
describes the checks and the register-visible effects) and the SoC testbench of the
firmware (``tests/firmware/tb_firmware.py``): :class:`Scoreboard` (the golden
:class:`~ahasd.golden.top.GoldenTop`, in-order checkers of EDC decisions, TVC answers and
queue entries, the GTSU's outputs and ``want_preverify`` every cycle, every register
access's AXI response (read data, ``RRESP``, ``BRESP``) against the golden model, the
interrupt), :class:`ChangeRecord` (which registers each event changed, read back
through the bus) and the rules saying when a read can be compared (:func:`depends_on_edc`,
:func:`depends_on_tvc`, :data:`LEVELS`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ahasd.golden.edc import COUNTER_NAMES
from ahasd.golden.gtsu import TASK_CODES
from ahasd.golden.queues import unpack
from ahasd.golden.top import GoldenTop
from ahasd.hw.axi_lite import Resp
from ahasd.hw.tb.checker import ErrorLog, InOrderChecker
from ahasd.hw.tb.top import WORD_SHIFT, CpuCycle, NpuCycle, PimCycle
from ahasd.hw.tvc import Op, Table
from ahasd.params import TopParams

from .coverage import Coverage

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
OKAY, SLVERR = Resp.OKAY.value, Resp.SLVERR.value


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

    def check_cycle(self, sample: PimCycle, quiet: bool, settled, queues) -> None:
        """The register accesses and checks of every PIM cycle, before its events, in the
        golden model's order: the write taken at the last edge (applied first) and its
        ``BRESP``, the R response of the read taken there, the interrupt when ``quiet`` (the
        EDC and TVC settled), the read the register file takes at the coming edge (compared
        when ``settled(name)``; the level registers against the level ports of ``queues``, a
        :class:`~ahasd.hw.tb.top.QueuePorts`), the GTSU's outputs."""
        if sample.write is not None:
            word, data, strobe, bresp = sample.write
            self.register_write(word << WORD_SHIFT, data, strobe, bresp)
        if sample.read_answer is not None:
            self.read_answered(*sample.read_answer)
        if quiet:
            self.check_irq(sample.irq)
        if sample.read is not None:
            levels = {port: queues.level(port) for port in LEVELS.values()}
            self.register_read(sample.read << WORD_SHIFT, settled, levels)
        self.check_gtsu(sample)

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
