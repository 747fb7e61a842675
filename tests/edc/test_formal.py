"""EDC, formal tier: properties over every input sequence (sby: bounded model check,
k-induction, cover).

The inputs (event stream, decision ready, Hmax writes) are left completely free: the block
must keep its invariants whatever the CPU does, including stream-rule violations. Reset is
held low after the initial state (which is the reset state), so "past" values are meaningful.

Small parameters keep the state space tractable and make the saturation corners reachable
within the depth: 2-bit LLR (three outstanding batches), 2-bit PHT counters, 2-bit event
counters, two history entries (PHT of 256 entries) and 2-bit lengths.

:class:`Arithmetic` checks what each executed event computes against spec 2.1, written out
again here: the bucket ``min(7, (8*S) // (L*Hmax))`` of every ``DRAFT`` and ``VERIFY``, the
history shifts, LLR, the in-flight indices and the PHT entry each ``VERIFY`` trains (both
``update`` modes); k-induction proves all but the bucket, whose bounded check is complete
(see its test).
"""

from __future__ import annotations

import dataclasses

import pytest
from amaranth.asserts import AnyConst, AnySeq  # amaranth.hdl does not export it in 0.5
from amaranth.hdl import (
    Array,
    Assert,
    Assume,
    Cat,
    Cover,
    Elaboratable,
    Fragment,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib.fifo import SyncFIFO
from harness import small_params
from harness.formal import check, registers_named
from harness.planted import cases

from ahasd.hw.edc import EDC, EventKind
from ahasd.params import EDCParams

PARAMS = {
    "predicted": small_params.EDC,
    "current": dataclasses.replace(small_params.EDC, update="current"),
}
BMC_DEPTH = 10
ARITHMETIC_DEPTH = 4  # an event executes within three cycles of its acceptance
PROVE_DEPTH = 1


def spec_index(params: EDCParams, leht, llr):
    """``{avg(LEHT[N/2..N-1]), avg(LEHT[0..N/2-1]), LLR}``, written out from the spec."""
    half = params.history_len // 2
    shift = half.bit_length() - 1
    lo = (sum(leht[:half]) >> shift)[:3]
    hi = (sum(leht[half:]) >> shift)[:3]
    return Cat(llr, lo, hi)


def owed_decisions(m: Module, edc: EDC, *, check_payload: bool) -> Signal:
    """The number of decisions owed on ``o`` (one per executed ``DRAFT`` with ``L >= 1``,
    ``emitting``) and not yet transferred, at most two (the buffer's depth); ``o.valid``
    says whether there is one and, with ``check_payload``, ``o`` carries the oldest."""
    owed = [Signal.like(edc.decision, name=f"owed{k}") for k in range(2)]
    count = Signal(range(3), name="owed_count")
    transfer = edc.o.valid & edc.o.ready
    m.d.comb += Assert(edc.o.valid == (count != 0))
    if check_payload:
        m.d.comb += Assert(~edc.o.valid | (edc.o.payload.as_value() == owed[0].as_value()))
    with m.If(transfer):
        m.d.sync += owed[0].eq(owed[1])
    with m.If(edc.emitting):
        with m.If(count - transfer == 0):
            m.d.sync += owed[0].eq(edc.decision)
        with m.Else():
            m.d.sync += owed[1].eq(edc.decision)
    m.d.sync += count.eq(count + edc.emitting - transfer)
    return count


def _decision_buffer(fragment: Fragment) -> SyncFIFO:
    """The EDC's output FIFO, found in its elaborated fragment (it is no attribute)."""
    for child, *_ in fragment.subfragments:
        for origin in child.origins or ():
            if isinstance(origin, SyncFIFO):
                return origin
    raise LookupError("the EDC has no SyncFIFO")


class Properties(Elaboratable):
    def __init__(self, params: EDCParams, checks=("queue", "counters", "decision", "ready")):
        self.params = params
        self.checks = checks

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.edc = edc = EDC(p)
        m.d.comb += Assume(~ResetSignal())
        # Undriven inputs would be constants: drive every input with a free value per cycle.
        for port in (
            edc.i.valid,
            edc.i.payload.as_value(),
            edc.o.ready,
            edc.hmax_w.valid,
            edc.hmax_w.payload,
        ):
            m.d.comb += port.eq(AnySeq(len(port)))

        # Values of the previous cycle (valid from the second cycle on).
        past_valid = Signal()
        m.d.sync += past_valid.eq(1)

        def past(value, name):
            register = Signal.like(value, name=f"past_{name}")
            m.d.sync += register.eq(value)
            return register

        # 1. LLR equals the number of in-flight indices, and the queue is a contiguous prefix.
        if "queue" in self.checks:
            occupancy = sum(edc.inflight_valid)
            m.d.comb += Assert(edc.llr == occupancy)
            for older, newer in zip(edc.inflight_valid, edc.inflight_valid[1:], strict=False):
                m.d.comb += Assert(older | ~newer)

        # The PHT is checked through two arbitrary entries (free constants the solver picks):
        # whatever holds for them holds for every entry, and the solver does not have to
        # carry a property per entry.
        watched = Signal(p.index_bits)
        other = Signal(p.index_bits)
        m.d.comb += [watched.eq(AnyConst(p.index_bits)), other.eq(AnyConst(p.index_bits))]
        pht = Array(edc.pht)
        entry, other_entry = Signal(p.counter_bits), Signal(p.counter_bits)
        m.d.comb += [entry.eq(pht[watched]), other_entry.eq(pht[other])]
        entry_before = past(entry, "entry")
        other_before = past(other_entry, "other_entry")

        # 2. Counters stay in range: a PHT counter moves by at most one and never wraps, and
        #    two entries never change in the same cycle; event counters never decrease (so
        #    never wrap) and step by at most one; LLR steps by one or drops to zero (rollback).
        counter_max = (1 << p.counter_bits) - 1
        stats_max = (1 << p.stats_bits) - 1
        if "counters" in self.checks:
            with m.If(past_valid):
                m.d.comb += [
                    Assert(
                        (entry == entry_before)
                        | (entry == entry_before + 1)
                        | (entry_before == entry + 1)
                    ),
                    Assert(~((entry_before == counter_max) & (entry == 0))),
                    Assert(~((entry_before == 0) & (entry == counter_max))),
                ]
                with m.If(watched != other):
                    m.d.comb += Assert((entry == entry_before) | (other_entry == other_before))
            for name in ("drafts", "continues", "suppressions", "verifies", "rollbacks"):
                counter = getattr(edc, name)
                before = past(counter, name)
                with m.If(past_valid):
                    m.d.comb += Assert((counter == before) | (counter == before + 1))
                    m.d.comb += Assert(~((before == stats_max) & (counter != stats_max)))
            llr_before = past(edc.llr, "llr")
            error_before = past(edc.error, "error")
            with m.If(past_valid):
                m.d.comb += Assert(
                    (edc.llr == llr_before)
                    | ((edc.llr == llr_before + 1) & (llr_before != p.llr_max))
                    | ((edc.llr + 1 == llr_before) & (llr_before != 0))
                    | (edc.llr == 0)
                )
                m.d.comb += Assert(edc.error | ~error_before)  # sticky

        # 3. The decision is a pure function of the spec's state: right after a DRAFT executes,
        #    the decision it emitted carries index {avg hi, avg lo, LLR} of the new LEHT and
        #    LLR, and its counter (hence continue = MSB) is PHT[index] (a DRAFT does not
        #    change the PHT), checked at the watched entry, which may be any index.
        if "decision" in self.checks:
            # ... and reaches o in order, none lost or duplicated, whatever o.ready does.
            owed_decisions(m, edc, check_payload=True)
            emitted = past(edc.emitting, "emitting")
            decision = past(edc.decision, "decision")
            index = Signal(p.index_bits)
            m.d.comb += index.eq(spec_index(p, edc.leht, edc.llr))
            with m.If(past_valid & emitted):
                m.d.comb += [Assert(decision.index == index), Assert(edc.llr != 0)]
                with m.If(index == watched):
                    m.d.comb += [
                        Assert(decision.counter == entry),
                        Assert(decision.keep_drafting == entry[-1]),
                    ]

        # 4. Only a decision waits for room on o (the docstring's back-pressure rule): after a
        #    VERIFY is taken, which emits none, the next event is not held back by it
        #    whatever o does; a VERIFY at the head is never refused, so it is taken at once.
        if "ready" in self.checks:
            head_is_verify = edc.i.payload.kind.as_value() == EventKind.VERIFY.value
            took_verify = past(edc.i.valid & edc.i.ready & head_is_verify, "verify")
            with m.If(past_valid & took_verify & head_is_verify):
                m.d.comb += Assert(edc.i.ready)

        # Reachability of the corners the assertions are about.
        m.d.comb += [
            Cover(edc.llr == p.llr_max),
            Cover(edc.rollbacks == stats_max),
            Cover(past_valid & past(edc.emitting & ~edc.decision.keep_drafting, "suppress")),
            Cover(edc.error),
        ]
        return m


def spec_bucket_holds(bucket, entropy_sum, length, hmax):
    """Whether ``bucket == min(7, (8*S) // (L*Hmax))`` (spec 2.1), ``L*Hmax > 0``.

    Stated through floor division's defining property, ``x // d >= k`` exactly when
    ``k*d <= x``: so ``min(7, x // d) >= k`` exactly when ``k*d <= x``, for ``k = 1..7``. (The
    other definition, ``q*d <= x < (q+1)*d`` with a free ``q``, is the same statement but a
    multiplier-equivalence problem the solver does not finish at 16-bit ``Hmax``.)"""
    scaled = entropy_sum * 8
    step = length * hmax
    return Cat(*((bucket >= k) == (k * step <= scaled) for k in range(1, 8))).all()


class Arithmetic(Elaboratable):
    """The EDC with free events; what each executed event computes, against spec 2.1.

    The wrapper mirrors the event the block has taken (its fields and the ``Hmax`` of its
    acceptance cycle), and in the cycle after the event executes compares the state with
    the state before:

    - ``DRAFT(S, L)``, ``L >= 1``: LEHT gained ``bucket(S, L)`` at index 0 and shifted the
      rest one place older; LLR rose by one; LCEHT and the PHT did not move; the in-flight
      queue gained the index ``{avg hi, avg lo, LLR}`` of the new LEHT and LLR;
    - ``VERIFY(full, S_acc, n_acc)`` with LLR > 0: the PHT entry trained is the one the spec
      names (``predicted``: the oldest in-flight batch's index; ``current``: the index of the
      state after the event), by +1 (``full``) or -1, saturating, and no other entry moves;
      LCEHT gained ``bucket(S_acc, n_acc)`` if ``n_acc > 0`` (``current``: became LEHT on a
      full accept); a full accept lowered LLR by one and kept LEHT, a rejection restored
      LEHT from the new LCEHT, cleared LLR and emptied the in-flight queue;
    - a protocol error (``DRAFT`` with ``L == 0``, ``VERIFY`` with LLR == 0), and a cycle
      that executed nothing, changes none of them.

    ``o.ready`` is free, so execution is followed through the port handshakes rather than
    a fixed delay: the wrapper keeps the decisions the spec says the block owes (one per
    executed ``DRAFT`` with ``L >= 1``, buffered two deep, in order) and requires that the
    decision on ``o`` is the oldest of them, and that the event taken executes in the next
    cycle unless it is such a ``DRAFT`` and two decisions wait on ``o`` (the only reason
    the docstring gives for holding an event back). Every event's effect is then checked
    whatever ``o`` did meanwhile, a ``VERIFY`` executed behind a full buffer included. The
    block's in-flight queue is compared with the wrapper's queue of spec indices in every
    cycle.
    """

    def __init__(self, params: EDCParams, which: str, block=EDC):
        self.params = params
        self.which = which
        self.block = block

    def elaborate(self, platform):
        m = Module()
        p = self.params
        edc = self.block(p)
        m.submodules.edc = fragment = Fragment.get(edc, platform)
        m.d.comb += Assume(~ResetSignal())
        for port in (
            edc.i.valid,
            edc.i.payload.as_value(),
            edc.o.ready,
            edc.hmax_w.valid,
            edc.hmax_w.payload,
        ):
            m.d.comb += port.eq(AnySeq(len(port)))

        # The event taken and not yet executed (spec 2.1: L of a DRAFT and n_acc of a
        # VERIFY share the length field, S and S_acc the entropy-sum field).
        taken = edc.i.valid & edc.i.ready
        head = edc.i.payload
        waiting = Signal()
        is_draft = Signal()
        full = Signal()
        entropy_sum = Signal(p.sum_bits)
        length = Signal(p.length_bits)
        hmax = Signal(16)
        executes = waiting & (~is_draft | (length == 0) | edc.emitting)

        owed_count = owed_decisions(m, edc, check_payload=False)
        buffer_full = owed_count == 2
        # A strengthening invariant for the induction (the buffer's occupancy is not a
        # port): it holds the decisions owed. Their values are checked from reset only
        # (Properties), since a memory's contents cannot be named here.
        m.d.comb += Assert(_decision_buffer(fragment).level == owed_count)
        # Likewise the block's stage-1 register is the event the wrapper saw taken: an event
        # may now wait without bound, so its fields are no longer pinned down by the steps
        # the induction looks back over.
        stage = registers_named(fragment, "s1_valid", "s1_kind", "s1_has_tokens", "s1_full")
        m.d.comb += Assert(stage["s1_valid"] == waiting)
        # A DRAFT is taken only when it finds room (spec 2.1: refused while LLR is full),
        # and nothing executes while it waits.
        m.d.comb += Assert(~(waiting & is_draft & (length != 0)) | (edc.llr != p.llr_max))
        with m.If(waiting):
            m.d.comb += [
                Assert((stage["s1_kind"] == EventKind.DRAFT.value) == is_draft),
                Assert(stage["s1_has_tokens"] == (length != 0)),
                Assert(stage["s1_full"] == full),
            ]
        m.d.comb += [
            Assert(~edc.emitting | ~buffer_full),
            # The only wait: a decision with no room for it on o.
            Assert(~waiting | executes | (is_draft & (length != 0) & buffer_full)),
        ]
        with m.If(taken):
            m.d.sync += [
                waiting.eq(1),
                is_draft.eq(head.kind.as_value() == EventKind.DRAFT.value),
                full.eq(head.payload.verify.full),
                entropy_sum.eq(head.payload.draft.s),
                length.eq(head.payload.draft.length),
                hmax.eq(edc.hmax),
            ]
        with m.Elif(executes):
            m.d.sync += waiting.eq(0)
        # One event at a time: a new one is taken only as the waiting one executes.
        m.d.comb += Assert(~taken | ~waiting | executes)
        m.d.comb += Assert(~edc.emitting | (waiting & is_draft & (length != 0)))

        # The executed event and the state of the cycle before, for this cycle's checks.
        checking = Signal()
        event = {
            "draft": Signal(name="was_draft"),
            "full": Signal(name="was_full"),
            "sum": Signal(p.sum_bits, name="was_sum"),
            "length": Signal(p.length_bits, name="was_length"),
            "hmax": Signal(16, name="was_hmax"),
        }
        m.d.sync += [
            checking.eq(executes),
            event["draft"].eq(is_draft),
            event["full"].eq(full),
            event["sum"].eq(entropy_sum),
            event["length"].eq(length),
            event["hmax"].eq(hmax),
        ]
        old_llr = Signal.like(edc.llr)
        old_leht = [Signal(3, name=f"old_leht{k}") for k in range(p.history_len)]
        old_lceht = [Signal(3, name=f"old_lceht{k}") for k in range(p.history_len)]
        m.d.sync += [
            old_llr.eq(edc.llr),
            *(o.eq(v) for o, v in zip(old_leht, edc.leht, strict=True)),
            *(o.eq(v) for o, v in zip(old_lceht, edc.lceht, strict=True)),
        ]
        drafted = checking & event["draft"] & (event["length"] != 0)
        verified = checking & ~event["draft"] & (old_llr != 0)

        def same(new, old):
            return [Assert(n == o) for n, o in zip(new, old, strict=True)]

        def pushed(history, old, entropy_sum, length, hmax):
            # The bucket (multiplications) and the rest are proved separately: together
            # they take the solver several times as long.
            if self.which == "bucket":
                return [Assert(spec_bucket_holds(history[0], entropy_sum, length, hmax))]
            return same(history[1:], old[:-1])

        was = (event["sum"], event["length"], event["hmax"])

        # The PHT through one free entry (whatever holds for any entry holds for all).
        watched = Signal(p.index_bits)
        m.d.comb += watched.eq(AnyConst(p.index_bits))
        entry = Signal(p.counter_bits)
        m.d.comb += entry.eq(Array(edc.pht)[watched])
        old_entry = Signal.like(entry)
        m.d.sync += old_entry.eq(entry)
        counter_max = (1 << p.counter_bits) - 1
        trained_value = Mux(
            event["full"],
            Mux(old_entry == counter_max, old_entry, old_entry + 1),
            Mux(old_entry == 0, old_entry, old_entry - 1),
        )

        # The spec's in-flight queue (the index of every outstanding DRAFT, oldest first)
        # after the events checked so far, and its view with this cycle's event applied.
        slots = p.llr_max
        queue = [Signal(p.index_bits, name=f"spec_inflight{k}") for k in range(slots)]
        queue_len = Signal(range(slots + 1))
        view = [Signal(p.index_bits, name=f"spec_inflight_view{k}") for k in range(slots)]
        view_len = Signal(range(slots + 1))
        index_now = spec_index(p, edc.leht, edc.llr)
        m.d.comb += [*(v.eq(q) for v, q in zip(view, queue, strict=True)), view_len.eq(queue_len)]
        with m.If(drafted):
            m.d.comb += view_len.eq(queue_len + 1)
            for k in range(slots):
                with m.If(queue_len == k):
                    m.d.comb += view[k].eq(index_now)
        with m.If(verified & event["full"]):
            m.d.comb += [*(v.eq(q) for v, q in zip(view, queue[1:], strict=False))]
            m.d.comb += view_len.eq(queue_len - 1)
        with m.If(verified & ~event["full"]):
            m.d.comb += view_len.eq(0)
        m.d.sync += [*(q.eq(v) for q, v in zip(queue, view, strict=True)), queue_len.eq(view_len)]
        m.d.comb += Assert(edc.llr == view_len)
        for k in range(slots):
            with m.If(k < view_len):
                m.d.comb += [Assert(edc.inflight_valid[k]), Assert(edc.inflight[k] == view[k])]
            with m.Else():
                m.d.comb += Assert(~edc.inflight_valid[k])

        past_valid = Signal()  # the "before" registers hold a real cycle from step 1 on
        m.d.sync += past_valid.eq(1)
        with m.If(~past_valid):
            pass
        with m.Elif(drafted):
            m.d.comb += [
                *pushed(edc.leht, old_leht, *was),
                *same(edc.lceht, old_lceht),
                Assert(edc.llr == old_llr + 1),
                Assert(entry == old_entry),
            ]
        with m.Elif(verified):
            if p.update == "predicted":
                trained = queue[0]
                with m.If(event["length"] != 0):
                    m.d.comb += pushed(edc.lceht, old_lceht, *was)
                with m.Else():
                    m.d.comb += same(edc.lceht, old_lceht)
            else:
                trained = index_now
                with m.If(event["full"]):
                    m.d.comb += same(edc.lceht, old_leht)
                with m.Elif(event["length"] != 0):
                    m.d.comb += pushed(edc.lceht, old_lceht, *was)
                with m.Else():
                    m.d.comb += same(edc.lceht, old_lceht)
            with m.If(event["full"]):
                m.d.comb += [Assert(edc.llr + 1 == old_llr), *same(edc.leht, old_leht)]
            with m.Else():
                m.d.comb += [Assert(edc.llr == 0), *same(edc.leht, edc.lceht)]
            m.d.comb += Assert(entry == Mux(watched == trained, trained_value, old_entry))
        with m.Else():
            m.d.comb += [
                *same(edc.leht, old_leht),
                *same(edc.lceht, old_lceht),
                Assert(edc.llr == old_llr),
                Assert(entry == old_entry),
            ]
        return m


@pytest.mark.formal
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_llr_queue_and_decision_bmc(update):
    """LLR vs the in-flight queue and the decision rule are invariants of reachable states:
    bounded check from reset."""
    design = Properties(PARAMS[update], checks=("queue", "decision", "ready"))
    check(design, name=f"edc_{update}_bmc", mode="bmc", depth=BMC_DEPTH)


@pytest.mark.formal
@pytest.mark.long
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_counters_stay_in_range_prove(update):
    """The counter properties hold for every transition of every state (reachable or not),
    so k-induction proves them for all time, not just to a bound."""
    design = Properties(PARAMS[update], checks=("counters",))
    check(design, name=f"edc_{update}_prove", mode="prove", depth=PROVE_DEPTH)


@pytest.mark.formal
def test_corners_are_reachable():
    design = Properties(PARAMS["predicted"])
    check(design, name="edc_cover", mode="cover", depth=BMC_DEPTH)


@pytest.mark.formal
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_histories_index_and_trained_entry_follow_the_spec_proved(update):
    """k-induction over every state and event: the history shifts, LLR, the in-flight
    indices {avg hi, avg lo, LLR} and the PHT entry each VERIFY trains, as spec 2.1 gives
    them (bucket values apart: the next test)."""
    check(
        Arithmetic(PARAMS[update], "state"),
        name=f"edc_{update}_state_prove",
        mode="prove",
        depth=ARITHMETIC_DEPTH,
        engine="smtbmc yices",
    )


@pytest.mark.formal
@pytest.mark.long
def test_every_bucket_equals_the_spec_formula():
    """The bucket of every DRAFT and VERIFY equals min(7, (8*S) // (L*Hmax)) for every S, L
    and Hmax, so at every threshold 8*S == k*L*Hmax and on both sides of it. A bounded check
    is complete here: the bucket is a function of the event's fields and Hmax alone, and
    every combination is reachable within four steps of reset (an Hmax write, a DRAFT, a
    VERIFY, the check); the k-induction proof of the same takes three minutes."""
    check(
        Arithmetic(PARAMS["predicted"], "bucket"),
        name="edc_bucket_bmc",
        mode="bmc",
        depth=ARITHMETIC_DEPTH,
        engine="smtbmc yices",
    )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("edc.state_proof"))
def test_state_proof_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            Arithmetic(PARAMS["predicted"], "state", block=bug.build(EDC)),
            name="edc_state_planted",
            mode="prove",
            depth=ARITHMETIC_DEPTH,
            engine="smtbmc yices",
        )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("edc.bucket_check"))
def test_bucket_check_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            Arithmetic(PARAMS["predicted"], "bucket", block=bug.build(EDC)),
            name="edc_bucket_planted",
            mode="bmc",
            depth=ARITHMETIC_DEPTH,
            engine="smtbmc yices",
        )
