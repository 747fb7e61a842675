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

The other modes (``docs/aau.md`` sections 9 and 10: NORM, RELU, SILU, GELU) are
:mod:`ahasd.golden.aau_modes`.

Public API (stable): :func:`aau_stats`, :func:`aau_softmax`, :func:`aau_sum`,
:func:`aau_max`, :func:`aau_trace` (per-element intermediates, for RTL debugging), the
tables :func:`exp2_table`, :func:`log2_table`, the input check :func:`check_vector`, and the
format constants below. :func:`aau_stats` is vectorised and provably identical to the
sequential :func:`aau_stats_sequential` (see :func:`aau_stats`). The float64 references are
:mod:`ahasd.golden.aau_reference`.
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
    "Stats",
    "aau_max",
    "aau_softmax",
    "aau_stats",
    "aau_stats_sequential",
    "aau_sum",
    "aau_trace",
    "check_vector",
    "exp2_table",
    "finish",
    "log2_table",
    "shift_int",
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


# ---------------------------------------------------------------------------------------
# Input checking and the element front end


def check_vector(x: object, params: AAUParams) -> np.ndarray:
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


def shift_int(value: int, amount: int) -> int:
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
    codes = check_vector(x, params)
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
        e_i = shift_int(int(mant[i]), _Z_GUARD - s)
        w_i = shift_int(int(prod[i]), _W_GUARD - s)
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
    codes = check_vector(x, params)
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
    codes = check_vector(x, params)
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
    return int(np.sum(check_vector(x, params)))


def aau_max(x: object, params: AAUParams = _DEFAULT_PARAMS) -> tuple[int, int]:
    """MAX: ``(max code, index of its first occurrence)``."""
    codes = check_vector(x, params)
    index = int(np.argmax(codes))
    return int(codes[index]), index
