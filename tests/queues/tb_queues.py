"""cocotb testbench of the three async queues (``AsyncQueues``), on generated Verilog.

Three free-running clocks (``pim``, ``npu``, ``cpu``) with periods from ``AHASD_CLOCKS``
(picoseconds, ``pim:npu:cpu``). Random valid/ready patterns with idle and backpressure
phases drive all three queues at once; the draft queue's reader bumps its epoch at random
(a rejection) and its writer learns the new epoch late, as through the feedback path, so
entries of stale epochs are in flight. The golden scoreboards of ``ahasd.golden.queues``
check that every non-stale entry comes out once, in order and intact, that no stale entry
comes out and that the plain queues drop nothing; monitors check that levels never exceed
the depth and that the writer is only back-pressured when the queue is full.

Functional coverage (``harness/coverage.py``, one group per clock ratio): every queue full
(its writer's level at the depth) and drained empty again (its reader's level back at 0),
each three times, and stale entries squashed; a run that leaves a bin below its required
count fails naming it and the ratio.
"""

from __future__ import annotations

import os
import time
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer
from harness.coverage import Coverage
from harness.tb import StreamSink, StreamSource, params_from_env, report, rng_from_env

from ahasd.golden.queues import DraftQueueScoreboard, FifoScoreboard, pack, unpack
from ahasd.params import QueueParams

ENTRIES = int(os.environ.get("AHASD_ENTRIES", "20000"))


QUEUES = ("draft", "feedback", "preverify")
EPISODES = 3  # times each queue must fill up and drain empty in one run


def coverage_bins() -> dict[str, int]:
    """Every queue full (its writer's level at the depth) and empty again (its reader's
    level back at 0 after holding entries), each ``EPISODES`` times at this run's clock
    ratio; stale entries squashed."""
    bins = {f"{queue} {state}": EPISODES for queue in QUEUES for state in ("full", "empty")}
    bins["draft squash"] = 1
    return bins


class LevelMonitor:
    """Checks one side's fill level every cycle, remembers the highest seen, and counts the
    episodes of a full queue (writer side) or of a drained one (reader side)."""

    def __init__(self, level, ready, clock, depth: int, name: str, errors: list[str], on_edge):
        self.level, self.ready, self.clock = level, ready, clock
        self.depth, self.name, self.errors = depth, name, errors
        self.on_edge = on_edge  # called when the level reaches the depth (writer) or 0
        self.highest = 0
        cocotb.start_soon(self._run())

    async def _run(self) -> None:
        refused = False
        previous = 0
        while True:
            await FallingEdge(self.clock)
            await ReadOnly()
            level = int(self.level.value)
            self.highest = max(self.highest, level)
            edge = self.depth if self.ready is not None else 0
            if level == edge and previous != edge:
                self.on_edge()
            previous = level
            if level > self.depth:
                self.errors.append(f"{self.name}: level {level} exceeds depth {self.depth}")
            # The writer's level is registered: it shows the state that the previous cycle's
            # ready was computed from, so a refusal must be followed by a full level.
            if refused and level < self.depth:
                self.errors.append(f"{self.name}: writer back-pressured at level {level}")
            refused = self.ready is not None and not int(self.ready.value)


class TB:
    def __init__(self, dut, params: QueueParams):
        self.dut = dut
        self.params = params
        self.rng = rng_from_env("queues")
        self.errors: list[str] = []
        self.epoch_mask = (1 << params.epoch_bits) - 1
        # Epochs are kept unbounded here and wrapped to epoch_bits on the wires.
        self.reader_epoch = 0
        self.writer_epoch = 0
        self.in_queue: deque[int] = deque()  # epochs of the entries in the queue, oldest first
        self.squashed = 0
        self.draft_board = DraftQueueScoreboard()
        self.feedback_board = FifoScoreboard("feedback")
        self.preverify_board = FifoScoreboard("preverify")
        self.draft_written = 0
        self.bumps = 0
        self.reader_stall = 0.2
        self.pausing = False  # a drain pause: no writer writes, every reader reads

    async def start(self, periods_ps: tuple[int, int, int]) -> None:
        dut = self.dut
        for name, period in zip(("pim", "npu", "cpu"), periods_ps, strict=True):
            Clock(getattr(dut, f"{name}_clk"), period, unit="ps").start(start_high=False)
        for name in ("pim", "npu", "cpu"):
            getattr(dut, f"{name}_rst").value = 1
        # Every input defined before the first edge (four-state simulators start at X).
        for queue in ("draft", "feedback", "preverify"):
            getattr(dut, f"{queue}_w__valid").value = 0
            getattr(dut, f"{queue}_w__payload").value = 0
            getattr(dut, f"{queue}_r__ready").value = 0
        dut.draft_r_epoch.value = 0
        await Timer(max(periods_ps) * 4, unit="ps")
        for name in ("pim", "npu", "cpu"):
            getattr(dut, f"{name}_rst").value = 0
        await Timer(max(periods_ps) * 4, unit="ps")

    async def draft_writer(self, count: int) -> None:
        """PIM side: drafts carrying the writer's (lagging) epoch, with idle cycles."""
        dut, rng, p = self.dut, self.rng, self.params
        presenting = None
        while self.draft_written < count or presenting is not None:
            await FallingEdge(dut.pim_clk)
            writing = self.draft_written < count and not self.pausing
            if presenting is None and writing and rng.random() >= 0.3:
                # The writer learns of a bump late, through the feedback path.
                if rng.random() < 0.1:
                    self.writer_epoch = self.reader_epoch
                presenting = {
                    "batch_id": rng.randrange(1 << p.batch_id_bits),
                    "epoch": self.writer_epoch & self.epoch_mask,
                    "first_pos": rng.randrange(1 << p.pos_bits),
                    "length": rng.randrange(1 << p.length_bits),
                    "bucket": rng.randrange(8),
                }
                dut.draft_w__payload.value = pack("draft", presenting, p)
            dut.draft_w__valid.value = int(presenting is not None)
            await ReadOnly()
            if presenting is not None and int(dut.draft_w__ready.value):
                # The scoreboard sees unwrapped epochs, so a wrap cannot fool its checks.
                self.draft_board.write({**presenting, "epoch": self.writer_epoch})
                self.in_queue.append(self.writer_epoch)
                self.draft_written += 1
                presenting = None
        await FallingEdge(dut.pim_clk)
        dut.draft_w__valid.value = 0

    async def draft_reader(self) -> None:
        """NPU side: random backpressure in phases, random epoch bumps (rejections)."""
        dut, rng = self.dut, self.rng
        while True:
            await FallingEdge(dut.npu_clk)
            if rng.random() < 0.002:  # a new phase: mostly reading, or mostly stalling
                self.reader_stall = rng.choice([0.0, 0.2, 0.9, 1.0])
            if self.bumps_enabled and rng.random() < 0.01 and self.bump_is_unambiguous():
                self.reader_epoch += 1
                self.bumps += 1
            dut.draft_r_epoch.value = self.reader_epoch & self.epoch_mask
            dut.draft_r__ready.value = int(self.pausing or rng.random() >= self.reader_stall)
            await ReadOnly()
            if int(dut.draft_r__valid.value) and int(dut.draft_r__ready.value):
                entry = unpack("draft", int(dut.draft_r__payload.value), self.params)._asdict()
                real = self.in_queue.popleft()
                if entry["epoch"] != real & self.epoch_mask:
                    self.errors.append(f"read {entry}: expected an entry of epoch {real}")
                self.draft_board.read({**entry, "epoch": real}, self.reader_epoch)
            if int(dut.draft_r_squashed.value):
                self.squashed += 1
                self.in_queue.popleft()

    def bump_is_unambiguous(self) -> bool:
        """Whether one more bump keeps every live epoch distinct from the reader's after
        wrapping (the protocol's bound on how far the writer and the queue may lag)."""
        oldest = self.in_queue[0] if self.in_queue else self.writer_epoch
        return self.reader_epoch + 1 - oldest <= self.epoch_mask

    async def drained(self, limit_cycles: int = 10_000) -> None:
        """Wait until every queue is empty on its reader's side."""
        dut = self.dut
        for _ in range(limit_cycles):
            await FallingEdge(dut.pim_clk)
            await ReadOnly()
            levels = (
                int(dut.draft_r_level.value),
                int(dut.draft_w_level.value),
                int(dut.feedback_r_level.value),
                int(dut.feedback_w_level.value),
                int(dut.preverify_r_level.value),
                int(dut.preverify_w_level.value),
            )
            if not any(levels):
                return
        raise AssertionError(f"queues did not drain within {limit_cycles} cycles: {levels}")


@cocotb.test(timeout_time=50, timeout_unit="ms")
async def random_traffic(dut):
    """Random traffic on all three queues at the clock ratio given by AHASD_CLOCKS."""
    params = params_from_env(QueueParams)
    periods = tuple(int(x) for x in os.environ.get("AHASD_CLOCKS", "1250:1000:1500").split(":"))
    tb = TB(dut, params)
    tb.bumps_enabled = True
    await tb.start(periods)
    rng = tb.rng

    feedback_src = StreamSource(dut, "feedback_w", dut.npu_clk, rng_from_env("fb-w"), idle=0.4)
    feedback_sink = StreamSink(
        dut,
        "feedback_r",
        dut.pim_clk,
        rng_from_env("fb-r"),
        stall=0.5,
        on_item=lambda bits: tb.feedback_board.read(unpack("feedback", bits, params)),
    )
    preverify_src = StreamSource(dut, "preverify_w", dut.cpu_clk, rng_from_env("pv-w"), idle=0.2)
    preverify_sink = StreamSink(
        dut,
        "preverify_r",
        dut.pim_clk,
        rng_from_env("pv-r"),
        stall=0.6,
        on_item=lambda bits: tb.preverify_board.read(unpack("preverify", bits, params)),
    )
    for _ in range(ENTRIES):
        fb = {
            "batch_id": rng.randrange(1 << params.batch_id_bits),
            "n_accepted": rng.randrange(1 << params.length_bits),
            "full": rng.randrange(2),
        }
        pv = {
            "batch_id": rng.randrange(1 << params.batch_id_bits),
            "n_tokens": rng.randrange(1 << params.length_bits),
        }
        tb.feedback_board.write(fb)
        tb.preverify_board.write(pv)
        feedback_src.send(pack("feedback", fb, params))
        preverify_src.send(pack("preverify", pv, params))

    coverage = Coverage(f"queues.{':'.join(map(str, periods))}", coverage_bins())

    def sampler(name: str):
        return lambda: coverage.sample(name)

    monitors = [
        LevelMonitor(
            getattr(dut, f"{queue}_{side}_level"),
            getattr(dut, f"{queue}_w__ready") if side == "w" else None,
            getattr(dut, f"{clock}_clk"),
            getattr(params, f"{queue}_depth"),
            f"{queue} {'writer' if side == 'w' else 'reader'}",
            tb.errors,
            sampler(f"{queue} {'full' if side == 'w' else 'empty'}"),
        )
        for queue, side, clock in [
            ("draft", "w", "pim"),
            ("draft", "r", "npu"),
            ("feedback", "w", "npu"),
            ("feedback", "r", "pim"),
            ("preverify", "w", "cpu"),
            ("preverify", "r", "pim"),
        ]
    ]

    async def stall_phases(sink: StreamSink, clock) -> None:
        """Backpressure in phases (free-flowing, patchy, blocked) so the queue fills up."""
        while not tb.draining:
            if tb.pausing:
                sink.stall = 0.0
                await ClockCycles(clock, 10)
                continue
            sink.stall = rng.choice([0.0, 0.5, 0.95, 1.0])
            await ClockCycles(clock, rng.randrange(50, 1500))

    async def drain_pauses() -> None:
        """Every ENTRIES / (EPISODES + 2) drafts, the writers pause until every queue is
        empty: whatever the clock ratio (a slow reader never catches up on its own), each
        queue drains EPISODES + 1 times before the final drain."""
        every = max(1, ENTRIES // (EPISODES + 2))
        next_pause = every
        while not tb.draining:
            await FallingEdge(dut.pim_clk)
            if tb.draft_written < next_pause:
                continue
            next_pause += every
            tb.pausing = True
            idles = feedback_src.idle, preverify_src.idle
            feedback_src.idle = preverify_src.idle = 1.0
            feedback_sink.stall = preverify_sink.stall = 0.0
            await tb.drained()
            feedback_src.idle, preverify_src.idle = idles
            tb.pausing = False

    tb.draining = False
    cocotb.start_soon(stall_phases(feedback_sink, dut.pim_clk))
    cocotb.start_soon(stall_phases(preverify_sink, dut.pim_clk))
    cocotb.start_soon(drain_pauses())

    started = time.perf_counter()
    start_ns = cocotb.utils.get_sim_time("ns")
    cocotb.start_soon(tb.draft_reader())
    await tb.draft_writer(ENTRIES)
    while not (feedback_src.done and preverify_src.done):
        await RisingEdge(dut.pim_clk)

    # Drain: no more rejections, every reader takes what is there.
    tb.draining = True
    tb.bumps_enabled = False
    tb.reader_stall = 0.0
    feedback_sink.stall = 0.0
    preverify_sink.stall = 0.0
    await tb.drained()
    for _ in range(16):
        await RisingEdge(dut.npu_clk)
    wall = time.perf_counter() - started
    sim_ns = cocotb.utils.get_sim_time("ns") - start_ns

    errors = list(tb.errors)
    errors += tb.draft_board.finish(final_epoch=tb.reader_epoch)  # unwrapped, as written
    errors += tb.feedback_board.finish(drained=True)
    errors += tb.preverify_board.finish(drained=True)
    assert not errors, f"{len(errors)} error(s), first ones:\n" + "\n".join(errors[:10])

    board = tb.draft_board
    assert board.delivered + board.dropped == ENTRIES, (board.delivered, board.dropped)
    assert tb.squashed == board.dropped, (tb.squashed, board.dropped)
    assert tb.feedback_board.delivered == ENTRIES
    assert tb.preverify_board.delivered == ENTRIES
    # The traffic exercised what it claims to: squashes happened, every queue filled up and
    # drained again several times (at this clock ratio), and most drafts got through.
    assert board.delivered > ENTRIES // 4, (board.delivered, board.dropped)
    if board.dropped:
        coverage.sample("draft squash")
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()

    highest = {monitor.name: monitor.highest for monitor in monitors}
    report(dut, f"highest levels seen: {highest}")
    pim_cycles = sim_ns * 1000 / periods[0]
    report(
        dut,
        f"clocks pim:npu:cpu = {':'.join(map(str, periods))} ps; {ENTRIES} entries per queue; "
        f"draft delivered {board.delivered}, squashed {board.dropped}, {tb.bumps} epoch bumps; "
        f"{pim_cycles:.0f} pim cycles in {wall:.1f} s = {pim_cycles / wall:.0f} pim cycles/s",
    )
