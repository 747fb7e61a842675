"""Queues, formal tier: no queue drops, duplicates or reorders an entry.

Unbounded (k-induction, :class:`QueuePointers`): all three queues of ``AsyncQueues`` at
the reduced parameter set, free clocks; each FIFO pointer is exactly its side's transfer
count, memory slots follow the counts, a write is accepted only into a free slot and a read
(or squash) takes only a written one, for all time. The data itself (the entry that comes
out is the one that went in, stale ones squashed) is the bounded check below: the memory's
contents are not signals a wrapper can name.

The draft queue's data, bounded model check with yowasp-sby in multiclock mode: the
writer's and the reader's clocks are free inputs, so every interleaving of the two clocks
(every ratio, every phase) within the bound is explored, along with every valid/ready
pattern.

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

The epoch at a width that tells epochs apart (:class:`DraftEpochProperties`, 3 bits), the
reader's epoch bumped at any time (back to back, with entries of several epochs queued) and
the writer taking it at any later time: no entry whose epoch differs from the reader's is
ever presented (k-induction: for all time, any number of switches); bounded, with at most
seven switches (the epoch width must cover the rejections in flight, the protocol's part),
each epoch's entries come out from its first, in order, with no gap; a cover shows two
back-to-back switches with entries queued and then an entry two epochs on taken after a
squash. The stale test planted on bit 0 only (harness/planted.py's catalogue) fails both.
"""

from __future__ import annotations

import itertools

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import (
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
    Value,
)
from amaranth.lib.wiring import In
from harness import small_params
from harness.formal import check
from harness.planted import cases

from ahasd.hw.queues import AsyncQueues, DraftQueue
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


# ---- the epoch at its full width, switched any number of times ---------------------------

#: Three epoch bits: the reader can switch seven times before an epoch number comes back, so
#: an entry two or more epochs old is a distinct value (a 1-bit epoch switched once cannot
#: tell a comparison of the whole field from one of bit 0).
EPOCH_PARAMS = QueueParams(draft_depth=4, epoch_bits=3, pos_bits=8, batch_id_bits=1,
                           length_bits=1)  # fmt: skip
EPOCHS = 1 << EPOCH_PARAMS.epoch_bits
#: The cover below is reached at step 12 (two bumps on consecutive read cycles with entries
#: queued, then an entry two epochs on taken after a squash); the bounded data check goes
#: three steps further (about 30 s; a step more doubles it).
EPOCH_BMC_DEPTH = 15


class DraftEpochProperties(Elaboratable):
    """The draft queue with the reader's epoch bumped at any time, back to back or with
    entries of several epochs in the queue, and the writer taking the reader's epoch at
    any later time (it learns it through the feedback path).

    ``data=False``: every entry presented carries the reader's current epoch, for all time
    (k-induction; any number of switches, wrapping included: the check is of the
    comparison, whatever the memory holds). ``data=True`` (bounded, at most ``EPOCHS - 1``
    switches: the epoch width must cover the rejections in flight, the protocol's part):
    the entries of an epoch come out in the order written, starting at its first and with
    no gap, so no current entry is dropped and no stale one delivered.
    """

    def __init__(self, queue=DraftQueue, *, data: bool = False, cover: bool = False):
        self.queue, self.data, self.cover = queue, data, cover

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.queue(EPOCH_PARAMS)
        m.d.comb += [Assume(~ResetSignal("pim")), Assume(~ResetSignal("npu"))]
        reader_epoch = Signal(EPOCH_PARAMS.epoch_bits)
        writer_epoch = Signal(EPOCH_PARAMS.epoch_bits)
        next_seq = Signal(8)
        m.d.comb += [
            dut.w.valid.eq(AnySeq(1)),
            dut.w.payload.first_pos.eq(next_seq),
            dut.w.payload.epoch.eq(writer_epoch),
            dut.r.ready.eq(AnySeq(1)),
            dut.r_epoch.eq(reader_epoch),
            Assume(next_seq < 250),
        ]
        with m.If(dut.w.valid & dut.w.ready):
            m.d.pim += next_seq.eq(next_seq + 1)
        with m.If(AnySeq(1)):
            m.d.pim += writer_epoch.eq(reader_epoch)
        bumps = Signal(range(EPOCHS + 1))
        with m.If(AnySeq(1)):
            m.d.npu += [reader_epoch.eq(reader_epoch + 1), bumps.eq(bumps + 1)]
        out = dut.r.payload
        if self.cover:
            # Two switches in consecutive read cycles while the queue holds entries, then an
            # entry of the epoch two switches on taken after a squash.
            bumped, twice, squashed = Signal(), Signal(), Signal()
            previous = Signal.like(reader_epoch)
            m.d.npu += [bumped.eq(0), previous.eq(reader_epoch)]
            with m.If(reader_epoch != previous):
                m.d.npu += bumped.eq(1)
                with m.If(bumped & (dut.r_level > 1)):
                    m.d.npu += twice.eq(1)
            with m.If(dut.r_squashed):
                m.d.npu += squashed.eq(1)
            m.d.comb += Cover(twice & squashed & dut.r.valid & dut.r.ready & (out.epoch == 2))
            return m
        with m.If(dut.r.valid):
            m.d.comb += Assert(out.epoch == reader_epoch)
        if not self.data:
            return m

        m.d.comb += Assume(bumps < EPOCHS)
        # The first sequence number written in each epoch, and whether one was.
        first = [Signal(8, name=f"first_{e}") for e in range(EPOCHS)]
        written = Signal(EPOCHS)
        with m.If(dut.w.valid & dut.w.ready & ~written.bit_select(writer_epoch, 1)):
            m.d.pim += written.bit_select(writer_epoch, 1).eq(1)
            with m.Switch(writer_epoch):
                for epoch in range(EPOCHS):
                    with m.Case(epoch):
                        m.d.pim += first[epoch].eq(next_seq)
        first_of_out = Signal(8)
        with m.Switch(out.epoch):
            for epoch in range(EPOCHS):
                with m.Case(epoch):
                    m.d.comb += first_of_out.eq(first[epoch])
        last_pos = Signal(8)
        last_epoch = Signal(EPOCH_PARAMS.epoch_bits)
        taken_any = Signal()
        take = dut.r.valid & dut.r.ready
        with m.If(take):
            m.d.npu += [last_pos.eq(out.first_pos), last_epoch.eq(out.epoch), taken_any.eq(1)]
            m.d.comb += Assert(written.bit_select(out.epoch, 1))
            with m.If(taken_any & (last_epoch == out.epoch)):
                m.d.comb += Assert(out.first_pos == last_pos + 1)
            with m.Else():
                m.d.comb += Assert(out.first_pos == first_of_out)
        return m


@pytest.mark.formal
def test_no_stale_entry_is_ever_presented_proved():
    check(
        DraftEpochProperties(),
        name="queues_epoch_prove",
        mode="prove",
        depth=INDUCTION_DEPTH,
        multiclock=True,
    )


@pytest.mark.formal
def test_epoch_switches_back_to_back_are_reachable():
    check(
        DraftEpochProperties(cover=True),
        name="queues_epoch_cover",
        mode="cover",
        depth=EPOCH_BMC_DEPTH,
        multiclock=True,
    )


@pytest.mark.formal
@pytest.mark.long
def test_epochs_switched_back_to_back_lose_and_leak_nothing():
    check(
        DraftEpochProperties(data=True),
        name="queues_epoch_bmc",
        mode="bmc",
        depth=EPOCH_BMC_DEPTH,
        multiclock=True,
    )


@pytest.mark.formal
@pytest.mark.parametrize(
    ("bug", "data"),
    [
        *((case.values[0], False) for case in cases("queues.epoch_proof")),
        *((case.values[0], True) for case in cases("queues.epoch_data")),
    ],
    ids=[
        *(f"{case.id}-proof" for case in cases("queues.epoch_proof")),
        *(f"{case.id}-data" for case in cases("queues.epoch_data")),
    ],
)
def test_epoch_checks_fail_on_planted_bugs(bug, data):
    queue = bug.build(DraftQueue)
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            DraftEpochProperties(queue, data=data),
            name=f"queues_epoch_planted_{'data' if data else 'proof'}",
            mode="prove" if not data else "bmc",
            depth=INDUCTION_DEPTH if not data else EPOCH_BMC_DEPTH,
            multiclock=True,
        )


# ---- unbounded: the pointers of all three queues (k-induction) --------------------------

#: The whole block at the reduced set of harness/small_params.py (the netlist the mutation
#: campaign mutates): queues of 4, 2 and 4 entries, 3-bit pointer counters.
UNBOUNDED_PARAMS = small_params.QUEUES
INDUCTION_DEPTH = 8


#: The synchronisers of a queue FIFO's reset handshake (``hw/async_fifo.py``): the writer's
#: request into the reader, the reader's acknowledgement back.
HANDSHAKE = ("reset_to_reader", "reset_ack_to_writer")


def _fifo_signals(fragment: Fragment) -> dict[str, Signal]:
    """The named registers of one queue FIFO fragment and of its synchronisers (the
    pointers' ``produce_cdc``/``consume_cdc``, the reset's ``rst_cdc`` and the handshake's:
    ``stage0``, ``stage1``), by name."""
    found: dict[str, Signal] = {}

    def collect(part: Fragment, prefix: str) -> None:
        for statements in part.statements.values():
            for statement in statements:
                for signal in statement._lhs_signals():
                    if isinstance(signal, Signal):
                        found[prefix + signal.name] = signal

    collect(fragment, "")
    for child, name, *_ in fragment.subfragments:
        if name in ("produce_cdc", "consume_cdc", "rst_cdc", *HANDSHAKE):
            collect(child, f"{name}.")
    return found


def _gray_decode(code: Value) -> Value:
    """Binary from reflected Gray code: bit i is the XOR of the code's bits i and above."""
    bits = [code[-1]]
    for index in reversed(range(len(code) - 1)):
        bits.insert(0, bits[0] ^ code[index])
    return Cat(*bits)


class QueuePointers(Elaboratable):
    """Every queue of ``AsyncQueues`` neither drops, duplicates nor reorders an entry, for
    all time, every clock ratio and phase (free clocks) and every valid/ready/epoch pattern.

    Writer and reader each count their transfers (the reader counts squashes too: a squash
    consumes the head). With ``P``/``C`` the FIFO's write and read pointers (``log2(depth)
    + 1`` bits, so that ``P - C`` distinguishes full from empty):

    - ``P`` is the writer's count and ``C`` the reader's (each transfer moves its pointer by
      exactly one), and the memory is written at ``P mod depth`` and read ahead at the next
      ``C mod depth``: the k-th entry read is the slot of the k-th entry written (in order);
    - a write is accepted only when ``P - C < depth``: it never overwrites an entry not yet
      read (nothing dropped); a read or squash happens only when ``P - C >= 1``: it takes
      an entry written and not yet read (nothing duplicated, nothing read from nowhere);
    - the levels on both sides never exceed the depth.

    k-induction needs what makes these inductive, the Gray-pointer relations: each Gray
    pointer is the Gray code of its binary pointer, and the pointers as each synchroniser
    stage holds them are ordered ``cwb <= c1 <= c0 <= C <= p1 <= p0 <= P`` (``c0``/``c1``:
    ``C`` in the write domain's stages, ``cwb`` its registered binary; ``p0``/``p1``: ``P``
    in the read domain's) with the whole span at most ``depth``; and, while the reset
    synchroniser has not yet cleared after power-up, the read side in its initial state.
    """

    def __init__(self, queues_class=AsyncQueues):
        self.queues_class = queues_class

    def elaborate(self, platform):
        p = UNBOUNDED_PARAMS
        m = Module()
        block = self.queues_class(p)
        fragment = Fragment.get(block, platform)
        m.submodules.dut = fragment
        for domain in ("cpu", "npu", "pim"):
            m.d.comb += Assume(~ResetSignal(domain))
        for name, member in block.signature.members.items():
            if member.flow == In:
                port = getattr(block, name)
                if hasattr(port, "valid"):
                    m.d.comb += [
                        port.valid.eq(AnySeq(1)),
                        port.payload.as_value().eq(AnySeq(len(port.payload.as_value()))),
                    ]
                else:
                    m.d.comb += port.eq(AnySeq(len(port)))
            elif hasattr(getattr(block, name), "ready"):
                m.d.comb += getattr(block, name).ready.eq(AnySeq(1))
        children = {name: child for child, name, *_ in fragment.subfragments}
        for queue in ("draft", "feedback", "preverify"):
            self.pointers(m, block, queue, children[queue], getattr(p, f"{queue}_depth"))
        return m

    def pointers(self, m, block, queue: str, fragment: Fragment, depth: int) -> None:
        fifo = next(child for child, name, *_ in fragment.subfragments if name == "fifo")
        s = _fifo_signals(fifo)
        width = len(s["produce_w_bin"])
        w_domain, r_domain = (
            block.member_domains()[f"{queue}_w"],
            block.member_domains()[f"{queue}_r"],
        )
        written, read = Signal(width, name=f"{queue}_written"), Signal(width, name=f"{queue}_read")
        w, r = getattr(block, f"{queue}_w"), getattr(block, f"{queue}_r")
        wrote = w.valid & w.ready
        took = r.valid & r.ready
        if queue == "draft":
            took = took | block.draft_r_squashed
        m.d[w_domain] += written.eq(written + wrote)
        m.d[r_domain] += read.eq(read + took)

        produce, consume = s["produce_w_bin"], s["consume_r_bin"]
        p0 = _gray_decode(s["produce_cdc.stage0"])
        p1 = _gray_decode(s["produce_cdc.stage1"])
        c0 = _gray_decode(s["consume_cdc.stage0"])
        c1 = _gray_decode(s["consume_cdc.stage1"])
        chain = [s["consume_w_bin"], c1, c0, consume, p1, p0, produce]

        def distance(low, high):
            return (high - low)[:width]

        span = sum(distance(low, high) for low, high in itertools.pairwise(chain))
        m.d.comb += [
            # the Gray-pointer relations (what makes the rest inductive)
            Assert(s["produce_w_gry"] == produce ^ (produce >> 1)),
            Assert(s["consume_r_gry"] == consume ^ (consume >> 1)),
            Assert(span <= depth),
            # the pointers are the transfer counts, the slots follow them
            Assert(produce == written),
            Assert(consume == read),
            Assert(s["w_port__addr"] == written[: width - 1]),
            Assert(s["r_port__addr"] == (read + took)[: width - 1]),
            # the levels: the reader's is exact, the entries written as its synchroniser
            # shows them less those read (the writer's is registered: bounded only)
            Assert(getattr(block, f"{queue}_w_level") <= depth),
            Assert(getattr(block, f"{queue}_r_level") <= depth),
            Assert(getattr(block, f"{queue}_r_level") == distance(consume, p1)),
        ]
        # The reset synchroniser starts high (its stages' init is 1) and clears at the first
        # two read-clock edges; until then the read side is at its initial state.
        reset_0, reset_1 = s["rst_cdc.stage0"], s["rst_cdc.stage1"]
        with m.If(reset_0):
            m.d.comb += [Assert(reset_1), Assert(p0 == 0)]
        with m.If(reset_1):
            m.d.comb += [Assert(consume == 0), Assert(read == 0), Assert(p1 == 0)]
        # With the resets held low, the reset handshake stays at power-up's idle state.
        idle = [s["reset_request"]]
        idle += [s[f"{name}.stage{index}"] for name in HANDSHAKE for index in (0, 1)]
        m.d.comb += [Assert(~register) for register in idle]
        with m.If(wrote):
            m.d.comb += Assert(distance(consume, produce) < depth)
        with m.If(took):
            m.d.comb += Assert(distance(consume, produce) >= 1)


@pytest.mark.formal
def test_no_queue_drops_duplicates_or_reorders_an_entry_proved():
    check(
        QueuePointers(),
        name="queues_pointers_prove",
        mode="prove",
        depth=INDUCTION_DEPTH,
        multiclock=True,
    )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("queues.pointer_proof"))
def test_pointer_proof_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            QueuePointers(bug.build(AsyncQueues)),
            name="queues_pointers_planted",
            mode="prove",
            depth=INDUCTION_DEPTH,
            multiclock=True,
        )
