"""The AAU's front end (``docs/aau.md`` 4 and 8): an element in, its exponent, gate and
shifted contributions out, ready to be accumulated or to enter the back end.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_back_end import ElementKind
from ahasd.hw.aau_layouts import Mode, check_params, input_layout
from ahasd.hw.aau_tables import GATE_BITS, LOGIT_BITS, MANTISSA_BITS, N_BITS
from ahasd.hw.aau_units import EXP_LATENCY, Exp2Unit, GateUnit
from ahasd.params import AAUParams

__all__ = [
    "FRONT_END_LATENCY",
    "SHIFT_BITS",
    "FrontEnd",
    "element_tag_layout",
    "front_end_output_layout",
]

P_BITS = 33  # P = M * X, |P| < 2**32 (X * X <= 2**30 for the NORM modes)
E_BITS = 33  # e = shift(M, 16 - s) < 2**33
WCONTRIB_BITS = 37  # w = shift(P, 4 - s), |w| < 2**36
SQUARE_BITS = 31  # X**2 <= 2**30
SHIFT_BITS = 6  # shift amounts saturate at 63: beyond every accumulator's width

# The input register, the exp and gate units, reg4, reg5.
FRONT_END_LATENCY = 1 + EXP_LATENCY + 2

# The mode decoded once: (reduce, back-end kind, square, gelu) for each mode, every field in
# every case; the modes not named (STATS, SUM, MAX, the reserved codes) are reductions as SUM.
_DECODE = {
    Mode.SOFTMAX: (0, ElementKind.SOFTMAX, 0, 0),
    Mode.NORM: (0, ElementKind.NORM, 0, 0),
    Mode.RELU: (0, ElementKind.RELU, 0, 0),
    Mode.SILU: (0, ElementKind.GATE, 0, 0),
    Mode.GELU: (0, ElementKind.GATE, 0, 1),
    Mode.LAYERNORM: (1, ElementKind.SOFTMAX, 1, 0),
    Mode.RMSNORM: (1, ElementKind.SOFTMAX, 1, 0),
}
_DECODE_OTHERS = (1, ElementKind.SOFTMAX, 0, 0)


def element_tag_layout() -> data.StructLayout:
    """What travels with an element through the exp and gate units: its code, its vector's
    flags and the mode decoded once at the input: ``reduce`` (a reduction element),
    ``kind`` (the back end's, for the others), ``square`` (LAYERNORM, RMSNORM: the multiplier
    squares ``X``), ``gelu`` (the GELU table)."""
    return data.StructLayout(
        {
            "x": signed(LOGIT_BITS),
            "last": 1,
            "first": 1,
            "mode": Mode,
            "reduce": 1,
            "kind": ElementKind,
            "square": 1,
            "gelu": 1,
        }
    )


def front_end_output_layout() -> data.StructLayout:
    """An element leaving the front end: its ``tag`` (:func:`element_tag_layout`), ``exp(x) =
    m * 2**(n - 16)``, the gate ``g``, the vector's reference exponent ``ref`` (``R`` after
    this element), the accumulators' rescaling shift ``k``, the contributions ``e = shift(M,
    16 - s)`` and ``w = shift(P, 4 - s)`` and ``square`` (``X**2``, the NORM modes)."""
    return data.StructLayout(
        {
            "tag": element_tag_layout(),
            "n": signed(N_BITS),
            "m": MANTISSA_BITS,
            "g": GATE_BITS,
            "ref": signed(N_BITS),
            "k": SHIFT_BITS,
            "e": E_BITS,
            "w": signed(WCONTRIB_BITS),
            "square": SQUARE_BITS,
        }
    )


def _saturate_shift(amount):
    """Shifts of 63 and more leave 0 (or the sign) in every accumulator and term."""
    return Mux(amount[SHIFT_BITS:].any(), (1 << SHIFT_BITS) - 1, amount[:SHIFT_BITS])


class FrontEnd(wiring.Component):
    """The AAU's element lane up to the accumulators (``docs/aau.md`` 4, 8 and 10).

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(input_layout(params)))
        Elements; a vector's mode is the ``mode`` of its first element. ``i.ready`` is
        ``o.ready`` (combinational, whatever ``i.valid``).
    o : Out(stream.Signature(front_end_output_layout()))
        Each element with its exponent, gate, reference exponent and contributions, in
        order.

    Registers (``m.submodules`` names for the units)::

        reg0      input register                  X, last, mode (decoded), first
        exp       Exp2Unit, 3 stages              t = X * log2 e; table read; M
        gate      GateUnit, 3 stages, beside exp  |x|; gate-table read; g (SILU, GELU)
        reg4      P = M * X (X * X: NORM modes)   (18 x 16 mult); R loop: R := max(R, n),
                                                  k = R_new - R, s = R_new - n (1-cycle loop)
        reg5      e = (M << 16) >> s, w = (P << 4) >> s    (barrel shifters, 6-bit s)

    Latency :data:`FRONT_END_LATENCY` (6) advancing edges, the one that takes the element
    included. Throughput one element per cycle. Backpressure: ``o.ready`` low freezes the
    whole lane, bubbles and the ``R`` loop included (a global stall), and holds ``o``.
    """

    def __init__(self, params: AAUParams):
        check_params(self, params)
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(input_layout(params))),
                "o": Out(stream.Signature(front_end_output_layout())),
            }
        )

    def elaborate(self, platform):
        m = Module()
        advance = self.o.ready  # the global enable: every register moves with it
        m.d.comb += self.i.ready.eq(advance)
        head = self._input_register(m, advance)

        # reg1..reg3: exp(x) = M * 2**(n - 16), and the gate g(x), side by side
        p = self.params
        tag_layout = element_tag_layout()
        m.submodules.exp = exp = Exp2Unit(table_bits=p.exp_table_bits, tag_shape=tag_layout)
        m.submodules.gate = gate = GateUnit(table_bits=p.gate_table_bits)
        m.d.comb += [
            exp.i.valid.eq(head["valid"]),
            exp.i.payload.x.eq(head["tag"].x),
            exp.i.payload.tag.eq(head["tag"]),
            exp.o.ready.eq(advance),  # so exp.i.ready is advance too
            gate.i.valid.eq(head["valid"]),
            gate.i.payload.x.eq(head["tag"].x),
            gate.i.payload.gelu.eq(head["tag"].gelu),
            gate.o.ready.eq(advance),  # in step with the exp unit: same latency, same stall
        ]
        s4, ref = self._reference(m, advance, exp.o, gate.o.payload.g)
        self._contributions(m, advance, s4, ref)
        return m

    @staticmethod
    def _stage(m: Module, advance, name: str, values: dict) -> dict:
        """A pipeline register per entry of ``values`` (and ``valid``), loaded with it when
        the lane advances."""
        regs = {key: Signal(value.shape(), name=f"{name}_{key}") for key, value in values.items()}
        with m.If(advance):
            m.d.sync += [regs[key].eq(value) for key, value in values.items()]
        return regs

    def _input_register(self, m: Module, advance) -> dict:
        """reg0: the element, its vector's flags, the mode decoded once."""
        payload = self.i.payload
        in_first = Signal(init=1)  # the next accepted element starts a vector
        in_mode = Signal(Mode)  # the current vector's mode
        mode_now = Signal(Mode)
        with m.If(in_first):
            m.d.comb += mode_now.eq(payload.mode)
        with m.Else():
            m.d.comb += mode_now.eq(in_mode)
        tag_layout = element_tag_layout()
        tag_now = Signal(tag_layout)
        flags = (tag_now.reduce, tag_now.kind, tag_now.square, tag_now.gelu)
        with m.Switch(mode_now):
            for mode, values in _DECODE.items():
                with m.Case(mode):
                    m.d.comb += [flag.eq(value) for flag, value in zip(flags, values, strict=True)]
            with m.Default():
                m.d.comb += [
                    flag.eq(value) for flag, value in zip(flags, _DECODE_OTHERS, strict=True)
                ]
        m.d.comb += [
            tag_now.x.eq(payload.data),
            tag_now.last.eq(payload.last),
            tag_now.first.eq(in_first),
            tag_now.mode.eq(mode_now),
        ]
        with m.If(advance & self.i.valid):
            m.d.sync += [in_first.eq(payload.last), in_mode.eq(mode_now)]
        return self._stage(m, advance, "s0", {"valid": self.i.valid, "tag": tag_now})

    def _reference(self, m: Module, advance, exp_out, gate_g) -> tuple[dict, Signal]:
        """reg4: ``P = M * X`` (``X * X`` for the NORM modes) and the ``R`` loop."""
        n, mantissa, tag = exp_out.payload.n, exp_out.payload.m, exp_out.payload.tag
        ref = Signal(signed(N_BITS))  # R of the vector streaming through this stage
        ref_new = Signal(signed(N_BITS))
        rescale = Signal(N_BITS + 1)  # R_new - R in 0 .. 369
        element_shift = Signal(N_BITS + 1)  # R_new - n in 0 .. 369
        m.d.comb += [
            ref_new.eq(Mux(tag.first | (n > ref), n, ref)),
            rescale.eq(Mux(tag.first, 0, ref_new - ref)),
            element_shift.eq(ref_new - n),
        ]
        factor = Signal(signed(MANTISSA_BITS + 1))  # M (unsigned 17) or X
        with m.If(tag.square):
            m.d.comb += factor.eq(tag.x)
        with m.Else():
            m.d.comb += factor.eq(mantissa)
        product = Signal(signed(P_BITS))
        m.d.comb += product.eq(factor * tag.x)
        with m.If(advance & exp_out.valid):
            m.d.sync += ref.eq(ref_new)
        values = {
            "valid": exp_out.valid,
            "tag": tag,
            "n": n,
            "m": mantissa,
            "g": gate_g,
            "p": product,
            "k": Signal(SHIFT_BITS),
            "s": Signal(SHIFT_BITS),
        }
        m.d.comb += [
            values["k"].eq(_saturate_shift(rescale)),
            values["s"].eq(_saturate_shift(element_shift)),
        ]
        return self._stage(m, advance, "s4", values), ref

    def _contributions(self, m: Module, advance, s4: dict, ref: Signal) -> None:
        """reg5: the contributions (barrel shifters), onto ``o``."""
        out = self.o.payload
        contributions = {
            "e": Signal(E_BITS),
            "w": Signal(signed(WCONTRIB_BITS)),
            "square": Signal(SQUARE_BITS),
        }
        m.d.comb += [
            contributions["e"].eq(s4["m"].shift_left(16) >> s4["s"]),  # shift(M, 16 - s), floor
            # shift(P, 4 - s), floor (arithmetic)
            contributions["w"].eq(s4["p"].shift_left(4) >> s4["s"]),
            contributions["square"].eq(s4["p"][:SQUARE_BITS]),  # X**2 for the NORM modes
        ]
        values = {
            "valid": s4["valid"],
            "tag": s4["tag"],
            "n": s4["n"],
            "m": s4["m"],
            "g": s4["g"],
            "ref": ref,  # R after this element (the register was loaded with it)
            "k": s4["k"],
            **contributions,
        }
        s5 = self._stage(m, advance, "s5", values)
        m.d.comb += self.o.valid.eq(s5["valid"])
        m.d.comb += [getattr(out, key).eq(s5[key]) for key in values if key != "valid"]
