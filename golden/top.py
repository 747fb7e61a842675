"""Golden model of the AHASD controller top (spec 2.6): the golden blocks, composed as in RTL.

:class:`GoldenTop` holds the golden EDC, TVC and GTSU (``ahasd.golden.edc``/``tvc``/``gtsu``)
and the three queue models (``ahasd.golden.queues``), wired as ``ahasd.hw.top`` wires the
blocks: the GTSU's pre-verification request is "the pre-verification queue holds an order".
The CPU reaches the registers through the bus, word by word, with the rules of the register
map (``hw/regmap.rdl`` as compiled by :mod:`ahasd.regmap`, and ``docs/integration.md``): an
unmapped word or a write to a read-only register is refused (``ok`` False) and changes
nothing; ``WSTRB`` byte strobes; write 1 to clear, write 1 to pulse; the 64-bit registers'
write buffer (committed by the high word) and read snapshot (taken by the low word); the
interrupt causes, set when their condition rises. It imports nothing from Amaranth.

Time
----
The model counts PIM cycles in :attr:`GoldenTop.cycle`. One PIM cycle is, in this order:

1. register reads (:meth:`bus_read`): the values *during* the current cycle;
2. the events taken at the edge that ends it: EDC events (:meth:`edc_draft`,
   :meth:`edc_verify`), TVC commands (``tvc_*``, which take the current cycle as their
   acceptance cycle, so NCR is exact), queue transactions;
3. :meth:`step`: the edge itself for the cycle-accurate GTSU and the interrupt causes, then
   ``cycle += 1``;
4. register writes taken at that edge (:meth:`bus_write`): they hold from the new cycle on;
   a cause set at that edge is not cleared by them.

The EDC, TVC and queue models are transaction level: an event's whole effect is applied when
it is taken. The RTL blocks take some cycles to finish an event (EDC: its state and counters
change one cycle after acceptance; TVC: a ``LEARN`` lands ``2 + divider`` cycles after it),
so an RTL register read agrees with :meth:`bus_read` once the block is quiet (no EDC event
taken in the previous cycles; the TVC not busy), and an interrupt cause of an error rises
here as many cycles earlier. The GTSU model is cycle accurate, so its registers agree in
every cycle. Queue levels here are exact; the RTL's lag by the synchroniser latency.
"""

from __future__ import annotations

from typing import Any

from ahasd.golden.edc import EDC
from ahasd.golden.gtsu import GTSU, TASK_CODES
from ahasd.golden.queues import DraftQueueModel, FifoModel, check_entry
from ahasd.golden.tvc import TVC
from ahasd.params import TopParams
from ahasd.regmap import DATA_BITS, IRQ_ENABLE, IRQ_STATUS, STRB_BITS, Register, register_map

__all__ = ["GoldenTop"]

_TABLES = {"TVC_NVCT": "nvct", "TVC_PDCT": "pdct", "TVC_PVCT": "pvct"}
_WORD = (1 << DATA_BITS) - 1


def _mask(bits: int) -> int:
    return (1 << bits) - 1


def _byte_mask(strobe: int) -> int:
    """The bit mask of the bytes whose strobe is 1 in a 32-bit word."""
    return sum(0xFF << (8 * byte) for byte in range(STRB_BITS) if (strobe >> byte) & 1)


class GoldenTop:
    """The controller top, golden reading (see the module docstring for the timing).

    Parameters
    ----------
    params : TopParams

    Attributes
    ----------
    edc, tvc, gtsu : the golden blocks.
    draft_queue : DraftQueueModel; feedback_queue, preverify_queue : FifoModel
    regmap : ahasd.regmap.RegisterMap
    irq_status, irq_enable : dict[str, int]
        The interrupt causes and their enable bits, by field name.
    cycle : int
        PIM cycles since reset.
    """

    def __init__(self, params: TopParams | None = None) -> None:
        params = TopParams() if params is None else params
        if not isinstance(params, TopParams):
            raise TypeError(f"params must be a TopParams, not {params!r}")
        self.params = params
        self.regmap = register_map(params)
        self.edc = EDC(params.edc)
        self.tvc = TVC(params.tvc)
        self.gtsu = GTSU(params.gtsu)
        q = params.queues
        self.draft_queue = DraftQueueModel(q.draft_depth)
        self.feedback_queue = FifoModel(q.feedback_depth)
        self.preverify_queue = FifoModel(q.preverify_depth)
        causes = [f.name for f in self.regmap.get(IRQ_STATUS).fields]
        self.irq_status = dict.fromkeys(causes, 0)
        self.irq_enable = dict.fromkeys(causes, 0)
        self._conditions = dict.fromkeys(causes, False)  # in the cycle before
        self._risen: set[str] = set()  # causes set at the current edge
        self._draft_held = False
        self._write_buffers: dict[str, tuple[int, int]] = {}  # register -> (bits, bit mask)
        self._snapshots: dict[str, int] = {}  # register -> its upper words
        self.cycle = 0

    # -- registers -------------------------------------------------------------------------

    def _field_value(self, reg: Register, field: str) -> int:
        """The current value of a readable field."""
        name = reg.group
        edc, tvc, gtsu = self.edc, self.tvc, self.gtsu
        if name in _TABLES:
            return self.tvc.tables[_TABLES[name]][reg.index]
        if name == IRQ_STATUS:
            return self.irq_status[field]
        if name == IRQ_ENABLE:
            return self.irq_enable[field]
        if name.startswith("EDC_") and name[4:].lower() in edc.counters:
            return edc.counters[name[4:].lower()]
        values = {
            ("ERROR", "edc"): lambda: int(edc.error),
            ("ERROR", "tvc"): lambda: int(tvc.error),
            ("ERROR", "gtsu_config"): lambda: int(gtsu.config_error),
            ("STATUS", "gtsu_task"): lambda: TASK_CODES[gtsu.task],
            ("STATUS", "gtsu_ready"): lambda: int(gtsu.ready),
            ("STATUS", "gtsu_gating"): lambda: int(gtsu.gating),
            ("STATUS", "tvc_busy"): lambda: 0,  # transaction level: done when taken
            ("STATUS", "tvc_npu_busy"): lambda: int(tvc.busy),
            ("DRAFT_QUEUE_LEVEL", "entries"): lambda: self.draft_queue.level,
            ("FEEDBACK_QUEUE_LEVEL", "entries"): lambda: self.feedback_queue.level,
            ("PREVERIFY_QUEUE_LEVEL", "entries"): lambda: self.preverify_queue.level,
            ("EDC_HMAX", "hmax"): lambda: edc.hmax,
            ("EDC_LLR", "llr"): lambda: edc.llr,
            ("TVC_N_MAX", "n_max"): lambda: tvc.n_max,
            ("TVC_NCR", "ncr"): lambda: tvc.ncr(self.cycle),
            ("GTSU_DLM_MASK", "mask"): lambda: gtsu.dlm_mask,
            ("GTSU_TLM_MASK", "mask"): lambda: gtsu.tlm_mask,
            ("GTSU_T_OFF", "cycles"): lambda: gtsu.t_off,
            ("GTSU_T_ON", "cycles"): lambda: gtsu.t_on,
            ("GTSU_LAST_SWITCH", "cycles"): lambda: gtsu.last_switch_cycles,
            ("GTSU_SWITCHES", "count"): lambda: gtsu.switches,
            ("GTSU_DLM_ENABLE", "enable"): lambda: gtsu.dlm_enable,
            ("GTSU_TLM_ENABLE", "enable"): lambda: gtsu.tlm_enable,
        }
        return values[(name, field)]()

    def value(self, name: str) -> int:
        """What register ``name`` holds now (its readable fields at their bits), without the
        bus's snapshot: the value a read of its low word snapshots."""
        reg = self.regmap.get(name)
        total = 0
        for f in reg.fields:
            if f.readable:
                value = f.reset if f.constant else self._field_value(reg, f.name)
                total |= (value & _mask(f.width)) << f.lsb
        return total

    def bus_read(self, address: int) -> tuple[int, bool]:
        """``(data, ok)`` of a bus read of the word at byte ``address`` now.

        Unmapped: ``(0, False)``. A write-only register reads 0. The low word of a
        ``buffer_reads`` register snapshots its upper words; an upper word returns the
        snapshot.
        """
        found = self.regmap.at(address)
        if found is None:
            return 0, False
        reg, word = found
        if not reg.readable:
            return 0, True
        if reg.buffer_reads and word > 0:
            return (self._snapshots.get(reg.name, 0) >> (DATA_BITS * (word - 1))) & _WORD, True
        value = self.value(reg.name)
        if reg.buffer_reads:
            self._snapshots[reg.name] = value >> DATA_BITS
        return (value >> (DATA_BITS * word)) & _WORD, True

    def bus_write(self, address: int, data: int, strobe: int = 0xF) -> bool:
        """A bus write of ``data`` with byte strobes ``strobe`` to the word at ``address``,
        taken at the current edge; ``False`` (and no effect) when refused."""
        if isinstance(data, bool) or not isinstance(data, int) or not 0 <= data <= _WORD:
            raise ValueError(f"data must be a 32-bit unsigned integer, not {data!r}")
        if not 0 <= strobe < 1 << STRB_BITS:
            raise ValueError(f"strobe must be a {STRB_BITS}-bit mask, not {strobe!r}")
        found = self.regmap.at(address)
        if found is None or not found[0].writable:
            return False
        reg, word = found
        shift = DATA_BITS * word
        bits, mask = data << shift, _byte_mask(strobe) << shift
        if reg.buffer_writes and word < reg.words - 1:
            held, held_mask = self._write_buffers.get(reg.name, (0, 0))
            self._write_buffers[reg.name] = ((held & ~mask) | (bits & mask), held_mask | mask)
            return True
        if reg.buffer_writes:
            held, held_mask = self._write_buffers.pop(reg.name, (0, 0))
            bits, mask = (bits & mask) | (held & ~mask), mask | held_mask
        new = (self.value(reg.name) & ~mask) | (bits & mask)
        for f in reg.fields:
            if not mask & f.mask:
                continue  # no strobe reaches the field
            value = (new >> f.lsb) & _mask(f.width)
            written = ((bits & mask) >> f.lsb) & _mask(f.width)
            if f.access == "rw":
                self._write_field(reg, f.name, value)
            elif f.access == "w1c" and written and f.name not in self._risen:
                self.irq_status[f.name] = 0
            elif f.access == "w1p" and written:
                {"edc": self.edc, "tvc": self.tvc, "gtsu": self.gtsu}[f.name].reset()
        return True

    def _write_field(self, reg: Register, field: str, value: int) -> None:
        name = reg.group
        if name in _TABLES:
            self.tvc.write(_TABLES[name], reg.index, value)
        elif name == IRQ_ENABLE:
            self.irq_enable[field] = value
        elif name == "EDC_HMAX":
            if value == 0:
                self.edc.error = True  # the EDC's rule: Hmax kept
            else:
                self.edc.hmax = value
        elif name == "TVC_N_MAX":
            self.tvc.n_max = value
        elif name == "GTSU_DLM_MASK":
            self.gtsu.dlm_mask = value
        elif name == "GTSU_TLM_MASK":
            self.gtsu.tlm_mask = value
        elif name == "GTSU_T_OFF":
            self.gtsu.t_off = value
        elif name == "GTSU_T_ON":
            self.gtsu.t_on = value
        else:  # the map and this method are kept in step by the tests
            raise AssertionError(f"writable field {reg.name}.{field} is not modelled")

    def reg_read(self, name: str) -> int:
        """A whole register read over the bus, low word first (a refused read raises)."""
        reg = self.regmap.get(name)
        total = 0
        for word, address in enumerate(reg.word_addresses):
            data, ok = self.bus_read(address)
            if not ok:
                raise ValueError(f"read of {name} refused")
            total |= data << (DATA_BITS * word)
        return total

    def reg_write(self, name: str, value: int) -> None:
        """A whole register written over the bus, low word first, all strobes (a refused
        write raises)."""
        reg = self.regmap.get(name)
        if not 0 <= value < 1 << reg.width:
            raise ValueError(f"value must fit {reg.width} bits, not {value!r}")
        for word, address in enumerate(reg.word_addresses):
            if not self.bus_write(address, (value >> (DATA_BITS * word)) & _WORD):
                raise ValueError(f"write of {name} refused")

    @property
    def irq(self) -> bool:
        """The interrupt output: a cause with its enable bit."""
        return any(self.irq_status[c] and self.irq_enable[c] for c in self.irq_status)

    # -- EDC -------------------------------------------------------------------------------

    def edc_refuses_draft(self) -> bool:
        """Whether a ``DRAFT`` at the head of the event stream is refused now (EDC full)."""
        return self.edc.full()

    def edc_draft(self, s: int, length: int) -> dict[str, int] | None:
        """``DRAFT(s, length)`` taken: the decision as the RTL's decision fields
        (``keep_drafting``, ``counter``, ``index``, ``bucket``), or ``None`` when no decision
        is emitted (``length == 0``, a protocol error). Must not be called while
        :meth:`edc_refuses_draft`."""
        if self.edc.full():
            raise RuntimeError("DRAFT taken while the EDC is full")
        keep = self.edc.draft(s, length)
        if keep is None:
            return None
        index = self.edc.inflight[-1]
        return {
            "keep_drafting": int(keep),
            "counter": int(self.edc.pht[index]),
            "index": index,
            "bucket": self.edc.leht[0],
        }

    def edc_verify(self, full: bool, s_acc: int, n_acc: int) -> None:
        """``VERIFY(full, s_acc, n_acc)`` taken."""
        self.edc.verify(full, s_acc, n_acc)

    # -- TVC (the acceptance cycle is the current cycle) -----------------------------------

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        """``LEARN(table, cycles, length)``; ``table`` ``"n_max"`` is a protocol error."""
        if table == "n_max":
            self.tvc.error = True
            return
        self.tvc.learn(table, cycles, length)

    def tvc_npu_start(self, l_kv: int) -> None:
        self.tvc.npu_start(l_kv, self.cycle)

    def tvc_npu_done(self) -> None:
        self.tvc.npu_done(self.cycle)

    def tvc_ask(self, p: int) -> dict[str, int]:
        """``ASK(p)``: the answer as the RTL's answer fields (``n``, ``c_left``)."""
        terms = self.tvc.terms(p, self.cycle)
        n = self.tvc.ask(p, self.cycle)  # checks that time does not go backwards
        return {"n": n, "c_left": terms["C_left"]}

    # -- GTSU and the clock ----------------------------------------------------------------

    def want_preverify(self) -> bool:
        """The GTSU's pre-verification request: the pre-verification queue holds an order."""
        return not self.preverify_queue.is_empty

    def gtsu_outputs(self) -> dict[str, int]:
        """The GTSU's outputs during the current cycle (see ``GTSU.outputs``)."""
        return self.gtsu.outputs()

    def edc_draft_held(self) -> None:
        """A ``DRAFT`` is presented on the event port this cycle and not taken (for the
        backpressure cause: it counts when the EDC is full)."""
        self._draft_held = True

    def step(self, want_draft: bool, want_preverify: bool | None = None) -> None:
        """The PIM clock edge: the GTSU samples its requests, the interrupt causes whose
        condition rose in this cycle are set, then ``cycle += 1``.

        ``want_preverify`` defaults to :meth:`want_preverify`; a testbench of the RTL passes
        the level the RTL's queue shows (it lags the golden queue by the synchroniser).
        """
        if want_preverify is None:
            want_preverify = self.want_preverify()
        conditions = {
            "preverify": bool(want_preverify),
            "edc_backpressure": self._draft_held and self.edc.full(),
            "edc_error": bool(self.edc.error),
            "tvc_error": bool(self.tvc.error),
            "gtsu_error": bool(self.gtsu.config_error),
        }
        previous = self._conditions
        self._risen = (
            {c for c, now in conditions.items() if now and not previous[c]}
            if conditions != previous
            else set()
        )
        for cause in self._risen:
            self.irq_status[cause] = 1
        self._conditions = conditions
        self._draft_held = False
        self.gtsu.step(bool(want_draft), bool(want_preverify))
        self.cycle += 1

    # -- queues ----------------------------------------------------------------------------

    def draft_push(self, entry: Any) -> bool:
        """PIM writes a draft entry; ``False`` when the queue is full (the writer waits)."""
        return self.draft_queue.push(check_entry("draft", entry, self.params.queues))

    def draft_pop(self, epoch: int) -> Any:
        """NPU reads at reader epoch ``epoch``: stale entries are dropped, the next returned."""
        return self.draft_queue.pop(epoch)

    def draft_squash_one(self, epoch: int) -> Any:
        """The reader drops the head entry because it is stale (its epoch is not ``epoch``),
        as the RTL does, one entry per NPU cycle. Returns the dropped entry, or ``None`` (and
        drops nothing) when the head is missing or live."""
        head = self.draft_queue.peek()
        if head is None or head.epoch == epoch:
            return None
        entry = self.draft_queue.pop(head.epoch)  # the head is live at its own epoch
        self.draft_queue.dropped.append(entry)
        return entry

    def feedback_push(self, entry: Any) -> bool:
        """NPU writes a feedback entry."""
        return self.feedback_queue.push(check_entry("feedback", entry, self.params.queues))

    def feedback_pop(self) -> Any:
        """PIM reads the oldest feedback entry (``None`` when empty)."""
        return self.feedback_queue.pop()

    def preverify_push(self, entry: Any) -> bool:
        """CPU writes a pre-verification order."""
        return self.preverify_queue.push(check_entry("preverify", entry, self.params.queues))

    def preverify_pop(self) -> Any:
        """PIM takes the oldest pre-verification order (``None`` when empty)."""
        return self.preverify_queue.pop()
