"""EDC: entropy-history-aware drafting control (spec 2.1, paper section 4.2).

The block answers, for every batch the draft model finishes, whether look-ahead drafting is
worth continuing, and learns from every verification result. Its state is the speculative and
committed entropy histories (LEHT, LCEHT), the leading length register LLR, the pattern history
table PHT of saturating counters and the queue of PHT indices of the batches in flight. The
rules, including the ``update`` modes, are those of spec 2.1 and ``docs/spec-decisions.md``;
``docs/edc.md`` explains the choices this implementation makes where both are silent.

Event and decision layouts are defined once here, as functions of :class:`EDCParams`; the
testbenches and the controller top encode and decode through them.
"""

from __future__ import annotations

from functools import cache

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import at_least_sum, partial_products
from ahasd.params import ENTROPY_BITS, EDCParams

__all__ = [
    "EDC",
    "EventKind",
    "decision_layout",
    "decode_decision",
    "encode_draft",
    "encode_verify",
    "event_layout",
]

BUCKETS = 1 << EDCParams.BUCKET_BITS  # eight equally spaced entropy buckets

# A register write without handshake (a stream with ``always_ready`` would leave a constant
# ``ready`` among the top-level ports, which Amaranth's back end rejects).
HMAX_WRITE = wiring.Signature({"valid": Out(1), "payload": Out(ENTROPY_BITS)})


class EventKind(enum.Enum, shape=1):
    """Tag of an input event."""

    DRAFT = 0
    VERIFY = 1


@cache
def event_layout(params: EDCParams) -> data.StructLayout:
    """``{kind, payload}``: a tagged event, ``payload`` a union of the two event kinds.

    ``DRAFT(S, L)`` is ``payload.draft = {s, length}``; ``VERIFY(full, S_acc, n_acc)`` is
    ``payload.verify = {s_acc, n_acc, full}``. The entropy sum and the token count sit in the
    same bits in both (checked below), so one bucket unit serves both kinds. ``s``/``s_acc``
    are sums of UQ4.12 entropies, ``params.sum_bits`` wide.
    """
    draft = data.StructLayout({"s": params.sum_bits, "length": params.length_bits})
    verify = data.StructLayout({"s_acc": params.sum_bits, "n_acc": params.length_bits, "full": 1})
    # The shared bucket unit relies on this aliasing; a field reorder must not break it silently.
    assert draft["s"].offset == verify["s_acc"].offset
    assert draft["length"].offset == verify["n_acc"].offset
    return data.StructLayout(
        {"kind": EventKind, "payload": data.UnionLayout({"draft": draft, "verify": verify})}
    )


@cache
def decision_layout(params: EDCParams) -> data.StructLayout:
    """``{keep_drafting, counter, index, bucket}`` of one answered ``DRAFT``.

    ``keep_drafting`` is the spec's ``continue`` (the MSB of the PHT counter); ``counter`` is
    that counter's value, ``index`` the PHT index (its low ``llr_bits`` bits are LLR after
    the increment) and ``bucket`` the batch's entropy bucket; the last three are for debugging.
    """
    return data.StructLayout(
        {
            "keep_drafting": 1,
            "counter": params.counter_bits,
            "index": params.index_bits,
            "bucket": EDCParams.BUCKET_BITS,
        }
    )


def _fits(name: str, value: int, width: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << width):
        raise ValueError(f"{name} must be an integer in [0, {(1 << width) - 1}], not {value!r}")
    return value


@cache
def _offsets(params: EDCParams) -> tuple[int, int, int, int]:
    layout = event_layout(params)
    base = layout["payload"].offset
    verify = layout["payload"].shape["verify"].shape
    return (
        layout["kind"].offset,
        base + verify["s_acc"].offset,
        base + verify["n_acc"].offset,
        base + verify["full"].offset,
    )


def encode_draft(params: EDCParams, s: int, length: int) -> int:
    """The bits of ``DRAFT(s, length)`` in :func:`event_layout` (for testbenches and drivers)."""
    kind, s_at, length_at, _ = _offsets(params)
    return (
        (EventKind.DRAFT.value << kind)
        | (_fits("s", s, params.sum_bits) << s_at)
        | (_fits("length", length, params.length_bits) << length_at)
    )


def encode_verify(params: EDCParams, full: bool, s_acc: int, n_acc: int) -> int:
    """The bits of ``VERIFY(full, s_acc, n_acc)`` in :func:`event_layout`."""
    kind, s_at, n_at, full_at = _offsets(params)
    return (
        (EventKind.VERIFY.value << kind)
        | (_fits("s_acc", s_acc, params.sum_bits) << s_at)
        | (_fits("n_acc", n_acc, params.length_bits) << n_at)
        | (int(bool(full)) << full_at)
    )


def decode_decision(params: EDCParams, bits: int) -> dict[str, int]:
    """The fields of a decision word (``keep_drafting``, ``counter``, ``index``, ``bucket``)."""
    return {name: (bits >> offset) & mask for name, offset, mask in _decision_fields(params)}


@cache
def _decision_fields(params: EDCParams) -> tuple[tuple[str, int, int], ...]:
    """``(name, offset, mask)`` of the decision's fields (walking the layout per decision
    cost a testbench microseconds per decision)."""
    return tuple(
        (name, field.offset, (1 << field.width) - 1) for name, field in decision_layout(params)
    )


def _assign(targets, sources) -> list:
    """Element-wise ``target.eq(source)`` of two equally long lists of values."""
    return [target.eq(source) for target, source in zip(targets, sources, strict=True)]


def _rejected(component: wiring.Component, error: Exception) -> Exception:
    """``error``, after telling Amaranth that a half-built ``component`` is not a forgotten one."""
    component._MustUse__silence = True
    return error


class EDC(wiring.Component):
    """Entropy-history-aware drafting control.

    Parameters
    ----------
    params : EDCParams
        Widths, history length, reset value of ``Hmax`` and the PHT ``update`` mode.

    Members
    -------
    i : In(stream.Signature(event_layout(params)))
        The ordered event stream (``DRAFT``/``VERIFY``). ``i.ready`` is low, and the event
        stays at the head, while the head is a ``DRAFT`` and LLR (after the event being
        executed) is ``2**llr_bits - 1``; a ``VERIFY`` is still taken then. ``i.ready`` is
        also low while the event taken before it waits for room on ``o``. ``i.ready`` depends
        on ``i.payload.kind`` (that is the refusal rule) but not on ``o.ready``.
    o : Out(stream.Signature(decision_layout(params)))
        One decision per accepted ``DRAFT`` with ``L >= 1``, in order, buffered two deep.
    hmax_w : In(wiring.Signature({"valid": Out(1), "payload": Out(16)}))
        Writes ``Hmax`` (UQ4.12 nats) in each cycle ``valid`` is high (no handshake). A write
        takes effect for the events accepted after the write's cycle. Writing 0 is a protocol
        error: flagged, ``Hmax`` unchanged.
    hmax : Out(16)
        The current ``Hmax``; reset value ``params.hmax``.
    llr : Out(llr_bits)
        Batches drafted and not yet verified.
    error : Out(1)
        Sticky protocol error: ``VERIFY`` with nothing outstanding, ``DRAFT`` with ``L == 0``
        or a zero ``Hmax`` write. The offending event is consumed and changes nothing else.
        Cleared only by reset.
    drafts, continues, suppressions, verifies, rollbacks : Out(stats_bits)
        Event counters, saturating at ``2**stats_bits - 1``.

    Attributes (internal state, for formal checks and waveforms; not ports)
    -----------------------------------------------------------------------
    leht, lceht : list of Signal(3), index 0 newest.
    pht : Array of Signal(counter_bits), ``2**index_bits`` entries.
    inflight, inflight_valid : list of Signal(index_bits) / Signal(1); slot 0 is the oldest
        batch; the valid bits are a thermometer code whose length is the queue's occupancy.
    emitting : Signal(1), high in the cycle in which a decision is written into ``o``'s buffer.
    decision : Signal(decision_layout(params)), the decision being written then.

    Latency and throughput
    ----------------------
    Two stages. In the acceptance cycle the batch's bucket is computed from the payload and the
    current ``Hmax`` and registered with the event. In the next cycle the event executes: all
    state is updated at the end of that cycle, and a ``DRAFT``'s decision is written into a
    two-entry output FIFO. A ``DRAFT`` accepted at rising edge ``n`` has its decision valid on
    ``o`` from just after edge ``n + 1``, ready to transfer at edge ``n + 2``: 2 cycles. One
    event is accepted per cycle as long as ``o`` is drained; a stall on ``o`` back-pressures
    ``i`` without losing a decision. Each event sees every effect of the events before it.

    PHT storage
    -----------
    The PHT is a register array, not a ``lib.memory.Memory``: every event needs up to two
    reads (the decision's entry, the trained entry) and a read-modify-write that the very next
    event may read, and the reset must put ``2**(w-1)`` into every entry. Registers give all of
    that in one cycle without forwarding paths and without a post-reset clearing sweep (a
    memory's ``init`` is only its power-on content, so a synchronous reset would need a
    ``2**index_bits``-cycle clear during which ``i`` stalls). At the default 512 x 2 bits it is
    1024 flip-flops; at much larger tables a memory with a clear sweep would pay off.
    """

    def __init__(self, params: EDCParams):
        if not isinstance(params, EDCParams):
            raise _rejected(self, TypeError(f"params must be an EDCParams, not {params!r}"))
        self.params = params
        p = params
        super().__init__(
            {
                "i": In(stream.Signature(event_layout(p))),
                "o": Out(stream.Signature(decision_layout(p))),
                "hmax_w": In(HMAX_WRITE),
                "hmax": Out(ENTROPY_BITS, init=p.hmax),
                "llr": Out(p.llr_bits),
                "error": Out(1),
                "drafts": Out(p.stats_bits),
                "continues": Out(p.stats_bits),
                "suppressions": Out(p.stats_bits),
                "verifies": Out(p.stats_bits),
                "rollbacks": Out(p.stats_bits),
            }
        )
        bucket_bits = EDCParams.BUCKET_BITS
        self.leht = [Signal(bucket_bits, name=f"leht{k}") for k in range(p.history_len)]
        self.lceht = [Signal(bucket_bits, name=f"lceht{k}") for k in range(p.history_len)]
        weak_continue = 1 << (p.counter_bits - 1)
        self.pht = Array(
            Signal(p.counter_bits, init=weak_continue, name=f"pht{k}") for k in range(p.pht_entries)
        )
        self.inflight = [Signal(p.index_bits, name=f"inflight{k}") for k in range(p.llr_max)]
        self.inflight_valid = [Signal(name=f"inflight_valid{k}") for k in range(p.llr_max)]
        self.emitting = Signal()
        self.decision = Signal(decision_layout(p))

    def bucket(self, m: Module, entropy_sum, length, hmax_multiples) -> Signal:
        """``min(7, (8*S) // (L*Hmax))``, exactly, without a divider.

        The quotient reaches ``k`` exactly when ``8*S >= L*(k*Hmax)``; these comparisons hold
        for a prefix of ``k = 1..7``, so the highest ``k`` that holds is the clamped quotient.
        ``hmax_multiples[k]`` is ``k*Hmax`` (registers, see ``elaborate``), so each threshold
        is one short product of ``L`` and a register.
        """
        scaled_sum = entropy_sum << EDCParams.BUCKET_BITS
        # reached[k - 1]: the quotient is at least k. Each test is a carry-save sum of the
        # product's rows against 8*S, with one carry propagation (ahasd.hw.arith).
        reached = Signal(BUCKETS - 1)
        for k in range(1, BUCKETS):
            rows = partial_products(hmax_multiples[k], length)
            m.d.comb += reached[k - 1].eq(at_least_sum(m, scaled_sum, rows, f"bucket_reached{k}"))

        # A thermometer code (k reached implies every smaller k reached) to binary: bit j of
        # the count is set where an odd multiple of 2**j is the last k reached. Two gate
        # levels, where a priority chain over seven tests would be seven multiplexers deep.
        def at(k):
            return reached[k - 1] if k < BUCKETS else Const(0)

        result = Signal(EDCParams.BUCKET_BITS)
        for j in range(EDCParams.BUCKET_BITS):
            step = 1 << j
            m.d.comb += result[j].eq(
                Cat(*(at(k) & ~at(k + step) for k in range(step, BUCKETS, 2 * step))).any()
            )
        return result

    def pht_index(self, history, llr) -> Value:
        """``{avg(older half), avg(newer half), LLR}`` of a history (index 0 newest)."""
        half = len(history) // 2
        shift = half.bit_length() - 1  # log2(half): the halves are powers of two

        def average(entries):
            # A balanced adder tree: both operands of every adder have the same width.
            while len(entries) > 1:
                entries = [a + b for a, b in zip(entries[::2], entries[1::2], strict=True)]
            return (entries[0] >> shift)[: EDCParams.BUCKET_BITS]

        return Cat(llr, average(history[:half]), average(history[half:]))

    def elaborate(self, platform):
        m = Module()
        p = self.params
        llr_max = p.llr_max

        # Stage 1: the accepted event, reduced to what execution needs.
        head = self.i.payload
        s1_valid = Signal()
        s1_kind = Signal(EventKind)
        s1_bucket = Signal(EDCParams.BUCKET_BITS)
        s1_full = Signal()
        s1_has_tokens = Signal()  # L >= 1 for a DRAFT, n_acc > 0 for a VERIFY (same bits)
        # k*Hmax for k = 1..7: the odd multiples 3, 5, 7 are registers written with Hmax (one
        # adder in the write path instead of one per event in the bucket's path), the others
        # are shifts.
        odd_multiples = {
            k: Signal(ENTROPY_BITS + EDCParams.BUCKET_BITS, init=k * p.hmax, name=f"hmax_times{k}")
            for k in (3, 5, 7)
        }
        hmax_multiples = {
            1: self.hmax,
            2: self.hmax << 1,
            3: odd_multiples[3],
            4: self.hmax << 2,
            5: odd_multiples[5],
            6: odd_multiples[3] << 1,
            7: odd_multiples[7],
        }
        head_bucket = self.bucket(
            m, head.payload.draft.s, head.payload.draft.length, hmax_multiples
        )

        # The decision buffer: two entries, so its "not full" is a register and i.ready never
        # waits on o.ready combinationally, while a drained o still takes one decision a cycle.
        m.submodules.decisions = decisions = SyncFIFO(width=decision_layout(p).size, depth=2)
        wiring.connect(m, wiring.flipped(self.o), decisions.r_stream)

        # Stage 2: execution of the stage-1 event.
        is_draft = s1_kind == EventKind.DRAFT
        emits = s1_valid & is_draft & s1_has_tokens
        fire = s1_valid & (~emits | decisions.w_rdy)
        draft_ok = fire & is_draft & s1_has_tokens
        verify_ok = fire & ~is_draft & self.llr.any()
        protocol_error = fire & ((is_draft & ~s1_has_tokens) | (~is_draft & ~self.llr.any()))
        rollback = verify_ok & ~s1_full

        def pushed(history):
            return [s1_bucket, *history[:-1]]

        llr_next = Signal.like(self.llr)
        leht_next = [Signal.like(x, name=f"{x.name}_next") for x in self.leht]
        lceht_next = [Signal.like(x, name=f"{x.name}_next") for x in self.lceht]
        m.d.comb += [llr_next.eq(self.llr), *_assign(leht_next, self.leht)]
        m.d.comb += _assign(lceht_next, self.lceht)
        with m.If(draft_ok):
            m.d.comb += llr_next.eq(self.llr + 1)
            m.d.comb += _assign(leht_next, pushed(self.leht))
        with m.If(verify_ok):
            m.d.comb += llr_next.eq(Mux(s1_full, self.llr - 1, 0))
            accepted_bucket = _assign(lceht_next, pushed(self.lceht))
            if p.update == "current":
                with m.If(s1_full):
                    # The authors' model commits the whole speculative history.
                    m.d.comb += _assign(lceht_next, self.leht)
                with m.Elif(s1_has_tokens):
                    m.d.comb += accepted_bucket
            else:
                with m.If(s1_has_tokens):
                    m.d.comb += accepted_bucket
            with m.If(~s1_full):
                m.d.comb += _assign(leht_next, lceht_next)
        m.d.sync += [self.llr.eq(llr_next)]
        m.d.sync += _assign(self.leht, leht_next)
        m.d.sync += _assign(self.lceht, lceht_next)

        # The refusal rule looks at LLR as the head event will find it: after stage 2.
        head_is_draft = head.kind == EventKind.DRAFT
        m.d.comb += self.i.ready.eq((~s1_valid | fire) & ~(head_is_draft & (llr_next == llr_max)))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                s1_valid.eq(1),
                s1_kind.eq(head.kind),
                s1_bucket.eq(head_bucket),
                s1_full.eq(head.payload.verify.full),
                s1_has_tokens.eq(head.payload.draft.length.any()),
            ]
        with m.Elif(fire):
            m.d.sync += s1_valid.eq(0)

        answered, index_next = self._pht_step(
            m, decisions, leht_next, llr_next, s1_bucket, s1_full, draft_ok, verify_ok
        )
        self._inflight_step(m, index_next, s1_full, draft_ok, verify_ok)
        self._count_events(m, answered, draft_ok, verify_ok, rollback)
        self._hmax_write(m, odd_multiples)
        with m.If(protocol_error):
            m.d.sync += self.error.eq(1)
        return m

    def _pht_step(self, m, decisions, leht_next, llr_next, s1_bucket, s1_full, draft_ok, verify_ok):
        """The PHT: a DRAFT reads the entry of its new index; a VERIFY trains one entry.
        Returns the answered counter and the new index."""
        p = self.params
        counter_max = (1 << p.counter_bits) - 1
        index_next = Signal(p.index_bits)
        m.d.comb += index_next.eq(self.pht_index(leht_next, llr_next))
        if p.update == "predicted":
            trained_index = self.inflight[0]
        else:
            trained_index = index_next  # formed from the state after the rollback
        # Read once into a signal, so the read mux exists once.
        trained = Signal(p.counter_bits)
        retrained = Signal(p.counter_bits)
        m.d.comb += trained.eq(self.pht[trained_index])
        with m.If(s1_full):
            m.d.comb += retrained.eq(Mux(trained == counter_max, trained, trained + 1))
        with m.Else():
            m.d.comb += retrained.eq(Mux(trained.any(), trained - 1, trained))
        # One decoder for the write (an array proxy on the left would emit a full case
        # statement per entry, quadratic in the table size).
        write_select = Signal(p.pht_entries)
        m.d.comb += write_select.eq(Const(1, p.pht_entries) << trained_index)
        for entry_index, entry in enumerate(self.pht):
            with m.If(verify_ok & write_select[entry_index]):
                m.d.sync += entry.eq(retrained)

        answered = Signal(p.counter_bits)
        m.d.comb += answered.eq(self.pht[index_next])
        m.d.comb += [
            self.emitting.eq(draft_ok),
            self.decision.keep_drafting.eq(answered[-1]),
            self.decision.counter.eq(answered),
            self.decision.index.eq(index_next),
            self.decision.bucket.eq(s1_bucket),
            decisions.w_en.eq(draft_ok),
            decisions.w_data.eq(self.decision),
        ]

        return answered, index_next

    def _inflight_step(self, m, index_next, s1_full, draft_ok, verify_ok):
        """The in-flight index queue: slot 0 oldest, pushes fill the first free slot."""
        slots = len(self.inflight)
        with m.If(draft_ok):
            for k in range(slots):
                first_free = ~self.inflight_valid[k] & (
                    Const(1) if k == 0 else self.inflight_valid[k - 1]
                )
                with m.If(first_free):
                    m.d.sync += [self.inflight[k].eq(index_next), self.inflight_valid[k].eq(1)]
        with m.If(verify_ok):
            with m.If(s1_full):
                for k in range(slots):
                    if k + 1 < slots:
                        m.d.sync += [
                            self.inflight[k].eq(self.inflight[k + 1]),
                            self.inflight_valid[k].eq(self.inflight_valid[k + 1]),
                        ]
                    else:
                        m.d.sync += self.inflight_valid[k].eq(0)
            with m.Else():
                # Everything drafted after the rejected token is void: no updates for it.
                m.d.sync += [valid.eq(0) for valid in self.inflight_valid]

    def _count_events(self, m, answered, draft_ok, verify_ok, rollback):
        """The saturating statistics counters."""
        stats_max = (1 << self.params.stats_bits) - 1

        def count(counter, when):
            with m.If(when & (counter != stats_max)):
                m.d.sync += counter.eq(counter + 1)

        count(self.drafts, draft_ok)
        count(self.continues, draft_ok & answered[-1])
        count(self.suppressions, draft_ok & ~answered[-1])
        count(self.verifies, verify_ok)
        count(self.rollbacks, rollback)

    def _hmax_write(self, m, odd_multiples):
        """A write of Hmax: 0 is an error; otherwise Hmax and its odd multiples."""
        with m.If(self.hmax_w.valid):
            with m.If(~self.hmax_w.payload.any()):
                m.d.sync += self.error.eq(1)
            with m.Else():
                m.d.sync += self.hmax.eq(self.hmax_w.payload)
                m.d.sync += [
                    multiple.eq(self.hmax_w.payload * k) for k, multiple in odd_multiples.items()
                ]
