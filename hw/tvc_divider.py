"""The TVC's divider (``docs/tvc.md``): radix 4, two quotient bits per cycle, one subtraction
deep; it serves both ``LEARN``'s ratio and ``ASK``'s quotient."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import at_least, sum_of
from ahasd.hw.checks import check_int, rejected

__all__ = ["Radix4Divider"]


class Radix4Divider(wiring.Component):
    """``floor(dividend / divisor)``, two quotient bits per cycle, over one of two quotient
    lengths.

    The remainder stays below the divisor; the dividend's low bits shift out of the top of
    the quotient register while the quotient digits shift in at its bottom. Each step forms
    ``trial = 4 * remainder`` plus the next two dividend bits (below ``4 * divisor``) and
    compares it with ``divisor``, ``2 * divisor`` and ``3 * divisor`` side by side: the
    largest multiple that fits is the digit, and the trial less that multiple the new
    remainder. The multiples are registers as wide as the trial (their constant bits cost
    nothing after synthesis), so every comparison sees operands of equal width.

    Parameters
    ----------
    dividend_bits, divisor_bits : int, keyword-only
        Widths, each 1 to 256.
    learn_bits, ask_bits : int, keyword-only
        The two quotient lengths (a ``LEARN``'s, an ``ASK``'s), even, 2 to 256.

    Members
    -------
    start : In(1)
        Loads ``dividend`` and the multiples of ``divisor`` (the step's register updates win
        when ``step`` is high in the same cycle).
    learn : In(1)
        Read with ``start``: divide over ``learn_bits`` quotient bits, else ``ask_bits``.
    dividend : In(dividend_bits)
        Must satisfy ``dividend < divisor * 2**q`` for the chosen length ``q``.
    divisor : In(divisor_bits)
    step : In(1)
        One step at this edge.
    last : Out(1)
        The step of this cycle is the last of the division.
    quotient : Out(max(learn_bits, ask_bits))
        The quotient after this cycle's step, combinational; in the ``last`` cycle its low
        ``q`` bits are ``dividend // divisor``.

    Latency: ``start`` at edge ``a``, then ``q / 2`` steps; the quotient is on ``quotient``
    in the cycle of the last step (``last`` high), before its edge. No handshake: the
    caller raises ``step`` in each cycle of the division.
    """

    def __init__(self, *, dividend_bits: int, divisor_bits: int, learn_bits: int, ask_bits: int):
        check_int(self, "dividend_bits", dividend_bits, 1, 256)
        check_int(self, "divisor_bits", divisor_bits, 1, 256)
        for name, bits in (("learn_bits", learn_bits), ("ask_bits", ask_bits)):
            check_int(self, name, bits, 2, 256)
            if bits % 2:
                raise rejected(self, ValueError(f"{name} must be even, not {bits!r}"))
        self.dividend_bits = dividend_bits
        self.divisor_bits = divisor_bits
        self.learn_bits = learn_bits
        self.ask_bits = ask_bits
        self.quotient_bits = max(learn_bits, ask_bits)
        super().__init__(
            {
                "start": In(1),
                "learn": In(1),
                "dividend": In(dividend_bits),
                "divisor": In(divisor_bits),
                "step": In(1),
                "last": Out(1),
                "quotient": Out(self.quotient_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        divisor_bits = self.divisor_bits
        quotient_bits = self.quotient_bits
        step_bits = divisor_bits + 2  # trial < 4*divisor
        multiples = [Signal(step_bits, name=f"divisor_x{k}") for k in (1, 2, 3)]
        remainder = Signal(divisor_bits)
        low = Signal(quotient_bits)
        count = Signal(range(max(2, quotient_bits // 2)))  # cycles left after this one

        trial = Cat(low[-2], low[-1], remainder)
        fits = [at_least(trial, multiple) for multiple in multiples]  # fits[k-1]: k*d fits
        # When k*divisor fits and (k+1)*divisor does not, trial - k*divisor < divisor: its
        # low bits are the whole new remainder.
        differences = [
            (trial[:divisor_bits] - multiple[:divisor_bits])[:divisor_bits]
            for multiple in multiples
        ]
        rem_2 = Mux(
            fits[2],
            differences[2],
            Mux(fits[1], differences[1], Mux(fits[0], differences[0], trial[:divisor_bits])),
        )
        digit = Cat(fits[2] | (fits[0] & ~fits[1]), fits[1])
        low_2 = Cat(digit, low[:-2])
        m.d.comb += [self.quotient.eq(low_2), self.last.eq(~count.any())]

        divisor = self.divisor
        divisor_x3 = sum_of(m, [divisor, divisor << 1], step_bits, "divisor_source_x3")

        def load(q_bits):
            m.d.sync += [
                remainder.eq(self.dividend >> q_bits),
                low.eq(self.dividend[:q_bits] << (quotient_bits - q_bits)),
                count.eq(q_bits // 2 - 1),
            ]

        with m.If(self.start):
            with m.If(self.learn):
                load(self.learn_bits)
            with m.Else():
                load(self.ask_bits)
            m.d.sync += [
                multiples[0].eq(divisor),
                multiples[1].eq(divisor << 1),
                multiples[2].eq(divisor_x3),
            ]
        with m.If(self.step):
            m.d.sync += [remainder.eq(rem_2), low.eq(low_2), count.eq(count - 1)]
        return m
