"""Tests of the AAU golden model (spec 2.4, docs/aau.md).

Expected values come from the float64 reference (``reference_stats`` is a few lines of
NumPy on the float logits, independent of the fixed-point code), from closed forms
(uniform vectors: ``top1 = 1/N``, ``H = ln N``), from 50-digit decimal arithmetic (the
tables) or from hand calculation with the doc's formulas (the two-element trace).
Runtime: about 3 s.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, getcontext

import numpy as np
import pytest
from harness.seeds import choose_seed as seed_for

from ahasd.golden.aau import (
    LN2_CODE,
    LOG2E_CODE,
    Stats,
    aau_max,
    aau_softmax,
    aau_stats,
    aau_stats_sequential,
    aau_sum,
    aau_trace,
    exp2_table,
    finish,
    log2_table,
    sum_bits,
    w_bits,
    z_bits,
)
from ahasd.golden.aau_reference import reference_softmax, reference_stats
from ahasd.params import AAUParams

ENTROPY_LSB = 2.0**-12
PROB_LSB = 2.0**-16
# Spec targets (section 2.4) and the tighter bounds docs/aau.md claims.
ENTROPY_TARGET = 0.02
PROB_TARGET = 2.0**-10
ENTROPY_DOC_BOUND = 2.3e-3 + 2.0**-13
PROB_DOC_BOUND = 2.0**-16 + 1e-9


def codes_of(values: np.ndarray) -> np.ndarray:
    return np.clip(np.round(np.asarray(values) * 256.0), -32768, 32767).astype(np.int64)


def errors(codes: np.ndarray, params: AAUParams | None = None) -> tuple[float, float, float]:
    """(entropy, top1, max softmax) absolute errors against float64 on the same codes."""
    params = params or AAUParams()
    stats = aau_stats(codes, params)
    ref = reference_stats(codes / 256.0)
    probs = aau_softmax(codes, params, stats=stats) / 65536.0
    return (
        abs(stats.entropy * ENTROPY_LSB - ref.entropy),
        abs(stats.top1 * PROB_LSB - ref.top1),
        float(np.max(np.abs(probs - reference_softmax(codes / 256.0)))),
    )


# ---- tables and constants against 50-digit arithmetic ----


@pytest.mark.parametrize("bits", range(1, 13))
def test_tables_are_correctly_rounded(bits: int) -> None:
    getcontext().prec = 50
    ln2 = Decimal(2).ln()
    size = 1 << bits
    exp_expected = [
        int(((ln2 * j / size).exp() * 65536).quantize(Decimal(1), ROUND_HALF_UP))
        for j in range(size + 1)
    ]
    log_expected = [
        int(((1 + Decimal(j) / size).ln() / ln2 * 2**20).quantize(Decimal(1), ROUND_HALF_UP))
        for j in range(size + 1)
    ]
    assert list(exp2_table(bits)) == exp_expected
    assert list(log2_table(bits)) == log_expected


def test_constants_and_widths() -> None:
    # Hand values of docs/aau.md sections 2 and 8.
    assert LOG2E_CODE == 24204406
    assert LN2_CODE == 11629080
    params = AAUParams()
    assert (z_bits(params), w_bits(params), sum_bits(params)) == (49, 53, 32)
    assert (z_bits(AAUParams(max_length=1)), sum_bits(AAUParams(max_length=1000))) == (33, 26)
    assert exp2_table(6)[28:30] == (88752, 89719)


# ---- directed cases ----


def test_two_element_trace_by_hand() -> None:
    # x = [0.0, 1.0]: worked through with the formulas of docs/aau.md 4.1 and 4.3.
    stats, trace = aau_trace(np.array([0, 256]))
    # element 0: t = 0, n = 0, f = 0, M = E[0] = 65536, e = 65536 << 16 = 2**32, w = 0
    # element 1: t = (256 * 24204406) >> 16 = 94548, n = 1, f = 29012, j = 28, r = 340,
    #            M = 88752 + ((89719 - 88752) * 340 >> 10) = 88752 + 321 = 89073;
    #            R: 0 -> 1 so k = 1, s = 0, e = 89073 << 16, w = (89073 * 256) << 4
    assert trace.t.tolist() == [0, 94548]
    assert trace.n.tolist() == [0, 1]
    assert trace.m.tolist() == [65536, 89073]
    assert trace.k.tolist() == [0, 1]
    assert trace.s.tolist() == [0, 0]
    z = (2**32 >> 1) + (89073 << 16)
    assert stats.z == z == 7984971776
    assert stats.w == (89073 * 256) << 4
    assert (stats.max, stats.argmax, stats.z_exp) == (256, 1, 1)
    # top1 = round(89073 * (2**56 // z) / 2**24); float: 1 / (1 + e**-1) = 0.7311
    recip = 2**56 // z
    assert stats.recip == recip
    assert stats.top1 == (89073 * recip + 2**23) >> 24
    assert abs(stats.top1 / 65536 - 1 / (1 + math.exp(-1))) < 2**-16


@pytest.mark.parametrize("code", [-32768, -32767, -257, -256, -1, 0, 1, 255, 256, 12345, 32767])
def test_length_one(code: int) -> None:
    x = np.array([code])
    stats = aau_stats(x)
    # p = 1 saturates to 65535; H = 0 (one LSB of table rounding allowed).
    assert (stats.max, stats.argmax, stats.top1) == (code, 0, 65535)
    assert stats.entropy in (0, 1)
    assert aau_softmax(x).tolist() == [65535]
    assert aau_sum(x) == code
    assert aau_max(x) == (code, 0)


def test_length_one_every_code_has_zero_entropy() -> None:
    for code in range(-32768, 32768, 97):
        stats = aau_stats(np.array([code]))
        assert stats.entropy <= 1, code
        assert stats.top1 == 65535, code


@pytest.mark.parametrize("length", [2, 3, 7, 1000, 4096, 65536])
@pytest.mark.parametrize("code", [-32768, 0, 12345, 32767])
def test_all_equal(length: int, code: int) -> None:
    x = np.full(length, code)
    stats = aau_stats(x)
    assert (stats.max, stats.argmax) == (code, 0)  # ties: lowest index
    # Closed forms: top1 = 1/N, H = ln N.
    assert abs(stats.top1 - 65536 / length) <= 0.5 + 1e-9
    if length & (length - 1) == 0:
        assert stats.top1 == 65536 // length
    assert abs(stats.entropy - math.log(length) * 4096) <= 1.0
    assert set(aau_softmax(x).tolist()) == {stats.top1}


@pytest.mark.seeded
@pytest.mark.parametrize("where", ["first", "last", "middle"])
def test_max_first_last(where: str) -> None:
    rng = np.random.default_rng(seed_for(11))
    x = codes_of(rng.normal(0.0, 3.0, 3000))
    index = {"first": 0, "last": x.size - 1, "middle": 1234}[where]
    x[index] = 32000
    stats = aau_stats(x)
    assert (stats.max, stats.argmax) == (32000, index)
    assert aau_max(x) == (32000, index)
    assert aau_stats_sequential(x) == stats
    h_err, p_err, s_err = errors(x)
    assert h_err <= ENTROPY_DOC_BOUND
    assert max(p_err, s_err) <= PROB_DOC_BOUND


def test_argmax_ties_take_lowest_index() -> None:
    x = np.zeros(200, dtype=np.int64)
    x[[7, 3, 150, 199]] = 5000
    assert aau_stats(x).argmax == 3
    assert aau_stats_sequential(x).argmax == 3
    assert aau_max(x) == (5000, 3)
    # the SOFTMAX outputs of tied maxima are equal, and equal top1
    probs = aau_softmax(x)
    assert len({probs[3], probs[7], probs[150], probs[199], aau_stats(x).top1}) == 1


def test_extreme_values() -> None:
    # One element at +128 nats, the rest at -128: p = 1 - tiny, H ~ 1e-104.
    x = np.full(65536, -32768)
    x[-1] = 32767
    stats = aau_stats(x)
    assert (stats.max, stats.argmax, stats.top1, stats.entropy) == (32767, 65535, 65535, 0)
    probs = aau_softmax(x)
    assert probs[-1] == 65535
    assert not probs[:-1].any()
    assert z_bits() >= stats.z.bit_length()
    # Half at +128, half at -128: H = ln(N/2), top1 = 2/N.
    y = np.tile(np.array([32767, -32768]), 2048)
    stats = aau_stats(y)
    assert stats.top1 == 65536 // 2048
    assert abs(stats.entropy - math.log(2048) * 4096) <= 1.0
    assert aau_sum(y) == -2048
    # The widths of docs/aau.md section 8 hold at the extremes.
    for code in (-32768, 32767):
        stats = aau_stats(np.full(65536, code))
        assert stats.z < 2 ** z_bits()
        assert -(2 ** (w_bits() - 1)) <= stats.w < 2 ** (w_bits() - 1)
        assert aau_sum(np.full(65536, code)) == 65536 * code
        assert -(2 ** (sum_bits() - 1)) <= 65536 * code < 2 ** (sum_bits() - 1)


def test_far_below_max_contributes_nothing_to_softmax() -> None:
    # Elements 60 nats below the max: exp(-60) ~ 1e-26 rounds to 0 (s = 86 >= 18).
    x = np.array([0, -60 * 256, 100, -60 * 256])
    probs = aau_softmax(x)
    assert probs[1] == probs[3] == 0
    ref = reference_softmax(x / 256.0)
    assert np.all(np.abs(probs / 65536 - ref) <= 2**-17 + 1e-12)


def test_softmax_with_other_stats_saturates_above_reference() -> None:
    stats = aau_stats(np.array([0, 10, 20]))
    probs = aau_softmax(np.array([0, 3 * 256, 20]), stats=stats)  # 3.0 is above 20/256
    assert probs[1] == 65535


@pytest.mark.seeded
def test_sum_matches_python() -> None:
    rng = np.random.default_rng(seed_for(5))
    x = rng.integers(-32768, 32768, 65536)
    assert aau_sum(x) == sum(int(v) for v in x)


# ---- sequential definition versus the vectorised model ----


@pytest.mark.seeded
def test_vectorised_equals_sequential() -> None:
    rng = np.random.default_rng(seed_for(7))
    vectors = [
        np.arange(-32768, 32768, 37),  # ascending: R grows at most elements (many rescales)
        np.arange(32767, -32768, -37),  # descending: no rescale after the first
        rng.integers(-32768, 32768, 1500),
        codes_of(rng.normal(0.0, 6.0, 1500)),
        codes_of(np.cumsum(rng.normal(0.05, 1.0, 1500))),  # drifting max
    ]
    for x in vectors:
        assert aau_stats(x) == aau_stats_sequential(x)
    params = AAUParams(exp_table_bits=3, ln_table_bits=9)
    assert aau_stats(vectors[2], params) == aau_stats_sequential(vectors[2], params)


# ---- seeded accuracy sample (the full sweep is bench/aau_accuracy.py) ----


def _sample(rng: np.random.Generator) -> list[np.ndarray]:
    vectors = []
    lengths = [1, 2, 5, 17, 100, 1000, 4096, 65536]
    for length in lengths:
        for sigma in (1.0, 3.0, 6.0):
            vectors.append(codes_of(rng.normal(0.0, sigma, length)))
        hot = rng.normal(0.0, 1.0, length)
        hot[rng.integers(length)] += rng.uniform(8.0, 30.0)
        vectors.append(codes_of(hot))
        vectors.append(codes_of(rng.uniform(-10.0, 10.0, length)))
        zipf = -1.1 * np.log(np.arange(1, length + 1)) + 0.5 * rng.standard_t(3, length)
        vectors.append(codes_of(rng.permutation(zipf)))
        vectors.append(rng.integers(-32768, 32768, length))
    return vectors


@pytest.mark.seeded
def test_accuracy_sample() -> None:
    rng = np.random.default_rng(seed_for(2024))
    worst = np.zeros(3)
    for x in _sample(rng):
        worst = np.maximum(worst, errors(x))
    print(f"worst errors: entropy {worst[0]:.2e} nats, top1 {worst[1]:.2e}, p {worst[2]:.2e}")
    assert worst[0] <= ENTROPY_TARGET
    assert max(worst[1:]) <= PROB_TARGET
    assert worst[0] <= ENTROPY_DOC_BOUND
    assert max(worst[1:]) <= PROB_DOC_BOUND


def test_truncation_worst_case_within_bound() -> None:
    # docs/aau.md section 12: max near +128, the rest 10..14 nats below.
    for gap in np.arange(10.0, 14.01, 0.5):
        x = np.full(65536, 32767 - int(gap * 256))
        x[0] = 32767
        h_err, p_err, s_err = errors(x)
        assert h_err <= ENTROPY_DOC_BOUND, gap
        assert max(p_err, s_err) <= PROB_DOC_BOUND, gap


# ---- parameter and input checking ----


INT16_MESSAGE = "x must hold INT16 codes (-32768..32767), found "
LENGTH_MESSAGE = "x must have between 1 and 65536 elements, not "


@pytest.mark.parametrize(
    ("x", "error", "message"),
    [
        (np.zeros((2, 2), dtype=np.int64), ValueError,
         "x must be a one-dimensional array, not shape (2, 2)"),
        (np.zeros(0, dtype=np.int64), ValueError, LENGTH_MESSAGE + "0"),
        (np.zeros(65537, dtype=np.int64), ValueError, LENGTH_MESSAGE + "65537"),
        (np.zeros(3), TypeError, "x must hold integer Q8.8 codes, not dtype float64"),
        (np.array([0, 32768]), ValueError, INT16_MESSAGE + "32768"),
        (np.array([-32769, 0]), ValueError, INT16_MESSAGE + "-32769"),
    ],
)  # fmt: skip
def test_rejects_bad_vectors(x: np.ndarray, error: type, message: str) -> None:
    for function in (aau_stats, aau_softmax, aau_sum, aau_max, aau_stats_sequential):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            function(x)


def test_softmax_after_reset_state() -> None:
    # docs/aau.md section 6: reset R = 0, recip = 0.
    reset = Stats(max=0, argmax=0, z=0, z_exp=0, w=0, recip=0, top1=0, entropy=0)
    # t = (X * 24204406) >> 16: X = 177 gives t = 65371 (n = 0), X = 178 gives 65741 (n = 1).
    probs = aau_softmax(np.array([-256, 0, 177, 178, 256]), stats=reset)
    assert probs.tolist() == [0, 0, 0, 65535, 65535]


def test_finish_rejects_small_z() -> None:
    with pytest.raises(ValueError, match=r"^z must be at least 2\*\*32 \(Z >= 1.0\), not 5$"):
        finish(5, 0, 0, 65536)


def test_rejects_bad_params() -> None:
    with pytest.raises(TypeError, match=r"^params must be an AAUParams, not 3$"):
        aau_stats(np.array([1]), 3)
    with pytest.raises(ValueError, match="x must have between 1 and 4 elements, not 5"):
        aau_stats(np.zeros(5, dtype=np.int64), AAUParams(max_length=4))
