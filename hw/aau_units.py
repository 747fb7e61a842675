"""The AAU's two table pipelines (``docs/aau.md`` 4.1 and 10), built on one skeleton:

===========================  ===============================================================
:class:`TablePipeline`       three stage registers with a global stall, a valid bit and a tag
                             carried alongside; a subclass supplies the stages' arithmetic
:class:`Exp2Unit`            ``exp(x) = M * 2**(n - 16)`` for a Q8.8 ``x``: ``t = x * log2 e``,
                             then ``2**frac(t)`` from an interpolated table (section 4.1)
:class:`GateUnit`            the gate ``g(x)`` of SILU and GELU (``x * g(x)``) from an
                             interpolated table over ``|x|`` (section 10)
===========================  ===============================================================

The tables and constants are in ``hw/aau_tables.py``; the logarithm is ``hw/aau_log.py``, the
bit-serial divider, square root and multiplier ``hw/serial_arith.py``.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, ShapeCastable, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_tables import (
    GATE_BITS,
    GATE_FRAC,
    LOG2E_CODE,
    LOGIT_BITS,
    MANTISSA_BITS,
    N_BITS,
    SILU_SPAN_BITS,
    T_BITS,
    T_FRAC,
    exp2_table,
    gelu_table,
    silu_table,
    table_roms,
)
from ahasd.hw.arith import partial_products, sum_of, widened
from ahasd.hw.checks import check_int, rejected

__all__ = [
    "EXP_LATENCY",
    "GATE_LATENCY",
    "PIPELINE_STAGES",
    "Exp2Unit",
    "GateUnit",
    "TablePipeline",
    "exp_input_layout",
    "exp_output_layout",
    "gate_input_layout",
    "gate_output_layout",
]

# Pipeline depths in edges, the one that takes (samples) the input included.
PIPELINE_STAGES = 3
EXP_LATENCY = PIPELINE_STAGES  # Exp2Unit: x to o
GATE_LATENCY = PIPELINE_STAGES  # GateUnit: x to o


def _tagged(fields: dict, tag_shape: ShapeCastable | int) -> data.StructLayout:
    """``fields`` and a ``tag`` field of ``tag_shape``, left out when it has no bits (a
    zero-width wire is an error in Verilator's lint)."""
    if Shape.cast(tag_shape).width:
        fields = {**fields, "tag": tag_shape}
    return data.StructLayout(fields)


def exp_input_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """An :class:`Exp2Unit` input: the Q8.8 code ``x`` and a ``tag`` carried alongside."""
    return data.StructLayout({"x": signed(LOGIT_BITS), "tag": tag_shape})


def exp_output_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """An :class:`Exp2Unit` output: ``exp(x) = m * 2**(n - 16)``, ``n`` the integer part of
    ``t = x * log2 e`` (signed), ``m = 2**frac(t)`` (UQ1.16, ``65536 <= m < 131072``), and the
    input's ``tag``."""
    return data.StructLayout({"n": signed(N_BITS), "m": MANTISSA_BITS, "tag": tag_shape})


def gate_input_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """A :class:`GateUnit` input: the Q8.8 code ``x``, ``gelu`` (the GELU table, else
    SiLU's) and a ``tag`` carried alongside (no ``tag`` field for a zero-width tag)."""
    return _tagged({"x": signed(LOGIT_BITS), "gelu": 1}, tag_shape)


def gate_output_layout(tag_shape: ShapeCastable | int = 0) -> data.StructLayout:
    """A :class:`GateUnit` output: the gate ``g`` (UQ1.16, ``0 .. 2**16``) and the ``tag``
    (no ``tag`` field for a zero-width tag)."""
    return _tagged({"g": GATE_BITS}, tag_shape)


class TablePipeline(wiring.Component):
    """A three-stage stream pipeline with a global stall, carrying a tag: the skeleton of
    :class:`Exp2Unit` and :class:`GateUnit`.

    Parameters
    ----------
    table_bits : int, keyword-only
        The address bits of the subclass's table, 1 to ``MAX_TABLE_BITS``.
    tag_shape : shape-castable, keyword-only
        Shape of a ``tag`` carried unchanged alongside each element (default: none).

    Members
    -------
    i : In(stream.Signature(input_layout(tag_shape)))
        ``i.ready`` is ``o.ready`` (combinational, whatever ``i.valid``).
    o : Out(stream.Signature(output_layout(tag_shape)))
        The results and the ``tag`` of each input element, in order.

    A subclass names its layouts (``input_layout``, ``output_layout``), its ``MAX_TABLE_BITS``
    and its arithmetic (:meth:`stages`); the skeleton adds the valid bits, the tag's delay
    line and the stall. Latency :data:`PIPELINE_STAGES` (3) advancing edges (edges with
    ``o.ready`` high), the one that takes the element included. Throughput one element per
    cycle. Backpressure: ``o.ready`` low freezes the whole pipeline, bubbles included (a
    global stall, so elements keep their spacing), and holds ``o``; ``i.ready`` follows it.
    """

    MAX_TABLE_BITS = 0
    input_layout = staticmethod(exp_input_layout)
    output_layout = staticmethod(exp_output_layout)

    def __init__(self, *, table_bits: int, tag_shape: ShapeCastable | int = 0):
        check_int(self, "table_bits", table_bits, 1, self.MAX_TABLE_BITS)
        try:
            Shape.cast(tag_shape)
        except TypeError:
            raise rejected(
                self, TypeError(f"tag_shape must be a shape, not {tag_shape!r}")
            ) from None
        self.table_bits = table_bits
        self.tag_shape = tag_shape
        super().__init__(
            {
                "i": In(stream.Signature(self.input_layout(tag_shape))),
                "o": Out(stream.Signature(self.output_layout(tag_shape))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        advance = self.o.ready  # a global stall: every register moves together
        m.d.comb += self.i.ready.eq(advance)

        def register(value, name: str, shape=None) -> Signal:
            """A stage register of ``value`` (of its shape unless ``shape`` is given), loaded
            when the pipeline advances."""
            stored = Signal(value.shape() if shape is None else shape, name=name)
            with m.If(advance):
                m.d.sync += stored.eq(value)
            return stored

        results = self.stages(m, register)
        valid = self.i.valid
        for stage in range(1, PIPELINE_STAGES + 1):
            valid = register(valid, f"valid{stage}")
        m.d.comb += self.o.valid.eq(valid)
        m.d.comb += [getattr(self.o.payload, key).eq(value) for key, value in results.items()]
        if Shape.cast(self.tag_shape).width:
            tag = self.i.payload.tag
            for stage in range(1, PIPELINE_STAGES + 1):
                tag = register(tag, f"tag{stage}")
            m.d.comb += self.o.payload.tag.eq(tag)
        return m

    def stages(self, m: Module, register) -> dict:
        """The arithmetic of the three stages, each stage's values through ``register(value,
        name, shape=None)``; returns the third stage's registers by ``o.payload`` field."""
        raise NotImplementedError


class Exp2Unit(TablePipeline):
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

    MAX_TABLE_BITS = 12
    input_layout = staticmethod(exp_input_layout)
    output_layout = staticmethod(exp_output_layout)

    def stages(self, m: Module, register) -> dict:
        r_bits = T_FRAC - self.table_bits
        base_rom, step_rom, _ = table_roms(exp2_table(self.table_bits), MANTISSA_BITS)

        # Stage 1: t = x * log2 e, split into its integer part n and its fraction f.
        t = Signal(signed(T_BITS))
        m.d.comb += t.eq((self.i.payload.x * Const(LOG2E_CODE, 25)).shift_right(T_FRAC))
        n1 = register(t[T_FRAC:].as_signed(), "n1")
        f1 = register(t[:T_FRAC], "f1")

        # Stage 2: table read at the top B bits of f; the low bits r interpolate.
        index = f1[r_bits:]
        n2 = register(n1, "n2")
        base2 = register(base_rom[index], "base2")
        # wider than needed: equal operand widths below
        step2 = register(step_rom[index], "step2", MANTISSA_BITS)
        rest2 = register(f1[:r_bits], "rest2")

        # Stage 3: M = E[j] + (D[j] * r) >> (16 - B) = (D[j] * r + E[j] * 2**(16 - B)) >> (16 - B)
        # (the low bits of the second term are zero): one multiply-add, whose partial products
        # and addend the synthesiser sums in one tree with one carry propagation, where the
        # product and the add would be two. (D * r) >> (16 - B) < D because r < 2**(16 - B),
        # so M < E[j + 1] <= 2**17.
        mantissa_sum = step2 * rest2 + Cat(Const(0, r_bits), base2)
        n3 = register(n2, "n3")
        mantissa3 = register(mantissa_sum[r_bits : r_bits + MANTISSA_BITS], "mantissa3")
        return {"n": n3, "m": mantissa3}


class GateUnit(TablePipeline):
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

    MAX_TABLE_BITS = 10
    input_layout = staticmethod(gate_input_layout)
    output_layout = staticmethod(gate_output_layout)

    def stages(self, m: Module, register) -> dict:
        bits = self.table_bits
        span = SILU_SPAN_BITS
        low_bits = span - bits  # at least 2
        # One ROM pair for both tables, addressed by {gelu, j}: SiLU's 2**G segments, then
        # GELU's (each table's own end point only enters its last step).
        silu_base, silu_step, _ = table_roms(silu_table(bits), GATE_BITS)
        gelu_base, gelu_step, _ = table_roms(gelu_table(bits), GATE_BITS)
        base_rom = Array([*silu_base, *gelu_base])
        step_rom = Array([*silu_step, *gelu_step])
        one = Const(1 << GATE_FRAC, GATE_BITS)

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
        outside1 = register(scaled[span:].any(), "outside1")
        negative1 = register(x[-1], "negative1")
        gelu1 = register(self.i.payload.gelu, "gelu1")
        index1 = register(scaled[low_bits:span], "index1")
        rest1 = register(scaled[:low_bits], "rest1")

        # Stage 2: the table read.
        address = Cat(index1, gelu1)
        outside2 = register(outside1, "outside2")
        negative2 = register(negative1, "negative2")
        base2 = register(base_rom[address], "base2")
        # wider than needed: equal operand widths below
        step2 = register(step_rom[address], "step2", GATE_BITS)
        rest2 = register(rest1, "rest2")

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
        gate = Mux(outside2, Mux(negative2, 0, one), gate_sum[low_bits : low_bits + GATE_BITS])
        return {"g": register(gate, "gate3")}
