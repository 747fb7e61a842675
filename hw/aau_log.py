"""The AAU's logarithm (``docs/aau.md`` 5.1): a leading-one detector and the pipeline that
turns ``2**exponent * z`` into ``log2`` and ``ln`` through an interpolated table."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_tables import LN2_CODE, LN_FRAC, LOG2_FRAC, log2_table, table_roms
from ahasd.hw.checks import check_int

__all__ = ["LN_LATENCY", "LOG2_LATENCY", "LeadingOne", "LogUnit"]

# Pipeline depths in edges, the one that takes (samples) the input included.
LOG2_LATENCY = 3  # LogUnit: z, exponent to log2
LN_LATENCY = 4  # LogUnit: z, exponent to ln


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
        check_int(self, "width", width, 1, 1024)
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
        check_int(self, "z_bits", z_bits, 1, 256)
        check_int(self, "z_frac_bits", z_frac_bits, 0, z_bits - 1)
        check_int(self, "exponent_bits", exponent_bits, 1, 32)
        check_int(self, "table_bits", table_bits, 1, 12)
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
        base_rom, step_rom, _ = table_roms(log2_table(self.table_bits), LOG2_FRAC)

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
