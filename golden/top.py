"""Golden model of the AHASD controller top (spec 2.6): the golden blocks, composed as in RTL.

:class:`GoldenTop` holds the golden EDC, TVC and GTSU (``ahasd.golden.edc``/``tvc``/``gtsu``)
and the three queue models (``ahasd.golden.queues``), wired as ``ahasd.hw.top`` wires the
blocks: the GTSU's pre-verification request is "the pre-verification queue holds an order",
and the CPU reaches every programmable field and counter through the register map of
``ahasd.regmap`` (by name or by address). It imports nothing from Amaranth.

Time
----
The model counts PIM cycles in :attr:`GoldenTop.cycle`. One PIM cycle is, in this order:

1. register reads (:meth:`reg_read`): the values *during* the current cycle;
2. the events taken at the edge that ends it: EDC events (:meth:`edc_draft`,
   :meth:`edc_verify`), TVC commands (``tvc_*``, which take the current cycle as their
   acceptance cycle, so NCR is exact), queue transactions;
3. :meth:`step`: the edge itself for the cycle-accurate GTSU, then ``cycle += 1``;
4. register writes taken at that edge (:meth:`reg_write`): they hold from the new cycle on.

The EDC, TVC and queue models are transaction level: an event's whole effect is applied when
it is taken. The RTL blocks take some cycles to finish an event (EDC: its state and counters
change one cycle after acceptance; TVC: a ``LEARN`` lands ``2 + divider`` cycles after it),
so an RTL register read agrees with :meth:`reg_read` once the block is quiet (no EDC event
taken in the previous cycle; the TVC not busy). The GTSU model is cycle accurate, so its
registers agree in every cycle. Queue levels here are exact; the RTL's lag by the
synchroniser latency.
"""

from __future__ import annotations

from typing import Any

from ahasd.golden.edc import EDC
from ahasd.golden.gtsu import GTSU, TASK_CODES
from ahasd.golden.queues import DraftQueueModel, FifoModel, check_entry
from ahasd.golden.tvc import TVC
from ahasd.params import ENTROPY_BITS, TopParams
from ahasd.regmap import (
    ERROR_BITS,
    ID_VALUE,
    SOFT_RESET_BITS,
    STATUS_BITS,
    VERSION_VALUE,
    Register,
    register_map,
)

__all__ = ["GoldenTop"]

_TABLE_PREFIXES = {"TVC_NVCT_": "nvct", "TVC_PDCT_": "pdct", "TVC_PVCT_": "pvct"}


def _mask(bits: int) -> int:
    return (1 << bits) - 1


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
        self.cycle = 0

    # -- registers -------------------------------------------------------------------------

    def _register(self, key: str | int) -> Register | None:
        if isinstance(key, str):
            return self.regmap.get(key)
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"register must be a name or an address, not {key!r}")
        return self.regmap.find(key)

    def reg_read(self, key: str | int) -> int:
        """The value a bus read of register ``key`` (name or address) returns now.

        Unmapped addresses and write-only (``W1P``) registers read 0.
        """
        reg = self._register(key)
        if reg is None or not reg.readable:
            return 0
        name = reg.name
        for prefix, table in _TABLE_PREFIXES.items():
            if name.startswith(prefix):
                return self.tvc.tables[table][int(name[len(prefix) :])]
        edc, tvc, gtsu = self.edc, self.tvc, self.gtsu
        if name == "ERROR":
            flags = {"edc": edc.error, "tvc": tvc.error, "gtsu_config": gtsu.config_error}
            return sum(int(flag) << ERROR_BITS[flag_name] for flag_name, flag in flags.items())
        if name == "STATUS":
            fields = {
                "gtsu_task": TASK_CODES[gtsu.task],
                "gtsu_ready": int(gtsu.ready),
                "gtsu_gating": int(gtsu.gating),
                "tvc_busy": 0,  # transaction level: a command is done when it is taken
                "tvc_npu_busy": int(tvc.busy),
            }
            return sum(value << STATUS_BITS[field][0] for field, value in fields.items())
        values = {
            "ID": lambda: ID_VALUE,
            "VERSION": lambda: VERSION_VALUE,
            "DRAFT_QUEUE_LEVEL": lambda: self.draft_queue.level,
            "FEEDBACK_QUEUE_LEVEL": lambda: self.feedback_queue.level,
            "PREVERIFY_QUEUE_LEVEL": lambda: self.preverify_queue.level,
            "EDC_HMAX": lambda: edc.hmax,
            "EDC_LLR": lambda: edc.llr,
            "TVC_N_MAX": lambda: tvc.n_max,
            "TVC_NCR": lambda: tvc.ncr(self.cycle),
            "GTSU_DLM_MASK": lambda: gtsu.dlm_mask,
            "GTSU_TLM_MASK": lambda: gtsu.tlm_mask,
            "GTSU_T_OFF": lambda: gtsu.t_off,
            "GTSU_T_ON": lambda: gtsu.t_on,
            "GTSU_LAST_SWITCH": lambda: gtsu.last_switch_cycles,
            "GTSU_SWITCHES": lambda: gtsu.switches,
            "GTSU_DLM_ENABLE": lambda: gtsu.dlm_enable,
            "GTSU_TLM_ENABLE": lambda: gtsu.tlm_enable,
        }
        if name.startswith("EDC_") and name[4:].lower() in edc.counters:
            return edc.counters[name[4:].lower()]
        return values[name]()

    def reg_write(self, key: str | int, value: int) -> None:
        """A bus write of ``value`` (32 bits) to register ``key``, taken at the current edge.

        Each register keeps the low bits it holds; ``RO`` registers and unmapped addresses
        ignore the write. ``EDC_HMAX := 0`` sets the EDC error flag and keeps ``Hmax``;
        ``TVC_N_MAX`` saturates a value too large for it; ``SOFT_RESET`` resets the blocks
        whose bits are 1 (the queues are not affected).
        """
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
            raise ValueError(f"value must be a 32-bit unsigned integer, not {value!r}")
        reg = self._register(key)
        if reg is None or not reg.writable:
            return
        name, p = reg.name, self.params
        for prefix, table in _TABLE_PREFIXES.items():
            if name.startswith(prefix):
                index = int(name[len(prefix) :])
                self.tvc.write(table, index, value & _mask(p.tvc.ratio_bits))
                return
        if name == "EDC_HMAX":
            hmax = value & _mask(ENTROPY_BITS)
            if hmax == 0:
                self.edc.error = True
            else:
                self.edc.hmax = hmax
        elif name == "TVC_N_MAX":
            # The TVC's write port carries max(ratio_bits, n_bits) bits and saturates.
            port = value & _mask(max(p.tvc.ratio_bits, p.tvc.n_bits))
            self.tvc.n_max = min(port, _mask(p.tvc.n_bits))
        elif name == "GTSU_DLM_MASK":
            self.gtsu.dlm_mask = value & _mask(p.gtsu.ranks)
        elif name == "GTSU_TLM_MASK":
            self.gtsu.tlm_mask = value & _mask(p.gtsu.ranks)
        elif name == "GTSU_T_OFF":
            self.gtsu.t_off = value & _mask(p.gtsu.timer_bits)
        elif name == "GTSU_T_ON":
            self.gtsu.t_on = value & _mask(p.gtsu.timer_bits)
        elif name == "SOFT_RESET":
            blocks = {"edc": self.edc, "tvc": self.tvc, "gtsu": self.gtsu}
            for block, bit in SOFT_RESET_BITS.items():
                if (value >> bit) & 1:
                    blocks[block].reset()
        else:  # the map and this method are kept in step by the tests
            raise AssertionError(f"writable register {name} is not modelled")

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

    def step(self, want_draft: bool, want_preverify: bool | None = None) -> None:
        """The PIM clock edge: the GTSU samples its requests, then ``cycle += 1``.

        ``want_preverify`` defaults to :meth:`want_preverify`; a testbench of the RTL passes
        the level the RTL's queue shows (it lags the golden queue by the synchroniser).
        """
        if want_preverify is None:
            want_preverify = self.want_preverify()
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
