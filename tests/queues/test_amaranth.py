"""Queues, Amaranth-simulator tier: directed cases on the draft queue (the one with a squash).

Clocks: PIM (writer) 800 MHz, NPU (reader) 1 GHz, as on the paper's platform.
"""

from __future__ import annotations

import re

import pytest
from amaranth.hdl import ClockDomain, Module
from harness.amaranth_sim import simulate

from ahasd.hw.queues import DraftQueue, Queue, draft_entry_layout, feedback_entry_layout
from ahasd.params import QueueParams

PIM_PERIOD = 1.25e-9
NPU_PERIOD = 1.0e-9
CLOCKS = {"pim": PIM_PERIOD, "npu": NPU_PERIOD}
DEADLINE = 20e-6


def entry(params: QueueParams, batch_id: int, epoch: int = 0, length: int = 3) -> dict:
    return {
        "batch_id": batch_id,
        "epoch": epoch,
        "first_pos": 100 + batch_id,
        "length": length,
        "bucket": batch_id % 8,
    }


async def write(ctx, dut, fields: dict) -> None:
    """Present one entry and wait for its transfer (pim domain)."""
    ctx.set(dut.w.payload, fields)
    ctx.set(dut.w.valid, 1)
    await ctx.tick("pim").until(dut.w.ready)
    ctx.set(dut.w.valid, 0)


async def read(ctx, dut, *, patience: int = 64) -> dict | None:
    """Take one entry (npu domain); ``None`` if nothing arrives within ``patience`` cycles."""
    ctx.set(dut.r.ready, 1)
    for _ in range(patience):
        _, _, valid, payload = await ctx.tick("npu").sample(dut.r.valid, dut.r.payload)
        if valid:
            ctx.set(dut.r.ready, 0)
            return {name: int(payload[name]) for name, _ in draft_entry_layout(dut.params)}
    ctx.set(dut.r.ready, 0)
    return None


async def settle(ctx, cycles: int = 8) -> None:
    await ctx.tick("npu").repeat(cycles)


def test_empty_queue_presents_nothing():
    params = QueueParams()
    dut = DraftQueue(params)

    async def testbench(ctx):
        await settle(ctx, 16)
        assert ctx.get(dut.r.valid) == 0
        assert ctx.get(dut.r_level) == 0
        assert ctx.get(dut.w_level) == 0
        assert ctx.get(dut.w.ready) == 1
        assert await read(ctx, dut, patience=16) is None

    simulate(dut, testbench, clocks=CLOCKS, name="queues_empty", deadline=DEADLINE)


def test_full_queue_backpressures_and_keeps_every_entry():
    params = QueueParams(draft_depth=8)
    dut = DraftQueue(params)
    written = [entry(params, i) for i in range(8)]

    async def testbench(ctx):
        for fields in written:
            await write(ctx, dut, fields)
        await ctx.tick("pim").repeat(2)
        assert ctx.get(dut.w_level) == 8
        assert ctx.get(dut.w.ready) == 0
        # A ninth entry is held at the port, not dropped and not accepted.
        ctx.set(dut.w.payload, entry(params, 8))
        ctx.set(dut.w.valid, 1)
        for _ in range(10):
            await ctx.tick("pim")
            assert ctx.get(dut.w.ready) == 0
        await settle(ctx)
        assert ctx.get(dut.r_level) == 8
        got = [await read(ctx, dut) for _ in range(8)]
        assert got == written
        # The held entry now goes in and comes out.
        await ctx.tick("pim").until(dut.w.ready)
        ctx.set(dut.w.valid, 0)
        assert await read(ctx, dut) == entry(params, 8)

    simulate(dut, testbench, clocks=CLOCKS, name="queues_full", deadline=DEADLINE)


def test_squash_drops_entries_in_flight_of_a_stale_epoch():
    params = QueueParams()
    dut = DraftQueue(params)

    async def testbench(ctx):
        for i in range(5):
            await write(ctx, dut, entry(params, i, epoch=0))
        await settle(ctx)
        assert await read(ctx, dut) == entry(params, 0, epoch=0)
        # A rejection: the reader bumps its epoch with four entries in flight.
        ctx.set(dut.r_epoch, 1)
        await settle(ctx)
        assert ctx.get(dut.r_level) == 0
        assert ctx.get(dut.r.valid) == 0
        # New drafts of the new epoch flow again.
        await write(ctx, dut, entry(params, 10, epoch=1))
        assert await read(ctx, dut) == entry(params, 10, epoch=1)

    simulate(dut, testbench, clocks=CLOCKS, name="queues_squash", deadline=DEADLINE)


def test_squash_counts_each_dropped_entry():
    params = QueueParams()
    dut = DraftQueue(params)
    dropped = []

    async def testbench(ctx):
        for i in range(6):
            await write(ctx, dut, entry(params, i, epoch=0))
        await settle(ctx)
        ctx.set(dut.r_epoch, 1)
        for _ in range(16):
            _, _, squashed = await ctx.tick("npu").sample(dut.r_squashed)
            dropped.append(squashed)
        assert sum(dropped) == 6

    simulate(dut, testbench, clocks=CLOCKS, name="queues_squash_count", deadline=DEADLINE)


def test_back_to_back_epochs_keep_only_the_current_one():
    params = QueueParams()
    dut = DraftQueue(params)
    sequence = [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 3), (6, 3)]

    async def testbench(ctx):
        ctx.set(dut.r_epoch, 3)
        for batch_id, epoch in sequence:
            await write(ctx, dut, entry(params, batch_id, epoch=epoch))
        await settle(ctx, 16)
        got = [await read(ctx, dut) for _ in range(2)]
        assert got == [entry(params, 5, epoch=3), entry(params, 6, epoch=3)]
        assert await read(ctx, dut, patience=16) is None

    simulate(dut, testbench, clocks=CLOCKS, name="queues_epochs", deadline=DEADLINE)


def test_stale_head_is_withdrawn_when_the_reader_bumps_while_stalled():
    params = QueueParams()
    dut = DraftQueue(params)

    async def testbench(ctx):
        await write(ctx, dut, entry(params, 1, epoch=0))
        await settle(ctx)
        assert ctx.get(dut.r.valid) == 1  # presented, reader not ready
        ctx.set(dut.r_epoch, 1)
        await ctx.tick("npu")
        assert ctx.get(dut.r.valid) == 0
        await settle(ctx)
        assert ctx.get(dut.r_level) == 0

    simulate(dut, testbench, clocks=CLOCKS, name="queues_withdraw", deadline=DEADLINE)


def test_writer_reset_in_the_middle_of_traffic_empties_the_queue():
    params = QueueParams()
    dut = DraftQueue(params)
    top = Module()
    top.submodules.dut = dut
    top.domains.pim = pim = ClockDomain("pim")
    top.domains.npu = ClockDomain("npu")

    async def testbench(ctx):
        for i in range(4):
            await write(ctx, dut, entry(params, i))
        ctx.set(dut.w.payload, entry(params, 4))
        ctx.set(dut.w.valid, 1)
        ctx.set(dut.r.ready, 1)
        # Reset the writer's domain while an entry is presented and the reader is reading.
        # (Waiting on the reader's clock: a testbench waiting on a domain under reset would be
        # interrupted by Amaranth's DomainReset.)
        ctx.set(pim.rst, 1)
        await ctx.tick("npu").repeat(4)
        ctx.set(pim.rst, 0)
        ctx.set(dut.w.valid, 0)
        ctx.set(dut.r.ready, 0)
        await settle(ctx, 16)
        assert ctx.get(dut.r_level) == 0
        assert ctx.get(dut.w_level) == 0
        # The queue works after the reset.
        await write(ctx, dut, entry(params, 20))
        assert await read(ctx, dut) == entry(params, 20)

    simulate(top, testbench, clocks=CLOCKS, name="queues_reset", deadline=DEADLINE)


def test_plain_queue_keeps_order():
    params = QueueParams()
    dut = Queue(feedback_entry_layout(params), 4, w_domain="npu", r_domain="pim")
    items = [{"batch_id": i, "n_accepted": i % 32, "full": i % 2} for i in range(10)]
    got = []

    async def writer(ctx):
        for fields in items:
            ctx.set(dut.w.payload, fields)
            ctx.set(dut.w.valid, 1)
            await ctx.tick("npu").until(dut.w.ready)
        ctx.set(dut.w.valid, 0)

    async def reader(ctx):
        ctx.set(dut.r.ready, 1)
        while len(got) < len(items):
            _, _, valid, payload = await ctx.tick("pim").sample(dut.r.valid, dut.r.payload)
            if valid:
                got.append({k: int(payload[k]) for k in ("batch_id", "n_accepted", "full")})
        assert got == items

    simulate(dut, [writer, reader], clocks=CLOCKS, name="queues_plain", deadline=DEADLINE)
    assert len(got) == len(items)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"draft_depth": 48}, ValueError, "draft_depth must be a power of two, not 48"),
        ({"feedback_depth": 1}, ValueError, "feedback_depth must be between 2 and 4096, not 1"),
        ({"preverify_depth": 16.0}, TypeError, "preverify_depth must be an integer, not 16.0"),
        ({"epoch_bits": 0}, ValueError, "epoch_bits must be between 1 and 16, not 0"),
        ({"batch_id_bits": True}, TypeError, "batch_id_bits must be an integer, not True"),
    ],
)
def test_parameters_are_validated_with_exact_messages(kwargs, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        QueueParams(**kwargs)


def test_queue_rejects_bad_construction():
    layout = draft_entry_layout(QueueParams())
    with pytest.raises(ValueError, match=r"^depth must be a power of two, not 12$"):
        Queue(layout, 12, w_domain="pim", r_domain="npu")
    with pytest.raises(ValueError, match=r"^w_domain and r_domain must differ, both are 'pim'$"):
        Queue(layout, 8, w_domain="pim", r_domain="pim")
    with pytest.raises(TypeError, match=r"^params must be a QueueParams, not 3$"):
        DraftQueue(3)


def test_default_depths_are_the_specs():
    params = QueueParams()
    assert (params.draft_depth, params.feedback_depth, params.preverify_depth) == (64, 32, 16)


@pytest.mark.parametrize(
    "pulses",
    [(1,), (2,), (1, 2, 1), (1, 6, 1)],
    ids=["one-cycle", "two-cycles", "again-during-handshake", "again-late-in-handshake"],
)
@pytest.mark.parametrize(
    ("writer_period", "reader_period"),
    [
        (1.0e-9, 1.3e-9),
        (1.0e-9, 3.7e-9),
        (1.0e-9, 7.3e-9),
        (3.1e-9, 1.0e-9),
        (1.25e-9, 1.0e-9),
        (7.0e-9, 3.0e-9),
        (3.0e-9, 7.0e-9),
    ],
)
def test_a_short_writer_reset_empties_the_queue_and_loses_no_later_entry(
    writer_period, reader_period, pulses
):
    """A writer reset of one or two write-clock cycles (or a second one, given a few cycles
    after the first, while its handshake runs), with entries in the queue, then writes as
    early as ``w.ready`` allows: the reader gets exactly the entries written after
    the reset, in order. (Amaranth's ``AsyncFIFO`` alone, reset by the writer's reset, fails
    both halves at these ratios: it presents entries never written after a reset shorter than
    two read-clock periods, and loses the first entries written after it.)"""
    layout = feedback_entry_layout(QueueParams())
    dut = Queue(layout, 4, w_domain="w", r_domain="r")
    top = Module()
    top.submodules.dut = dut
    top.domains.w = writer = ClockDomain("w")
    top.domains.r = ClockDomain("r")
    before = [{"batch_id": i, "n_accepted": i, "full": 0} for i in range(1, 4)]
    after = [{"batch_id": 40 + i, "n_accepted": i, "full": 1} for i in range(4)]  # fills it
    got = []

    async def send(ctx, fields):
        ctx.set(dut.w.payload, fields)
        ctx.set(dut.w.valid, 1)
        await ctx.tick("w").until(dut.w.ready)
        ctx.set(dut.w.valid, 0)

    async def testbench(ctx):
        for fields in before:
            await send(ctx, fields)
        await ctx.tick("r").repeat(6)  # all three visible to the reader, none read
        # A pulse covers ``cycles`` write-clock edges (a wait on the writer's clock under
        # its reset would raise DomainReset; this one ends half a period after the last).
        await ctx.tick("w")
        for index, cycles in enumerate(pulses):
            if index % 2:  # the gap before the next pulse
                await ctx.tick("w").repeat(cycles)
                continue
            ctx.set(writer.rst, 1)
            await ctx.delay((cycles + 0.5) * writer_period)
            ctx.set(writer.rst, 0)
        for fields in after:
            await send(ctx, fields)
        await ctx.tick("r").repeat(8)
        ctx.set(dut.r.ready, 1)
        for _ in range(2 * 4 + len(after)):
            _, _, valid, payload = await ctx.tick("r").sample(dut.r.valid, dut.r.payload)
            if valid:
                got.append({name: int(payload[name]) for name, _ in layout})
        ctx.set(dut.r.ready, 0)

    simulate(top, testbench, clocks={"w": writer_period, "r": reader_period}, deadline=DEADLINE)
    assert got == after
