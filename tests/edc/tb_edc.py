"""cocotb testbench of EDC on its generated Verilog, checked against the golden model.

One coroutine drives and samples everything, once per clock (drive after the falling edge,
sample in ``ReadOnly``), so the Python work per cycle is small. Each event that transfers on
``i`` is handed to the golden model (``ahasd.golden.edc.EDC``) at once, in stream order.

Traffic: a slowly drifting entropy regime (so buckets and PHT counters visit every value),
batches of 1..max tokens, full acceptance more likely at low entropy, partial acceptance
otherwise, and (``predicted`` mode) a fifth of the verdicts following the trained entry's
prediction, which runs entries into both saturations; DRAFTs while EDC is full are
presented for a few cycles (they must be refused) and then withdrawn; protocol errors
(``VERIFY`` with nothing outstanding, ``DRAFT`` with ``L == 0``) at a low rate; rare
``Hmax`` writes; idle cycles; and DRAFTs aimed at the bucket thresholds of spec 2.1
(``8*S == k*L*Hmax`` exactly, and ``S`` one step below or above), for
every ``k``. Functional coverage (``harness/coverage.py``) counts those, the PHT counters
saturating at both ends, LLR full, rollbacks and (with narrow counters) every event counter
at its saturation value; a run that leaves a bin below its required count fails naming it.

Checks:
- every decision (continue, PHT counter, index, bucket) equals the golden model's, in order;
- ``Hmax`` reads back as the golden model's around every write; every counter, LLR and the
  error flag equal the golden model's state after the
  events executed so far: EDC executes an event in the cycle after it is accepted, so in any
  cycle the RTL shows the golden state after either all accepted events or all but the last;
  after the final drain it must show exactly the final golden state;
- ``i.ready`` is low for a DRAFT exactly when the golden model is full, and (with ``o``
  always ready) high otherwise: one event per cycle, no spurious backpressure;
- decision latency (rising edges from the DRAFT's transfer to the first cycle its decision
  is valid on ``o``) is at most 2; a later decision is allowed only when ``o`` was stalled
  while it waited.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter, deque
from math import gcd

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from harness.coverage import Coverage
from harness.tb import params_from_env, report, reset, rng_from_env

from ahasd.golden.edc import COUNTER_NAMES
from ahasd.golden.edc import EDC as GoldenEDC
from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
from ahasd.hw.tb.pins import Pin, pins
from ahasd.params import EDCParams

EVENTS = int(os.environ.get("AHASD_EVENTS", "100000"))
STALL_EVENTS = int(os.environ.get("AHASD_STALL_EVENTS", "10000"))
LATENCY_TARGET = 2


THRESHOLD_RATE = 0.1  # DRAFTs aimed at a bucket threshold
# VERIFYs whose verdict follows the trained entry's prediction (predicted mode): a
# predictable stretch drives the entries it trains into both saturations, so the PHT bins
# fill in short runs too (seed 890934202's 4,000-event stall run trained no entry up at
# its maximum three times otherwise).
FOLLOW_RATE = 0.2
# Repeating stretches (predicted mode): now and then STRETCH_EVENTS events in which every
# DRAFT is the same (S, L) and every verdict follows the prediction, so the history, and
# with it the PHT index, repeats and one entry is trained into saturation. Following at
# random alone spreads the training over many entries: the reduced set's 4,000-event stall
# run of seed 1246223317 trained an entry up at its maximum once (3 required).
STRETCH_RATE = 0.004
STRETCH_EVENTS = 40
BUCKET_BINS = [f"8S {side} k*L*Hmax, k={k}" for k in range(1, 8) for side in ("<", "==", ">")]


def coverage_bins(params: EDCParams, events: int) -> dict[str, int]:
    """Every bin and its required count: each bucket threshold of spec 2.1 hit exactly, and
    missed by one step of S on either side; the PHT counters saturating at both ends (in
    ``predicted`` mode, where the trained entry is known before the event); LLR full; a
    rollback; and each event counter at its saturation value when the run can reach it."""
    bins = dict.fromkeys(BUCKET_BINS, 2)
    bins |= {"LLR full, DRAFT refused": 3, "rollback": 3}
    if params.update == "predicted":
        bins |= {"PHT entry at its maximum, trained up": 3, "PHT entry at 0, trained down": 3}
    stats_max = (1 << params.stats_bits) - 1
    if stats_max < events // 20:
        counters = ["drafts", "continues", "verifies", "rollbacks"]
        if params.update == "predicted":
            counters.append("suppressions")
        bins |= {f"{name} saturated": 1 for name in counters}
    return bins


def bucket_bins(s: int, length: int, hmax: int) -> list[str]:
    """The threshold bins a batch falls in: ``8*S`` equal to ``k*L*Hmax``, or ``S`` one step
    below or above the smallest sum that reaches bucket ``k``."""
    hits = []
    for k in range(1, 8):
        edge = k * length * hmax
        first = -(-edge // 8)  # the smallest S with 8*S >= k*L*Hmax
        if 8 * s == edge:
            hits.append(f"8S == k*L*Hmax, k={k}")
        elif s == first - 1:
            hits.append(f"8S < k*L*Hmax, k={k}")
        elif s == first + 1:
            hits.append(f"8S > k*L*Hmax, k={k}")
    return hits


class Traffic:
    """Legal-ish random events for the golden model's current state."""

    def __init__(self, params: EDCParams, rng):
        self.p = params
        self.rng = rng
        self.regime = 0.5  # mean token entropy as a fraction of Hmax
        self.batches: deque[int] = deque()  # lengths of the outstanding batches, oldest first
        self.max_length = (1 << params.length_bits) - 1
        self.sum_max = (1 << params.sum_bits) - 1
        self.thresholds = 0  # threshold DRAFTs so far
        self.stretch = 0  # events left in a repeating stretch
        self.stretch_draft = (0, 1)

    def entropy_sum(self, length: int, hmax: int) -> int:
        mean = max(0.0, self.rng.gauss(self.regime, 0.15)) * hmax
        return min(self.sum_max, int(mean * length))

    def at_threshold(self, hmax: int) -> tuple[int, int]:
        """``(S, L)`` on a bucket threshold of spec 2.1 (``8*S == k*L*Hmax``, an ``L`` that
        makes it an integer) or one step of ``S`` below or above it: the 21 cases in turn, so
        that every bin fills at the same pace whatever the seed."""
        rng = self.rng
        k = 1 + self.thresholds % 7
        side = (self.thresholds // 7) % 3 - 1
        self.thresholds += 1
        step = 8 // gcd(k * hmax, 8)  # L must be a multiple of it for 8*S == k*L*Hmax
        if step > self.max_length:  # no such L (narrow lengths): the nearest case instead
            step = 1
        length = step * rng.randrange(1, self.max_length // step + 1)
        edge = k * length * hmax // 8
        return min(self.sum_max, edge + side), length

    def next(self, golden: GoldenEDC) -> tuple[str, int, tuple]:
        """``(kind, bits, golden args)``; kind is "draft", "probe" (DRAFT while full) or
        "verify"."""
        rng, p = self.rng, self.p
        self.regime = min(1.2, max(0.0, self.regime + rng.gauss(0.0, 0.02)))
        if self.stretch:
            self.stretch -= 1
        elif p.update == "predicted" and rng.random() < STRETCH_RATE:
            self.stretch = STRETCH_EVENTS
            length = rng.randrange(1, self.max_length + 1)
            self.stretch_draft = (self.entropy_sum(length, golden.hmax), length)
        if golden.llr == 0:
            if rng.random() < 0.02:  # protocol error: nothing outstanding
                n_acc = rng.randrange(self.max_length + 1)
                s_acc = self.entropy_sum(n_acc, golden.hmax)
                full = rng.random() < 0.5
                return "verify", encode_verify(p, full, s_acc, n_acc), (full, s_acc, n_acc)
            verify = False
        elif golden.full():
            if rng.random() < 0.2:
                length = rng.randrange(1, self.max_length + 1)
                s = self.entropy_sum(length, golden.hmax)
                return "probe", encode_draft(p, s, length), (s, length)
            verify = True
        else:
            verify = rng.random() < 0.45
        if not verify:
            if self.stretch:
                s, length = self.stretch_draft
            elif rng.random() < THRESHOLD_RATE:
                s, length = self.at_threshold(golden.hmax)
            else:
                length = 0 if rng.random() < 0.01 else rng.randrange(1, self.max_length + 1)
                s = self.entropy_sum(length, golden.hmax)
            return "draft", encode_draft(p, s, length), (s, length)
        length = self.batches[0] if self.batches else 1
        # Low-entropy regimes get their batches accepted more often (logistic).
        accept = 1.0 / (1.0 + math.exp((self.regime - 0.45) / 0.08))
        follow = self.stretch or rng.random() < FOLLOW_RATE
        if p.update == "predicted" and golden.inflight and follow:
            full = bool(golden.pht[golden.inflight[0]] >> (p.counter_bits - 1))
        else:
            full = rng.random() < accept
        n_acc = length if full else rng.randrange(length)
        if rng.random() < 0.02:
            n_acc = rng.randrange(self.max_length + 1)  # odd but legal: any count
        s_acc = self.entropy_sum(n_acc, golden.hmax)
        return "verify", encode_verify(p, full, s_acc, n_acc), (full, s_acc, n_acc)

    def accepted(self, kind: str, args: tuple, golden: GoldenEDC) -> None:
        """Keep the batch lengths in step with the golden model's in-flight queue."""
        if kind == "draft" and golden.llr > len(self.batches):
            self.batches.append(args[1])
        elif kind == "verify" and self.batches:
            self.batches.popleft()
        if golden.llr == 0:
            self.batches.clear()


def state_reader(dut):
    """A function reading (counters, LLR, error) from the ports, read as integers through
    Pins (every cycle: through ``handle.value`` this was a third of the testbench's time)."""
    counters = [pin.read for pin in pins(dut, *COUNTER_NAMES)]
    llr, error = Pin(dut.llr).read, Pin(dut.error).read

    def observed_state() -> tuple:
        return (tuple(read() for read in counters), llr(), error())

    return observed_state


def golden_state(golden: GoldenEDC) -> tuple:
    return (
        tuple(golden.counters[name] for name in COUNTER_NAMES),
        golden.llr,
        int(golden.error),
    )


async def run_random(dut, events: int, stall: float, label: str) -> None:
    params = params_from_env(EDCParams)
    rng = rng_from_env(f"edc-{label}")
    golden = GoldenEDC(params)
    top = (1 << params.counter_bits) - 1
    traffic = Traffic(params, rng)
    coverage = Coverage(f"edc.{label}", coverage_bins(params, events))
    stats_max = (1 << params.stats_bits) - 1
    errors: list[str] = []

    def fail(message: str) -> None:
        if len(errors) < 20:
            errors.append(f"cycle {cycle}: {message}")

    dut.i__valid.value = 0
    dut.o__ready.value = 0
    dut.hmax_w__valid.value = 0
    # Payloads defined too: four-state simulators start every input at X.
    dut.i__payload.value = 0
    dut.hmax_w__payload.value = 0
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    await reset(dut.clk, dut.rst)

    observed_state = state_reader(dut)
    i_valid, i_ready, i_payload = dut.i__valid, dut.i__ready, dut.i__payload
    o_valid, o_ready_port, o_payload = dut.o__valid, dut.o__ready, dut.o__payload
    expected: deque[tuple[int, dict]] = deque()  # (acceptance edge, decision fields)
    first_valid: int | None = None  # cycle the head decision was first seen valid
    latencies: Counter[int] = Counter()
    last_o_stall = -1
    current_state = golden_state(golden)  # kept up to date after every golden call
    previous_state = current_state  # golden state before the last accepted event
    presenting = None  # (kind, bits, args, cycles left for a probe)
    hmax_checks = 0
    sent = 0
    refusals = 0
    cycle = 0
    started = time.perf_counter()
    while sent < events or presenting is not None or expected:
        await FallingEdge(dut.clk)
        cycle += 1
        if cycle > 6 * events + 1000:
            fail("traffic did not finish")
            break
        # Drive: the next event (held until it transfers), o.ready, a rare Hmax write.
        if presenting is None and sent < events and rng.random() >= 0.1:
            kind, bits, args = traffic.next(golden)
            presenting = (kind, bits, args, rng.randrange(1, 4))
            i_payload.value = bits
        i_valid.value = int(presenting is not None)
        o_ready = int(stall == 0.0 or rng.random() >= stall)
        o_ready_port.value = o_ready
        hmax_write = None
        if rng.random() < 2e-4:
            hmax_write = rng.randrange(params.hmax // 2, 1 << 16)
            if params.length_bits < 3:
                # With batches of at most 3 tokens, 8*S == k*L*Hmax needs 8 | k*L*Hmax for
                # every k: keep Hmax a multiple of 8 so the threshold bins stay reachable.
                hmax_write &= ~7
        dut.hmax_w__valid.value = int(hmax_write is not None)
        if hmax_write is not None:
            dut.hmax_w__payload.value = hmax_write
        await ReadOnly()

        # State check: the RTL has executed all accepted events, or all but the last one.
        state = observed_state()
        if state != current_state and state != previous_state:
            fail(f"state {state} is neither {current_state} nor {previous_state}")

        # Decisions: in order, exactly the golden model's.
        if int(o_valid.value):
            if not expected:
                fail("a decision nobody asked for")
            else:
                if first_valid is None:
                    first_valid = cycle
                    accepted_at, _ = expected[0]
                    latency = cycle - accepted_at
                    latencies[latency] += 1
                    if latency > LATENCY_TARGET and last_o_stall < accepted_at:
                        fail(f"decision latency {latency} without a stall on o")
                if o_ready:
                    _, want = expected.popleft()
                    got = decode_decision(params, int(o_payload.value))
                    if got != want:
                        fail(f"decision {got} != golden {want}")
                    first_valid = None
                else:
                    last_o_stall = cycle

        # The event on i: refusal rule, and the golden model in stream order.
        if presenting is not None:
            kind, bits, args, left = presenting
            ready = int(i_ready.value)
            if kind == "probe":
                refusals += 1
                coverage.sample("LLR full, DRAFT refused")
                if ready:
                    fail("a DRAFT was accepted while the golden model is full")
                presenting = None if left == 1 else (kind, bits, args, left - 1)
            elif ready:
                before = current_state
                if kind == "draft":
                    if args[1]:
                        coverage.sample(*bucket_bins(*args, golden.hmax))
                    answer = golden.draft(*args)
                    if answer is not None:
                        index = golden.inflight[-1]
                        want = {
                            "keep_drafting": int(answer),
                            "counter": int(golden.pht[index]),
                            "index": index,
                            "bucket": golden.leht[0],
                        }
                        expected.append((cycle, want))
                    elif args[1] != 0:
                        fail("the golden model refused a DRAFT the RTL took")
                else:
                    full, s_acc, n_acc = args
                    if n_acc:
                        coverage.sample(*bucket_bins(s_acc, n_acc, golden.hmax))
                    if params.update == "predicted" and golden.inflight:
                        entry = int(golden.pht[golden.inflight[0]])
                        coverage.sample_if(
                            [
                                ("PHT entry at its maximum, trained up", full and entry == top),
                                ("PHT entry at 0, trained down", not full and entry == 0),
                            ]
                        )
                    if golden.llr and not full:
                        coverage.sample("rollback")
                    golden.verify(*args)
                for name, value in golden.counters.items():
                    if value == stats_max and f"{name} saturated" in coverage.required:
                        coverage.sample(f"{name} saturated")
                traffic.accepted(kind, args, golden)
                previous_state = before
                current_state = golden_state(golden)
                sent += 1
                presenting = None
            elif stall == 0.0 and not golden.full():
                fail(f"{kind} refused although the golden model is not full")
        if hmax_checks or hmax_write is not None:
            # Read back around every write (the register shows it from the next cycle).
            hmax_checks = 2 if hmax_write is not None else hmax_checks - 1
            if int(dut.hmax.value) != golden.hmax:
                fail(f"Hmax {int(dut.hmax.value)} != golden {golden.hmax}")
        if hmax_write is not None:
            # The write lands at this edge, after the event accepted at this edge has taken
            # its bucket with the old value: the same order as here.
            golden.hmax = hmax_write
    # Drain, then the RTL must show exactly the final golden state.
    await FallingEdge(dut.clk)
    dut.i__valid.value = 0
    dut.hmax_w__valid.value = 0
    for _ in range(3):
        await RisingEdge(dut.clk)
    await ReadOnly()
    if observed_state() != golden_state(golden) or int(dut.hmax.value) != golden.hmax:
        fail(f"final state {observed_state()} != golden {golden_state(golden)}")
    wall = time.perf_counter() - started

    assert not errors, f"{len(errors)}+ mismatch(es), first ones:\n" + "\n".join(errors)
    counters = golden.counters
    # The traffic did what it claims: both answers, rollbacks, refusals and errors happened.
    for name in ("continues", "rollbacks"):
        assert counters[name] > 0, counters
    if params.update == "predicted":
        assert counters["suppressions"] > 0, counters
    else:
        # Spec 2.1's "current" mode trains only entries with LLR field 0 downwards, and a
        # DRAFT always reads an entry with LLR >= 1: it can never suppress (docs/edc.md).
        assert counters["suppressions"] == 0, counters
    assert refusals > 0
    assert golden.error
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()
    worst = max(latencies)
    if stall == 0.0:
        assert set(latencies) == {LATENCY_TARGET}, latencies
    report(
        dut,
        f"{label} {params.tag()}: {sent} events in {cycle} cycles, {wall:.1f} s = "
        f"{sent / wall:.0f} events/s ({cycle / wall:.0f} cycles/s); decision latency "
        f"{dict(sorted(latencies.items()))} (worst {worst}); counters {counters}; "
        f"{refusals} refused DRAFT cycles",
    )


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_events(dut):
    """Random events, o always ready: exact latency, one event per cycle."""
    await run_random(dut, EVENTS, 0.0, "o-ready")


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_events_with_stalls(dut):
    """Random events with o stalled 40% of the cycles: back-pressure without loss."""
    await run_random(dut, STALL_EVENTS, 0.4, "o-stalls")
