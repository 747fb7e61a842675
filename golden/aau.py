"""Golden model of the AAU, the attention algorithm unit (spec 2.4).

A bit-accurate fixed-point model written from ``docs/spec.md`` section 2.4,
plus a float64 reference that bounds its error. ``docs/aau.md`` is the complete
specification of the arithmetic (it is what the RTL is written from); this module is one
reading of it. Notation: ``Qa.b`` signed, ``UQa.b`` unsigned, ``b`` fraction bits;
``>>`` on a negative integer is an arithmetic shift (floor division by a power of two).

The algorithm in brief (per element, ``X`` the INT16 Q8.8 code of logit ``x = X / 256``):

1. ``t = (X * LOG2E_CODE) >> 16``: ``x * log2(e)`` in Q.16 (floor); ``n = t >> 16`` its
   integer part (floor), ``f = t & 0xFFFF`` its fraction.
2. ``M = 2**f`` in UQ1.16 from a ``2**exp_table_bits + 1``-entry table with linear
   interpolation; ``P = M * X`` (exact product).
3. The running reference ``R = max(n_0..n_i)`` (an integer). The unit accumulates, relative
   to ``2**R``, ``Z = sum 2**(t_i - R)`` in UQ17.32 and ``W = sum 2**(t_i - R) * X_i`` in
   Q.20, where element ``i`` contributes ``e_i = M_i * 2**(16 - s_i)`` and
   ``w_i = P_i * 2**(4 - s_i)`` (``s_i = R - n_i``, floor when the exponent is negative).
   When ``R`` grows by ``k``, both accumulators are first shifted right by ``k``: the
   online rescaling ``exp(m_old - m_new)`` becomes an exact power of two because the
   reference is an integer in the base-2 domain.
4. After the pass: ``log2 Z`` by leading-one detection and a ``log2(1 + m)`` table,
   ``ln S = (R + log2 Z) * ln 2`` (``S = sum 2**t_i``), ``E[x] = W / Z`` (sequential
   divider), ``H = ln S - E[x]`` rounded to UQ4.12; ``recip = 2**56 // Z``,
   ``top1 = round(M_max * recip / 2**24)`` in UQ0.16.
5. SOFTMAX (second pass): ``p_i = round(M_i * recip / 2**(24 + R - n_i))`` in UQ0.16.

The other modes (``docs/aau.md`` sections 9 and 10):

6. NORM (LayerNorm, RMSNorm): a first pass accumulates ``S1 = sum X`` and
   ``S2 = sum (X**2 * 2**16 + E)`` (``eps = E / 2**32`` added per element); once per vector
   ``U = N S2 - 2**16 T**2`` (``T = S1``, or 0 for RMSNorm) is normalised by an even shift,
   ``s = isqrt(V)``, ``r = 2**47 // s``; the second pass outputs
   ``y = clamp(round(clamp((N X - T) r >> k) * G / 2**16) + B)`` in Q8.8.
7. RELU exactly; SILU and GELU as ``x * g(x)`` with the gate ``g(|x|)`` from a
   ``2**gate_table_bits + 1``-entry interpolated table and ``g(-a) = 1 - g(a)``.

Public API (stable): :func:`aau_stats`, :func:`aau_softmax`, :func:`aau_sum`,
:func:`aau_max`, :func:`aau_trace` (per-element intermediates, for RTL debugging),
:func:`aau_norm_stats`, :func:`aau_norm`, :func:`aau_relu`, :func:`aau_silu`,
:func:`aau_gelu`, the float64 references :func:`reference_stats`,
:func:`reference_softmax`, :func:`reference_layernorm`, :func:`reference_rmsnorm`,
:func:`reference_silu`, :func:`reference_gelu`, the tables :func:`exp2_table`,
:func:`log2_table`, :func:`silu_table`, :func:`gelu_table`, and the format constants below.
:func:`aau_stats` is vectorised and provably identical to the sequential
:func:`aau_stats_sequential` (see :func:`aau_stats`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from ahasd.params import ENTROPY_BITS, ENTROPY_FRAC_BITS, AAUParams

__all__ = [
    "GATE_FRAC",
    "GELU_CUBIC",
    "GELU_SPAN_BITS",
    "H_FRAC",
    "LN2_CODE",
    "LN2_FRAC",
    "LOG2E_CODE",
    "LOG2E_FRAC",
    "LOG2_FRAC",
    "LOG2_MANT_BITS",
    "M_FRAC",
    "NORM_EPS_FRAC",
    "NORM_RESET",
    "NORM_ROOT_BITS",
    "NORM_SQUARE_SHIFT",
    "NORM_Z_BITS",
    "NORM_Z_FRAC",
    "PROB_FRAC",
    "RECIP_FRAC",
    "SILU_SPAN_BITS",
    "T_FRAC",
    "W_FRAC",
    "Z_FRAC",
    "ElementTrace",
    "Finish",
    "NormStats",
    "RefStats",
    "Stats",
    "aau_gelu",
    "aau_max",
    "aau_norm",
    "aau_norm_stats",
    "aau_relu",
    "aau_silu",
    "aau_softmax",
    "aau_stats",
    "aau_stats_sequential",
    "aau_sum",
    "aau_trace",
    "exp2_table",
    "finish",
    "gelu_table",
    "log2_table",
    "reference_gelu",
    "reference_layernorm",
    "reference_rmsnorm",
    "reference_silu",
    "reference_softmax",
    "reference_stats",
    "silu_table",
    "sum_bits",
    "sum_sq_bits",
    "w_bits",
    "z_bits",
]

# ---- Formats (fraction bits). Module constants until they earn an AAUParams field. ----
#: ``log2(e)`` constant: UQ1.24.
LOG2E_FRAC = 24
LOG2E_CODE = round(math.log2(math.e) * (1 << LOG2E_FRAC))  # 24204406
#: ``t = x * log2(e)``: Q9.16 (the product ``X * LOG2E_CODE`` has 8 + 24 = 32 fraction bits).
T_FRAC = 16
#: Mantissa ``M = 2**f``, ``f`` in [0, 1): UQ1.16, 17 bits, value in [1, 2).
M_FRAC = 16
#: ``Z`` accumulator: UQ(1 + clog2(max_length)).32 (UQ17.32, 49 bits, by default).
Z_FRAC = 32
#: ``W`` accumulator, in units of (Q8.8 code) x (weight): Q(33 + clog2(max_length)).20.
W_FRAC = 20
#: ``log2(1 + m)``: the mantissa below the leading one keeps this many bits (truncated).
LOG2_MANT_BITS = 20
#: ``log2`` table entries and ``log2 S``: 20 fraction bits.
LOG2_FRAC = 20
#: ``ln(2)`` constant: UQ0.24.
LN2_FRAC = 24
LN2_CODE = round(math.log(2) * (1 << LN2_FRAC))  # 11629080
#: ``ln S``, ``E[x]`` and the entropy before its final rounding: 24 fraction bits (nats).
H_FRAC = 24
#: ``recip = 1 / Z`` (Z relative to ``2**R``): UQ1.24.
RECIP_FRAC = 24
#: Probabilities (top-1 and SOFTMAX outputs): UQ0.16, saturating at ``2**16 - 1``.
PROB_FRAC = 16

#: SILU/GELU gates ``g`` and their tables: UQ1.16 (``0 .. 2**16``).
GATE_FRAC = 16
#: The tables span ``|x| < 2**SPAN_BITS / 256``: 16 for SiLU, 4 for GELU.
SILU_SPAN_BITS = 12
GELU_SPAN_BITS = 10
#: GELU's tanh form: ``g(a) = (1 + tanh(sqrt(2/pi) (a + GELU_CUBIC a**3))) / 2``.
GELU_CUBIC = 0.044715
#: NORM: ``eps = norm_eps / 2**NORM_EPS_FRAC``; each ``X**2`` enters ``S2`` shifted by 16.
NORM_EPS_FRAC = 32
NORM_SQUARE_SHIFT = 16
#: NORM: the root ``s`` has this many bits (``V`` in ``[2**46, 2**48)``), ``r = 2**47 // s``.
NORM_ROOT_BITS = 24
#: NORM: ``z`` (the normalised element) is Q9.16, clamped to ``[-2**24, 2**24)``.
NORM_Z_FRAC = 16
NORM_Z_BITS = 25

_LOGIT_BITS = AAUParams.LOGIT_BITS
_LOGIT_FRAC = AAUParams.LOGIT_FRAC_BITS
_Z_GUARD = Z_FRAC - M_FRAC  # e_i = M_i << (16 - s_i)
_W_GUARD = W_FRAC - M_FRAC  # w_i = P_i << (4 - s_i)
_PROB_MAX = (1 << PROB_FRAC) - 1
_ENTROPY_MAX = (1 << ENTROPY_BITS) - 1
_PROB_SHIFT = M_FRAC + RECIP_FRAC - PROB_FRAC  # 24
_DEFAULT_PARAMS = AAUParams()  # frozen, so one shared default is safe


def _clog2(value: int) -> int:
    """Bits needed to count ``value`` items: ``ceil(log2(value))``, 0 for 1."""
    return (value - 1).bit_length()


def z_bits(params: AAUParams = _DEFAULT_PARAMS) -> int:
    """Width of the unsigned Z accumulator: ``Z_FRAC + 1 + clog2(max_length)`` (49)."""
    return Z_FRAC + 1 + _clog2(params.max_length)


def w_bits(params: AAUParams = _DEFAULT_PARAMS) -> int:
    """Width of the signed W accumulator: ``1 + 32 + (W_FRAC - M_FRAC) + clog2(max_length)``.

    ``|w_i| <= (2**17 - 1) * 2**15 * 2**4 < 2**36`` and at most ``max_length`` terms:
    ``-2**52 <= W < 2**52`` by default, 53 bits.
    """
    return 1 + (M_FRAC + 1) + (_LOGIT_BITS - 1) + _W_GUARD + _clog2(params.max_length)


def sum_bits(params: AAUParams = _DEFAULT_PARAMS) -> int:
    """Width of the signed SUM result: ``16 + clog2(max_length)`` (32, Q24.8)."""
    return _LOGIT_BITS + _clog2(params.max_length)


def sum_sq_bits(params: AAUParams = _DEFAULT_PARAMS) -> int:
    """Width of the unsigned NORM sum of squares ``S2``: ``47 + clog2(max_length)`` (63).

    Each term ``X**2 * 2**16 + E`` is below ``2**46 + 2**16 < 2**47``.
    """
    return 2 * (_LOGIT_BITS - 1) + NORM_SQUARE_SHIFT + 1 + _clog2(params.max_length)


@cache
def exp2_table(bits: int) -> tuple[int, ...]:
    """``2**bits + 1`` entries ``E[j] = round(2**(j / 2**bits) * 2**M_FRAC)``, UQ1.16.

    ``E[2**bits] = 2**17`` is the interpolation end point. Only ``j = 0`` and
    ``j = 2**bits`` are exact; every other value is irrational, so round-to-nearest is
    unambiguous (the tests check these float64 values against 50-digit decimals).
    """
    size = 1 << bits
    return tuple(math.floor(2.0 ** (M_FRAC + j / size) + 0.5) for j in range(size + 1))


@cache
def log2_table(bits: int) -> tuple[int, ...]:
    """``2**bits + 1`` entries ``L[j] = round(log2(1 + j / 2**bits) * 2**LOG2_FRAC)``.

    ``L[0] = 0`` and ``L[2**bits] = 2**20`` are exact; the others are irrational.
    """
    size = 1 << bits
    return tuple(
        math.floor(math.log2(1.0 + j / size) * (1 << LOG2_FRAC) + 0.5) for j in range(size + 1)
    )


def _sigmoid(a: float) -> float:
    return 1.0 / (1.0 + math.exp(-a))


def _gelu_gate(a: float) -> float:
    return (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (a + GELU_CUBIC * a**3))) / 2.0


@cache
def silu_table(bits: int) -> tuple[int, ...]:
    """``2**bits + 1`` entries ``HS[j] = round(2**16 * sigmoid(16 j / 2**bits))``, UQ1.16.

    ``HS[0] = 32768`` is exact; every other entry is irrational and far from a rounding tie
    (the tests check these float64 values against 50-digit decimals).
    """
    size = 1 << bits
    span = (1 << SILU_SPAN_BITS) >> _LOGIT_FRAC  # 16
    return tuple(
        math.floor(_sigmoid(span * j / size) * (1 << GATE_FRAC) + 0.5) for j in range(size + 1)
    )


@cache
def gelu_table(bits: int) -> tuple[int, ...]:
    """``2**bits + 1`` entries ``HG[j] = round(2**16 * (1 + tanh(sqrt(2/pi) (a + 0.044715
    a**3))) / 2)`` at ``a = 4 j / 2**bits``, UQ1.16 (``HG[0] = 32768``)."""
    size = 1 << bits
    span = (1 << GELU_SPAN_BITS) >> _LOGIT_FRAC  # 4
    return tuple(
        math.floor(_gelu_gate(span * j / size) * (1 << GATE_FRAC) + 0.5) for j in range(size + 1)
    )


# ---------------------------------------------------------------------------------------
# Data records


@dataclass(frozen=True)
class Stats:
    """Result of a STATS pass (all raw integer codes).

    Attributes
    ----------
    max : int
        Largest logit, INT16 Q8.8 code.
    argmax : int
        Index of the first element equal to ``max`` (ties: lowest index).
    z : int
        Z accumulator ``sum 2**(t_i - z_exp)``, UQ17.32 (``z_bits`` wide), always
        ``>= 2**32``. The spec's ``sum exp(x - max)`` is about ``z / 2**32 / M_max * 2**16``
        where ``M_max`` is the mantissa of the max element (``2**(t_max - z_exp)``).
    z_exp : int
        The reference ``R = floor(t_max)``: ``S = sum 2**t_i = 2**R * z / 2**32``.
    w : int
        W accumulator ``sum 2**(t_i - R) * X_i``, signed, 20 fraction bits.
    recip : int
        ``2**56 // z``: ``1 / (z / 2**32)`` in UQ1.24, used by SOFTMAX.
    top1 : int
        Top-1 probability ``1 / sum exp(x - max)``, UQ0.16, saturated at 65535.
    entropy : int
        ``H = ln Z - sum exp(x - max)(x - max) / Z`` in UQ4.12 nats, saturated to
        ``[0, 65535]``.
    """

    max: int
    argmax: int
    z: int
    z_exp: int
    w: int
    recip: int
    top1: int
    entropy: int


@dataclass(frozen=True)
class Finish:
    """Intermediate values of the post-pass computation (for RTL debugging).

    Attributes
    ----------
    lead : int
        Position of the leading one of ``z`` (``z.bit_length() - 1``, >= 32).
    mant : int
        The 20 bits of ``z`` below the leading one (truncated): ``m`` in UQ0.20.
    log2_frac : int
        ``log2(1 + m)`` from the interpolated table, UQ1.20.
    log2_s : int
        ``log2 S = R + (lead - 32) + log2(1 + m)``, signed, 20 fraction bits.
    ln_s : int
        ``ln S = (log2_s * LN2_CODE) >> 20``, signed, 24 fraction bits (nats).
    mean_x : int
        ``E[x] = W / Z`` in nats, signed, 24 fraction bits, truncated toward zero.
    entropy_fine : int
        ``ln_s - mean_x``, signed, 24 fraction bits.
    recip, top1, entropy : int
        As in :class:`Stats`.
    """

    lead: int
    mant: int
    log2_frac: int
    log2_s: int
    ln_s: int
    mean_x: int
    entropy_fine: int
    recip: int
    top1: int
    entropy: int


@dataclass(frozen=True)
class ElementTrace:
    """Per-element intermediates of a STATS pass (arrays of equal length, int64).

    Attributes
    ----------
    t : ``(X * LOG2E_CODE) >> 16``, Q9.16.
    n, f : ``t >> 16`` (signed) and ``t & 0xFFFF``.
    m : mantissa ``2**f``, UQ1.16.
    p : ``m * X``, signed.
    r : the reference after this element, ``max(n_0..n_i)``.
    k : the rescale shift applied to the accumulators before adding this element.
    s : ``r - n`` (>= 0).
    e, w : the contributions added to Z and W.
    z, w_acc : Z and W after this element.
    """

    t: np.ndarray
    n: np.ndarray
    f: np.ndarray
    m: np.ndarray
    p: np.ndarray
    r: np.ndarray
    k: np.ndarray
    s: np.ndarray
    e: np.ndarray
    w: np.ndarray
    z: np.ndarray
    w_acc: np.ndarray


@dataclass(frozen=True)
class NormStats:
    """A LAYERNORM or RMSNORM first pass and its post pass (``docs/aau.md`` 9.1, 9.2).

    Attributes
    ----------
    count : int
        ``N``, the number of elements.
    sum : int
        ``S1 = sum X`` (the ``result``'s ``sum``).
    sum_sq : int
        ``S2 = sum (X**2 * 2**16 + E)``, ``2**32 sum (x**2 + eps)`` (the ``result``'s
        ``sum_sq``).
    centre : int
        ``T``: ``S1`` for LayerNorm, 0 for RMSNorm.
    u : int
        ``U = N S2 - 2**16 T**2``, ``2**32 N**2 (var + eps)``.
    rstd_shift : int
        ``k = lead(U) >> 1`` (the ``result``'s ``rstd_shift``).
    radicand : int
        ``V = shift(U, 46 - 2k)``, in ``[2**46, 2**48)``.
    root : int
        ``s = isqrt(V)``, in ``[2**23, 2**24)``.
    rstd : int
        ``r = 2**47 // s`` (the ``result``'s ``rstd``): ``1/sqrt(var + eps) ~ N r
        2**-(8 + k)``.

    The second pass uses ``count``, ``centre``, ``rstd`` and ``rstd_shift``;
    :data:`NORM_RESET` is the unit's state before any first pass.
    """

    count: int
    sum: int
    sum_sq: int
    centre: int
    u: int
    rstd_shift: int
    radicand: int
    root: int
    rstd: int


#: The held NORM statistics after reset (``docs/aau.md`` 9.2): a NORM pass outputs ``B``.
NORM_RESET = NormStats(
    count=0, sum=0, sum_sq=0, centre=0, u=0, rstd_shift=0, radicand=0, root=0, rstd=0
)


@dataclass(frozen=True)
class RefStats:
    """Float64 reference results (values, not codes): max, argmax, Z, top1, entropy."""

    max: float
    argmax: int
    z: float
    top1: float
    entropy: float


# ---------------------------------------------------------------------------------------
# Input checking and the element front end


def _check_vector(x: object, params: AAUParams) -> np.ndarray:
    """Return ``x`` as an int64 array of INT16 codes, or raise with an exact message."""
    if not isinstance(params, AAUParams):
        raise TypeError(f"params must be an AAUParams, not {params!r}")
    array = np.asarray(x)
    if array.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array, not shape {array.shape}")
    if not 1 <= array.size <= params.max_length:
        raise ValueError(
            f"x must have between 1 and {params.max_length} elements, not {array.size}"
        )
    if array.dtype.kind not in "iu":
        raise TypeError(f"x must hold integer Q8.8 codes, not dtype {array.dtype}")
    low, high = int(array.min()), int(array.max())
    if low < -(1 << 15) or high > (1 << 15) - 1:
        bad = low if low < -(1 << 15) else high
        raise ValueError(f"x must hold INT16 codes (-32768..32767), found {bad}")
    return array.astype(np.int64)


def _shift(value: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """``value * 2**amount`` with floor for negative ``amount`` (arithmetic shift).

    Right shifts are clamped to 63, which is exact here: every shifted value is below
    ``2**40`` in magnitude, so 63 gives the same floor (0 or -1) as any larger shift.
    """
    left = np.left_shift(value, np.clip(amount, 0, 63))
    right = np.right_shift(value, np.clip(-amount, 0, 63))
    return np.where(amount >= 0, left, right)


def _shift_int(value: int, amount: int) -> int:
    """Scalar ``shift(value, amount)``: left for ``amount >= 0``, else floor right."""
    return value << amount if amount >= 0 else value >> -amount


def _front_end(codes: np.ndarray, exp_bits: int) -> tuple[np.ndarray, ...]:
    """Return ``(t, n, f, M, P)`` per element (pipeline stages that need no state)."""
    table = np.array(exp2_table(exp_bits), dtype=np.int64)
    t = (codes * LOG2E_CODE) >> (LOG2E_FRAC + _LOGIT_FRAC - T_FRAC)
    n = t >> T_FRAC
    f = t & ((1 << T_FRAC) - 1)
    low_bits = T_FRAC - exp_bits
    index = f >> low_bits
    rest = f & ((1 << low_bits) - 1)
    mant = table[index] + (((table[index + 1] - table[index]) * rest) >> low_bits)
    return t, n, f, mant, mant * codes


def _probability(mant: int, shift: int, recip: int) -> int:
    """``min(65535, round(mant * recip / 2**(24 + shift)))``; ``shift < 0`` saturates."""
    if shift < 0:
        return _PROB_MAX
    total = _PROB_SHIFT + shift
    return min(_PROB_MAX, (mant * recip + (1 << (total - 1))) >> total)


def finish(z: int, w: int, z_exp: int, m_max: int, params: AAUParams = _DEFAULT_PARAMS) -> Finish:
    """Post-pass arithmetic: from the accumulators to ``top1``, entropy and ``recip``.

    Parameters
    ----------
    z, w, z_exp : the accumulators and reference at the end of the pass.
    m_max : the mantissa ``M`` of the max element (latched with ``argmax``).
    params : table sizes.
    """
    if z < 1 << Z_FRAC:
        raise ValueError(f"z must be at least 2**{Z_FRAC} (Z >= 1.0), not {z!r}")
    bits = params.ln_table_bits
    table = log2_table(bits)
    lead = z.bit_length() - 1
    mant = (z >> (lead - LOG2_MANT_BITS)) - (1 << LOG2_MANT_BITS)
    low_bits = LOG2_MANT_BITS - bits
    index, rest = mant >> low_bits, mant & ((1 << low_bits) - 1)
    log2_frac = table[index] + (((table[index + 1] - table[index]) * rest) >> low_bits)
    log2_s = ((z_exp + lead - Z_FRAC) << LOG2_FRAC) + log2_frac
    ln_s = (log2_s * LN2_CODE) >> (LOG2_FRAC + LN2_FRAC - H_FRAC)
    # E[x] = (W / 2**20) / (Z / 2**32) / 256 nats, to 24 fraction bits: magnitude divide.
    quotient = (abs(w) << (Z_FRAC + H_FRAC - W_FRAC - _LOGIT_FRAC)) // z
    mean_x = quotient if w >= 0 else -quotient
    entropy_fine = ln_s - mean_x
    half = 1 << (H_FRAC - ENTROPY_FRAC_BITS - 1)
    entropy = min(_ENTROPY_MAX, max(0, (entropy_fine + half) >> (H_FRAC - ENTROPY_FRAC_BITS)))
    recip = (1 << (Z_FRAC + RECIP_FRAC)) // z
    top1 = _probability(m_max, 0, recip)
    return Finish(lead, mant, log2_frac, log2_s, ln_s, mean_x, entropy_fine, recip, top1, entropy)


# ---------------------------------------------------------------------------------------
# STATS


def aau_stats_sequential(x: object, params: AAUParams = _DEFAULT_PARAMS) -> Stats:
    """STATS, written as the one-element-per-cycle loop the RTL implements (slow).

    This is the definition; :func:`aau_stats` must agree with it bit for bit.
    """
    return _sequential(x, params)[0]


def aau_trace(x: object, params: AAUParams = _DEFAULT_PARAMS) -> tuple[Stats, ElementTrace]:
    """STATS with every per-element intermediate (sequential; for RTL debugging)."""
    return _sequential(x, params)


def _sequential(x: object, params: AAUParams) -> tuple[Stats, ElementTrace]:
    codes = _check_vector(x, params)
    t, n, f, mant, prod = _front_end(codes, params.exp_table_bits)
    size = codes.size
    ref_seq, k_seq, s_seq, e_seq, w_seq, z_seq, wacc_seq = ([0] * size for _ in range(7))
    z = w_acc = 0
    best, best_index, ref = int(codes[0]), 0, int(n[0])
    for i in range(size):
        code, n_i = int(codes[i]), int(n[i])
        if code > best:  # strict: the first of equal maxima keeps argmax
            best, best_index = code, i
        new_ref = max(ref, n_i)
        k, ref = new_ref - ref, new_ref
        s = ref - n_i
        e_i = _shift_int(int(mant[i]), _Z_GUARD - s)
        w_i = _shift_int(int(prod[i]), _W_GUARD - s)
        z = (z >> k) + e_i
        w_acc = (w_acc >> k) + w_i
        ref_seq[i], k_seq[i], s_seq[i] = ref, k, s
        e_seq[i], w_seq[i], z_seq[i], wacc_seq[i] = e_i, w_i, z, w_acc
    end = finish(z, w_acc, ref, int(mant[best_index]), params)
    stats = Stats(best, best_index, z, ref, w_acc, end.recip, end.top1, end.entropy)
    as_array = np.array
    trace = ElementTrace(
        t, n, f, mant, prod, as_array(ref_seq), as_array(k_seq), as_array(s_seq),
        as_array(e_seq), as_array(w_seq), as_array(z_seq, dtype=object),
        as_array(wacc_seq, dtype=object),
    )  # fmt: skip
    return stats, trace


def _accumulate(codes: np.ndarray, params: AAUParams) -> tuple[int, int, int, np.ndarray]:
    """Vectorised accumulation: return ``(Z, W, R, mantissas)``.

    Identical to the sequential loop: the rescale shift ``k`` is non-zero only where the
    running reference ``R`` grows, so between two such elements Z and W take plain
    integer sums (exact and associative) of contributions computed with that segment's
    ``R``; only the (at most ~370) segment boundaries need the sequential shift.
    """
    _, n, _, mant, prod = _front_end(codes, params.exp_table_bits)
    ref = np.maximum.accumulate(n)
    shift = ref - n
    e = _shift(mant, _Z_GUARD - shift)
    w = _shift(prod, _W_GUARD - shift)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(ref)) + 1))
    seg_e = np.add.reduceat(e, starts)
    seg_w = np.add.reduceat(w, starts)
    seg_ref = ref[starts]
    z = w_acc = 0
    previous = int(seg_ref[0])
    for r_j, e_j, w_j in zip(seg_ref.tolist(), seg_e.tolist(), seg_w.tolist(), strict=True):
        k, previous = r_j - previous, r_j
        z = (z >> k) + e_j
        w_acc = (w_acc >> k) + w_j
    return z, w_acc, previous, mant


def aau_stats(x: object, params: AAUParams = _DEFAULT_PARAMS) -> Stats:
    """STATS: one online pass giving max, argmax, Z, top-1 probability and entropy.

    Parameters
    ----------
    x : 1-D integer array of INT16 Q8.8 codes, ``1 <= len(x) <= params.max_length``.
    params : the shared parameter set.

    Returns
    -------
    Stats
        Raw integer codes; see :class:`Stats`.

    Notes
    -----
    Vectorised but bit-identical to :func:`aau_stats_sequential` (the tests compare them);
    a 65,536-element vector takes a few milliseconds.
    """
    codes = _check_vector(x, params)
    z, w_acc, ref, mant = _accumulate(codes, params)
    best_index = int(np.argmax(codes))  # first occurrence, as the strict compare
    end = finish(z, w_acc, ref, int(mant[best_index]), params)
    return Stats(
        int(codes[best_index]), best_index, z, ref, w_acc, end.recip, end.top1, end.entropy
    )


# ---------------------------------------------------------------------------------------
# SOFTMAX, SUM, MAX


def aau_softmax(
    x: object, params: AAUParams = _DEFAULT_PARAMS, stats: Stats | None = None
) -> np.ndarray:
    """SOFTMAX: the second pass, ``p_i`` in UQ0.16 (int64 codes, saturating at 65535).

    Parameters
    ----------
    x : the vector (INT16 Q8.8 codes).
    params : the shared parameter set.
    stats : the STATS result the unit holds from the first pass; by default the STATS
        pass over ``x`` itself. Elements whose ``n_i`` exceeds ``stats.z_exp`` (possible
        only if ``x`` is not the vector of the STATS pass) saturate to 65535.
    """
    codes = _check_vector(x, params)
    if stats is None:
        stats = aau_stats(codes, params)
    _, n, _, mant, _ = _front_end(codes, params.exp_table_bits)
    shift = stats.z_exp - n
    total = _PROB_SHIFT + np.clip(shift, 0, 38)  # beyond 38 the result is 0 anyway
    rounded = (mant * stats.recip + np.left_shift(1, total - 1)) >> total
    prob = np.where(shift > 38, 0, np.minimum(rounded, _PROB_MAX))
    return np.where(shift < 0, _PROB_MAX, prob).astype(np.int64)


def aau_sum(x: object, params: AAUParams = _DEFAULT_PARAMS) -> int:
    """SUM: the exact signed sum of the codes, Q(8 + clog2(max_length)).8 (``sum_bits``)."""
    return int(np.sum(_check_vector(x, params)))


def aau_max(x: object, params: AAUParams = _DEFAULT_PARAMS) -> tuple[int, int]:
    """MAX: ``(max code, index of its first occurrence)``."""
    codes = _check_vector(x, params)
    index = int(np.argmax(codes))
    return int(codes[index]), index


# ---------------------------------------------------------------------------------------
# NORM: LAYERNORM / RMSNORM first pass, NORM second pass


def _check_parameters(name: str, values: object, size: int) -> np.ndarray:
    """``values`` as an int64 array of ``size`` INT16 codes, or raise with an exact message."""
    array = np.asarray(values)
    if array.shape != (size,):
        raise ValueError(f"{name} must have the shape of x, ({size},), not {array.shape}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer Q8.8 codes, not dtype {array.dtype}")
    low, high = int(array.min()), int(array.max())
    if low < -(1 << 15) or high > (1 << 15) - 1:
        bad = low if low < -(1 << 15) else high
        raise ValueError(f"{name} must hold INT16 codes (-32768..32767), found {bad}")
    return array.astype(np.int64)


def aau_norm_stats(
    x: object, params: AAUParams = _DEFAULT_PARAMS, *, rms: bool = False
) -> NormStats:
    """LAYERNORM (or RMSNORM with ``rms=True``): the first pass and its post pass.

    Parameters
    ----------
    x : 1-D integer array of INT16 Q8.8 codes, ``1 <= len(x) <= params.max_length``.
    params : the shared parameter set (``norm_eps`` is ``E``).
    rms : RMSNorm (no centring, ``T = 0``) instead of LayerNorm.
    """
    codes = _check_vector(x, params)
    count = codes.size
    total = int(np.sum(codes))
    squares = int(np.sum(codes * codes))  # < 2**50 for any max_length: int64 is exact
    sum_sq = (squares << NORM_SQUARE_SHIFT) + count * params.norm_eps
    centre = 0 if rms else total
    u = count * sum_sq - (centre * centre << NORM_SQUARE_SHIFT)
    shift = (u.bit_length() - 1) >> 1
    radicand = _shift_int(u, 2 * (NORM_ROOT_BITS - 1) - 2 * shift)
    root = math.isqrt(radicand)
    rstd = (1 << (2 * NORM_ROOT_BITS - 1)) // root
    return NormStats(count, total, sum_sq, centre, u, shift, radicand, root, rstd)


def aau_norm(
    x: object,
    gamma: object,
    beta: object,
    params: AAUParams = _DEFAULT_PARAMS,
    stats: NormStats | None = None,
    *,
    rms: bool = False,
) -> np.ndarray:
    """NORM: the second pass, ``y_i`` in Q8.8 (int64 codes).

    Parameters
    ----------
    x : the vector (INT16 Q8.8 codes).
    gamma, beta : the scale and bias of each element (INT16 Q8.8 codes, as long as ``x``):
        the parameter stream.
    params : the shared parameter set.
    stats : the first pass the unit holds (:func:`aau_norm_stats`, or :data:`NORM_RESET`);
        by default the LAYERNORM (RMSNORM with ``rms=True``) pass over ``x`` itself.
    """
    codes = _check_vector(x, params)
    scale = _check_parameters("gamma", gamma, codes.size)
    bias = _check_parameters("beta", beta, codes.size)
    if stats is None:
        stats = aau_norm_stats(codes, params, rms=rms)
    centred = stats.count * codes - stats.centre  # |c| < 2**32
    z_low, z_high = -(1 << (NORM_Z_BITS - 1)), (1 << (NORM_Z_BITS - 1)) - 1
    z = np.clip((centred * stats.rstd) >> stats.rstd_shift, z_low, z_high)  # |c r| < 2**57
    half = 1 << (NORM_Z_FRAC - 1)
    y = ((z * scale + half) >> NORM_Z_FRAC) + bias
    return np.clip(y, -(1 << 15), (1 << 15) - 1).astype(np.int64)


# ---------------------------------------------------------------------------------------
# RELU, SILU, GELU


def aau_relu(x: object, params: AAUParams = _DEFAULT_PARAMS) -> np.ndarray:
    """RELU: ``max(X, 0)``, exact (int64 codes)."""
    return np.maximum(_check_vector(x, params), 0)


def _gated(codes: np.ndarray, table: tuple[int, ...], span_bits: int, bits: int) -> np.ndarray:
    """``round_shift(X * g, 16)`` with ``g(|X|)`` interpolated in ``table`` over
    ``|X| < 2**span_bits``, 1 beyond, and ``g(-a) = 1 - g(a)`` (``docs/aau.md`` 10)."""
    entries = np.array(table, dtype=np.int64)
    one = 1 << GATE_FRAC
    magnitude = np.abs(codes)
    low_bits = span_bits - bits
    inside = magnitude < (1 << span_bits)
    index = np.where(inside, magnitude >> low_bits, 0)
    rest = magnitude & ((1 << low_bits) - 1)
    steps = entries[index + 1] - entries[index]  # index < 2**bits: index + 1 is in the table
    h = np.where(inside, entries[index] + ((steps * rest) >> low_bits), one)
    gate = np.where(codes >= 0, h, one - h)
    return (codes * gate + (1 << (GATE_FRAC - 1))) >> GATE_FRAC


def aau_silu(x: object, params: AAUParams = _DEFAULT_PARAMS) -> np.ndarray:
    """SILU: ``x * sigmoid(x)`` in Q8.8 (int64 codes), gate from :func:`silu_table`."""
    codes = _check_vector(x, params)
    bits = params.gate_table_bits
    return _gated(codes, silu_table(bits), SILU_SPAN_BITS, bits)


def aau_gelu(x: object, params: AAUParams = _DEFAULT_PARAMS) -> np.ndarray:
    """GELU (tanh form) in Q8.8 (int64 codes), gate from :func:`gelu_table`."""
    codes = _check_vector(x, params)
    bits = params.gate_table_bits
    return _gated(codes, gelu_table(bits), GELU_SPAN_BITS, bits)


# ---------------------------------------------------------------------------------------
# float64 reference


def reference_stats(x_float: object) -> RefStats:
    """Exact-arithmetic (float64) STATS of logits given as values (not codes)."""
    values = np.asarray(x_float, dtype=np.float64)
    index = int(np.argmax(values))
    delta = values - values[index]
    weights = np.exp(delta)
    z = float(np.sum(weights))
    entropy = math.log(z) - float(np.dot(weights, delta)) / z
    return RefStats(float(values[index]), index, z, 1.0 / z, entropy)


def reference_softmax(x_float: object) -> np.ndarray:
    """Float64 softmax of logits given as values."""
    values = np.asarray(x_float, dtype=np.float64)
    weights = np.exp(values - values.max())
    return weights / weights.sum()


def reference_layernorm(
    x_float: object, gamma_float: object, beta_float: object, eps: float
) -> np.ndarray:
    """Float64 LayerNorm of values (population variance): ``(x - mean) / sqrt(var + eps) *
    gamma + beta``."""
    values = np.asarray(x_float, dtype=np.float64)
    centred = values - values.mean()
    return centred / np.sqrt(np.mean(centred * centred) + eps) * gamma_float + beta_float


def reference_rmsnorm(
    x_float: object, gamma_float: object, beta_float: object, eps: float
) -> np.ndarray:
    """Float64 RMSNorm of values: ``x / sqrt(mean(x**2) + eps) * gamma + beta``."""
    values = np.asarray(x_float, dtype=np.float64)
    return values / np.sqrt(np.mean(values * values) + eps) * gamma_float + beta_float


def reference_silu(x_float: object) -> np.ndarray:
    """Float64 SiLU of values: ``x * sigmoid(x)``."""
    values = np.asarray(x_float, dtype=np.float64)
    return values / (1.0 + np.exp(-values))


def reference_gelu(x_float: object) -> np.ndarray:
    """Float64 GELU of values, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x**3)))``."""
    values = np.asarray(x_float, dtype=np.float64)
    inner = math.sqrt(2.0 / math.pi) * (values + GELU_CUBIC * values**3)
    return 0.5 * values * (1.0 + np.tanh(inner))
