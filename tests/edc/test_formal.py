"""EDC, formal tier: properties over every input sequence (sby, bounded model check + cover).

The inputs (event stream, decision ready, Hmax writes) are left completely free: the block
must keep its invariants whatever the CPU does, including stream-rule violations. Reset is
held low after the initial state (which is the reset state), so "past" values are meaningful.

Small parameters keep the state space tractable and make the saturation corners reachable
within the depth: 2-bit LLR (three outstanding batches), 2-bit PHT counters, 2-bit event
counters, two history entries (PHT of 256 entries) and 2-bit lengths.
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
    Module,
    ResetSignal,
    Signal,
)
from harness.formal import check

from ahasd.hw.edc import EDC
from ahasd.params import EDCParams

PARAMS = {
    "predicted": EDCParams(counter_bits=2, llr_bits=2, history_len=2, length_bits=2, stats_bits=2),
    "current": EDCParams(
        counter_bits=2, llr_bits=2, history_len=2, length_bits=2, stats_bits=2, update="current"
    ),
}
# The counter properties are about single transitions, independent of the LLR width: the
# proof uses a 1-bit LLR (a 128-entry PHT) to stay fast.
PROVE_PARAMS = {
    update: dataclasses.replace(params, llr_bits=1) for update, params in PARAMS.items()
}
BMC_DEPTH = 10
PROVE_DEPTH = 1


def spec_index(params: EDCParams, leht, llr):
    """``{avg(LEHT[N/2..N-1]), avg(LEHT[0..N/2-1]), LLR}``, written out from the spec."""
    half = params.history_len // 2
    shift = half.bit_length() - 1
    lo = (sum(leht[:half]) >> shift)[:3]
    hi = (sum(leht[half:]) >> shift)[:3]
    return Cat(llr, lo, hi)


class Properties(Elaboratable):
    def __init__(self, params: EDCParams, checks=("queue", "counters", "decision")):
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

        # Reachability of the corners the assertions are about.
        m.d.comb += [
            Cover(edc.llr == p.llr_max),
            Cover(edc.rollbacks == stats_max),
            Cover(past_valid & past(edc.emitting & ~edc.decision.keep_drafting, "suppress")),
            Cover(edc.error),
        ]
        return m


@pytest.mark.formal
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_llr_queue_and_decision_bmc(update):
    """LLR vs the in-flight queue and the decision rule are invariants of reachable states:
    bounded check from reset."""
    design = Properties(PARAMS[update], checks=("queue", "decision"))
    check(design, name=f"edc_{update}_bmc", mode="bmc", depth=BMC_DEPTH)


@pytest.mark.formal
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_counters_stay_in_range_prove(update):
    """The counter properties hold for every transition of every state (reachable or not),
    so k-induction proves them for all time, not just to a bound."""
    design = Properties(PROVE_PARAMS[update], checks=("counters",))
    check(design, name=f"edc_{update}_prove", mode="prove", depth=PROVE_DEPTH)


@pytest.mark.formal
def test_corners_are_reachable():
    design = Properties(PARAMS["predicted"])
    check(design, name="edc_cover", mode="cover", depth=BMC_DEPTH)
