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
===========================  ===============================================================

The tables and the two constants are the ones of ``docs/aau.md`` section 2.
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, ShapeCastable, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "EXP_LATENCY",
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
    "LeadingOne",
    "LogUnit",
    "RestoringDivider",
    "exp2_table",
    "exp_input_layout",
    "exp_output_layout",
    "log2_table",
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

# Pipeline depths in edges, the one that takes (samples) the input included.
EXP_LATENCY = 3  # Exp2Unit: x to o
LOG2_LATENCY = 3  # LogUnit: z, exponent to log2
LN_LATENCY = 4  # LogUnit: z, exponent to ln


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
    constant); the table read (``E[j]``, ``E[j+1] - E[j]``, ``r``); ``M`` (one small multiplier,
    ``(E[j+1] - E[j]) x r``, and an add).

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

        # Stage 3: M = E[j] + (D[j] * r) >> (16 - B); (D * r) >> (16 - B) < D because
        # r < 2**(16 - B), so M < E[j + 1] <= 2**17.
        valid3 = Signal()
        n3 = Signal(signed(N_BITS))
        mantissa3 = Signal(MANTISSA_BITS)
        tag3 = Signal(self.tag_shape)
        interpolation = (step2 * rest2).shift_right(r_bits)[:MANTISSA_BITS]
        with m.If(advance):
            m.d.sync += [
                valid3.eq(valid2),
                n3.eq(n2),
                mantissa3.eq((base2 + interpolation)[:MANTISSA_BITS]),
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

    No register: zero latency, a priority chain of ``width`` multiplexers.
    """

    def __init__(self, *, width: int):
        _check_int(self, "width", width, 1, 1024)
        self.width = width
        super().__init__({"value": In(width), "position": Out(range(width)), "nonzero": Out(1)})

    def elaborate(self, platform):
        m = Module()
        # The highest set bit wins: later assignments take priority.
        for bit in range(self.width):
            with m.If(self.value[bit]):
                m.d.comb += self.position.eq(bit)
        m.d.comb += self.nonzero.eq(self.value.any())
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
        # concatenate.
        fraction = (base2 + (step2 * rest2).shift_right(r_bits))[:LOG2_FRAC]
        m.d.sync += self.log2.eq(Cat(fraction, integer2))

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
