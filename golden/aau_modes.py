"""Golden model of the AAU's NORM and activation modes (``docs/aau.md`` sections 9 and 10).

- NORM (LayerNorm, RMSNorm): a first pass accumulates ``S1 = sum X`` and
   ``S2 = sum (X**2 * 2**16 + E)`` (``eps = E / 2**32`` added per element); once per vector
   ``U = N S2 - 2**16 T**2`` (``T = S1``, or 0 for RMSNorm) is normalised by an even shift,
   ``s = isqrt(V)``, ``r = 2**47 // s``; the second pass outputs
   ``y = clamp(round(clamp((N X - T) r >> k) * G / 2**16) + B)`` in Q8.8.
- RELU exactly; SILU and GELU as ``x * g(x)`` with the gate ``g(|x|)`` from a
   ``2**gate_table_bits + 1``-entry interpolated table and ``g(-a) = 1 - g(a)``.

The formats and the input check are those of :mod:`ahasd.golden.aau`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from ahasd.golden.aau import (
    GATE_FRAC,
    GELU_CUBIC,
    GELU_SPAN_BITS,
    NORM_ROOT_BITS,
    NORM_SQUARE_SHIFT,
    NORM_Z_BITS,
    NORM_Z_FRAC,
    SILU_SPAN_BITS,
    check_vector,
    shift_int,
)
from ahasd.params import AAUParams

__all__ = [
    "NORM_RESET",
    "NormStats",
    "aau_gelu",
    "aau_norm",
    "aau_norm_stats",
    "aau_relu",
    "aau_silu",
    "gelu_table",
    "silu_table",
]

_DEFAULT_PARAMS = AAUParams()  # frozen, so one shared default is safe


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
    span = (1 << SILU_SPAN_BITS) >> AAUParams.LOGIT_FRAC_BITS  # 16
    return tuple(
        math.floor(_sigmoid(span * j / size) * (1 << GATE_FRAC) + 0.5) for j in range(size + 1)
    )


@cache
def gelu_table(bits: int) -> tuple[int, ...]:
    """``2**bits + 1`` entries ``HG[j] = round(2**16 * (1 + tanh(sqrt(2/pi) (a + 0.044715
    a**3))) / 2)`` at ``a = 4 j / 2**bits``, UQ1.16 (``HG[0] = 32768``)."""
    size = 1 << bits
    span = (1 << GELU_SPAN_BITS) >> AAUParams.LOGIT_FRAC_BITS  # 4
    return tuple(
        math.floor(_gelu_gate(span * j / size) * (1 << GATE_FRAC) + 0.5) for j in range(size + 1)
    )


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
    codes = check_vector(x, params)
    count = codes.size
    total = int(np.sum(codes))
    squares = int(np.sum(codes * codes))  # < 2**50 for any max_length: int64 is exact
    sum_sq = (squares << NORM_SQUARE_SHIFT) + count * params.norm_eps
    centre = 0 if rms else total
    u = count * sum_sq - (centre * centre << NORM_SQUARE_SHIFT)
    shift = (u.bit_length() - 1) >> 1
    radicand = shift_int(u, 2 * (NORM_ROOT_BITS - 1) - 2 * shift)
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
    codes = check_vector(x, params)
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


def aau_relu(x: object, params: AAUParams = _DEFAULT_PARAMS) -> np.ndarray:
    """RELU: ``max(X, 0)``, exact (int64 codes)."""
    return np.maximum(check_vector(x, params), 0)


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
    codes = check_vector(x, params)
    bits = params.gate_table_bits
    return _gated(codes, silu_table(bits), SILU_SPAN_BITS, bits)


def aau_gelu(x: object, params: AAUParams = _DEFAULT_PARAMS) -> np.ndarray:
    """GELU (tanh form) in Q8.8 (int64 codes), gate from :func:`gelu_table`."""
    codes = check_vector(x, params)
    bits = params.gate_table_bits
    return _gated(codes, gelu_table(bits), GELU_SPAN_BITS, bits)
