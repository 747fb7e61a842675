"""The AAU's element back end: the lane from an element of an element mode to ``o``.

The element modes (``docs/aau.md`` section 11) give one output per input element:
``SOFTMAX`` (section 6), ``NORM`` (section 9.3), ``RELU``, ``SILU`` and ``GELU`` (section
10). Their arithmetic after the front end is one product and a rounding; this component
holds it, one lane of four registers shared by every kind, with a single multiplier:

=========  ========================================================================
kind       the lane (``a * b - c``, then per kind)
=========  ========================================================================
SOFTMAX    ``M * recip``, then ``min(65535, round_shift(.. >> s, 24))`` (UQ0.16)
NORM       ``X * (N r) - T r = (N X - T) r``, then ``z = clamp(.. >> k)``, then
           ``clamp(round_shift(z G, 16) + B)`` with ``(G, B)`` from ``param`` (Q8.8)
RELU       ``max(X, 0)``, past the multiplier
GATE       ``X * g`` (SILU, GELU: ``g`` from the ``GateUnit``), then ``round_shift(.., 16)``
=========  ========================================================================

NORM's ``(N X - T) r`` is computed as ``X (N r) - T r`` (the same integer): the post pass
holds ``N r`` and ``T r`` (``hw/aau.py``), so the lane needs no ``N X`` multiplier of its
own and SOFTMAX, NORM and the gates share one ``18 x scale_bits`` multiplier.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_tables import GATE_BITS, LOGIT_BITS, MANTISSA_BITS, N_BITS
from ahasd.hw.arith import decoded, widen
from ahasd.params import AAUParams

__all__ = [
    "BACK_END_LATENCY",
    "NORM_SHIFT_BITS",
    "NORM_Z_BITS",
    "RECIP_BITS",
    "BackEnd",
    "ElementKind",
    "back_end_input_layout",
    "element_layout",
    "norm_offset_bits",
    "norm_scale_bits",
    "param_layout",
    "product_bits",
]

RECIP_BITS = 25  # recip = 2**56 // Z <= 2**24 (STATS), r = 2**47 // s <= 2**24 (NORM)
NORM_SHIFT_BITS = 6  # k <= clog2(max_length) + 23 <= 43
NORM_Z_BITS = 25  # z, Q9.16, clamped to [-2**24, 2**24)
NORM_Z_FRAC = 16
SOFTMAX_SHIFT_MAX = 18  # round_shift by 24 + s of M * recip < 2**41 is 0 from s = 18 on
GATE_FRAC = 16
OUT_MAX = 65535
BACK_END_LATENCY = 4  # the lane's registers: capture, product, rounding, output


def _clog2(value: int) -> int:
    return (value - 1).bit_length()


def norm_scale_bits(params: AAUParams) -> int:
    """``N * r <= max_length * 2**24``: ``clog2(max_length) + 25`` bits (41)."""
    return _clog2(params.max_length) + RECIP_BITS


def norm_offset_bits(params: AAUParams) -> int:
    """``|T * r| <= max_length * 2**15 * 2**24``: ``clog2(max_length) + 40`` bits signed
    (56)."""
    return _clog2(params.max_length) + 40


def product_bits(params: AAUParams) -> int:
    """The lane's product: ``|(N X - T) r| < 2**(clog2 N + 40)`` (``docs/aau.md`` 9.5),
    ``M * recip < 2**41``, ``|X g| <= 2**31``: the widest, plus the sign."""
    return max(_clog2(params.max_length) + 40, 41) + 1


class ElementKind(enum.Enum, shape=2):
    """Which arithmetic the lane applies to an element."""

    SOFTMAX = 0
    NORM = 1
    RELU = 2
    GATE = 3


def back_end_input_layout(params: AAUParams) -> data.StructLayout:
    """An element entering the lane: its ``kind``, ``last``, the code ``x``, the exp unit's
    ``m`` and ``n`` (SOFTMAX) and the gate unit's ``g`` (SILU, GELU)."""
    return data.StructLayout(
        {
            "kind": ElementKind,
            "last": 1,
            "x": signed(LOGIT_BITS),
            "m": MANTISSA_BITS,
            "n": signed(N_BITS),
            "g": GATE_BITS,
        }
    )


def element_layout(params: AAUParams) -> data.StructLayout:
    """An output element: ``data`` (UQ0.16 ``p_i`` for SOFTMAX, a Q8.8 code for the other
    element modes: read it as signed) and the ``last`` flag of its input element."""
    return data.StructLayout({"data": 16, "last": 1})


def param_layout(params: AAUParams) -> data.StructLayout:
    """One entry of the NORM parameter stream: ``gamma`` and ``beta``, Q8.8 each."""
    return data.StructLayout({"gamma": signed(LOGIT_BITS), "beta": signed(LOGIT_BITS)})


def _round_shift(value, amount: int):
    """``round_shift(value, amount) = (value + 2**(amount - 1)) >> amount``, written as
    ``(floor(value / 2**(amount - 1)) + 1) >> 1`` (the same integer), which adds 1 rather
    than a wide constant. A signed ``value`` adds its 1 to the bit pattern (two's complement,
    which cannot wrap: ``floor(value / 2**(amount - 1))`` is far from its top here) and keeps
    the sign bit, so no signed constant reaches the Verilog."""
    halves = value.shift_right(amount - 1)
    total = halves.as_unsigned() + 1
    if value.shape().signed:
        return total[1 : len(halves)].as_signed()
    return total[1:]


def _fits(value, bits: int):
    """``value`` (signed) is in ``[-2**(bits - 1), 2**(bits - 1))``: its bits from
    ``bits - 1`` up are all equal."""
    top = value[bits - 1 :]
    return ~top.any() | top.all()


class BackEnd(wiring.Component):
    """The element lane of the AAU (``docs/aau.md`` 6, 9.3, 10), four registers deep.

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(back_end_input_layout(params)))
        An element of an element mode. ``i.ready`` is ``advance``.
    advance : In(1)
        The AAU's global enable: every register of the lane loads when it is high. The AAU
        keeps it low while ``blocked`` (and for its own stalls).
    blocked : Out(1)
        The lane cannot move: ``o`` holds an element that is not taken, or the NORM element
        about to take its parameters finds ``param`` empty. Combinational from ``o.ready``,
        ``param.valid`` and the lane's registers, never from ``advance``.
    o : Out(stream.Signature(element_layout(params)))
        The outputs, in input order; held until taken. The output register empties when
        taken even while ``advance`` is low.
    param : In(stream.Signature(param_layout(params)))
        ``(gamma, beta)``, one per NORM element, in order; taken at the edge where that
        element moves into the output register (``param.ready = advance`` and such an
        element waiting).
    stats_ref : In(signed(N_BITS))
    stats_recip : In(RECIP_BITS)
        ``R`` and ``recip`` of the last STATS pass (SOFTMAX).
    norm_scale : In(norm_scale_bits(params))
    norm_offset : In(signed(norm_offset_bits(params)))
    norm_shift : In(NORM_SHIFT_BITS)
        ``N r``, ``T r`` and ``k`` of the last LAYERNORM/RMSNORM pass (NORM).

    The held statistics are read only at the edge that takes an element (into the first
    register) and travel with it: the AAU takes an element only when no pass ahead of it is
    about to change them, and a pass behind it changes them only after that edge.

    Registers: capture (the product's operands and the shift), product (``a * b - c``, one
    multiplier), rounding (per kind), output (NORM's ``z * G + B``; the others pass).
    Latency :data:`BACK_END_LATENCY` (4) advancing edges from ``i`` to ``o``; throughput one
    element per cycle.
    """

    def __init__(self, params: AAUParams):
        if not isinstance(params, AAUParams):
            self._MustUse__silence = True  # a rejected component is not a forgotten one
            raise TypeError(f"params must be an AAUParams, not {params!r}")
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(back_end_input_layout(params))),
                "advance": In(1),
                "blocked": Out(1),
                "o": Out(stream.Signature(element_layout(params))),
                "param": In(stream.Signature(param_layout(params))),
                "stats_ref": In(signed(N_BITS)),
                "stats_recip": In(RECIP_BITS),
                "norm_scale": In(norm_scale_bits(params)),
                "norm_offset": In(signed(norm_offset_bits(params))),
                "norm_shift": In(NORM_SHIFT_BITS),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(self.advance)
        stage1 = self._capture(m)
        stage2 = self._product(m, stage1)
        stage3 = self._rounding(m, stage2)
        self._output(m, stage3)
        return m

    def _capture(self, m: Module) -> SimpleNamespace:
        """The product's operands ``a * b - c``, the shift, the held statistics."""
        advance = self.advance
        element = self.i.payload
        scale_bits = norm_scale_bits(self.params)
        valid1 = Signal()
        kind1 = Signal(ElementKind)
        last1 = Signal()
        a1 = Signal(signed(MANTISSA_BITS + 1))  # M (unsigned 17) or X
        b1 = Signal(scale_bits)  # recip, N r or g
        c1 = Signal(signed(MANTISSA_BITS + 1 + scale_bits))  # T r or 0, as wide as a * b
        shift1 = Signal(NORM_SHIFT_BITS)  # SOFTMAX's s (at most 18) or NORM's k
        above1 = Signal()  # SOFTMAX: s < 0, the element is above the STATS pass's R
        softmax_shift = Signal(signed(N_BITS + 1))
        m.d.comb += softmax_shift.eq(self.stats_ref - element.n)
        entering = {each: decoded(m, element.kind, each) for each in ElementKind}
        with m.If(advance):
            m.d.sync += [
                valid1.eq(self.i.valid),
                kind1.eq(element.kind),
                last1.eq(element.last),
                a1.eq(element.x),
                b1.eq(0),
                c1.eq(0),
                shift1.eq(0),
                above1.eq(0),
            ]
            with m.If(entering[ElementKind.SOFTMAX]):
                saturated = softmax_shift[5:].any() | (softmax_shift[:5] >= SOFTMAX_SHIFT_MAX)
                m.d.sync += [
                    a1.eq(element.m),
                    b1.eq(self.stats_recip),
                    shift1.eq(Mux(saturated, SOFTMAX_SHIFT_MAX, softmax_shift[:5])),
                    above1.eq(softmax_shift[-1]),
                ]
            with m.Elif(entering[ElementKind.NORM]):
                m.d.sync += [
                    b1.eq(self.norm_scale),
                    c1.eq(self.norm_offset),
                    shift1.eq(self.norm_shift),
                ]
            with m.Elif(entering[ElementKind.RELU]), m.If(element.x[-1]):
                m.d.sync += a1.eq(0)
            with m.Else():  # GATE
                m.d.sync += b1.eq(element.g)

        return SimpleNamespace(
            valid=valid1, kind=kind1, last=last1, a=a1, b=b1, c=c1, shift=shift1, above=above1
        )

    def _product(self, m: Module, stage1: SimpleNamespace) -> SimpleNamespace:
        """``a * b - c`` (RELU passes ``a``)."""
        advance = self.advance
        valid1, kind1, last1 = stage1.valid, stage1.kind, stage1.last
        a1, b1, c1, shift1, above1 = stage1.a, stage1.b, stage1.c, stage1.shift, stage1.above
        wide = product_bits(self.params)
        valid2 = Signal()
        kind2 = Signal(ElementKind)
        last2 = Signal()
        shift2 = Signal(NORM_SHIFT_BITS)
        above2 = Signal()
        product2 = Signal(signed(wide))
        relu1 = decoded(m, kind1, ElementKind.RELU)
        with m.If(advance):
            m.d.sync += [
                valid2.eq(valid1),
                kind2.eq(kind1),
                last2.eq(last1),
                shift2.eq(shift1),
                above2.eq(above1),
            ]
            with m.If(relu1):
                m.d.sync += product2.eq(a1)
            with m.Else():
                m.d.sync += product2.eq(a1 * b1 - c1)

        return SimpleNamespace(
            valid=valid2, kind=kind2, last=last2, shift=shift2, above=above2, product=product2
        )

    def _rounding(self, m: Module, stage2: SimpleNamespace) -> SimpleNamespace:
        """The rounding of each kind: SOFTMAX's probability, NORM's clamped ``z``, RELU's
        and the gates' outputs."""
        advance = self.advance
        valid2, kind2, last2 = stage2.valid, stage2.kind, stage2.last
        shift2, above2, product2 = stage2.shift, stage2.above, stage2.product
        valid3 = Signal()
        norm3 = Signal()
        last3 = Signal()
        value3 = Signal(signed(NORM_Z_BITS))  # z (NORM) or the 16-bit output
        z_top = (1 << (NORM_Z_BITS - 1)) - 1
        # SOFTMAX: M * recip >= 0 and below 2**41; a rounding shift by 24 + s in two steps
        probability = _round_shift(product2[:41] >> shift2, 24)
        z_full = product2 >> shift2
        rounding = {each: decoded(m, kind2, each) for each in ElementKind}
        with m.If(advance):
            m.d.sync += [
                valid3.eq(valid2),
                norm3.eq(rounding[ElementKind.NORM]),
                last3.eq(last2),
            ]
            with m.If(rounding[ElementKind.SOFTMAX]):
                with m.If(above2 | probability[16:].any()):
                    m.d.sync += value3.eq(OUT_MAX)
                with m.Else():
                    m.d.sync += value3.eq(probability[:16])
            with m.Elif(rounding[ElementKind.NORM]):
                with m.If(_fits(z_full, NORM_Z_BITS)):
                    m.d.sync += value3.eq(z_full[:NORM_Z_BITS])
                with m.Elif(z_full[-1]):
                    m.d.sync += value3.eq(-z_top - 1)
                with m.Else():
                    m.d.sync += value3.eq(z_top)
            with m.Elif(rounding[ElementKind.RELU]):
                m.d.sync += value3.eq(product2[:LOGIT_BITS].as_signed())
            with m.Else():  # GATE: |X g| <= 2**31, g <= 2**16, so the result is within |X|
                gated = _round_shift(product2, GATE_FRAC)
                m.d.sync += value3.eq(gated[:LOGIT_BITS].as_signed())

        return SimpleNamespace(valid=valid3, norm=norm3, last=last3, value=value3)

    def _output(self, m: Module, stage3: SimpleNamespace) -> None:
        """The output register: NORM's ``y = clamp(round_shift(z G, 16) + B)``; the others
        pass."""
        advance = self.advance
        valid3, norm3, last3, value3 = stage3.valid, stage3.norm, stage3.last, stage3.value
        valid4 = Signal()
        last4 = Signal()
        data4 = Signal(LOGIT_BITS)
        wants_param = valid3 & norm3
        m.d.comb += [
            self.param.ready.eq(advance & wants_param),
            self.blocked.eq((valid4 & ~self.o.ready) | (wants_param & ~self.param.valid)),
        ]
        gamma, beta = self.param.payload.gamma, self.param.payload.beta
        # round_shift(z G, 16) + B = (z G + B * 2**16 + 2**15) >> 16: the bias and the
        # rounding half are one addend, {B, 0x8000}, a concatenation, which the multiplier's
        # adder tree takes in (one adder fewer on the path). |z G| <= 2**39, so
        # |y| < 2**23 + 2**15.
        product_bits_out = NORM_Z_BITS + LOGIT_BITS
        addend = Cat(Const(1 << (NORM_Z_FRAC - 1), NORM_Z_FRAC), beta).as_signed()
        y = Signal(signed(NORM_Z_BITS + 1))
        with m.If(wants_param):
            biased = value3 * gamma + widen(m, addend, product_bits_out)
            m.d.comb += y.eq(biased.shift_right(NORM_Z_FRAC))
        with m.If(advance):
            m.d.sync += [valid4.eq(valid3), last4.eq(last3)]
            with m.If(~norm3):
                m.d.sync += data4.eq(value3[:LOGIT_BITS])
            with m.Elif(_fits(y, LOGIT_BITS)):
                m.d.sync += data4.eq(y[:LOGIT_BITS])
            with m.Elif(y[-1]):
                m.d.sync += data4.eq(Const(1 << (LOGIT_BITS - 1), LOGIT_BITS))
            with m.Else():
                m.d.sync += data4.eq((1 << (LOGIT_BITS - 1)) - 1)
        # The output register empties when taken, even while a stall holds the rest.
        with m.If(~advance & self.o.ready):
            m.d.sync += valid4.eq(0)
        m.d.comb += [
            self.o.valid.eq(valid4),
            self.o.payload.data.eq(data4),
            self.o.payload.last.eq(last4),
        ]
