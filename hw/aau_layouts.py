"""The AAU's shared formats (``docs/aau.md`` 8 and 11): the mode codes, the widths of the
accumulators, the stream layouts of the unit's ports and of the vector the accumulate stage
hands to the post pass, and the parameter check every AAU component makes.
"""

from __future__ import annotations

from amaranth.hdl import signed
from amaranth.lib import data, enum, wiring

from ahasd.hw.aau_back_end import NORM_SHIFT_BITS, RECIP_BITS
from ahasd.hw.aau_tables import LOGIT_BITS, MANTISSA_BITS, N_BITS
from ahasd.params import AAUParams

__all__ = [
    "Z_FRAC",
    "Mode",
    "accumulators_layout",
    "argmax_bits",
    "check_params",
    "count_bits",
    "input_layout",
    "norm_u_bits",
    "result_layout",
    "sum_bits",
    "sum_sq_bits",
    "w_bits",
    "z_bits",
]

Z_FRAC = 32  # Z is UQ(1 + clog2 N).32


class Mode(enum.Enum, shape=4):
    """What the unit computes over a vector (taken from the vector's first element).

    Codes 10 to 15 are reserved: the unit treats them as ``SUM`` (``docs/aau.md`` 11).
    """

    STATS = 0
    SOFTMAX = 1
    SUM = 2
    MAX = 3
    LAYERNORM = 4
    RMSNORM = 5
    NORM = 6
    RELU = 7
    SILU = 8
    GELU = 9


def _clog2(value: int) -> int:
    return (value - 1).bit_length()


def argmax_bits(params: AAUParams) -> int:
    """Width of an element index: ``clog2(max_length)``, at least one bit."""
    return max(1, _clog2(params.max_length))


def count_bits(params: AAUParams) -> int:
    """Width of an element count ``N <= max_length``: ``clog2(max_length) + 1``."""
    return _clog2(params.max_length) + 1


def z_bits(params: AAUParams) -> int:
    """``Z`` is UQ(1 + clog2 N).32 (``docs/aau.md`` section 8)."""
    return Z_FRAC + 1 + _clog2(params.max_length)


def w_bits(params: AAUParams) -> int:
    """``W`` (20 fraction bits, signed): ``|W| < N * 2**36`` (``docs/aau.md`` section 8)."""
    return 37 + _clog2(params.max_length)


def sum_bits(params: AAUParams) -> int:
    """SUM is exact: ``16 + clog2(max_length)`` bits, signed, Q(8 + clog2 N).8."""
    return LOGIT_BITS + _clog2(params.max_length)


def sum_sq_bits(params: AAUParams) -> int:
    """NORM's ``S2 = sum (X**2 * 2**16 + E) < 2**(47 + clog2 N)`` (``docs/aau.md`` 9.5)."""
    return 47 + _clog2(params.max_length)


def norm_u_bits(params: AAUParams) -> int:
    """NORM's ``U <= N * S2 < 2**(47 + 2 clog2 N)`` (``docs/aau.md`` 9.5)."""
    return 47 + 2 * _clog2(params.max_length)


def input_layout(params: AAUParams) -> data.StructLayout:
    """An input element: Q8.8 ``data``, ``last`` of its vector, and the vector's ``mode``
    (read from the first element of each vector, ignored on the others)."""
    return data.StructLayout({"data": signed(LOGIT_BITS), "last": 1, "mode": Mode})


def result_layout(params: AAUParams) -> data.StructLayout:
    """The result of a reduction vector (``docs/aau.md`` 11).

    ``mode``, ``max``, ``argmax`` and ``sum`` in every reduction mode; ``z``, ``z_exp``
    (``R``) and ``w`` in STATS, SUM, MAX (0 in the NORM modes); ``recip``, ``top1`` and
    ``entropy`` in STATS only; ``sum_sq`` (``S2``), ``rstd`` (``r``) and ``rstd_shift``
    (``k``) in LAYERNORM and RMSNORM only (0 otherwise).
    """
    return data.StructLayout(
        {
            "mode": Mode,
            "max": signed(LOGIT_BITS),
            "argmax": argmax_bits(params),
            "sum": signed(sum_bits(params)),
            "z": z_bits(params),
            "z_exp": signed(N_BITS),
            "w": signed(w_bits(params)),
            "recip": RECIP_BITS,
            "top1": 16,
            "entropy": 16,
            "sum_sq": sum_sq_bits(params),
            "rstd": RECIP_BITS,
            "rstd_shift": NORM_SHIFT_BITS,
        }
    )


def accumulators_layout(params: AAUParams) -> data.StructLayout:
    """A finished reduction vector, as the accumulate stage hands it to the post pass:
    its ``mode``, ``max``, ``argmax``, ``sum``, the accumulators ``z`` and ``w``, their
    exponent ``ref`` (``R``), ``m_max``, the mantissa of the max element (UQ1.16), the
    element ``count`` and NORM's sum of squares ``sum_sq``."""
    return data.StructLayout(
        {
            "mode": Mode,
            "max": signed(LOGIT_BITS),
            "argmax": argmax_bits(params),
            "sum": signed(sum_bits(params)),
            "z": z_bits(params),
            "w": signed(w_bits(params)),
            "ref": signed(N_BITS),
            "m_max": MANTISSA_BITS,
            "count": count_bits(params),
            "sum_sq": sum_sq_bits(params),
        }
    )


def check_params(component: wiring.Component, params: object) -> None:
    """Reject ``params`` unless it is an :class:`AAUParams` (``TypeError``), telling Amaranth
    that the half-built ``component`` is not a forgotten one."""
    if not isinstance(params, AAUParams):
        component._MustUse__silence = True  # a rejected component is not a forgotten one
        raise TypeError(f"params must be an AAUParams, not {params!r}")
