"""Bit-serial arithmetic units, one result bit per cycle, widths as parameters: a radix-2
restoring divider (``docs/aau.md`` 5.2), a restoring square root and a shift-add multiplier
(section 9.2, the NORM post pass)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.checks import check_int

__all__ = ["RestoringDivider", "RestoringSquareRoot", "ShiftAddMultiplier"]


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
        check_int(self, "dividend_bits", dividend_bits, 1, 256)
        check_int(self, "divisor_bits", divisor_bits, 1, 256)
        check_int(self, "quotient_bits", quotient_bits, 1, 256)
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
        check_int(self, "radicand_bits", radicand_bits, 1, 256)
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
        check_int(self, "multiplicand_bits", multiplicand_bits, 1, 256)
        check_int(self, "multiplier_bits", multiplier_bits, 1, 256)
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
