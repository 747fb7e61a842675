"""Arithmetic units of the AAU (``docs/aau.md``), each a component of its own.

The AAU (``hw/aau.py``) composes them; other modes of the unit can reuse them:

===========================  ===============================================================
:class:`Exp2Unit`            ``exp(x) = M * 2**(n - 16)`` for a Q8.8 ``x``: ``t = x * log2 e``,
                             then ``2**frac(t)`` from an interpolated table (section 4.1); a
                             three-stage stream pipeline with a global stall, carrying a tag
:class:`LeadingOne`          position of the highest set bit (combinational)
:class:`LogUnit`             ``log2`` and ``ln`` of ``2**exponent * z``: leading one,
                             interpolated ``log2(1 + m)`` table, ``* ln 2`` (section 5.1); a
                             free-running pipeline of fixed latency
:class:`RestoringDivider`    ``floor(dividend / divisor)`` and the remainder, one quotient bit
                             per cycle (section 5.2), widths as parameters
:class:`RestoringSquareRoot` ``isqrt(radicand)`` and the remainder, one root bit per cycle
                             (section 9.2, the NORM post pass)
:class:`ShiftAddMultiplier`  ``multiplicand * multiplier``, one multiplier bit per cycle (the
                             NORM post pass's products)
:class:`GateUnit`            the gate ``g(x)`` of SILU and GELU (``x * g(x)``) from an
                             interpolated table over ``|x|`` (section 10); a three-stage stream
                             pipeline with a global stall, carrying a tag, like ``Exp2Unit``
===========================  ===============================================================

The tables and the two constants are the ones of ``docs/aau.md`` section 2.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

from amaranth.hdl import (
    Array,
    Cat,
    Const,
    Module,
    Mux,
    Shape,
    ShapeCastable,
    Signal,
    Value,
    signed,
)
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import partial_products, sum_of, widened

__all__ = [
    "EXP_LATENCY",
    "GATE_BITS",
    "GATE_LATENCY",
    "LN2_CODE",
    "LN_FRAC",
    "LN_LATENCY",
    "LOG2E_CODE",
    "LOG2_FRAC",
    "LOG2_LATENCY",
    "LOGIT_BITS",
    "MANTISSA_BITS",
    "N_BITS",
    "Exp2Unit",
    "GateUnit",
    "LeadingOne",
    "LogUnit",
    "RestoringDivider",
    "RestoringSquareRoot",
    "ShiftAddMultiplier",
    "decoded",
    "exp2_table",
    "exp_input_layout",
    "exp_output_layout",
    "gate_input_layout",
    "gate_output_layout",
    "gelu_table",
    "log2_table",
    "silu_table",
    "widen",
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

# Pipeline depths in edges, the one that takes (samples) the input included.
EXP_LATENCY = 3  # Exp2Unit: x to o
LOG2_LATENCY = 3  # LogUnit: z, exponent to log2
LN_LATENCY = 4  # LogUnit: z, exponent to ln
GATE_LATENCY = 3  # GateUnit: x to o


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


def widen(m: Module, value, width: int) -> Signal:
    """``value`` zero- or sign-extended to ``width`` bits in a wire of its own, so that both
    operands of an add have the same width (Verilator's lint wants that, and the synthesiser
    narrows them back). Call it inside the ``m.If`` that uses it: the assignment is then
    conditional and the wire reaches the Verilog (0 outside the condition); an
    unconditional one is folded back into a narrow operand."""
    value = Value.cast(value)
    if width < len(value):
        raise ValueError(f"cannot extend {len(value)} bits to {width}")
    wide = Signal(signed(width) if value.shape().signed else width)
    m.d.comb += wide.eq(value)
    return wide


def decoded(m: Module, value, *members) -> Signal:
    """A bit that is high while ``value`` (an enum-shaped signal) is one of ``members``,
    decoded by a ``Switch`` with a ``Default``. A ``==`` against an enum member reaches the
    Verilog as a constant narrower than the signal (or as ``!`` for code 0), which
    Verilator's lint reports; case patterns keep the full width."""
    flag = Signal()
    with m.Switch(value):
        with m.Case(*members):
            m.d.comb += flag.eq(1)
        with m.Default():
            m.d.comb += flag.eq(0)
    return flag


def _rejected(component: wiring.Component, error: Exception) -> Exception:
    """``error``, after telling Amaranth that the half-built ``component`` is not a forgotten
    one (it warns about every elaboratable that is never elaborated)."""
    component._MustUse__silence = True
    return error


def _check_int(component: wiring.Component, name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _rejected(component, TypeError(f"{name} must be an integer, not {value!r}"))
    if not low <= value <= high:
        raise _rejected(
            component, ValueError(f"{name} must be between {low} and {high}, not {value!r}")
        )


def _table_roms(entries: list[int], base_bits: int) -> tuple[Array, Array, int]:
    """An interpolation table as two ROMs: ``base[j] = T[j]`` and ``step[j] = T[j+1] - T[j]``,
    and the width of the steps."""
    steps = [b - a for a, b in itertools.pairwise(entries)]
    step_bits = max(1, max(steps).bit_length())
    base_rom = Array(Const(value, base_bits) for value in entries[:-1])
    step_rom = Array(Const(value, step_bits) for value in steps)
    return base_rom, step_rom, step_bits


# ---------------------------------------------------------------------------------------------
# exp


def exp_input_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """An :class:`Exp2Unit` input: the Q8.8 code ``x`` and a ``tag`` carried alongside."""
    return data.StructLayout({"x": signed(LOGIT_BITS), "tag": tag_shape})


def exp_output_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """An :class:`Exp2Unit` output: ``exp(x) = m * 2**(n - 16)``, ``n`` the integer part of
    ``t = x * log2 e`` (signed), ``m = 2**frac(t)`` (UQ1.16, ``65536 <= m < 131072``), and the
    input's ``tag``."""
    return data.StructLayout({"n": signed(N_BITS), "m": MANTISSA_BITS, "tag": tag_shape})


class Exp2Unit(wiring.Component):
    """``exp(x)`` in base 2 with an integer exponent (``docs/aau.md`` section 4.1, steps 1-3).

    For a Q8.8 code ``X``: ``t = (X * LOG2E_CODE) >> 16`` (Q9.16, floor), ``n = t >> 16``,
    ``f = t & 0xFFFF``; ``j = f >> (16 - B)``, ``r = f & (2**(16 - B) - 1)`` and
    ``M = E[j] + (((E[j+1] - E[j]) * r) >> (16 - B))`` with ``E = exp2_table(B)``. Then
    ``exp(X / 256) ~ M * 2**(n - 16)``.

    Parameters
    ----------
    table_bits : int, keyword-only
        ``B``, the address bits of the exp table (``2**B + 1`` entries), 1 to 12.
    tag_shape : shape-castable, keyword-only
        Shape of a ``tag`` carried unchanged alongside each element (default: none). A
        caller puts there whatever must stay with the element (its ``x``, its vector's
        flags).

    Members
    -------
    i : In(stream.Signature(exp_input_layout(tag_shape)))
        ``x`` and ``tag``. ``i.ready`` is ``o.ready`` (combinational, whatever ``i.valid``).
    o : Out(stream.Signature(exp_output_layout(tag_shape)))
        ``n``, ``m`` and the ``tag`` of each input element, in order.

    Three pipeline registers: ``t`` split into ``n`` and ``f`` (16 x 25 multiplier by a
    constant); the table read (``E[j]``, ``E[j+1] - E[j]``, ``r``); ``M`` (one small
    multiply-add, ``(E[j+1] - E[j]) x r`` plus ``E[j]`` shifted left, one carry propagation).

    Latency :data:`EXP_LATENCY` (3): an element is on ``o`` after three advancing edges
    (edges with ``o.ready`` high), the one that takes it included. Throughput one element per
    cycle.
    Backpressure: ``o.ready`` low freezes the whole pipeline, bubbles included (a global
    stall, so elements keep their spacing), and holds ``o``; ``i.ready`` follows it.
    """

    def __init__(self, *, table_bits: int, tag_shape: ShapeCastable | int = 0):
        _check_int(self, "table_bits", table_bits, 1, 12)
        try:
            Shape.cast(tag_shape)
        except TypeError:
            raise _rejected(
                self, TypeError(f"tag_shape must be a shape, not {tag_shape!r}")
            ) from None
        self.table_bits = table_bits
        self.tag_shape = tag_shape
        super().__init__(
            {
                "i": In(stream.Signature(exp_input_layout(tag_shape))),
                "o": Out(stream.Signature(exp_output_layout(tag_shape))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        r_bits = T_FRAC - self.table_bits
        base_rom, step_rom, _ = _table_roms(exp2_table(self.table_bits), MANTISSA_BITS)

        advance = self.o.ready  # a global stall: every register moves together
        m.d.comb += self.i.ready.eq(advance)

        # Stage 1: t = x * log2 e, split into its integer part n and its fraction f.
        valid1 = Signal()
        n1 = Signal(signed(N_BITS))
        f1 = Signal(T_FRAC)
        tag1 = Signal(self.tag_shape)
        t = Signal(signed(T_BITS))
        m.d.comb += t.eq((self.i.payload.x * Const(LOG2E_CODE, 25)).shift_right(T_FRAC))
        with m.If(advance):
            m.d.sync += [
                valid1.eq(self.i.valid),
                n1.eq(t[T_FRAC:].as_signed()),
                f1.eq(t[:T_FRAC]),
                tag1.eq(self.i.payload.tag),
            ]

        # Stage 2: table read at the top B bits of f; the low bits r interpolate.
        valid2 = Signal()
        n2 = Signal(signed(N_BITS))
        base2 = Signal(MANTISSA_BITS)
        step2 = Signal(MANTISSA_BITS)  # wider than needed: equal operand widths below
        rest2 = Signal(r_bits)
        tag2 = Signal(self.tag_shape)
        index = f1[r_bits:]
        with m.If(advance):
            m.d.sync += [
                valid2.eq(valid1),
                n2.eq(n1),
                base2.eq(base_rom[index]),
                step2.eq(step_rom[index]),
                rest2.eq(f1[:r_bits]),
                tag2.eq(tag1),
            ]

        # Stage 3: M = E[j] + (D[j] * r) >> (16 - B) = (D[j] * r + E[j] * 2**(16 - B)) >> (16 - B)
        # (the low bits of the second term are zero): one multiply-add, whose partial products
        # and addend the synthesiser sums in one tree with one carry propagation, where the
        # product and the add would be two. (D * r) >> (16 - B) < D because r < 2**(16 - B),
        # so M < E[j + 1] <= 2**17.
        valid3 = Signal()
        n3 = Signal(signed(N_BITS))
        mantissa3 = Signal(MANTISSA_BITS)
        tag3 = Signal(self.tag_shape)
        mantissa_sum = step2 * rest2 + Cat(Const(0, r_bits), base2)
        with m.If(advance):
            m.d.sync += [
                valid3.eq(valid2),
                n3.eq(n2),
                mantissa3.eq(mantissa_sum[r_bits : r_bits + MANTISSA_BITS]),
                tag3.eq(tag2),
            ]

        m.d.comb += [
            self.o.valid.eq(valid3),
            self.o.payload.n.eq(n3),
            self.o.payload.m.eq(mantissa3),
            self.o.payload.tag.eq(tag3),
        ]
        return m


# ---------------------------------------------------------------------------------------------
# log


class LeadingOne(wiring.Component):
    """Position of the highest set bit of ``value``, combinational.

    Parameters
    ----------
    width : int, keyword-only
        Width of ``value``, 1 to 1024.

    Members
    -------
    value : In(width)
    position : Out(range(width))
        ``floor(log2(value))`` when ``value`` is not 0; 0 when it is.
    nonzero : Out(1)
        ``value != 0``.

    No register: zero latency. A binary tree over ``value`` (padded to a power of two):
    each node takes the upper half's answer when that half has a set bit, else the lower
    half's, and adds one position bit; ``clog2(width)`` levels of multiplexers.
    """

    def __init__(self, *, width: int):
        _check_int(self, "width", width, 1, 1024)
        self.width = width
        super().__init__({"value": In(width), "position": Out(range(width)), "nonzero": Out(1)})

    def elaborate(self, platform):
        m = Module()

        m.d.comb += self.nonzero.eq(self.value.any())
        if self.width == 1:  # the position has no bits
            return m

        def search(bits):
            """(a bit of ``bits`` is set, position of the highest one) for a power-of-two
            number of ``bits``, at least two."""
            if len(bits) == 2:
                return bits.any(), bits[1]
            half = len(bits) // 2
            upper_set, upper_at = search(bits[half:])
            lower_set, lower_at = search(bits[:half])
            return upper_set | lower_set, Cat(Mux(upper_set, upper_at, lower_at), upper_set)

        padded = 1 << (self.width - 1).bit_length()
        _, position = search(Cat(self.value, Const(0, padded - self.width)))
        m.d.comb += self.position.eq(position[: len(self.position)])  # below width when set
        return m


class LogUnit(wiring.Component):
    """``log2`` and ``ln`` of ``S = 2**exponent * z / 2**z_frac_bits`` (``docs/aau.md`` 5.1).

    With ``lead`` the position of the leading one of ``z`` and ``C = table_bits``:
    ``mant = shift(z, 20 - lead) - 2**20`` (the 20 bits below the leading one, truncated),
    ``j = mant >> (20 - C)``, ``r = mant & (2**(20 - C) - 1)``,
    ``l = L[j] + (((L[j+1] - L[j]) * r) >> (20 - C))`` with ``L = log2_table(C)``; then
    ``log2 = ((exponent + lead - z_frac_bits) << 20) + l`` and
    ``ln = (log2 * LN2_CODE) >> 20`` (floor).

    Parameters
    ----------
    z_bits : int, keyword-only
        Width of ``z``, 1 to 256.
    z_frac_bits : int, keyword-only
        Fraction bits of ``z``, 0 to ``z_bits - 1``.
    exponent_bits : int, keyword-only
        Width of the signed ``exponent``, 1 to 32.
    table_bits : int, keyword-only
        ``C``, address bits of the log2 table (``2**C + 1`` entries), 1 to 12.

    Members
    -------
    z : In(z_bits)
        Must be at least ``2**z_frac_bits`` (``S >= 2**exponent``); below, ``lead`` reads as
        ``z_frac_bits`` and the result is meaningless.
    exponent : In(signed(exponent_bits))
    log2 : Out(signed(log2_bits))
        ``log2 S`` with 20 fraction bits.
    ln : Out(signed(ln_bits))
        ``ln S`` with 24 fraction bits.

    A free-running pipeline (no valid, no stall): the inputs sampled at edge ``a`` give
    ``log2`` after edge ``a + 2`` and ``ln`` after edge ``a + 3`` (:data:`LOG2_LATENCY` and
    :data:`LN_LATENCY` edges, the sampling one included); inputs held that long give steady
    outputs. Stages: leading one and mantissa, plus the integer
    part ``exponent + lead - z_frac_bits``; table read; ``log2`` (a concatenation: ``l <
    2**20``); ``ln`` (a ``log2_bits x 24`` multiplier by a constant). Throughput one input
    per cycle.
    """

    def __init__(self, *, z_bits: int, z_frac_bits: int, exponent_bits: int, table_bits: int):
        _check_int(self, "z_bits", z_bits, 1, 256)
        _check_int(self, "z_frac_bits", z_frac_bits, 0, z_bits - 1)
        _check_int(self, "exponent_bits", exponent_bits, 1, 32)
        _check_int(self, "table_bits", table_bits, 1, 12)
        self.z_bits = z_bits
        self.z_frac_bits = z_frac_bits
        self.exponent_bits = exponent_bits
        self.table_bits = table_bits
        # exponent + lead - z_frac_bits, lead - z_frac_bits in 0 .. z_bits - z_frac_bits - 1
        lead_bits = (z_bits - z_frac_bits - 1).bit_length() + 1
        self.integer_bits = max(exponent_bits, lead_bits) + 1
        self.log2_bits = self.integer_bits + LOG2_FRAC
        # |log2| < 2**(integer_bits - 1 + 20) and ln 2 < 1: ln fits integer_bits + 24 bits
        self.ln_bits = self.integer_bits + LN_FRAC
        super().__init__(
            {
                "z": In(z_bits),
                "exponent": In(signed(exponent_bits)),
                "log2": Out(signed(self.log2_bits)),
                "ln": Out(signed(self.ln_bits)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        frac = self.z_frac_bits
        r_bits = LOG2_FRAC - self.table_bits
        base_rom, step_rom, _ = _table_roms(log2_table(self.table_bits), LOG2_FRAC)

        # Stage 1: the leading one of z at or above the binary point; the mantissa below it.
        m.submodules.leading_one = leading_one = LeadingOne(width=self.z_bits - frac)
        m.d.comb += leading_one.value.eq(self.z[frac:])
        if frac >= LOG2_FRAC:
            aligned = self.z.shift_right(frac - LOG2_FRAC)
        else:
            aligned = self.z.shift_left(LOG2_FRAC - frac)
        # lead - z_frac_bits, at least as wide as the exponent, in a signal of its own (an
        # operand that is only a zero-extended port reaches the Verilog narrow, and Verilator's
        # lint wants the operands of an add as wide as its result less the carry); it counts
        # only when z has a one at or above the binary point.
        lead = Signal(signed(self.integer_bits - 1))
        with m.If(leading_one.nonzero):
            m.d.comb += lead.eq(leading_one.position)
        integer1 = Signal(signed(self.integer_bits))
        mantissa1 = Signal(LOG2_FRAC)  # truncated: the leading one falls off the top
        m.d.sync += [
            integer1.eq(self.exponent + lead),
            mantissa1.eq(aligned >> leading_one.position),
        ]

        # Stage 2: table read.
        integer2 = Signal(signed(self.integer_bits))
        base2 = Signal(LOG2_FRAC)  # L[j] < 2**20
        step2 = Signal(LOG2_FRAC)  # wider than needed: equal operand widths below
        rest2 = Signal(r_bits)
        index = mantissa1[r_bits:]
        m.d.sync += [
            integer2.eq(integer1),
            base2.eq(base_rom[index]),
            step2.eq(step_rom[index]),
            rest2.eq(mantissa1[:r_bits]),
        ]

        # Stage 3: l = L[j] + interpolation < L[j + 1] <= 2**20, so the integer part and l
        # concatenate; the interpolation is one multiply-add, as in Exp2Unit.
        fraction_sum = step2 * rest2 + Cat(Const(0, r_bits), base2)
        m.d.sync += self.log2.eq(Cat(fraction_sum[r_bits : r_bits + LOG2_FRAC], integer2))

        # Stage 4: ln = log2 * ln 2.
        m.d.sync += self.ln.eq((self.log2 * Const(LN2_CODE, 24)).shift_right(LOG2_FRAC))
        return m


# ---------------------------------------------------------------------------------------------
# divide


class RestoringDivider(wiring.Component):
    """``floor(dividend / divisor)`` and the remainder, radix 2, one quotient bit per cycle.

    The restoring algorithm of ``docs/aau.md`` section 5.2 with ``Q = quotient_bits``: load
    ``rem = dividend >> Q``; then for ``b = Q-1`` down to 0, ``rem = 2*rem + bit b of the
    dividend`` and, if ``rem >= divisor``, ``rem -= divisor`` and quotient bit ``b`` is 1.
    Each step is one ``divisor_bits``-wide subtractor whose borrow (with the trial's top bit)
    selects the new remainder.

    Parameters
    ----------
    dividend_bits, divisor_bits, quotient_bits : int, keyword-only
        Widths, each 1 to 256.

    Members
    -------
    start : In(1)
        Loads ``dividend`` and starts a division (abandoning one in progress).
    dividend : In(dividend_bits)
        Read only in the ``start`` cycle. Must satisfy
        ``dividend < divisor * 2**quotient_bits`` (the quotient fits; so ``divisor != 0``);
        otherwise the outputs are meaningless.
    divisor : In(divisor_bits)
        Read in each of the ``quotient_bits`` cycles after ``start``: hold it constant over
        them.
    busy : Out(1)
        High for the ``quotient_bits`` cycles after ``start``.
    quotient : Out(quotient_bits)
    remainder : Out(divisor_bits)
        ``dividend == quotient * divisor + remainder``, ``remainder < divisor``: valid from
        the cycle ``busy`` falls until the next ``start``.

    Latency: ``start`` high at edge ``a`` gives the result after edge ``a + quotient_bits``.
    Throughput: one division per ``quotient_bits + 1`` cycles when each result is read in
    the cycle after ``busy`` falls (``start`` may be high in that same cycle). No stall input.
    State: the remainder (``divisor_bits``) and one ``quotient_bits`` register into which
    the quotient bits shift while the dividend's low bits shift out.
    """

    def __init__(self, *, dividend_bits: int, divisor_bits: int, quotient_bits: int):
        _check_int(self, "dividend_bits", dividend_bits, 1, 256)
        _check_int(self, "divisor_bits", divisor_bits, 1, 256)
        _check_int(self, "quotient_bits", quotient_bits, 1, 256)
        self.dividend_bits = dividend_bits
        self.divisor_bits = divisor_bits
        self.quotient_bits = quotient_bits
        super().__init__(
            {
                "start": In(1),
                "dividend": In(dividend_bits),
                "divisor": In(divisor_bits),
                "busy": Out(1),
                "quotient": Out(quotient_bits),
                "remainder": Out(divisor_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        width = self.divisor_bits
        steps = self.quotient_bits
        low = self.quotient  # dividend bits leave at the top, quotient bits enter at the bottom
        count = Signal(range(steps))

        # One step. The trial 2*rem + bit is below 2*divisor, so it has width + 1 bits; it
        # fits (is at least the divisor) when its top bit is set or when its low bits are
        # not below the divisor: the borrow of one width-bit subtractor. The difference then
        # is below the divisor, so its low width bits are the new remainder.
        trial = Cat(low[-1], self.remainder)
        difference = trial[:width] - self.divisor
        fits = trial[-1] | ~difference[-1]

        with m.If(self.start):
            m.d.sync += [
                self.remainder.eq(self.dividend[steps:]),
                low.eq(self.dividend[:steps]),
                count.eq(0),
                self.busy.eq(1),
            ]
        with m.Elif(self.busy):
            m.d.sync += [
                self.remainder.eq(Mux(fits, difference[:width], trial[:width])),
                low.eq(Cat(fits, low[:-1])),
                count.eq(count + 1),
            ]
            with m.If(count == steps - 1):
                m.d.sync += self.busy.eq(0)
        return m


# ---------------------------------------------------------------------------------------------
# square root and multiply (the NORM post pass)


class RestoringSquareRoot(wiring.Component):
    """``isqrt(radicand)`` and the remainder, radix 2, one root bit per cycle.

    Digit by digit from the top (``docs/aau.md`` 9.2 needs only ``floor(sqrt(V))``): with
    ``root = rem = 0``, for each pair of radicand bits from the most significant one,
    ``rem = 4 * rem + pair``; if ``rem >= 4 * root + 1``, ``rem -= 4 * root + 1`` and the next
    root bit is 1, else 0 (``root = 2 * root + bit``). Each step is one subtractor of
    ``root_bits + 2`` bits whose borrow selects the new remainder.

    Parameters
    ----------
    radicand_bits : int, keyword-only
        Width of the radicand, 1 to 256; ``root_bits = ceil(radicand_bits / 2)``.

    Members
    -------
    start : In(1)
        Loads ``radicand`` and starts (abandoning one in progress).
    radicand : In(radicand_bits)
        Read only in the ``start`` cycle.
    busy : Out(1)
        High for the ``root_bits`` cycles after ``start``.
    root : Out(root_bits)
    remainder : Out(root_bits + 1)
        ``radicand == root**2 + remainder``, ``remainder <= 2 * root``: valid from the cycle
        ``busy`` falls until the next ``start``.

    Latency: ``start`` high at edge ``a`` gives the result after edge ``a + root_bits``.
    Throughput: one root per ``root_bits + 1`` cycles. No stall input, no precondition.
    State: the radicand (shifting out two bits per step), the root, the remainder.
    """

    def __init__(self, *, radicand_bits: int):
        _check_int(self, "radicand_bits", radicand_bits, 1, 256)
        self.radicand_bits = radicand_bits
        self.root_bits = (radicand_bits + 1) // 2
        super().__init__(
            {
                "start": In(1),
                "radicand": In(radicand_bits),
                "busy": Out(1),
                "root": Out(self.root_bits),
                "remainder": Out(self.root_bits + 1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        steps = self.root_bits
        pairs = Signal(2 * steps)  # the radicand's bits not yet used, at the top
        count = Signal(range(steps))

        # Before the last step root < 2**(steps - 1) and remainder <= 2 * root < 2**steps,
        # so the trial 4 * remainder + pair <= 8 * root + 3 fits steps + 2 bits, as does
        # 4 * root + 1. It fits (is at least 4 * root + 1) when the subtraction does not
        # borrow; the new remainder is then at most 2 * (2 * root + 1) < 2**(steps + 1).
        trial = Cat(pairs[-2:], self.remainder[:steps])
        difference = trial - Cat(Const(1, 2), self.root)
        fits = ~difference[-1]

        with m.If(self.start):
            m.d.sync += [
                pairs.eq(self.radicand),
                self.root.eq(0),
                self.remainder.eq(0),
                count.eq(0),
                self.busy.eq(1),
            ]
        with m.Elif(self.busy):
            m.d.sync += [
                self.remainder.eq(Mux(fits, difference[: steps + 1], trial[: steps + 1])),
                self.root.eq(Cat(fits, self.root[:-1])),
                pairs.eq(Cat(Const(0, 2), pairs[:-2])),
                count.eq(count + 1),
            ]
            with m.If(count == steps - 1):
                m.d.sync += self.busy.eq(0)
        return m


class ShiftAddMultiplier(wiring.Component):
    """``multiplicand * multiplier``, unsigned, one multiplier bit per cycle (least first).

    Each step adds the multiplicand to the upper half of the product when the multiplier's
    lowest remaining bit is set, then shifts the whole product right by one: the multiplier
    leaves at the bottom while the product's low bits enter at the top of its register.
    One ``multiplicand_bits``-wide adder.

    Parameters
    ----------
    multiplicand_bits, multiplier_bits : int, keyword-only
        Widths, each 1 to 256.

    Members
    -------
    start : In(1)
        Loads ``multiplier`` and starts (abandoning a product in progress).
    multiplicand : In(multiplicand_bits)
        Read in each of the ``multiplier_bits`` cycles after ``start``: hold it over them.
    multiplier : In(multiplier_bits)
        Read only in the ``start`` cycle.
    busy : Out(1)
        High for the ``multiplier_bits`` cycles after ``start``.
    product : Out(multiplicand_bits + multiplier_bits)
        Valid from the cycle ``busy`` falls until the next ``start``.

    Latency: ``start`` high at edge ``a`` gives the product after edge ``a +
    multiplier_bits``. Throughput: one product per ``multiplier_bits + 1`` cycles. No stall
    input.
    """

    def __init__(self, *, multiplicand_bits: int, multiplier_bits: int):
        _check_int(self, "multiplicand_bits", multiplicand_bits, 1, 256)
        _check_int(self, "multiplier_bits", multiplier_bits, 1, 256)
        self.multiplicand_bits = multiplicand_bits
        self.multiplier_bits = multiplier_bits
        super().__init__(
            {
                "start": In(1),
                "multiplicand": In(multiplicand_bits),
                "multiplier": In(multiplier_bits),
                "busy": Out(1),
                "product": Out(multiplicand_bits + multiplier_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        steps = self.multiplier_bits
        low = self.product[:steps]  # the multiplier's remaining bits, then the product's low
        high = self.product[steps:]
        count = Signal(range(steps))
        addend = Signal(self.multiplicand_bits)
        with m.If(low[0]):
            m.d.comb += addend.eq(self.multiplicand)
        total = Signal(self.multiplicand_bits + 1)
        m.d.comb += total.eq(high + addend)

        with m.If(self.start):
            m.d.sync += [
                self.product.eq(self.multiplier),
                count.eq(0),
                self.busy.eq(1),
            ]
        with m.Elif(self.busy):
            m.d.sync += [
                self.product.eq(Cat(low[1:], total)),
                count.eq(count + 1),
            ]
            with m.If(count == steps - 1):
                m.d.sync += self.busy.eq(0)
        return m


# ---------------------------------------------------------------------------------------------
# gate (SILU, GELU)


def _tagged(fields: dict, tag_shape: ShapeCastable | int) -> data.StructLayout:
    """``fields`` and a ``tag`` field of ``tag_shape``, left out when it has no bits (a
    zero-width wire is an error in Verilator's lint)."""
    if Shape.cast(tag_shape).width:
        fields = {**fields, "tag": tag_shape}
    return data.StructLayout(fields)


def gate_input_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """A :class:`GateUnit` input: the Q8.8 code ``x``, ``gelu`` (the GELU table, else
    SiLU's) and a ``tag`` carried alongside (no ``tag`` field for a zero-width tag)."""
    return _tagged({"x": signed(LOGIT_BITS), "gelu": 1}, tag_shape)


def gate_output_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """A :class:`GateUnit` output: the gate ``g`` (UQ1.16, ``0 .. 2**16``) and the ``tag``
    (no ``tag`` field for a zero-width tag)."""
    return _tagged({"g": GATE_BITS}, tag_shape)


class GateUnit(wiring.Component):
    """The gate ``g(x)`` of the activations ``x * g(x)``: SILU and GELU (``docs/aau.md`` 10).

    For a Q8.8 code ``X``, ``a = |X|``: beyond the table's span (``a >= 2**12`` for SiLU,
    ``2**10`` for GELU) ``h = 2**16``, else ``h = H[j] + (((H[j+1] - H[j]) * f) >> (P - G))``
    with ``j = a >> (P - G)``, ``f = a & (2**(P - G) - 1)``, ``H`` = :func:`silu_table` (``P =
    12``) or :func:`gelu_table` (``P = 10``) of ``G = table_bits``; then ``g = h`` for ``X
    >= 0``, ``2**16 - h`` otherwise.

    The GELU magnitude enters shifted left by two bits, ``4 a``: then both tables span
    ``4 a < 2**12`` and share the index split ``j = 4a >> (12 - G)``, ``f' = 4a & (2**(12 - G)
    - 1) = 4 f``, and ``(step * 4 f) >> (12 - G)`` is ``(step * f) >> (10 - G)`` exactly.

    Parameters
    ----------
    table_bits : int, keyword-only
        ``G``, the address bits of each gate table (``2**G + 1`` entries), 1 to 10.
    tag_shape : shape-castable, keyword-only
        Shape of a ``tag`` carried unchanged alongside each element (default: none, and
        then the payloads have no ``tag`` field).

    Members
    -------
    i : In(stream.Signature(gate_input_layout(tag_shape)))
        ``x``, ``gelu`` and ``tag``. ``i.ready`` is ``o.ready`` (combinational, whatever
        ``i.valid``).
    o : Out(stream.Signature(gate_output_layout(tag_shape)))
        ``g`` and the ``tag`` of each input element, in order.

    Three pipeline registers: ``|x|``, the range check and the index split; the table read
    (one ROM of both tables, ``2 * 2**G`` bases and steps, addressed by ``gelu`` and ``j``);
    ``h`` (a ``12 x (12 - G)``-bit multiply-add) and the sign's ``2**16 - h``, both in one
    carry-save tree with one carry propagation.

    Latency :data:`GATE_LATENCY` (3) advancing edges (edges with ``o.ready`` high), the one
    that takes the element included. Throughput one element per cycle. Backpressure: ``o.ready``
    low freezes the whole pipeline, bubbles included, and holds ``o``; ``i.ready`` follows.
    """

    def __init__(self, *, table_bits: int, tag_shape: ShapeCastable | int = 0):
        _check_int(self, "table_bits", table_bits, 1, 10)
        try:
            Shape.cast(tag_shape)
        except TypeError:
            raise _rejected(
                self, TypeError(f"tag_shape must be a shape, not {tag_shape!r}")
            ) from None
        self.table_bits = table_bits
        self.tag_shape = tag_shape
        super().__init__(
            {
                "i": In(stream.Signature(gate_input_layout(tag_shape))),
                "o": Out(stream.Signature(gate_output_layout(tag_shape))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bits = self.table_bits
        span = SILU_SPAN_BITS
        low_bits = span - bits  # at least 2
        # One ROM pair for both tables, addressed by {gelu, j}: SiLU's 2**G segments, then
        # GELU's (each table's own end point only enters its last step).
        silu_base, silu_step, _ = _table_roms(silu_table(bits), GATE_BITS)
        gelu_base, gelu_step, _ = _table_roms(gelu_table(bits), GATE_BITS)
        base_rom = Array([*silu_base, *gelu_base])
        step_rom = Array([*silu_step, *gelu_step])
        one = Const(1 << GATE_FRAC, GATE_BITS)

        advance = self.o.ready  # a global stall: every register moves together
        m.d.comb += self.i.ready.eq(advance)

        # Stage 1: |x| (32768 included), GELU's shifted by two; the range check; j and f.
        x = self.i.payload.x
        magnitude = Signal(LOGIT_BITS)
        with m.If(x[-1]):
            m.d.comb += magnitude.eq(-x)
        with m.Else():
            m.d.comb += magnitude.eq(x)
        scaled = Signal(LOGIT_BITS + 2)
        with m.If(self.i.payload.gelu):
            m.d.comb += scaled.eq(Cat(Const(0, 2), magnitude))
        with m.Else():
            m.d.comb += scaled.eq(magnitude)
        valid1 = Signal()
        outside1 = Signal()
        negative1 = Signal()
        gelu1 = Signal()
        index1 = Signal(bits)
        rest1 = Signal(low_bits)
        with m.If(advance):
            m.d.sync += [
                valid1.eq(self.i.valid),
                outside1.eq(scaled[span:].any()),
                negative1.eq(x[-1]),
                gelu1.eq(self.i.payload.gelu),
                index1.eq(scaled[low_bits:span]),
                rest1.eq(scaled[:low_bits]),
            ]

        # Stage 2: the table read.
        valid2 = Signal()
        outside2 = Signal()
        negative2 = Signal()
        base2 = Signal(GATE_BITS)
        step2 = Signal(GATE_BITS)  # wider than needed: equal operand widths below
        rest2 = Signal(low_bits)
        address = Cat(index1, gelu1)
        with m.If(advance):
            m.d.sync += [
                valid2.eq(valid1),
                outside2.eq(outside1),
                negative2.eq(negative1),
                base2.eq(base_rom[address]),
                step2.eq(step_rom[address]),
                rest2.eq(rest1),
            ]

        # Stage 3: h = H[j] + (D[j] * f) >> (P - G) <= H[j + 1] <= 2**16, and the gate, h or
        # 2**16 - h for x < 0, in one carry-save tree and one carry propagation. With
        # A = H[j] * 2**(P - G) + D[j] * f (so h = A >> (P - G)) and s = P - G:
        # 2**16 - h = (2**(16 + s) + 2**s - 1 - A) >> s, as -floor(A / 2**s) =
        # floor((2**s - 1 - A) / 2**s). For x < 0 each row v of A enters inverted, ~v = -v - 1,
        # and a constant makes up the ones and the rest.
        width = GATE_BITS + low_bits + 2
        flip = negative2.replicate(width)
        rows = [Cat(Const(0, low_bits), base2), *partial_products(step2, rest2)]
        flipped = [
            widened(m, row, width, f"gate_row{index}") ^ flip for index, row in enumerate(rows)
        ]
        complement = (1 << (GATE_FRAC + low_bits)) + (1 << low_bits) - 1 + len(rows)
        gate_sum = sum_of(m, [*flipped, Const(complement, width) & flip], width, "gate")
        valid3 = Signal()
        gate3 = Signal(GATE_BITS)
        with m.If(advance):
            m.d.sync += valid3.eq(valid2)
            with m.If(outside2):
                m.d.sync += gate3.eq(Mux(negative2, 0, one))
            with m.Else():
                m.d.sync += gate3.eq(gate_sum[low_bits : low_bits + GATE_BITS])

        m.d.comb += [self.o.valid.eq(valid3), self.o.payload.g.eq(gate3)]

        # The tag: a delay line of GATE_LATENCY registers beside the stages.
        if Shape.cast(self.tag_shape).width:
            tag = self.i.payload.tag
            for stage in range(1, GATE_LATENCY + 1):
                delayed = Signal(self.tag_shape, name=f"tag{stage}")
                with m.If(advance):
                    m.d.sync += delayed.eq(tag)
                tag = delayed
            m.d.comb += self.o.payload.tag.eq(tag)
        return m
