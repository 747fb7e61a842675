"""Directed tests of the EDC golden model (spec 2.1, docs/spec-decisions.md "EDC").

Every expected value is worked out by hand from the spec in the comments next to it.
With the default Hmax = 40960 (10.0 nats in UQ4.12), one bucket is Hmax/8 = 5120 per token,
so ``bucket(5120*k*L, L) == k``.
"""

from __future__ import annotations

import random
import re

import pytest
from harness.seeds import choose_seed

from ahasd.golden.edc import EDC, bucket
from ahasd.params import EDCParams

UNIT = 5120  # Hmax / 8 with the default Hmax: the width of one bucket, per token


# -- bucket -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(8))
def test_bucket_boundary_at_one_token(k):
    # L = 1: bucket k starts exactly at S = k*Hmax/8 = 5120k.
    assert bucket(UNIT * k, 1, 40960) == k
    if k:
        assert bucket(UNIT * k - 1, 1, 40960) == k - 1


@pytest.mark.parametrize("k", range(1, 8))
def test_bucket_boundary_at_longest_batch(k):
    # L = 31 (length_bits = 5): the boundary is S = 31*5120*k = 158720k.
    assert bucket(158720 * k, 31, 40960) == k
    assert bucket(158720 * k - 1, 31, 40960) == k - 1


def test_bucket_saturates_at_seven():
    # Mean entropy at Hmax (8*S == 8*L*Hmax) and far above it stay in bucket 7; the widest S
    # (21 bits) over L = 1: 8*2097151 // 40960 = 409 -> 7.
    assert bucket(40960, 1, 40960) == 7
    assert bucket(2**21 - 1, 1, 40960) == 7
    assert bucket(2**21 - 1, 31, 40960) == 7  # 16777208 // 1269760 = 13 -> 7


def test_bucket_with_hmax_not_a_multiple_of_eight():
    # Hmax = 1001, L = 3: 8*S // 3003; bucket 2 starts at S = ceil(2*3003/8) = 751.
    assert bucket(750, 3, 1001) == 1  # 6000 // 3003 = 1
    assert bucket(751, 3, 1001) == 2  # 6008 // 3003 = 2


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((1, 0, 40960), ValueError, "length must be at least 1, not 0"),
        ((1, 1, 0), ValueError, "hmax must be at least 1, not 0"),
        ((-1, 1, 40960), ValueError, "s must be at least 0, not -1"),
        ((1.5, 1, 40960), TypeError, "s must be an integer, not 1.5"),
    ],
)
def test_bucket_rejects(args, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        bucket(*args)


# -- draft / index / refusal ------------------------------------------------------------------


def test_reset_state():
    edc = EDC()
    assert edc.leht == [0] * 8
    assert edc.lceht == [0] * 8
    assert edc.llr == 0
    assert edc.hmax == 40960
    assert edc.pht.shape == (512,)
    assert set(edc.pht.tolist()) == {2}  # 2**(2-1): weakly "continue"
    assert list(edc.inflight) == []
    assert edc.counters == dict.fromkeys(
        ("drafts", "continues", "suppressions", "verifies", "rollbacks"), 0
    )
    assert not edc.error
    assert not edc.full()


def test_draft_pushes_bucket_and_forms_index():
    edc = EDC()
    # Bucket 3; LEHT = [3,0,...]; lo = 3>>2 = 0, hi = 0, LLR = 1 -> index 1.
    assert edc.draft(3 * UNIT, 1) is True
    assert edc.leht == [3, 0, 0, 0, 0, 0, 0, 0]
    assert (edc.llr, edc.index(), list(edc.inflight)) == (1, 1, [1])
    # Bucket 7 (S = 7*5120*2, L = 2); LEHT = [7,3,...]; lo = 10>>2 = 2, LLR 2 -> 2<<3|2 = 18.
    assert edc.draft(7 * UNIT * 2, 2) is True
    assert list(edc.inflight) == [1, 18]
    # Bucket 5 (L = 4); LEHT = [5,7,3,0,...]; lo = 15>>2 = 3, LLR 3 -> 3<<3|3 = 27.
    assert edc.draft(5 * UNIT * 4, 4) is True
    assert list(edc.inflight) == [1, 18, 27]
    assert edc.counters["drafts"] == 3
    assert edc.counters["continues"] == 3


def test_index_uses_older_half_in_high_bits():
    edc = EDC()
    # Commit four bucket-6 batches, roll back to load them into LEHT, then draft four
    # bucket-0 batches: LEHT = [0,0,0,0,6,6,6,6] -> hi = 24>>2 = 6, lo = 0, LLR = 4.
    for _ in range(4):
        edc.draft(6 * UNIT, 1)
        edc.verify(True, 6 * UNIT, 1)
    edc.draft(0, 1)
    edc.verify(False, 0, 0)  # rollback: LEHT := LCEHT = [6,6,6,6,0,0,0,0]
    assert edc.leht == [6, 6, 6, 6, 0, 0, 0, 0]
    for _ in range(4):
        edc.draft(0, 1)
    assert edc.leht == [0, 0, 0, 0, 6, 6, 6, 6]
    assert edc.index() == (6 << 6) | (0 << 3) | 4  # 388


def test_full_refuses_draft_and_changes_nothing():
    edc = EDC()
    for n in range(7):  # llr_bits = 3: at most 7 outstanding
        assert edc.draft(n * UNIT, 1) is not None
    assert edc.full()
    before = edc.state()
    pht_before = edc.pht.copy()
    assert edc.draft(UNIT, 1) is None
    assert edc.draft(0, 0) is None  # refused before it is examined: not a protocol error
    assert edc.state() == before
    assert (edc.pht == pht_before).all()
    assert not edc.error
    # One VERIFY frees a slot: the next DRAFT is accepted.
    edc.verify(True, 0, 1)
    assert not edc.full()
    assert edc.draft(UNIT, 1) is not None


def test_draft_of_length_zero_is_a_protocol_error():
    edc = EDC()
    edc.draft(UNIT, 1)
    before = edc.state()
    assert edc.draft(UNIT, 0) is None
    assert edc.error
    after = edc.state()
    after["error"] = False
    assert after == before  # nothing else changed, nothing counted
    edc.draft(UNIT, 1)
    assert edc.error  # sticky


# -- verify, both update modes ----------------------------------------------------------------


def draft_three(edc: EDC) -> None:
    # The three batches of test_draft_pushes_bucket_and_forms_index: indices 1, 18, 27.
    edc.draft(3 * UNIT, 1)
    edc.draft(7 * UNIT * 2, 2)
    edc.draft(5 * UNIT * 4, 4)


def test_verify_predicted_mode():
    edc = EDC()
    draft_three(edc)
    # Full accept of batch 1 (bucket 3 accepted): train index 1 up, LCEHT gets 3.
    edc.verify(True, 3 * UNIT, 1)
    assert edc.pht[1] == 3
    assert (edc.llr, list(edc.inflight)) == (2, [18, 27])
    assert edc.lceht == [3, 0, 0, 0, 0, 0, 0, 0]
    assert edc.leht == [5, 7, 3, 0, 0, 0, 0, 0]  # speculative history untouched
    # Partial accept of batch 2: 2 tokens, S = 61440 -> 8*61440 // 81920 = 6.
    # Train index 18 down; LCEHT = [6,3,...]; rollback: LEHT := LCEHT, LLR 0, queue empty.
    edc.verify(False, 61440, 2)
    assert edc.pht[18] == 1
    assert edc.pht[27] == 2  # the voided batch's entry is not trained
    assert edc.lceht == [6, 3, 0, 0, 0, 0, 0, 0]
    assert edc.leht == edc.lceht
    assert (edc.llr, list(edc.inflight)) == (0, [])
    assert edc.counters["verifies"] == 2
    assert edc.counters["rollbacks"] == 1
    # Next DRAFT builds on the committed history: LEHT = [0,6,3,0,...], lo = 9>>2 = 2,
    # LLR 1 -> index 2<<3|1 = 17.
    assert edc.draft(0, 1) is True
    assert list(edc.inflight) == [17]
    assert (edc.pht == 2).sum() == 512 - 2  # only entries 1 and 18 moved


def test_verify_current_mode():
    edc = EDC(EDCParams(update="current"))
    draft_three(edc)
    # Full accept: LCEHT := LEHT = [5,7,3,0,...]; train index(LEHT, LLR=2) = 3<<3|2 = 26.
    edc.verify(True, 3 * UNIT, 1)
    assert edc.lceht == [5, 7, 3, 0, 0, 0, 0, 0]
    assert edc.pht[26] == 3
    assert edc.pht[1] == 2  # the predicting entry is not the one trained
    assert (edc.llr, list(edc.inflight)) == (2, [18, 27])
    # Rejection with 2 accepted tokens (bucket 6): LCEHT = [6,5,7,3,0,...], LEHT := LCEHT,
    # LLR 0; train index(LEHT, 0): lo = 21>>2 = 5 -> 5<<3 = 40.
    edc.verify(False, 61440, 2)
    assert edc.lceht == [6, 5, 7, 3, 0, 0, 0, 0]
    assert edc.leht == edc.lceht
    assert edc.pht[40] == 1
    assert (edc.llr, list(edc.inflight)) == (0, [])
    assert edc.counters["rollbacks"] == 1
    assert (edc.pht == 2).sum() == 512 - 2


def test_rollback_without_accepted_tokens_keeps_lceht():
    edc = EDC()
    edc.draft(7 * UNIT, 1)
    edc.verify(True, 7 * UNIT, 1)  # LCEHT = [7,0,...]
    edc.draft(UNIT, 1)
    edc.draft(2 * UNIT, 1)
    edc.verify(False, 0, 0)  # n_acc = 0: nothing pushed; LEHT := LCEHT
    assert edc.lceht == [7, 0, 0, 0, 0, 0, 0, 0]
    assert edc.leht == [7, 0, 0, 0, 0, 0, 0, 0]
    assert (edc.llr, list(edc.inflight)) == (0, [])


@pytest.mark.parametrize("update", ["predicted", "current"])
def test_verify_with_nothing_outstanding_is_flagged_and_ignored(update):
    edc = EDC(EDCParams(update=update))
    edc.draft(UNIT, 1)
    edc.verify(False, UNIT, 1)  # rollback -> nothing outstanding
    before = edc.state()
    pht_before = edc.pht.copy()
    edc.verify(True, UNIT, 1)
    assert edc.error
    after = edc.state()
    after["error"] = False
    assert after == before
    assert (edc.pht == pht_before).all()


def test_counter_saturates_at_both_ends():
    edc = EDC()
    # All-zero entropy and one batch at a time: the index is always 0<<6|0<<3|1 = 1.
    # Counter 2 -> 3 -> 3 (top) on full accepts; each DRAFT reads the counter first.
    decisions = []
    for _ in range(3):
        decisions.append(edc.draft(0, 1))
        edc.verify(True, 0, 1)
    assert decisions == [True, True, True]
    assert edc.pht[1] == 3
    # Rejections: 3 -> 2 -> 1 -> 0 -> 0 (bottom). Answers read 3, 2, 1, 0, 0 before each.
    decisions = []
    values = []
    for _ in range(5):
        decisions.append(edc.draft(0, 1))
        edc.verify(False, 0, 0)
        values.append(int(edc.pht[1]))
    assert values == [2, 1, 0, 0, 0]
    assert decisions == [True, True, False, False, False]
    # Climb back: 0 -> 1 (still suppress) -> 2 (continue again).
    assert edc.draft(0, 1) is False
    edc.verify(True, 0, 1)
    assert edc.draft(0, 1) is False
    edc.verify(True, 0, 1)
    assert edc.draft(0, 1) is True
    assert edc.counters == {
        "drafts": 11,
        "continues": 6,
        "suppressions": 5,
        "verifies": 10,
        "rollbacks": 5,
    }
    assert edc.pht[0] == 2  # LLR is never 0 at prediction: index 0 is never touched


def test_event_counters_saturate():
    edc = EDC(EDCParams(stats_bits=2))  # counters stop at 3
    for _ in range(5):
        edc.draft(0, 1)
        edc.verify(False, 0, 0)
    assert edc.counters == {
        "drafts": 3,
        # Every DRAFT reads index 1, which the rejections take 2 -> 1 -> 0 -> 0 -> 0:
        # answers T, F, F, F, F, so 1 continue and 4 suppressions, the latter capped at 3.
        "continues": 1,
        "suppressions": 3,
        "verifies": 3,
        "rollbacks": 3,
    }


def test_event_counters_saturate_split():
    # Same stream with room to count: continues/suppressions as hand-derived (1 and 4).
    edc = EDC(EDCParams(stats_bits=3))
    for _ in range(5):
        edc.draft(0, 1)
        edc.verify(False, 0, 0)
    assert edc.counters["continues"] == 1
    assert edc.counters["suppressions"] == 4


# -- non-default parameters -------------------------------------------------------------------


def test_small_history_three_bit_counters_two_bit_llr():
    params = EDCParams(history_len=4, counter_bits=3, llr_bits=2)
    edc = EDC(params)
    assert params.pht_entries == 256  # 3 + 3 + 2 index bits
    assert set(edc.pht.tolist()) == {4}  # 2**(3-1)
    # history_len 4: halves of 2, averages >> 1; index = hi<<5 | lo<<2 | LLR.
    assert edc.draft(7 * UNIT, 1) is True  # LEHT [7,0,0,0]: lo 3, hi 0 -> 3<<2|1 = 13
    assert edc.draft(7 * UNIT, 1) is True  # [7,7,0,0]: lo 7 -> 7<<2|2 = 30
    assert edc.draft(7 * UNIT, 1) is True  # [7,7,7,0]: lo 7, hi 3 -> 96|28|3 = 127
    assert list(edc.inflight) == [13, 30, 127]
    assert edc.full()  # 2**2 - 1 = 3 outstanding
    assert edc.draft(7 * UNIT, 1) is None
    edc.verify(False, 0, 0)  # counter 13: 4 -> 3, MSB now 0
    assert edc.pht[13] == 3
    assert (edc.llr, list(edc.inflight), edc.leht) == (0, [], [0, 0, 0, 0])
    assert edc.draft(7 * UNIT, 1) is False  # index 13 again, counter 3 -> suppress
    edc.verify(True, 0, 1)  # 3 -> 4: MSB back to 1
    assert edc.pht[13] == 4
    assert edc.counters["suppressions"] == 1


def test_three_bit_counter_saturates_at_top():
    edc = EDC(EDCParams(history_len=4, counter_bits=3, llr_bits=2))
    # Zero entropy, one batch at a time: index 0<<5|0<<2|1 = 1 every time.
    values = []
    for _ in range(5):
        edc.draft(0, 1)
        edc.verify(True, 0, 1)
        values.append(int(edc.pht[1]))
    assert values == [5, 6, 7, 7, 7]


def test_long_history():
    edc = EDC(EDCParams(history_len=16))
    # history_len 16: halves of 8, averages >> 3.
    for _ in range(7):
        edc.draft(7 * UNIT, 1)
    # LEHT = [7]*7 + [0]*9: lo = 49>>3 = 6, hi = 0, LLR 7 -> 6<<3|7 = 55.
    assert edc.index() == (6 << 3) | 7
    for _ in range(7):
        edc.verify(True, 7 * UNIT, 1)  # LCEHT gets seven 7s
    edc.draft(0, 1)
    edc.verify(False, 0, 0)  # LEHT := LCEHT = [7]*7 + [0]*9
    for _ in range(7):
        edc.draft(0, 1)
    # LEHT = [0]*7 + [7]*7 + [0]*2: lo = 7>>3 = 0, hi = 42>>3 = 5, LLR 7 -> 5<<6|7 = 327.
    assert edc.leht == [0] * 7 + [7] * 7 + [0] * 2
    assert edc.index() == (5 << 6) | 7


def test_hmax_register():
    edc = EDC()
    edc.hmax = 8192  # 2.0 nats: one bucket = 1024 per token
    assert edc.draft(3 * 1024, 1) is True
    assert edc.leht[0] == 3
    with pytest.raises(ValueError, match=r"^hmax must be between 1 and 65535, not 0$"):
        edc.hmax = 0


# -- port validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda e: e.draft(2**21, 1), ValueError, "s must be between 0 and 2097151, not 2097152"),
        (lambda e: e.draft(0, 32), ValueError, "length must be between 0 and 31, not 32"),
        (lambda e: e.draft(-1, 1), ValueError, "s must be between 0 and 2097151, not -1"),
        (lambda e: e.draft(0, True), TypeError, "length must be an integer, not True"),
        (lambda e: e.verify(2, 0, 1), ValueError, "full must be between 0 and 1, not 2"),
        (lambda e: e.verify(True, 0, 32), ValueError, "n_acc must be between 0 and 31, not 32"),
        (
            lambda e: e.verify(True, 2**21, 1),
            ValueError,
            "s_acc must be between 0 and 2097151, not 2097152",
        ),
    ],
)
def test_port_values_are_validated(call, error, message):
    edc = EDC()
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call(edc)
    assert not edc.error  # a testbench bug is not a hardware protocol error


def test_params_type_is_checked():
    with pytest.raises(TypeError, match=r"^params must be an EDCParams, not 3$"):
        EDC(3)


# -- random invariants ------------------------------------------------------------------------


@pytest.mark.seeded
@pytest.mark.parametrize("update", ["predicted", "current"])
def test_random_stream_invariants(update):
    rng = random.Random(choose_seed(20261129))
    params = EDCParams(update=update)
    edc = EDC(params)
    committed = 0  # independent count of outstanding batches
    expect_error = False
    for _ in range(5000):
        if rng.random() < 0.55:
            length = rng.randint(1, 31)
            answer = edc.draft(rng.randint(0, length * 65535), length)
            if committed == params.llr_max:
                assert answer is None
            else:
                assert answer in (True, False)
                committed += 1
        else:
            full = rng.random() < 0.6
            n_acc = rng.randint(0, 31)
            edc.verify(full, rng.randint(0, n_acc * 65535), n_acc)
            if committed:
                committed = committed - 1 if full else 0
            else:
                expect_error = True
        assert edc.llr == committed == len(edc.inflight)
        assert all(0 <= b <= 7 for b in edc.leht + edc.lceht)
        assert edc.pht.min() >= 0
        assert edc.pht.max() <= 3
        assert edc.error == expect_error
    assert expect_error  # the stream did hit VERIFY with nothing outstanding


@pytest.mark.seeded
def test_current_mode_never_suppresses():
    # A consequence of the spec, not of the code: in "current" mode a rejection trains the
    # index formed after the rollback, whose LLR field is 0, while every DRAFT reads an index
    # with LLR >= 1. Counters a DRAFT can read therefore only ever go up from the reset value
    # 2 (MSB 1), so every answer is "continue", whatever the stream.
    rng = random.Random(choose_seed(77))
    edc = EDC(EDCParams(update="current"))
    answers = set()
    for _ in range(3000):
        if edc.llr and rng.random() < 0.5:
            n_acc = rng.randint(0, 31)
            edc.verify(rng.random() < 0.3, rng.randint(0, n_acc * 65535), n_acc)
        else:
            length = rng.randint(1, 31)
            answers.add(edc.draft(rng.randint(0, length * 65535), length))
    assert answers <= {True, None}
    assert edc.counters["rollbacks"] > 100
    assert int(edc.pht[[i for i in range(512) if i & 7 == 0]].min()) < 2  # LLR-0 entries moved
