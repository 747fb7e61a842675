"""Queues, formal tier: the draft queue neither drops nor duplicates a non-stale entry.

Bounded model check with yowasp-sby in multiclock mode: the writer's and the reader's clocks
are free inputs, so every interleaving of the two clocks (every ratio, every phase) within
the bound is explored, along with every valid/ready pattern.

The writer numbers its entries 0, 1, 2, ... in ``first_pos``. The protocol of the epochs
(decisions, "Queues"): the reader's epoch goes from 0 to 1 once, at a time the solver picks
(a rejection), and the writer switches to epoch 1 some time later (it learns through the
feedback path). So the writer's entries are ``0 .. K-1`` of epoch 0 then ``K ..`` of epoch 1,
and with that:

- every entry delivered carries the reader's current epoch (no stale entry comes out);
- the epoch-0 entries delivered are ``0, 1, 2, ...`` with no gap (nothing non-stale is
  dropped before the rejection, nothing is duplicated or reordered);
- the epoch-1 entries delivered are ``K, K+1, ...`` with no gap (nothing of the current
  epoch is ever dropped, and nothing is duplicated);
- and cover: the queue fills up, a stale entry is squashed, and epoch-1 entries come out
  after a squash (the properties are not vacuous).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, ResetSignal, Signal
from harness.formal import check

from ahasd.hw.queues import DraftQueue
from ahasd.params import QueueParams

PARAMS = QueueParams(draft_depth=4, epoch_bits=1, pos_bits=8, batch_id_bits=1, length_bits=1)


class DraftQueueProperties(Elaboratable):
    def __init__(self, cover: bool = False):
        self.cover = cover

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = DraftQueue(PARAMS)
        # Registers start at their reset values; the resets themselves stay low (a reset in
        # the middle of traffic is the Amaranth tier's directed test).
        m.d.comb += [Assume(~ResetSignal("pim")), Assume(~ResetSignal("npu"))]

        # Writer (pim): free valid, entries numbered in order, epoch switched once, late.
        next_seq = Signal(8)
        writer_epoch = Signal()
        reader_epoch = Signal()
        m.d.comb += [
            dut.w.valid.eq(AnySeq(1)),
            dut.w.payload.first_pos.eq(next_seq),
            dut.w.payload.epoch.eq(writer_epoch),
        ]
        with m.If(dut.w.valid & dut.w.ready):
            m.d.pim += next_seq.eq(next_seq + 1)
        with m.If(reader_epoch & AnySeq(1)):
            m.d.pim += writer_epoch.eq(1)
        # Never let the sequence number wrap within the bound.
        m.d.comb += Assume(next_seq < 250)

        # Reader (npu): free ready, epoch bumped once at a free time.
        m.d.comb += [dut.r.ready.eq(AnySeq(1)), dut.r_epoch.eq(reader_epoch)]
        with m.If(AnySeq(1)):
            m.d.npu += reader_epoch.eq(1)

        # Where the writer switched epochs: the first epoch-1 sequence number.
        first_new = Signal(8)
        switched = Signal()
        with m.If(dut.w.valid & dut.w.ready & writer_epoch & ~switched):
            m.d.pim += [switched.eq(1), first_new.eq(next_seq)]

        expect_old = Signal(8)
        expect_new = Signal(8)
        seen_new = Signal()
        out = dut.r.payload
        take = dut.r.valid & dut.r.ready
        with m.If(take):
            with m.If(out.epoch == 0):
                m.d.npu += expect_old.eq(expect_old + 1)
            with m.Else():
                m.d.npu += [expect_new.eq(out.first_pos + 1), seen_new.eq(1)]

        if self.cover:
            squashed = Signal()
            with m.If(dut.r_squashed):
                m.d.npu += squashed.eq(1)
            m.d.comb += [
                Cover(dut.w_level == PARAMS.draft_depth),
                Cover(squashed & take & (out.epoch == 1)),
            ]
        else:
            with m.If(dut.r.valid):
                m.d.comb += Assert(out.epoch == reader_epoch)
            with m.If(take & (out.epoch == 0)):
                m.d.comb += Assert(out.first_pos == expect_old)
            with m.If(take & (out.epoch == 1)):
                m.d.comb += Assert(out.first_pos == Mux(seen_new, expect_new, first_new))
                m.d.comb += Assert(switched)
        return m


@pytest.mark.formal
def test_draft_queue_never_drops_or_duplicates_a_current_entry():
    check(DraftQueueProperties(), name="queues_draft_bmc", mode="bmc", depth=16, multiclock=True)


@pytest.mark.formal
def test_draft_queue_properties_are_not_vacuous():
    check(
        DraftQueueProperties(cover=True),
        name="queues_draft_cover",
        mode="cover",
        depth=24,
        multiclock=True,
    )
