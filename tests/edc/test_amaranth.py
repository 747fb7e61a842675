"""EDC, Amaranth-simulator tier: directed cases, expected values worked out by hand from spec 2.1.

Hand rules used below (default parameters unless a test says otherwise): ``Hmax = 40960``
(10.0 nats in UQ4.12), so ``k*L*Hmax/8 = 5120*k*L`` and a batch of length ``L`` with entropy
sum ``S`` lands in bucket ``min(7, S // (5120*L))``. With eight history entries the PHT index
is ``(avg(LEHT[4..7]) << 6) | (avg(LEHT[0..3]) << 3) | LLR``, each average a sum of four
buckets shifted right by two.
"""

from __future__ import annotations

import pytest
from harness.amaranth_sim import simulate

from ahasd.hw.edc import EDC, encode_draft, encode_verify
from ahasd.params import EDCParams

PERIOD = 1e-8  # the harness's default clock
STEP = 5120  # one bucket's worth of entropy sum per token at the default Hmax


def draft(params: EDCParams, bucket: int, length: int = 1) -> int:
    """A DRAFT whose batch lands exactly on the lower edge of ``bucket`` (default Hmax)."""
    return encode_draft(params, bucket * STEP * length, length)


def verify(params: EDCParams, full: bool, bucket: int = 0, n_acc: int = 0) -> int:
    return encode_verify(params, full, bucket * STEP * n_acc, n_acc)


class Port:
    """Drives EDC's event stream one event at a time and takes its decisions."""

    def __init__(self, dut: EDC):
        self.dut = dut

    async def send(self, ctx, bits: int, *, patience: int = 32) -> bool:
        """Present one event; True once it transfers, False if refused ``patience`` cycles."""
        dut = self.dut
        ctx.set(dut.i.payload.as_value(), bits)
        ctx.set(dut.i.valid, 1)
        for _ in range(patience):
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready:
                ctx.set(dut.i.valid, 0)
                return True
        ctx.set(dut.i.valid, 0)
        return False

    async def event(self, ctx, bits: int) -> dict | None:
        """Send one event and let it execute; its decision (a field dict) or None."""
        assert await self.send(ctx, bits), "event refused"
        await ctx.tick()  # stage 2 executes at this edge; a decision is now on o
        if not ctx.get(self.dut.o.valid):
            return None
        decision = ctx.get(self.dut.o.payload)
        ctx.set(self.dut.o.ready, 1)
        await ctx.tick()
        ctx.set(self.dut.o.ready, 0)
        return {
            "keep_drafting": int(decision.keep_drafting),
            "counter": int(decision.counter),
            "index": int(decision.index),
            "bucket": int(decision.bucket),
        }

    def state(self, ctx) -> dict:
        dut = self.dut
        return {
            "leht": [ctx.get(x) for x in dut.leht],
            "lceht": [ctx.get(x) for x in dut.lceht],
            "llr": ctx.get(dut.llr),
            "inflight": [
                ctx.get(index)
                for index, valid in zip(dut.inflight, dut.inflight_valid, strict=True)
                if ctx.get(valid)
            ],
            "error": ctx.get(dut.error),
        }

    def counters(self, ctx) -> dict:
        names = ("drafts", "continues", "suppressions", "verifies", "rollbacks")
        return {name: ctx.get(getattr(self.dut, name)) for name in names}


def run(dut: EDC, body, name: str, *, cycles: int = 400) -> None:
    """Simulate ``body(ctx, port)`` for at most ``cycles`` clock cycles; it must finish."""
    port = Port(dut)
    finished = []

    async def testbench(ctx):
        await body(ctx, port)
        finished.append(True)

    # The harness runs until the deadline even when the testbench is done: keep it tight.
    simulate(dut, testbench, name=name, deadline=cycles * PERIOD)
    assert finished, f"testbench did not finish within {cycles} cycles"


def test_rejects_wrong_params_type():
    with pytest.raises(TypeError, match=r"^params must be an EDCParams, not 'x'$"):
        EDC("x")


def test_reset_state():
    params = EDCParams()
    dut = EDC(params)

    async def body(ctx, port):
        await ctx.tick()
        assert all(ctx.get(entry) == 2 for entry in dut.pht)  # 2**(2-1): weakly continue
        assert port.state(ctx) == {
            "leht": [0] * 8,
            "lceht": [0] * 8,
            "llr": 0,
            "inflight": [],
            "error": 0,
        }
        assert port.counters(ctx) == dict.fromkeys(port.counters(ctx), 0)
        assert ctx.get(dut.hmax) == 40960
        assert ctx.get(dut.i.ready) == 1
        assert ctx.get(dut.o.valid) == 0

    run(dut, body, "edc_reset")


@pytest.mark.parametrize("length", [1, 2, 31])
def test_bucket_boundaries_at_k_hmax_over_8(length):
    """Exactly at ``S = k*L*Hmax/8`` the bucket is ``k``; one below it is ``k - 1``."""
    params = EDCParams()
    dut = EDC(params)
    sums = []  # (S, expected bucket)
    for k in range(1, 8):
        edge = k * STEP * length
        sums += [(edge - 1, k - 1), (edge, k)]
    sums += [(0, 0), (8 * STEP * length, 7), (8 * STEP * length - 1, 7), ((1 << 21) - 1, 7)]

    async def body(ctx, port):
        for s, expected in sums:
            decision = await port.event(ctx, encode_draft(params, s, length))
            assert decision["bucket"] == expected, (s, length)
            assert port.state(ctx)["leht"][0] == expected
            assert await port.event(ctx, verify(params, True)) is None  # keep LLR low

    run(dut, body, f"edc_bucket_L{length}")


def test_bucket_with_programmed_hmax_that_does_not_divide():
    """Hmax = 3, L = 7: bucket = min(7, 8*S // 21), checked by hand at both sides of k*21/8."""
    params = EDCParams()
    dut = EDC(params)
    # 8*S >= 21*k first holds at S = ceil(21*k/8): 3, 6, 8, 11, 14, 16, 19 for k = 1..7.
    cases = [(2, 0), (3, 1), (5, 1), (6, 2), (7, 2), (8, 3), (10, 3), (11, 4), (13, 4)]
    cases += [(14, 5), (15, 5), (16, 6), (18, 6), (19, 7), (1000, 7)]

    async def body(ctx, port):
        ctx.set(dut.hmax_w.payload, 3)
        ctx.set(dut.hmax_w.valid, 1)
        await ctx.tick()
        ctx.set(dut.hmax_w.valid, 0)
        assert ctx.get(dut.hmax) == 3
        for s, expected in cases:
            decision = await port.event(ctx, encode_draft(params, s, 7))
            assert decision["bucket"] == expected, s
            await port.event(ctx, verify(params, True))
        assert ctx.get(dut.error) == 0

    run(dut, body, "edc_bucket_hmax3")


def test_zero_hmax_write_is_flagged_and_ignored():
    params = EDCParams()
    dut = EDC(params)

    async def body(ctx, port):
        ctx.set(dut.hmax_w.payload, 0)
        ctx.set(dut.hmax_w.valid, 1)
        await ctx.tick()
        ctx.set(dut.hmax_w.valid, 0)
        assert ctx.get(dut.hmax) == 40960
        assert ctx.get(dut.error) == 1

    run(dut, body, "edc_hmax0")


@pytest.mark.parametrize("counter_bits", [1, 2, 3])
def test_pht_counter_saturates_at_both_ends(counter_bits):
    """All-zero entropy keeps LEHT at zero, so every DRAFT uses index LLR = 1 (predicted)."""
    params = EDCParams(counter_bits=counter_bits)
    dut = EDC(params)
    top = (1 << counter_bits) - 1
    start = 1 << (counter_bits - 1)
    ups = top - start + 2  # one more than needed to reach the top
    downs = top + 2  # one more than needed to reach zero from the top

    async def body(ctx, port):
        expected = start
        continues = 0
        for full in [True] * ups + [False] * downs:
            decision = await port.event(ctx, draft(params, 0))
            assert decision["index"] == 1
            assert decision["counter"] == expected
            assert decision["keep_drafting"] == (expected >= start)  # the MSB
            continues += expected >= start
            await port.event(ctx, verify(params, full))
            expected = min(top, expected + 1) if full else max(0, expected - 1)
            assert ctx.get(dut.pht[1]) == expected
        assert expected == 0
        assert all(ctx.get(entry) == start for k, entry in enumerate(dut.pht) if k != 1)
        assert port.counters(ctx) == {
            "drafts": ups + downs,
            "continues": continues,
            "suppressions": ups + downs - continues,
            "verifies": ups + downs,
            "rollbacks": downs,
        }

    run(dut, body, f"edc_saturate_w{counter_bits}")


def test_event_counters_saturate():
    """stats_bits = 2: every counter stops at 3 and never wraps to 0."""
    params = EDCParams(stats_bits=2)
    dut = EDC(params)

    async def body(ctx, port):
        for _ in range(5):
            await port.event(ctx, draft(params, 0))
            await port.event(ctx, verify(params, False))  # rejection: rollback and 2 -> 1 -> 0
        # PHT[1] went 2 -> 1 -> 0 -> 0 ...: decisions were continue once, then suppress.
        assert port.counters(ctx) == {
            "drafts": 3,
            "continues": 1,
            "suppressions": 3,
            "verifies": 3,
            "rollbacks": 3,
        }

    run(dut, body, "edc_stats_saturate")


def test_llr_full_refuses_drafts_but_takes_verifies():
    params = EDCParams()  # llr_bits = 3: at most 7 batches outstanding
    dut = EDC(params)

    async def body(ctx, port):
        for n in range(1, 8):
            decision = await port.event(ctx, draft(params, 0))
            assert decision["index"] == n  # LEHT all zero: the index is LLR
        assert ctx.get(dut.llr) == 7
        # The eighth DRAFT is held at the port: not accepted, nothing counted or emitted.
        assert not await port.send(ctx, draft(params, 0), patience=20)
        assert ctx.get(dut.llr) == 7
        assert ctx.get(dut.o.valid) == 0
        assert port.counters(ctx)["drafts"] == 7
        assert ctx.get(dut.error) == 0
        # A VERIFY is still accepted while LLR is full; then the DRAFT goes in.
        assert await port.event(ctx, verify(params, True)) is None
        assert ctx.get(dut.llr) == 6
        decision = await port.event(ctx, draft(params, 0))
        assert decision["index"] == 7
        assert port.counters(ctx)["drafts"] == 8

    run(dut, body, "edc_llr_full")


def test_back_to_back_events_one_per_cycle_and_refusal_in_the_pipeline():
    """With o always ready, events go in one per cycle and decisions come 2 cycles later; an
    eighth DRAFT is refused in the very cycle the seventh executes; a VERIFY at full LLR frees
    a slot for a DRAFT presented in the next cycle."""
    params = EDCParams(llr_bits=3)
    dut = EDC(params)
    accepted = []  # cycle numbers of transfers on i
    decided = []  # (cycle, index) of transfers on o
    stream = [draft(params, 0)] * 8 + [verify(params, True), draft(params, 0)]
    # The refused DRAFT is dropped from the script; the two events after it go in.

    async def body(ctx, port):
        ctx.set(dut.o.ready, 1)
        pending = list(stream)
        refused_at = None
        for cycle in range(40):
            # After the refusal, withdraw the DRAFT for five cycles, then go on.
            presenting = bool(pending) and (refused_at is None or cycle > refused_at + 5)
            ctx.set(dut.i.valid, int(presenting))
            if presenting:
                ctx.set(dut.i.payload.as_value(), pending[0])
            _, _, i_ready, o_valid, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.payload
            )
            if presenting and i_ready:
                accepted.append(cycle)
                pending.pop(0)
            elif presenting and refused_at is None:
                refused_at = cycle
                # The 8th DRAFT leaves the head: the VERIFY is next.
                pending.pop(0)
            if o_valid:
                decided.append((cycle, int(o_payload.index)))
        # First seven DRAFTs on cycles 0..6; the eighth is refused at cycle 7.
        assert accepted[:7] == list(range(7))
        assert refused_at == 7
        assert [index for _, index in decided] == [1, 2, 3, 4, 5, 6, 7, 7]
        assert len(accepted) == 9
        # Latency: a DRAFT accepted at edge n has its decision transfer at edge n + 2.
        assert [c for c, _ in decided[:7]] == [n + 2 for n in range(7)]
        # The VERIFY and the DRAFT after it go in on consecutive cycles.
        assert accepted[8] == accepted[7] + 1
        assert decided[7][0] == accepted[8] + 2

    run(dut, body, "edc_back_to_back")


def test_stalled_decisions_backpressure_without_loss():
    """o not ready: two decisions wait in the buffer, a third DRAFT waits in stage 1, and
    i.ready then drops; nothing is lost or reordered when o drains."""
    params = EDCParams()
    dut = EDC(params)

    async def body(ctx, port):
        ctx.set(dut.o.ready, 0)
        for _ in range(3):
            assert await port.send(ctx, draft(params, 0), patience=3)
        assert not await port.send(ctx, draft(params, 0), patience=10)
        assert ctx.get(dut.llr) == 2  # the third DRAFT waits unexecuted
        indices = []
        ctx.set(dut.o.ready, 1)
        for _ in range(6):
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                indices.append(int(payload.index))
        assert indices == [1, 2, 3]
        assert ctx.get(dut.llr) == 3
        assert port.counters(ctx)["drafts"] == 3

    run(dut, body, "edc_stall")


def test_rollback_restores_leht_from_lceht_and_empties_the_inflight_queue():
    params = EDCParams()  # predicted
    dut = EDC(params)

    async def body(ctx, port):
        # Commit one batch of bucket 3: LCEHT = [3, 0...].
        first = await port.event(ctx, draft(params, 3))
        assert first["index"] == (0 << 6) | (0 << 3) | 1  # lo = 3 >> 2 = 0
        await port.event(ctx, verify(params, True, bucket=3, n_acc=4))
        assert port.state(ctx)["lceht"] == [3, 0, 0, 0, 0, 0, 0, 0]
        assert port.state(ctx)["leht"] == [3, 0, 0, 0, 0, 0, 0, 0]
        # Three look-ahead batches of buckets 5, 6, 7.
        a = await port.event(ctx, draft(params, 5))  # LEHT [5,3,0..]: lo = 8>>2 = 2
        b = await port.event(ctx, draft(params, 6))  # LEHT [6,5,3,0..]: lo = 14>>2 = 3
        c = await port.event(ctx, draft(params, 7))  # LEHT [7,6,5,3,..]: lo = 21>>2 = 5
        assert [a["index"], b["index"], c["index"]] == [(2 << 3) | 1, (3 << 3) | 2, (5 << 3) | 3]
        assert port.state(ctx)["inflight"] == [a["index"], b["index"], c["index"]]
        pht_before = [ctx.get(entry) for entry in dut.pht]
        # Batch a is rejected after 2 tokens of bucket 4.
        await port.event(ctx, verify(params, False, bucket=4, n_acc=2))
        state = port.state(ctx)
        assert state["lceht"] == [4, 3, 0, 0, 0, 0, 0, 0]
        assert state["leht"] == state["lceht"]
        assert state["llr"] == 0
        assert state["inflight"] == []
        # Only the entry that predicted batch a was trained (2 -> 1).
        pht_after = [ctx.get(entry) for entry in dut.pht]
        changed = {k: v for k, v in enumerate(pht_after) if v != pht_before[k]}
        assert changed == {a["index"]: 1}
        assert port.counters(ctx)["rollbacks"] == 1
        # b and c are gone: a further VERIFY has nothing outstanding.
        await port.event(ctx, verify(params, True))
        assert ctx.get(dut.error) == 1
        assert [ctx.get(entry) for entry in dut.pht] == pht_after
        # Drafting resumes from the restored history: LEHT [0,4,3,0..], lo = 7>>2 = 1.
        d = await port.event(ctx, draft(params, 0))
        assert d["index"] == (1 << 3) | 1

    run(dut, body, "edc_rollback")


def test_protocol_errors_are_flagged_sticky_and_change_nothing():
    params = EDCParams()
    dut = EDC(params)

    async def body(ctx, port):
        assert await port.event(ctx, verify(params, False, bucket=2, n_acc=3)) is None
        assert ctx.get(dut.error) == 1
        assert port.state(ctx) == {
            "leht": [0] * 8,
            "lceht": [0] * 8,
            "llr": 0,
            "inflight": [],
            "error": 1,
        }
        assert all(ctx.get(entry) == 2 for entry in dut.pht)
        assert port.counters(ctx) == dict.fromkeys(port.counters(ctx), 0)
        # DRAFT with L = 0: consumed, flagged, no decision, nothing changes.
        assert await port.event(ctx, encode_draft(params, 12345, 0)) is None
        assert port.state(ctx)["llr"] == 0
        assert port.counters(ctx)["drafts"] == 0
        # Normal operation continues; the flag stays up.
        decision = await port.event(ctx, draft(params, 6))
        assert decision["index"] == (1 << 3) | 1  # lo = 6 >> 2 = 1
        await port.event(ctx, verify(params, True, bucket=6, n_acc=1))
        assert ctx.get(dut.error) == 1
        assert port.counters(ctx)["verifies"] == 1

    run(dut, body, "edc_errors")


@pytest.mark.parametrize("update", ["predicted", "current"])
def test_update_modes(update):
    """The same events in both modes; the trained entries and histories worked out by hand.

    DRAFT b4 -> LEHT [4,0..], lo 1, LLR 1: index 9.  DRAFT b4 -> LEHT [4,4,0..], lo 2, LLR 2:
    index 18.  VERIFY(full, n_acc 3 of bucket 4):
      predicted: train PHT[9] 2->3; LCEHT [4,0..]; LLR 1.
      current:   LCEHT := LEHT [4,4,0..]; LLR 1; train index(LEHT, 1) = 17: 2->3.
    VERIFY(not full, n_acc 0):
      predicted: train PHT[18] 2->1; LEHT := LCEHT [4,0..]; LLR 0.
      current:   LCEHT unchanged; LEHT := [4,4,0..]; LLR 0; train index(LEHT, 0) = 16: 2->1.
    DRAFT b0 -> predicted: LEHT [0,4,0..], lo 1: index 9 (counter 3).
                current:   LEHT [0,4,4,0..], lo 2: index 17 (counter 3).
    """
    params = EDCParams(update=update)
    dut = EDC(params)
    expected = {
        "predicted": {
            "trained": {9: 3, 18: 1},
            "lceht": [4, 0, 0, 0, 0, 0, 0, 0],
            "last": {"index": 9, "counter": 3},
        },
        "current": {
            "trained": {17: 3, 16: 1},
            "lceht": [4, 4, 0, 0, 0, 0, 0, 0],
            "last": {"index": 17, "counter": 3},
        },
    }[update]

    async def body(ctx, port):
        assert (await port.event(ctx, draft(params, 4)))["index"] == 9
        assert (await port.event(ctx, draft(params, 4)))["index"] == 18
        await port.event(ctx, verify(params, True, bucket=4, n_acc=3))
        assert ctx.get(dut.llr) == 1
        await port.event(ctx, verify(params, False))
        state = port.state(ctx)
        assert state["lceht"] == expected["lceht"]
        assert state["leht"] == expected["lceht"]
        assert state["llr"] == 0
        assert state["inflight"] == []
        changed = {k: ctx.get(e) for k, e in enumerate(dut.pht) if ctx.get(e) != 2}
        assert changed == expected["trained"]
        last = await port.event(ctx, draft(params, 0))
        assert {"index": last["index"], "counter": last["counter"]} == expected["last"]
        assert last["keep_drafting"] == 1
        assert port.counters(ctx)["rollbacks"] == 1

    run(dut, body, f"edc_update_{update}")


@pytest.mark.parametrize(
    ("history_len", "buckets", "expected_index"),
    [
        # N = 2: hi = LEHT[1], lo = LEHT[0]; after pushing 5 then 3: LEHT [3,5], LLR 2.
        (2, [5, 3], (5 << 6) | (3 << 3) | 2),
        # N = 4: hi = (LEHT[2]+LEHT[3])>>1, lo = (LEHT[0]+LEHT[1])>>1; pushes 7,6,1,2:
        # LEHT [2,1,6,7]: hi = 13>>1 = 6, lo = 3>>1 = 1, LLR 3 (llr_bits 2).
        (4, [7, 6, 1, 2], None),
    ],
)
def test_index_with_other_history_lengths(history_len, buckets, expected_index):
    params = EDCParams(history_len=history_len, llr_bits=2 if history_len == 4 else 3)
    dut = EDC(params)
    if expected_index is None:
        # 4 pushes exceed llr_max = 3 with llr_bits = 2, so verify one in between.
        expected_index = (6 << 5) | (1 << 2) | 3

    async def body(ctx, port):
        decision = None
        for n, bucket in enumerate(buckets):
            if history_len == 4 and n == 3:
                await port.event(ctx, verify(params, True))  # LLR 3 -> 2, LEHT unchanged
            decision = await port.event(ctx, draft(params, bucket))
        assert decision["index"] == expected_index

    run(dut, body, f"edc_history{history_len}")
