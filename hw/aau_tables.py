"""The AAU's tables and constants (``docs/aau.md`` section 2): ``exp``, ``log2`` and the
SiLU and GELU gates, each computed in 50-digit decimal arithmetic, and the ROM pair an
interpolating unit reads them from.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

from amaranth.hdl import Array, Const

__all__ = [
    "GATE_BITS",
    "GATE_FRAC",
    "GELU_SPAN_BITS",
    "LN2_CODE",
    "LN_FRAC",
    "LOG2E_CODE",
    "LOG2_FRAC",
    "LOGIT_BITS",
    "MANTISSA_BITS",
    "N_BITS",
    "SILU_SPAN_BITS",
    "T_BITS",
    "T_FRAC",
    "exp2_table",
    "gelu_table",
    "log2_table",
    "silu_table",
    "table_roms",
]

LOG2E_CODE = 24204406  # round(log2(e) * 2**24), UQ1.24
LN2_CODE = 11629080  # round(ln(2) * 2**24), UQ0.24
LOGIT_BITS = 16  # the input x, Q8.8
T_BITS = 25  # t = (X * LOG2E_CODE) >> 16, Q9.16
T_FRAC = 16
N_BITS = 9  # n = t >> 16, in -185 .. 184
MANTISSA_BITS = 17  # M = 2**frac(t), UQ1.16
LOG2_FRAC = 20  # log2 table entries, the mantissa below the leading one, log2 results
LN_FRAC = 24  # ln results
GATE_FRAC = 16  # SILU/GELU gates, UQ1.16
GATE_BITS = 17  # a gate is 0 .. 2**16
SILU_SPAN_BITS = 12  # the SiLU table spans |X| < 2**12 (|x| < 16)
GELU_SPAN_BITS = 10  # the GELU table spans |X| < 2**10 (|x| < 4)


def exp2_table(bits: int) -> list[int]:
    """``E[j] = round(2**(16 + j / 2**bits))``, ``j = 0 .. 2**bits`` (UQ1.16).

    Computed in 50-digit decimal arithmetic (round half up; no entry is a tie).
    """
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        return [
            int(
                (Decimal(2) ** (16 + Decimal(j) / size) + Decimal("0.5")).to_integral_value(
                    "ROUND_FLOOR"
                )
            )
            for j in range(size + 1)
        ]


def log2_table(bits: int) -> list[int]:
    """``L[j] = round(2**20 * log2(1 + j / 2**bits))``, ``j = 0 .. 2**bits`` (UQ1.20)."""
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        ln2 = Decimal(2).ln()
        return [
            int(
                (
                    Decimal(1 << LOG2_FRAC) * (1 + Decimal(j) / size).ln() / ln2 + Decimal("0.5")
                ).to_integral_value("ROUND_FLOOR")
            )
            for j in range(size + 1)
        ]


def _decimal_pi() -> Decimal:
    """pi at the current decimal precision, by Machin's formula ``16 atan(1/5) -
    4 atan(1/239)`` (the Taylor series of ``atan(1/n)`` converges fast for these ``n``)."""

    def arctan_of_inverse(n: int) -> Decimal:
        term = total = Decimal(1) / n
        square = n * n
        k = 1
        while True:
            term /= -square
            addend = term / (2 * k + 1)
            if total + addend == total:
                return total
            total += addend
            k += 1

    return 16 * arctan_of_inverse(5) - 4 * arctan_of_inverse(239)


def _gate_table(bits: int, span: int, gate) -> list[int]:
    """``round(2**16 * gate(span * j / 2**bits))`` for ``j = 0 .. 2**bits``, in 50-digit
    decimal arithmetic (round half up; only ``j = 0`` is exact, ``gate(0) = 1/2``)."""
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        return [
            int(
                (
                    gate(Decimal(span * j) / size) * (1 << GATE_FRAC) + Decimal("0.5")
                ).to_integral_value("ROUND_FLOOR")
            )
            for j in range(size + 1)
        ]


def silu_table(bits: int) -> list[int]:
    """``HS[j] = round(2**16 * sigmoid(16 j / 2**bits))``, ``j = 0 .. 2**bits`` (UQ1.16)."""
    return _gate_table(bits, 16, lambda a: 1 / (1 + (-a).exp()))


def gelu_table(bits: int) -> list[int]:
    """``HG[j] = round(2**16 * (1 + tanh(sqrt(2/pi) (a + 0.044715 a**3))) / 2)`` at
    ``a = 4 j / 2**bits``, ``j = 0 .. 2**bits`` (UQ1.16)."""

    def gate(a: Decimal) -> Decimal:
        u = (2 / _decimal_pi()).sqrt() * (a + Decimal("0.044715") * a**3)
        # (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u))
        return 1 / (1 + (-2 * u).exp())

    return _gate_table(bits, 4, gate)


def table_roms(entries: list[int], base_bits: int) -> tuple[Array, Array, int]:
    """An interpolation table as two ROMs: ``base[j] = T[j]`` and ``step[j] = T[j+1] - T[j]``,
    and the width of the steps."""
    steps = [b - a for a, b in itertools.pairwise(entries)]
    step_bits = max(1, max(steps).bit_length())
    base_rom = Array(Const(value, base_bits) for value in entries[:-1])
    step_rom = Array(Const(value, step_bits) for value in steps)
    return base_rom, step_rom, step_bits
