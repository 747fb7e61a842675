"""cocotb testbench of EDC on its generated Verilog, checked against the golden model.

One cycle function drives and samples everything, once per clock: it drives after the
falling edge and samples the same cycle's outputs (see "How it stays fast" for when).
Each event that transfers on ``i`` is handed to the golden model (``ahasd.golden.edc.EDC``)
at once, in stream order.

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

How it stays fast (``docs/performance.md``, "Testbenches"; 55,000 to 66,000 clock edges
per CPU-second where it ran 20,000 to 22,600):

- Ports are read and written as integers through the simulator object behind the handle (a
  :class:`Pin`, or ``get_signal_val_long`` masked for the 32-bit counters), and an input is
  written only when its value changes.
- The cycle is run from bare simulator callbacks (the testbench library's
  :class:`~ahasd.hw.tb.clocking.EdgeLoop`), not from a coroutine awaiting cocotb triggers:
  each ``await`` costs cocotb's scheduler several times what the callback costs.
- The cycle's outputs are sampled at the falling edge, right after driving, unless the cycle
  puts an event of the other kind on ``i``; only then does it wait for the read-only phase.
  Everything sampled is a function of registers (the counters, LLR, the error flag,
  ``Hmax``; ``o.valid`` and ``o.payload`` are the decision FIFO's level and read data) or,
  for ``i.ready``, of registers and ``i.payload.kind`` alone (``hw/edc.py``: not of
  ``i.valid``, ``o.ready`` or the rest of the payload), so without a change of kind the
  outputs of the evaluation after the rising edge are what ``ReadOnly`` would show. An RTL
  bug that breaks this makes the testbench misjudge a transfer, which puts the golden model
  and the RTL out of step (an event executed once by one and not, or twice, by the other):
  the state and decision checks fail on the next event that changes either.
- A decision is compared as payload bits with the golden decision packed once through
  ``decision_layout`` (decoded only for a message); events are packed through
  ``event_layout``'s offsets, looked up once.
- A coverage bin is passed to ``harness.coverage`` only until it has its required count
  (:class:`Tally`: the same pass or fail; every hit is counted here and reported).

The report line gives the clock edges per wall-clock second and per CPU-second of the
simulator process (``time.process_time``), which ``bench/bench_edc.py`` reads.

Environment: ``AHASD_TB_PARAMS`` (EDCParams as JSON), ``AHASD_TB_SEED``, ``AHASD_EVENTS``
(default 100,000), ``AHASD_STALL_EVENTS`` (default 10,000).
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter, deque
from collections.abc import Callable
from math import gcd
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, Timer
from harness.coverage import Coverage
from harness.tb import params_from_env, report, reset, rng_from_env

from ahasd.golden.edc import COUNTER_NAMES
from ahasd.golden.edc import EDC as GoldenEDC
from ahasd.hw.edc import (
    EventKind,
    decision_layout,
    decode_decision,
    encode_draft,
    encode_verify,
    event_layout,
)
from ahasd.hw.tb.clocking import EdgeLoop, wait_until
from ahasd.hw.tb.pins import Pin
from ahasd.params import EDCParams

EVENTS = int(os.environ.get("AHASD_EVENTS", "100000"))
STALL_EVENTS = int(os.environ.get("AHASD_STALL_EVENTS", "10000"))
LATENCY_TARGET = 2
CLOCK_NS = 10
POLL_CYCLES = 1000  # the test body looks whether the cycles are over this often


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
        bins |= {f"{name} saturated": 1 for name in saturating_counters(params)}
    return bins


def saturating_counters(params: EDCParams) -> list[str]:
    """The event counters whose saturation has a bin (when the run is long enough to reach
    it): all but ``suppressions`` in ``current`` mode, which never suppresses."""
    counters = ["drafts", "continues", "verifies", "rollbacks"]
    if params.update == "predicted":
        counters.append("suppressions")
    return counters


def bucket_bins(s: int, length: int, hmax: int) -> list[str]:
    """The threshold bins a batch falls in: ``8*S`` equal to ``k*L*Hmax``, or ``S`` one step
    below or above the smallest sum that reaches bucket ``k``."""
    span = length * hmax
    # Each bin puts k*L*Hmax within 8*S - 16 < k*L*Hmax <= 8*S + 8 (equal: 8*S; one step
    # below: in (8*S, 8*S + 8]; one step above: in (8*S - 16, 8*S - 8]), so only the k in
    # that window can hit: usually none, at most a few (Hmax is large), instead of all seven.
    low, high = (8 * s - 16) // span + 1, (8 * s + 8) // span
    if high < low or high < 1 or low > 7:
        return []
    hits = []
    for k in range(max(1, low), min(7, high) + 1):
        edge = k * span
        first = -(-edge // 8)  # the smallest S with 8*S >= k*L*Hmax
        if 8 * s == edge:
            hits.append(f"8S == k*L*Hmax, k={k}")
        elif s == first - 1:
            hits.append(f"8S < k*L*Hmax, k={k}")
        elif s == first + 1:
            hits.append(f"8S > k*L*Hmax, k={k}")
    return hits


class Layouts:
    """Field offsets of the event and decision layouts (``hw/edc.py``), looked up once:
    packing an event or a decision is then a few shifts (``encode_draft`` and friends look
    the layout up and check every field on each call; ``decode_decision`` builds a dict)."""

    def __init__(self, params: EDCParams):
        event = event_layout(params)
        base = event["payload"].offset
        draft = event["payload"].shape["draft"].shape
        verify = event["payload"].shape["verify"].shape
        kind_at = event["kind"].offset
        self.kind_mask = ((1 << event["kind"].width) - 1) << kind_at
        self.draft_kind = EventKind.DRAFT.value << kind_at
        self.verify_kind = EventKind.VERIFY.value << kind_at
        self.s_at = base + draft["s"].offset
        self.length_at = base + draft["length"].offset
        self.s_acc_at = base + verify["s_acc"].offset
        self.n_acc_at = base + verify["n_acc"].offset
        self.full_at = base + verify["full"].offset
        self.sum_max = (1 << params.sum_bits) - 1
        self.length_max = (1 << params.length_bits) - 1
        decision = decision_layout(params)
        self.keep_at = decision["keep_drafting"].offset
        self.counter_at = decision["counter"].offset
        self.index_at = decision["index"].offset
        self.bucket_at = decision["bucket"].offset
        # The same bits as the block's own functions, or the run stops here.
        for s, length in ((0, 0), (self.sum_max, 1), (1, self.length_max)):
            assert self.draft(s, length) == encode_draft(params, s, length)
            assert self.verify(True, s, length) == encode_verify(params, True, s, length)
            assert self.verify(False, s, length) == encode_verify(params, False, s, length)
        index_max = (1 << params.index_bits) - 1
        fields = {"keep_drafting": 1, "counter": 1, "index": index_max, "bucket": 5}
        assert decode_decision(params, self.decision(*fields.values())) == fields

    def draft(self, s: int, length: int) -> int:
        """The bits of ``DRAFT(s, length)``, as :func:`ahasd.hw.edc.encode_draft`."""
        if not (0 <= s <= self.sum_max and 0 <= length <= self.length_max):
            raise ValueError(f"DRAFT({s}, {length}) does not fit the event layout")
        return self.draft_kind | (s << self.s_at) | (length << self.length_at)

    def verify(self, full: bool, s_acc: int, n_acc: int) -> int:
        """The bits of ``VERIFY(full, s_acc, n_acc)``, as :func:`ahasd.hw.edc.encode_verify`."""
        if not (0 <= s_acc <= self.sum_max and 0 <= n_acc <= self.length_max):
            raise ValueError(f"VERIFY({full}, {s_acc}, {n_acc}) does not fit the event layout")
        return (
            self.verify_kind
            | (s_acc << self.s_acc_at)
            | (n_acc << self.n_acc_at)
            | (int(full) << self.full_at)
        )

    def decision(self, keep_drafting: int, counter: int, index: int, bucket: int) -> int:
        """The payload bits of a decision (fields as :func:`ahasd.hw.edc.decode_decision`'s)."""
        return (
            (keep_drafting << self.keep_at)
            | (counter << self.counter_at)
            | (index << self.index_at)
            | (bucket << self.bucket_at)
        )


class Traffic:
    """Legal-ish random events for the golden model's current state.

    The draws come in a fixed order, so a seed gives the same events on every run (the same
    as before this testbench was made faster: the same counts in its report lines).
    """

    def __init__(self, params: EDCParams, rng, layouts: Layouts):
        self.rng = rng
        self.layouts = layouts
        self.predicted = params.update == "predicted"
        self.llr_max = params.llr_max
        self.msb_shift = params.counter_bits - 1
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
        rng = self.rng
        random, randrange = rng.random, rng.randrange
        self.regime = min(1.2, max(0.0, self.regime + rng.gauss(0.0, 0.02)))
        if self.stretch:
            self.stretch -= 1
        elif self.predicted and random() < STRETCH_RATE:
            self.stretch = STRETCH_EVENTS
            length = randrange(1, self.max_length + 1)
            self.stretch_draft = (self.entropy_sum(length, golden.hmax), length)
        llr = golden.llr
        if llr == 0:
            if random() < 0.02:  # protocol error: nothing outstanding
                n_acc = randrange(self.max_length + 1)
                s_acc = self.entropy_sum(n_acc, golden.hmax)
                full = random() < 0.5
                return "verify", self.layouts.verify(full, s_acc, n_acc), (full, s_acc, n_acc)
            verify = False
        elif llr == self.llr_max:  # golden.full(), without its calls
            if random() < 0.2:
                length = randrange(1, self.max_length + 1)
                s = self.entropy_sum(length, golden.hmax)
                return "probe", self.layouts.draft(s, length), (s, length)
            verify = True
        else:
            verify = random() < 0.45
        if not verify:
            if self.stretch:
                s, length = self.stretch_draft
            elif random() < THRESHOLD_RATE:
                s, length = self.at_threshold(golden.hmax)
            else:
                length = 0 if random() < 0.01 else randrange(1, self.max_length + 1)
                s = self.entropy_sum(length, golden.hmax)
            return "draft", self.layouts.draft(s, length), (s, length)
        length = self.batches[0] if self.batches else 1
        # Low-entropy regimes get their batches accepted more often (logistic).
        accept = 1.0 / (1.0 + math.exp((self.regime - 0.45) / 0.08))
        follow = self.stretch or random() < FOLLOW_RATE
        if self.predicted and golden.inflight and follow:
            full = bool(int(golden.pht[golden.inflight[0]]) >> self.msb_shift)
        else:
            full = random() < accept
        n_acc = length if full else randrange(length)
        if random() < 0.02:
            n_acc = randrange(self.max_length + 1)  # odd but legal: any count
        s_acc = self.entropy_sum(n_acc, golden.hmax)
        return "verify", self.layouts.verify(full, s_acc, n_acc), (full, s_acc, n_acc)

    def accepted(self, kind: str, args: tuple, golden: GoldenEDC) -> None:
        """Keep the batch lengths in step with the golden model's in-flight queue."""
        if kind == "draft" and golden.llr > len(self.batches):
            self.batches.append(args[1])
        elif kind == "verify" and self.batches:
            self.batches.popleft()
        if golden.llr == 0:
            self.batches.clear()


class Tally:
    """Coverage hits counted here and passed on to :class:`Coverage` only until each bin
    has its required count: the same pass or fail (a bin passes at its required count), at a
    dictionary increment per hit instead of a ``cocotb-coverage`` sample (the narrow
    counters' saturation bins are hit in nearly every event). ``coverage.xml`` shows the
    hits up to the required count; :attr:`hits` has them all, for the report."""

    def __init__(self, coverage: Coverage):
        self.coverage = coverage
        self.required = coverage.required
        self.hits: Counter[str] = Counter()

    def sample(self, *names: str) -> None:
        hits, required = self.hits, self.required
        for name in names:
            hits[name] += 1
            if hits[name] <= required[name]:  # an unknown bin raises KeyError, as there
                self.coverage.sample(name)

    def add(self, name: str, count: int) -> None:
        """``count`` hits of ``name`` at once."""
        owed = min(count, self.required[name] - self.hits[name])
        self.hits[name] += count
        for _ in range(owed):
            self.coverage.sample(name)


def counter_reader(handle: Any) -> tuple[Callable[[], int], int]:
    """``(read, mask)`` of an event counter: ``read() & mask`` is its unsigned value.

    Verilator's ``get_signal_val_long`` gives a 32-bit signal (the default counters) as a
    signed C long; the long and a mask give its value with an ``&`` in the state tuple,
    without the Python call of :attr:`Pin.read`'s masking method.
    """
    pin = Pin(handle)
    if pin.width <= 32 and "verilator" in cocotb.SIM_NAME.lower():
        return pin.raw.get_signal_val_long, pin.max
    return pin.read, pin.max


def golden_state(golden: GoldenEDC) -> tuple:
    """``(*counters, LLR, error)`` of the golden model, in ``COUNTER_NAMES`` order (its
    ``counters`` dict is built in that order, checked in :func:`run_random`)."""
    return (*golden.counters.values(), golden.llr, int(golden.error))


async def run_random(dut, events: int, stall: float, label: str) -> None:
    params = params_from_env(EDCParams)
    rng = rng_from_env(f"edc-{label}")
    random, randrange = rng.random, rng.randrange
    golden = GoldenEDC(params)
    assert tuple(golden.counters) == COUNTER_NAMES, "golden_state relies on this order"
    top = (1 << params.counter_bits) - 1
    predicted = params.update == "predicted"
    always_ready = stall == 0.0
    layouts = Layouts(params)
    keep_at, counter_at, index_at, bucket_at = (
        layouts.keep_at,
        layouts.counter_at,
        layouts.index_at,
        layouts.bucket_at,
    )
    traffic = Traffic(params, rng, layouts)
    next_event, accepted_event = traffic.next, traffic.accepted
    coverage = Coverage(f"edc.{label}", coverage_bins(params, events))
    tally = Tally(coverage)
    sample_bins = tally.sample
    stats_max = (1 << params.stats_bits) - 1
    # A counter's saturation bin is hit by every event after which the golden counter is at
    # its maximum. The golden counters saturate and are never reset in a run, so from the
    # first such event on every event hits it: the event is noted, the counter no longer
    # looked at, and the hits counted at the end (five bins per event otherwise).
    unsaturated = [
        (name, f"{name} saturated")
        for name in saturating_counters(params)
        if f"{name} saturated" in coverage.required
    ]
    saturated_from: dict[str, int] = {}  # bin: events accepted before the first hit
    hmax_low = params.hmax // 2
    hmax_multiple_of_8 = params.length_bits < 3
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
    Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
    await reset(dut.clk, dut.rst)

    counter_reads = [counter_reader(getattr(dut, name)) for name in COUNTER_NAMES]
    counter_mask = counter_reads[0][1]  # all five are stats_bits wide
    drafts, continues, suppressions, verifies, rollbacks = (read for read, _ in counter_reads)
    llr, error_flag, i_ready, o_valid, o_payload, hmax_port = (
        Pin(handle).read
        for handle in (dut.llr, dut.error, dut.i__ready, dut.o__valid, dut.o__payload, dut.hmax)
    )

    def observed_state() -> tuple:
        mask = counter_mask
        return (
            drafts() & mask,
            continues() & mask,
            suppressions() & mask,
            verifies() & mask,
            rollbacks() & mask,
            llr(),
            error_flag(),
        )

    write_i_valid, write_i_payload, write_o_ready, write_hmax_valid, write_hmax_payload = (
        Pin(handle).write
        for handle in (
            dut.i__valid,
            dut.i__payload,
            dut.o__ready,
            dut.hmax_w__valid,
            dut.hmax_w__payload,
        )
    )
    # The inputs' levels as last written (all 0 above): a write only when one changes.
    i_valid_level = o_ready_level = hmax_valid_level = payload_level = 0
    kind_mask = layouts.kind_mask
    expected: deque[tuple[int, int]] = deque()  # (acceptance edge, decision bits)
    first_valid: int | None = None  # cycle the head decision was first seen valid
    latencies: Counter[int] = Counter()
    last_o_stall = -1
    current_state = golden_state(golden)  # kept up to date after every golden call
    previous_state = current_state  # golden state before the last accepted event
    presenting = None  # (kind, bits, args, cycles left for a probe)
    o_ready = 0
    hmax_write = None
    hmax_checks = 0
    sent = 0
    refusals = 0
    cycle = 0
    cycle_limit = 6 * events + 1000

    def drive() -> bool:
        """The falling edge: the next event (held until it transfers), o.ready, a rare Hmax
        write. True when the cycle presents an event of the other kind than the payload last
        evaluated: i.ready depends on the kind (the refusal rule), so it is read in
        ``ReadOnly``. Everything else sampled is a function of registers, or of registers and
        the kind (module docstring): the outputs of the evaluation after the rising edge are
        what ``ReadOnly`` would show."""
        nonlocal cycle, presenting, payload_level, i_valid_level, o_ready, o_ready_level
        nonlocal hmax_write, hmax_valid_level
        cycle += 1
        other_kind = False
        if presenting is None and sent < events and random() >= 0.1:
            kind, bits, args = next_event(golden)
            presenting = (kind, bits, args, randrange(1, 4))
            if bits != payload_level:
                other_kind = (bits ^ payload_level) & kind_mask != 0
                write_i_payload(bits)
                payload_level = bits
        i_valid = 0 if presenting is None else 1
        if i_valid != i_valid_level:
            write_i_valid(i_valid)
            i_valid_level = i_valid
        o_ready = 1 if always_ready or random() >= stall else 0
        if o_ready != o_ready_level:
            write_o_ready(o_ready)
            o_ready_level = o_ready
        hmax_write = None
        if random() < 2e-4:
            hmax_write = randrange(hmax_low, 1 << 16)
            if hmax_multiple_of_8:
                # With batches of at most 3 tokens, 8*S == k*L*Hmax needs 8 | k*L*Hmax for
                # every k: keep Hmax a multiple of 8 so the threshold bins stay reachable.
                hmax_write &= ~7
            write_hmax_payload(hmax_write)
        hmax_valid = 0 if hmax_write is None else 1
        if hmax_valid != hmax_valid_level:
            write_hmax_valid(hmax_valid)
            hmax_valid_level = hmax_valid
        return other_kind

    def sample() -> bool:
        """The cycle's checks and the golden model's step; False after the last cycle."""
        nonlocal first_valid, last_o_stall, current_state, previous_state, presenting
        nonlocal hmax_checks, sent, refusals

        # State check: the RTL has executed all accepted events, or all but the last one.
        state = observed_state()
        if state != current_state and state != previous_state:
            fail(f"state {state} is neither {current_state} nor {previous_state}")

        # Decisions: in order, exactly the golden model's, compared as payload bits.
        if o_valid():
            if not expected:
                fail("a decision nobody asked for")
            else:
                if first_valid is None:
                    first_valid = cycle
                    accepted_at = expected[0][0]
                    latency = cycle - accepted_at
                    latencies[latency] += 1
                    if latency > LATENCY_TARGET and last_o_stall < accepted_at:
                        fail(f"decision latency {latency} without a stall on o")
                if o_ready:
                    want = expected.popleft()[1]
                    got = o_payload()
                    if got != want:
                        fail(
                            f"decision {decode_decision(params, got)} != golden "
                            f"{decode_decision(params, want)}"
                        )
                    first_valid = None
                else:
                    last_o_stall = cycle

        # The event on i: refusal rule, and the golden model in stream order.
        if presenting is not None:
            kind, bits, args, left = presenting
            ready = i_ready()
            if kind == "probe":
                refusals += 1
                sample_bins("LLR full, DRAFT refused")
                if ready:
                    fail("a DRAFT was accepted while the golden model is full")
                presenting = None if left == 1 else (kind, bits, args, left - 1)
            elif ready:
                before = current_state
                if kind == "draft":
                    s, length = args
                    if length:
                        hits = bucket_bins(s, length, golden.hmax)
                        if hits:
                            sample_bins(*hits)
                    answer = golden.draft(s, length)
                    if answer is not None:
                        index = golden.inflight[-1]
                        counter = int(golden.pht[index])
                        # The decision's bits (Layouts.decision, without a call per DRAFT).
                        expected.append(
                            (
                                cycle,
                                (answer << keep_at)
                                | (counter << counter_at)
                                | (index << index_at)
                                | (golden.leht[0] << bucket_at),
                            )
                        )
                    elif length != 0:
                        fail("the golden model refused a DRAFT the RTL took")
                else:
                    full, s_acc, n_acc = args
                    if n_acc:
                        hits = bucket_bins(s_acc, n_acc, golden.hmax)
                        if hits:
                            sample_bins(*hits)
                    if predicted and golden.inflight:
                        entry = int(golden.pht[golden.inflight[0]])
                        if full and entry == top:
                            sample_bins("PHT entry at its maximum, trained up")
                        elif not full and entry == 0:
                            sample_bins("PHT entry at 0, trained down")
                    if golden.llr and not full:
                        sample_bins("rollback")
                    golden.verify(full, s_acc, n_acc)
                if unsaturated:
                    counters = golden.counters
                    for name, saturated in list(unsaturated):
                        if counters[name] == stats_max:
                            saturated_from[saturated] = sent
                            unsaturated.remove((name, saturated))
                accepted_event(kind, args, golden)
                previous_state = before
                current_state = golden_state(golden)
                sent += 1
                presenting = None
            elif always_ready and not golden.full():
                fail(f"{kind} refused although the golden model is not full")
        if hmax_checks or hmax_write is not None:
            # Read back around every write (the register shows it from the next cycle).
            hmax_checks = 2 if hmax_write is not None else hmax_checks - 1
            if hmax_port() != golden.hmax:
                fail(f"Hmax {hmax_port()} != golden {golden.hmax}")
        if hmax_write is not None:
            # The write lands at this edge, after the event accepted at this edge has taken
            # its bucket with the old value: the same order as here.
            golden.hmax = hmax_write
        if cycle >= cycle_limit:
            fail("traffic did not finish")
            return False
        return sent < events or presenting is not None or len(expected) > 0

    def drain() -> None:
        write_i_valid(0)
        write_hmax_valid(0)

    last_sampled = False

    def at_falling_edge() -> bool:
        """Drive; sample at once, or in ``ReadOnly`` when ``drive`` asks; after the last
        sampled cycle, the inputs idle and the loop ends."""
        nonlocal last_sampled
        if last_sampled:
            drain()
            loop.stop()
            return False
        if drive():
            return True
        last_sampled = not sample()
        return False

    def in_read_only() -> None:
        nonlocal last_sampled
        last_sampled = not sample()

    loop = EdgeLoop(dut.clk, CLOCK_NS * 1000, at_falling_edge, in_read_only)
    started, cpu_started = time.perf_counter(), time.process_time()
    loop.start()
    try:
        await wait_until(lambda: not loop.running, [loop], Timer(POLL_CYCLES * CLOCK_NS, "ns"))
    finally:
        loop.stop()  # the test ended early: no callback into the next one
    # The drained design (a few cycles on) must show exactly the final golden state.
    for _ in range(3):
        await RisingEdge(dut.clk)
    await ReadOnly()
    if observed_state() != golden_state(golden) or hmax_port() != golden.hmax:
        fail(f"final state {observed_state()} != golden {golden_state(golden)}")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started

    assert not errors, f"{len(errors)}+ mismatch(es), first ones:\n" + "\n".join(errors)
    counters = golden.counters
    # The traffic did what it claims: both answers, rollbacks, refusals and errors happened.
    for name in ("continues", "rollbacks"):
        assert counters[name] > 0, counters
    if predicted:
        assert counters["suppressions"] > 0, counters
    else:
        # Spec 2.1's "current" mode trains only entries with LLR field 0 downwards, and a
        # DRAFT always reads an entry with LLR >= 1: it can never suppress (docs/edc.md).
        assert counters["suppressions"] == 0, counters
    assert refusals > 0
    assert golden.error
    for saturated, first in saturated_from.items():
        tally.add(saturated, sent - first)
    coverage.write()
    report(dut, f"{coverage.summary()}; hits {dict(sorted(tally.hits.items()))}")
    coverage.check()
    worst = max(latencies)
    if always_ready:
        assert set(latencies) == {LATENCY_TARGET}, latencies
    report(
        dut,
        f"{label} {params.tag()}: {sent} events in {cycle} cycles, {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU = {cycle / wall:.0f} clock edges/s, {cycle / cpu:.0f} per "
        f"CPU-second ({sent / wall:.0f} events/s); decision latency "
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
