"""Tests of the AAU golden model's NORM, RELU, SILU and GELU modes (``docs/aau.md`` 9, 10).

Expected values come from 50-digit decimal arithmetic (the gate tables), from the doc's
printed default tables, from hand calculation with the doc's formulas (worked in the
comments), from exact identities of the definition (``y(X) - y(-X) = X`` for the gated
activations, ``y = B`` for a constant vector), or from the float64 references within the
doc's error bounds; never from the code under test.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
import pytest
from harness.seeds import choose_seed

from ahasd.golden.aau import sum_sq_bits
from ahasd.golden.aau_modes import (
    NORM_RESET,
    aau_gelu,
    aau_norm,
    aau_norm_stats,
    aau_relu,
    aau_silu,
    gelu_table,
    silu_table,
)
from ahasd.golden.aau_reference import (
    reference_gelu,
    reference_layernorm,
    reference_rmsnorm,
    reference_silu,
)
from ahasd.params import AAUParams

ALL_CODES = np.arange(-32768, 32768, dtype=np.int64)
TARGET = 2.0**-8  # spec 2.4: SILU/GELU absolute, NORM relative to the reference's range
EPS = 42950 / 2**32  # the default norm_eps

# docs/aau.md section 2, "Default tables (G = 6)", copied from the doc.
DOC_HS = [
    32768, 36843, 40793, 44511, 47911, 50941, 53581, 55834, 57724, 59287, 60565, 61598, 62428,
    63090, 63615, 64030, 64357, 64614, 64816, 64974, 65097, 65194, 65269, 65328, 65374, 65410,
    65438, 65459, 65476, 65489, 65500, 65508, 65514, 65519, 65523, 65526, 65528, 65530, 65531,
    65532, 65533, 65534, 65534, 65535, 65535, 65535, 65535, 65535, 65536, 65536, 65536, 65536,
    65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536,
]  # fmt: skip
DOC_HG = [
    32768, 34401, 36028, 37641, 39236, 40807, 42346, 43850, 45313, 46731, 48100, 49417, 50678,
    51881, 53024, 54107, 55128, 56088, 56986, 57823, 58600, 59320, 59983, 60591, 61148, 61655,
    62116, 62532, 62907, 63243, 63544, 63811, 64048, 64258, 64442, 64603, 64744, 64866, 64972,
    65063, 65141, 65207, 65264, 65312, 65352, 65386, 65414, 65437, 65457, 65472, 65485, 65496,
    65504, 65511, 65517, 65521, 65524, 65527, 65529, 65531, 65532, 65533, 65534, 65534, 65535,
]  # fmt: skip


def codes_of(values) -> np.ndarray:
    return np.clip(np.round(np.asarray(values) * 256.0), -32768, 32767).astype(np.int64)


# ---- gate tables against 50-digit arithmetic ----


def _decimal_pi() -> Decimal:
    """pi by the series of the ``decimal`` module's documentation (at the context's
    precision)."""
    three = Decimal(3)
    last, t, total, n, na, d, da = 0, three, three, 1, 0, 0, 24
    while total != last:
        last = total
        n, na = n + na, na + 8
        d, da = d + da, da + 32
        t = (t * n) / d
        total += t
    return total


def _decimal_gates(bits: int) -> tuple[list[int], list[int]]:
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        root = (2 / _decimal_pi()).sqrt()

        def rounded(value: Decimal) -> int:
            return int((value * 65536).quantize(Decimal(1), ROUND_HALF_UP))

        def sigmoid(a: Decimal) -> Decimal:
            return 1 / (1 + (-a).exp())

        def gelu_gate(a: Decimal) -> Decimal:
            e = (2 * root * (a + Decimal("0.044715") * a**3)).exp()
            return (1 + (e - 1) / (e + 1)) / 2

        silu = [rounded(sigmoid(Decimal(16 * j) / size)) for j in range(size + 1)]
        gelu = [rounded(gelu_gate(Decimal(4 * j) / size)) for j in range(size + 1)]
    return silu, gelu


@pytest.mark.parametrize("bits", range(1, 11))
def test_gate_tables_are_correctly_rounded(bits: int) -> None:
    silu, gelu = _decimal_gates(bits)
    assert list(silu_table(bits)) == silu
    assert list(gelu_table(bits)) == gelu


def test_default_gate_tables_match_the_doc() -> None:
    assert list(silu_table(6)) == DOC_HS
    assert list(gelu_table(6)) == DOC_HG


# ---- RELU, SILU, GELU ----


def test_relu_is_exact_for_every_code() -> None:
    expected = np.array([code if code > 0 else 0 for code in ALL_CODES.tolist()])
    assert np.array_equal(aau_relu(ALL_CODES), expected)


def test_silu_by_hand() -> None:
    # X = 32 (x = 0.125), G = 6: a = 32, P - G = 6, j = 0, f = 32,
    # h = 32768 + ((36843 - 32768) * 32 >> 6) = 32768 + 2037 = 34805,
    # y = (32 * 34805 + 32768) >> 16 = 1146528 >> 16 = 17; float: 0.125 sigmoid(0.125) * 256
    # = 16.998. X = -32: g = 65536 - 34805 = 30731, y = (-983392 + 32768) >> 16 = -15.
    assert aau_silu(np.array([32, -32])).tolist() == [17, -15]
    assert abs(17 - 0.125 / (1 + math.exp(-0.125)) * 256) < 0.5


def test_gelu_by_hand() -> None:
    # X = 200 (x = 0.78125), G = 6, P = 10: j = 200 >> 4 = 12, f = 8,
    # h = 50678 + ((51881 - 50678) * 8 >> 4) = 50678 + 601 = 51279,
    # y = (200 * 51279 + 32768) >> 16 = 10288568 >> 16 = 156; float: 0.61138 * 256 = 156.51
    # (the interpolation's chord lies under the concave gate: 156.49 before rounding).
    assert aau_gelu(np.array([200])).tolist() == [156]
    x = 0.78125
    expected = 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert abs(156 - expected * 256) < 1


@pytest.mark.parametrize("function", [aau_silu, aau_gelu], ids=["silu", "gelu"])
def test_gate_symmetry_is_exact(function) -> None:
    # g(-a) = 65536 - g(a), so y(-X) = round_shift(-X * 65536 + X g, 16) = -X + y(X).
    codes = ALL_CODES[1:]  # -32768 has no positive twin
    assert np.array_equal(function(codes) - function(-codes), codes)


@pytest.mark.parametrize(
    ("function", "span"), [(aau_silu, 16 * 256), (aau_gelu, 4 * 256)], ids=["silu", "gelu"]
)
def test_beyond_the_table_the_gate_is_one(function, span) -> None:
    outside = np.concatenate([np.arange(span, 32768), np.arange(-32768, -span + 1)])
    assert np.array_equal(function(outside), np.maximum(outside, 0))


@pytest.mark.parametrize(
    ("function", "reference"),
    [(aau_silu, reference_silu), (aau_gelu, reference_gelu)],
    ids=["silu", "gelu"],
)
def test_activation_error_over_every_code(function, reference) -> None:
    error = np.abs(function(ALL_CODES) / 256 - reference(ALL_CODES / 256))
    print(f"max error {error.max():.3e} = {error.max() / TARGET:.3f} * 2**-8")
    assert error.max() <= TARGET


@pytest.mark.seeded
@pytest.mark.parametrize("bits", [1, 3, 10])
def test_other_gate_table_sizes_follow_the_definition(bits: int) -> None:
    # every code through the doc's formula, written out per element with Python ints
    params = AAUParams(gate_table_bits=bits)
    rng = np.random.default_rng(choose_seed(3))
    codes = rng.integers(-32768, 32768, 2000)
    for function, table, span_bits in (
        (aau_silu, silu_table(bits), 12),
        (aau_gelu, gelu_table(bits), 10),
    ):
        got = function(codes, params).tolist()
        for code, y in zip(codes.tolist(), got, strict=True):
            a = abs(code)
            if a >= 1 << span_bits:
                h = 65536
            else:
                low = span_bits - bits
                j, f = a >> low, a & ((1 << low) - 1)
                h = table[j] + (((table[j + 1] - table[j]) * f) >> low)
            g = h if code >= 0 else 65536 - h
            assert y == (code * g + 32768) >> 16, (function.__name__, code)


# ---- NORM ----


def test_norm_two_elements_by_hand() -> None:
    # x = [0, 1]: N = 2, S1 = 256, S2 = 2 * 0 + 256**2 * 2**16 + 2 E = 2**32 + 85900,
    # U = 2 S2 - 2**16 * 256**2 = 2**32 + 171800, lead = 32, k = 16,
    # V = U << 14 = 70371558948864, s = isqrt(V) = 8388775, r = 2**47 // s = 16776882.
    stats = aau_norm_stats(np.array([0, 256]))
    assert (stats.count, stats.sum, stats.centre) == (2, 256, 256)
    assert stats.sum_sq == 2**32 + 85900
    assert stats.u == 2**32 + 171800
    assert stats.rstd_shift == 16
    assert stats.radicand == (2**32 + 171800) << 14
    assert stats.root == math.isqrt((2**32 + 171800) << 14) == 8388775
    assert stats.rstd == 2**47 // 8388775 == 16776882
    # c = 2 * 0 - 256 = -256: z = (-256 * 16776882) >> 16 = -65535 (floor of -65534.7),
    # y = (-65535 * 256 + 32768) >> 16 = -256 (floor of -255.5); X = 256: c = 256,
    # z = 65534, y = (65534 * 256 + 32768) >> 16 = 256 (255.996 rounds up): y = [-1, 1].
    gamma, beta = np.array([256, 256]), np.array([0, 0])
    assert aau_norm(np.array([0, 256]), gamma, beta, stats=stats).tolist() == [-256, 256]


def test_rmsnorm_by_hand() -> None:
    # x = [1, 1]: RMSNorm T = 0, S2 = 2 (2**32 + E), U = 2 S2 = 4 (2**32 + E), lead = 34,
    # k = 17, V = U << 12, s = isqrt(2**46 (1 + E / 2**32)) = 8388608 + 42 (2**23 * 5.0e-6),
    # r = 2**47 // s; y = x / sqrt(1 + 1e-5) * 1 = 0.999995 -> 256.
    stats = aau_norm_stats(np.array([256, 256]), rms=True)
    assert (stats.centre, stats.sum) == (0, 512)
    assert stats.u == 4 * (2**32 + 42950)
    assert stats.rstd_shift == 17
    assert stats.root == math.isqrt((4 * (2**32 + 42950)) << 12)
    y = aau_norm(np.array([256, 256]), np.array([256, 256]), np.array([0, 0]), stats=stats)
    assert y.tolist() == [256, 256]


@pytest.mark.seeded
@pytest.mark.parametrize("length", [1, 2, 7, 4096, 65536])
@pytest.mark.parametrize("code", [-32768, -1, 0, 12345, 32767])
def test_layernorm_of_a_constant_vector_is_beta(length: int, code: int) -> None:
    # All equal: S1 = N X, so c = N X - T = 0 for every element and y = B exactly.
    rng = np.random.default_rng(choose_seed(17))
    x = np.full(length, code)
    gamma = rng.integers(-32768, 32768, length)
    beta = rng.integers(-32768, 32768, length)
    stats = aau_norm_stats(x)
    assert stats.u == length * length * 42950  # U = N**2 E: var = 0
    assert np.array_equal(aau_norm(x, gamma, beta, stats=stats), beta)


@pytest.mark.seeded
def test_norm_after_reset_outputs_beta() -> None:
    rng = np.random.default_rng(choose_seed(19))
    x, gamma, beta = (rng.integers(-32768, 32768, 300) for _ in range(3))
    assert np.array_equal(aau_norm(x, gamma, beta, stats=NORM_RESET), beta)


def test_norm_of_another_vector_clamps_z() -> None:
    # Statistics of a nearly constant vector (x = 0, 1/256 alternating: sigma = 1/512, so
    # r is large), and a second pass over a wide vector saturates z at +-2**24: y =
    # round(+-256 * gamma) + beta.
    stats = aau_norm_stats(np.array([0, 1] * 50))
    x = np.array([-32768, 32767, 0, 1])
    gamma = np.array([1, 1, 256, 256])
    beta = np.array([0, 5, 0, 0])
    y = aau_norm(x, gamma, beta, stats=stats)
    # z = clamp(-2**24) and clamp(2**24 - 1): y = round_shift(-2**24 * 1, 16) = -256,
    # round_shift((2**24 - 1) * 1, 16) + 5 = 256 + 5.
    assert y[:2].tolist() == [-256, 261]
    # X = 0 and 1 are this pass's own values: z = +-(1/512) / sqrt(1/512**2 + eps), where eps
    # dominates the variance: about +-0.526, within 1 LSB.
    own = (1 / 512) / math.sqrt(1 / 512**2 + EPS) * 256
    assert abs(y[2] + own) <= 1
    assert abs(y[3] - own) <= 1


def test_norm_output_saturates() -> None:
    x = np.array([0, 256])  # z = -1, +1
    gamma = np.array([32767, 32767])  # 128: y = -128, +128
    y = aau_norm(x, gamma, np.array([-32768, 32767]))
    assert y.tolist() == [-32768, 32767]


def test_norm_statistics_stay_in_their_widths() -> None:
    # docs/aau.md 9.5 at the extremes of the default length.
    n = 65536
    cases = [
        (np.full(n, -32768), False),  # var = 0, largest S1: U = N**2 E
        (np.full(n, -32768), True),  # largest S2: U = N S2 ~ 2**78
        (np.tile([-32768, 32767], n // 2), False),  # largest variance
        (np.array([0]), False),  # U = E: the smallest U, k = 7
    ]
    for x, rms in cases:
        stats = aau_norm_stats(x, rms=rms)
        assert stats.sum_sq < 2 ** sum_sq_bits()
        assert 1 <= stats.u < 2**79
        assert 0 <= stats.rstd_shift <= 39
        assert 2**46 <= stats.radicand < 2**48
        assert 2**23 <= stats.root < 2**24
        assert 2**23 < stats.rstd <= 2**24
    assert sum_sq_bits() == 63
    assert sum_sq_bits(AAUParams(max_length=1000)) == 57


def _norm_errors(rng: np.random.Generator, x: np.ndarray, rms: bool) -> tuple[float, float]:
    """(max error relative to the reference's range (at least 1), max excess over the doc's
    bound 9.4) of one vector with gamma ~ N(1, 0.3), beta ~ N(0, 0.1)."""
    gamma = codes_of(rng.normal(1.0, 0.3, x.size))
    beta = np.zeros(x.size, dtype=np.int64) if rms else codes_of(rng.normal(0.0, 0.1, x.size))
    y = aau_norm(x, gamma, beta, rms=rms) / 256
    reference = reference_rmsnorm if rms else reference_layernorm
    ref = reference(x / 256, gamma / 256, beta / 256, EPS)
    in_range = np.clip(ref, -128, 32767 / 256)  # the output saturates
    error = np.abs(y - in_range)
    span = max(1.0, float(ref.max() - ref.min()))
    z = (ref - beta / 256) / np.where(gamma == 0, 1, gamma / 256)
    bound = 2.0**-9 + np.abs(gamma / 256) * (np.abs(z) * 2.0**-22 + 2.0**-16) + 1e-9
    excess = float(np.max(np.where(ref == in_range, error - bound, -1.0)))
    return float(error.max()) / span, excess


@pytest.mark.seeded
def test_norm_accuracy_sample() -> None:
    rng = np.random.default_rng(choose_seed(2024))
    worst, worst_excess = 0.0, -1.0
    for length in (1, 2, 3, 17, 100, 768, 4096, 65536):
        vectors = [
            codes_of(rng.normal(0.0, 1.0, length)),
            codes_of(rng.normal(20.0, 0.05, length)),  # mean far above the spread
            codes_of(rng.standard_t(3, length) * 2),
            rng.integers(-32768, 32768, length),
        ]
        outliers = rng.normal(0.0, 1.0, length)  # OPT-like: a few huge channels
        outliers[rng.integers(length, size=max(1, length // 512))] = 60.0
        vectors.append(codes_of(outliers))
        for x in vectors:
            for rms in (False, True):
                relative, excess = _norm_errors(rng, x, rms)
                worst, worst_excess = max(worst, relative), max(worst_excess, excess)
    print(f"worst NORM error {worst:.3e} of the range = {worst / TARGET:.3f} * 2**-8")
    assert worst <= TARGET
    assert worst_excess <= 0.0


# ---- parameter and input checking ----


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("gate_table_bits", 0, ValueError, "gate_table_bits must be between 1 and 10, not 0"),
        ("gate_table_bits", 11, ValueError, "gate_table_bits must be between 1 and 10, not 11"),
        ("gate_table_bits", 2.0, TypeError, "gate_table_bits must be an integer, not 2.0"),
        ("norm_eps", 0, ValueError, "norm_eps must be between 1 and 65535, not 0"),
        ("norm_eps", 65536, ValueError, "norm_eps must be between 1 and 65535, not 65536"),
        ("norm_eps", True, TypeError, "norm_eps must be an integer, not True"),
        ("max_length", 0, ValueError, "max_length must be between 1 and 1048576, not 0"),
        ("exp_table_bits", 13, ValueError, "exp_table_bits must be between 1 and 12, not 13"),
        ("ln_table_bits", 0, ValueError, "ln_table_bits must be between 1 and 12, not 0"),
    ],
)
def test_params_reject(field: str, value: object, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        AAUParams(**{field: value})


@pytest.mark.parametrize(
    ("gamma", "error", "message"),
    [
        (np.zeros(2, dtype=np.int64), ValueError, "gamma must have the shape of x, (3,), not (2,)"),
        (np.zeros(3), TypeError, "gamma must hold integer Q8.8 codes, not dtype float64"),
        (np.array([0, 40000, 0]), ValueError,
         "gamma must hold INT16 codes (-32768..32767), found 40000"),
    ],
)  # fmt: skip
def test_norm_rejects_bad_parameters(gamma: np.ndarray, error: type, message: str) -> None:
    x = np.array([1, 2, 3])
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        aau_norm(x, gamma, np.zeros(3, dtype=np.int64))
    with pytest.raises(error, match=f"^{re.escape(message.replace('gamma', 'beta'))}$"):
        aau_norm(x, np.zeros(3, dtype=np.int64), gamma)


def test_new_modes_reject_bad_vectors() -> None:
    message = "x must have between 1 and 65536 elements, not 0"
    empty = np.zeros(0, dtype=np.int64)
    for function in (aau_relu, aau_silu, aau_gelu, aau_norm_stats):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            function(empty)
