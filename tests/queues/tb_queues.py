"""cocotb testbench of the three async queues (``AsyncQueues``), on generated Verilog.

Three free-running clocks (``pim``, ``npu``, ``cpu``) with periods from ``AHASD_CLOCKS``
(picoseconds, ``pim:npu:cpu``). Random valid/ready patterns with idle and backpressure
phases drive all three queues at once; the draft queue's reader bumps its epoch at random
after reading a draft of its current epoch (a rejection), now and then in bursts on
consecutive read cycles, and its writer learns the new epoch late, as through the feedback
path, so entries of several stale epochs are in flight. The
golden scoreboards of ``ahasd.golden.queues`` check that every non-stale entry comes out
once, in order and intact, that no stale entry comes out and that the plain queues drop
nothing; monitors check that levels never exceed the depth and that the writer is only
back-pressured when the queue is full.

Functional coverage (``harness/coverage.py``, one group per clock ratio): every queue full
(its writer's level at the depth) and drained empty again (its reader's level back at 0),
each three times, and stale entries squashed; a run that leaves a bin below its required
count fails naming it and the ratio. Each time the queue furthest ahead has carried another
``ENTRIES / 5`` entries, the writers pause until every queue is empty (a slow reader never
catches up on its own).

Every driver and monitor of a clock domain is an agent of that domain's
:class:`~ahasd.hw.tb.clocking.DomainLoop` (one coroutine per clock: drive after the falling
edge, sample in ``ReadOnly``), and ports are read and written through
:class:`~ahasd.hw.tb.pins.Pin` s, written only when their value changes
(``docs/performance.md``).

A second test, ``writer_resets``, is directed: each queue full, its writer reset for one
writer cycle (or twice, the second during the first's handshake); the head must be
withdrawn at the reset's assertion, and the reader must get exactly the entries written
after the reset, as early as ``w.ready`` let them in. It drives and samples at falling
edges only, with plain cocotb triggers.
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

from ahasd.golden.queues import (
    DraftQueueScoreboard,
    FifoScoreboard,
    field_widths,
    make_entry,
    pack,
    unpack,
)
from ahasd.hw.queues import QUEUE_DOMAINS
from ahasd.hw.tb.clocking import DomainLoop
from ahasd.hw.tb.pins import Pin, pins
from ahasd.params import QueueParams

ENTRIES = int(os.environ.get("AHASD_ENTRIES", "20000"))
DOMAINS = ("pim", "npu", "cpu")
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

    def __init__(
        self, level: Pin, ready: Pin | None, depth: int, name: str, errors: list[str], on_edge
    ):
        self.level, self.ready = level, ready
        self.depth, self.name, self.errors = depth, name, errors
        self.on_edge = on_edge  # called when the level reaches the depth (writer) or 0
        self.edge = depth if ready is not None else 0
        self.previous = 0
        self.highest = 0
        self.refused = False

    def drive(self) -> None:
        pass

    def sample(self) -> None:
        level = self.level.read()
        if level > self.highest:
            self.highest = level
        if level == self.edge and self.previous != self.edge:
            self.on_edge()
        self.previous = level
        if level > self.depth:
            self.errors.append(f"{self.name}: level {level} exceeds depth {self.depth}")
        # The writer's level is registered: it shows the state that the previous cycle's
        # ready was computed from, so a refusal must be followed by a full level.
        if self.refused and level < self.depth:
            self.errors.append(f"{self.name}: writer back-pressured at level {level}")
        self.refused = self.ready is not None and not self.ready.read()


class StallPhases:
    """Backpressure in phases (free-flowing, patchy, blocked) so the queue fills up: every
    50 to 1,500 cycles of its clock, a new stall probability for ``sink``."""

    def __init__(self, tb: TB, sink: StreamSink) -> None:
        self.tb, self.sink = tb, sink
        self.left = 0

    def drive(self) -> None:
        if self.tb.pausing:
            self.sink.stall = 0.0
        elif self.left == 0 and not self.tb.draining:
            rng = self.tb.rng
            self.sink.stall = rng.choice([0.0, 0.5, 0.95, 1.0])
            self.left = rng.randrange(50, 1500)
        self.left = max(0, self.left - 1)

    def sample(self) -> None:
        pass


class DraftWriter:
    """PIM side: drafts carrying the writer's (lagging) epoch, with idle cycles."""

    def __init__(self, tb: TB, count: int) -> None:
        self.tb, self.count = tb, count
        self.valid, self.ready, self.payload = pins(
            tb.dut, "draft_w__valid", "draft_w__ready", "draft_w__payload"
        )
        self.presenting: dict | None = None
        self.valid_level = 0

    @property
    def done(self) -> bool:
        return self.tb.draft_written >= self.count and self.presenting is None

    def drive(self) -> None:
        tb, rng, p = self.tb, self.tb.rng, self.tb.params
        writing = tb.draft_written < self.count and not tb.pausing
        if self.presenting is None and writing and rng.random() >= 0.3:
            # The writer learns of a bump late, through the feedback path.
            if rng.random() < 0.1:
                tb.writer_epoch = tb.reader_epoch
            self.presenting = {
                "batch_id": rng.randrange(1 << p.batch_id_bits),
                "epoch": tb.writer_epoch & tb.epoch_mask,
                "first_pos": rng.randrange(1 << p.pos_bits),
                "length": rng.randrange(1 << p.length_bits),
                "bucket": rng.randrange(8),
            }
            self.payload.write(pack("draft", self.presenting, p))
        level = int(self.presenting is not None)
        if level != self.valid_level:
            self.valid.write(level)
            self.valid_level = level

    def sample(self) -> None:
        if self.presenting is not None and self.ready.read():
            tb = self.tb
            # The scoreboard sees unwrapped epochs, so a wrap cannot fool its checks.
            tb.draft_board.write({**self.presenting, "epoch": tb.writer_epoch})
            tb.in_queue.append(tb.writer_epoch)
            tb.draft_written += 1
            self.presenting = None


class DraftReader:
    """NPU side: random backpressure in phases, random epoch bumps (rejections)."""

    def __init__(self, tb: TB) -> None:
        self.tb = tb
        self.rng = rng_from_env("queues-draft-reader")
        self.valid, self.ready, self.payload, self.epoch, self.squashed = pins(
            tb.dut,
            "draft_r__valid",
            "draft_r__ready",
            "draft_r__payload",
            "draft_r_epoch",
            "draft_r_squashed",
        )
        self.ready_level = 0
        self.epoch_level = 0
        self.verified = False
        self.bump_per_verified_draft = min(0.05, 1 / (2 * tb.params.draft_depth))
        # Bursts: the epoch bumped on consecutive read cycles while entries of several epochs
        # are in the queue (beyond what one rejection per read does), so an entry two or
        # more epochs old meets the stale test; one burst per about 8 * depth verified
        # drafts, each of 2 to 4 bumps (as many as keep every live epoch distinct).
        self.burst_per_verified_draft = 1 / (8 * tb.params.draft_depth)
        self.burst_left = 0
        self.ready.write(0)

    def drive(self) -> None:
        tb, rng = self.tb, self.rng
        if rng.random() < 0.002:  # a new phase: mostly reading, or mostly stalling
            tb.reader_stall = rng.choice([0.0, 0.2, 0.9, 1.0])
        # A rejection is the verdict on a draft just read: the reader bumps its epoch only
        # in the cycle after taking an entry of the current epoch. A bump squashes up to a
        # full queue when the writer is the faster side, so at most one bump per
        # 2 * depth verified drafts keeps most drafts delivered at every clock ratio (a
        # bump on a timer squashed 78 % of a run at 7:3, seed 722242568).
        verified, self.verified = self.verified, False
        if tb.bumps_enabled and verified and rng.random() < self.burst_per_verified_draft:
            self.burst_left = rng.randint(2, 4)
        if self.burst_left and tb.bumps_enabled and tb.bump_is_unambiguous():
            self.burst_left -= 1
            tb.reader_epoch += 1
            tb.bumps += 1
            tb.burst_bumps += 1
        elif (
            tb.bumps_enabled
            and verified
            and rng.random() < self.bump_per_verified_draft
            and tb.bump_is_unambiguous()
        ):
            tb.reader_epoch += 1
            tb.bumps += 1
        else:
            self.burst_left = 0
        epoch = tb.reader_epoch & tb.epoch_mask
        if epoch != self.epoch_level:
            self.epoch.write(epoch)
            self.epoch_level = epoch
        ready = int(tb.pausing or rng.random() >= tb.reader_stall)
        if ready != self.ready_level:
            self.ready.write(ready)
            self.ready_level = ready

    def sample(self) -> None:
        tb = self.tb
        if self.ready_level and self.valid.read():
            entry = unpack("draft", self.payload.read(), tb.params)._asdict()
            real = tb.in_queue.popleft()
            if entry["epoch"] != real & tb.epoch_mask:
                tb.errors.append(f"read {entry}: expected an entry of epoch {real}")
            tb.draft_board.read({**entry, "epoch": real}, tb.reader_epoch)
            self.verified = real == tb.reader_epoch
        if self.squashed.read():
            tb.squashed += 1
            tb.in_queue.popleft()


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
        self.burst_bumps = 0  # bumps of a burst (consecutive read cycles)
        self.reader_stall = 0.2
        self.pausing = False  # a drain pause: no writer writes, every reader reads
        self.bumps_enabled = True
        self.draining = False
        self.loops = {name: DomainLoop(getattr(dut, f"{name}_clk")) for name in DOMAINS}

    async def start(self, periods_ps: tuple[int, int, int]) -> None:
        dut = self.dut
        for name, period in zip(DOMAINS, periods_ps, strict=True):
            Clock(getattr(dut, f"{name}_clk"), period, unit="ps").start(start_high=False)
        for name in DOMAINS:
            getattr(dut, f"{name}_rst").value = 1
        # Every input defined before the first edge (four-state simulators start at X).
        for queue in ("draft", "feedback", "preverify"):
            getattr(dut, f"{queue}_w__valid").value = 0
            getattr(dut, f"{queue}_w__payload").value = 0
            getattr(dut, f"{queue}_r__ready").value = 0
        dut.draft_r_epoch.value = 0
        await Timer(max(periods_ps) * 4, unit="ps")
        for name in DOMAINS:
            getattr(dut, f"{name}_rst").value = 0
        # The writers wait out their queues' reset handshake (w.ready low until the reader
        # has seen the reset and its release: about four edges of each clock), the one time
        # a writer may see ready low below the depth.
        await Timer(max(periods_ps) * 12, unit="ps")

    def bump_is_unambiguous(self) -> bool:
        """Whether one more bump keeps every live epoch distinct from the reader's after
        wrapping (the protocol's bound on how far the writer and the queue may lag)."""
        oldest = self.in_queue[0] if self.in_queue else self.writer_epoch
        return self.reader_epoch + 1 - oldest <= self.epoch_mask

    async def drained(self, limit_cycles: int = 10_000) -> None:
        """Wait until every queue is empty on its reader's side."""
        dut = self.dut
        levels = pins(
            dut,
            "draft_r_level",
            "draft_w_level",
            "feedback_r_level",
            "feedback_w_level",
            "preverify_r_level",
            "preverify_w_level",
        )
        for _ in range(limit_cycles):
            await FallingEdge(dut.pim_clk)
            await ReadOnly()
            seen = [level.read() for level in levels]
            if not any(seen):
                return
        raise AssertionError(f"queues did not drain within {limit_cycles} cycles: {seen}")


# 20,000 entries take 0.35 ms of simulated time at the slowest ratio: the limit is about a
# hundred times that, in proportion (a hung mutant of the campaign's 1,500 fails in 5 ms).
@cocotb.test(timeout_time=max(5, ENTRIES // 400), timeout_unit="ms")
async def random_traffic(dut):
    """Random traffic on all three queues at the clock ratio given by AHASD_CLOCKS."""
    params = params_from_env(QueueParams)
    periods = tuple(int(x) for x in os.environ.get("AHASD_CLOCKS", "1250:1000:1500").split(":"))
    tb = TB(dut, params)
    await tb.start(periods)
    rng = tb.rng
    pim, npu, cpu = (tb.loops[name] for name in DOMAINS)

    writer = pim.add(DraftWriter(tb, ENTRIES))
    feedback_sink = StreamSink(
        dut,
        "feedback_r",
        dut.pim_clk,
        rng_from_env("fb-r"),
        stall=0.5,
        on_item=lambda bits: tb.feedback_board.read(unpack("feedback", bits, params)),
        loop=pim,
    )
    preverify_sink = StreamSink(
        dut,
        "preverify_r",
        dut.pim_clk,
        rng_from_env("pv-r"),
        stall=0.6,
        on_item=lambda bits: tb.preverify_board.read(unpack("preverify", bits, params)),
        loop=pim,
    )
    npu.add(DraftReader(tb))
    feedback_src = StreamSource(
        dut, "feedback_w", dut.npu_clk, rng_from_env("fb-w"), idle=0.4, loop=npu
    )
    preverify_src = StreamSource(
        dut, "preverify_w", dut.cpu_clk, rng_from_env("pv-w"), idle=0.2, loop=cpu
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

    monitors = []
    for queue, side, domain in [
        ("draft", "w", "pim"),
        ("draft", "r", "npu"),
        ("feedback", "w", "npu"),
        ("feedback", "r", "pim"),
        ("preverify", "w", "cpu"),
        ("preverify", "r", "pim"),
    ]:
        monitor = LevelMonitor(
            Pin(getattr(dut, f"{queue}_{side}_level")),
            Pin(getattr(dut, f"{queue}_w__ready")) if side == "w" else None,
            getattr(params, f"{queue}_depth"),
            f"{queue} {'writer' if side == 'w' else 'reader'}",
            tb.errors,
            sampler(f"{queue} {'full' if side == 'w' else 'empty'}"),
        )
        monitors.append(tb.loops[domain].add(monitor))
    pim.add(StallPhases(tb, feedback_sink))
    pim.add(StallPhases(tb, preverify_sink))

    def progress() -> int:
        # The queue furthest ahead: the others still have entries to carry at its pauses.
        return max(tb.draft_written, len(feedback_src.sent), len(preverify_src.sent))

    async def drain_pauses() -> None:
        """Each time the queue furthest ahead has carried another ENTRIES / (EPISODES + 2)
        entries, the writers pause until every queue is empty: whatever the clock ratio,
        each queue drains EPISODES + 1 times before the final drain. (Counting drafts
        alone let the preverify queue finish before the third pause at 7:3, seed
        816212892.)"""
        every = max(1, ENTRIES // (EPISODES + 2))
        next_pause = every
        while not tb.draining:
            await Timer(64 * periods[0], unit="ps")
            if progress() < next_pause:
                continue
            next_pause += every
            tb.pausing = True
            idles = feedback_src.idle, preverify_src.idle
            feedback_src.idle = preverify_src.idle = 1.0
            feedback_sink.stall = preverify_sink.stall = 0.0
            await tb.drained()
            feedback_src.idle, preverify_src.idle = idles
            tb.pausing = False

    cocotb.start_soon(drain_pauses())
    started = time.perf_counter()
    cpu_started = time.process_time()
    start_ps = cocotb.utils.get_sim_time("ps")
    for loop in (pim, npu, cpu):
        loop.start()
    # Nothing to do per cycle here: look every 64 PIM cycles whether the traffic is done.
    while not (writer.done and feedback_src.done and preverify_src.done):
        await Timer(64 * periods[0], unit="ps")
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

    errors = list(tb.errors)
    errors += tb.draft_board.finish(final_epoch=tb.reader_epoch)  # unwrapped, as written
    errors += tb.feedback_board.finish(drained=True)
    errors += tb.preverify_board.finish(drained=True)
    wall = time.perf_counter() - started
    cpu_s = time.process_time() - cpu_started
    sim_ps = cocotb.utils.get_sim_time("ps") - start_ps
    assert not errors, f"{len(errors)} error(s), first ones:\n" + "\n".join(errors[:10])

    board = tb.draft_board
    assert board.delivered + board.dropped == ENTRIES, (board.delivered, board.dropped)
    assert tb.squashed == board.dropped, (tb.squashed, board.dropped)
    assert tb.feedback_board.delivered == ENTRIES
    assert tb.preverify_board.delivered == ENTRIES
    # The traffic exercised what it claims to: squashes happened, every queue filled up and
    # drained again several times (at this clock ratio), and most drafts got through.
    assert board.delivered > ENTRIES // 4, (board.delivered, board.dropped, tb.bumps)
    assert tb.burst_bumps > 0, "no epoch bumps on consecutive read cycles"
    if board.dropped:
        coverage.sample("draft squash")
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()
    highest = {monitor.name: monitor.highest for monitor in monitors}
    report(dut, f"highest levels seen: {highest}")

    pim_cycles = sim_ps / periods[0]
    edges = sum(sim_ps / period for period in periods)  # rising edges of the three clocks
    report(
        dut,
        f"clocks pim:npu:cpu = {':'.join(map(str, periods))} ps; {ENTRIES} entries per queue; "
        f"draft delivered {board.delivered}, squashed {board.dropped}, {tb.bumps} epoch bumps "
        f"({tb.burst_bumps} in bursts); "
        f"{pim_cycles:.0f} pim cycles in {wall:.1f} s = {pim_cycles / wall:.0f} pim cycles/s; "
        f"{edges / wall:.0f} clock edges/s, {edges / cpu_s:.0f} per CPU-second",
    )


async def _send(dut, queue: str, clock, words: list[int]) -> None:
    """Write ``words`` into ``queue``, each as soon as ``w.ready`` allows. Everything happens
    at the writer clock's falling edges (mid-cycle): ``ready`` seen there holds through the
    next rising edge, which takes the word presented."""
    valid, payload = getattr(dut, f"{queue}_w__valid"), getattr(dut, f"{queue}_w__payload")
    ready = getattr(dut, f"{queue}_w__ready")
    await FallingEdge(clock)
    for word in words:
        payload.value, valid.value = word, 1
        while not ready.value:
            await FallingEdge(clock)
        await FallingEdge(clock)
    valid.value = 0


async def _receive(dut, queue: str, clock, cycles: int) -> list[int]:
    """Everything ``queue`` presents in ``cycles`` reader cycles, reading all the while (at
    the reader clock's falling edges: an entry presented there is taken at the next rising
    edge)."""
    ready = getattr(dut, f"{queue}_r__ready")
    valid, payload = getattr(dut, f"{queue}_r__valid"), getattr(dut, f"{queue}_r__payload")
    got = []
    await FallingEdge(clock)
    ready.value = 1
    for _ in range(cycles):
        if valid.value:
            got.append(int(payload.value))
        await FallingEdge(clock)
    ready.value = 0
    return got


@cocotb.test(timeout_time=2, timeout_unit="ms")  # it needs 10 us at the slowest ratio
async def writer_resets(dut):
    """Each queue full, its writer reset for one writer cycle (or twice, the second a few
    cycles into the first's handshake), then written as early as ``w.ready`` allows: the
    reader gets exactly the entries written after the last reset, in order: none from
    before, none lost (docs/integration.md, the queues' reset)."""
    params = params_from_env(QueueParams)
    periods = tuple(int(x) for x in os.environ.get("AHASD_CLOCKS", "1250:1000:1500").split(":"))
    tb = TB(dut, params)
    await tb.start(periods)
    rng = tb.rng
    pulses = 0
    for queue, (w_domain, r_domain) in QUEUE_DOMAINS.items():
        depth = getattr(params, f"{queue}_depth")
        w_clock, r_clock = getattr(dut, f"{w_domain}_clk"), getattr(dut, f"{r_domain}_clk")
        reset = getattr(dut, f"{w_domain}_rst")
        r_valid = getattr(dut, f"{queue}_r__valid")
        for second in (None, *(rng.randint(1, 6) for _ in range(3))):
            words = [_random_entry(queue, params, rng) for _ in range(depth + min(depth, 3))]
            before, after = words[:depth], words[depth:]
            await _send(dut, queue, w_clock, before)
            await Timer(6 * max(periods), unit="ps")  # all of them visible to the reader
            for pulse in (0, second):
                if pulse is None:
                    continue
                await ClockCycles(w_clock, pulse + 1, rising=False)
                reset.value = 1
                if pulse == 0:
                    # The reader sees the queue empty from the reset's assertion, before
                    # any clock edge (docs/integration.md): the full queue's head withdrawn.
                    await ReadOnly()
                    assert not r_valid.value, f"{queue}: the head still presented under reset"
                await FallingEdge(w_clock)  # one rising edge under reset
                reset.value = 0
            await _send(dut, queue, w_clock, after)
            await Timer(10 * max(periods), unit="ps")
            got = await _receive(dut, queue, r_clock, 2 * depth + 4)
            assert got == after, (
                f"{queue}: after a writer reset (second pulse {second} cycles on) the reader "
                f"got {[unpack(queue, w, params) for w in got]}, expected "
                f"{[unpack(queue, w, params) for w in after]}"
            )
            pulses += 1 + (second is not None)
    dut._log.info(f"writer resets: {pulses} pulses on the three queues, every entry as expected")


def _random_entry(queue: str, params: QueueParams, rng) -> int:
    """A random entry of ``queue``, packed; a draft of epoch 0 (the reader's, never bumped
    here)."""
    fields = {
        name: rng.randrange(1 << width) for name, width in field_widths(queue, params).items()
    }
    if queue == "draft":
        fields["epoch"] = 0
    return pack(queue, make_entry(queue, **fields), params)
