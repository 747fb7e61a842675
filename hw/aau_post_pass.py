"""The AAU's post pass (``docs/aau.md`` sections 5 and 9.2): a finished reduction vector's
accumulators in, its ``result`` and the state the second passes read out.

Structure (``m.submodules`` names)::

    mean_divider, recip_divider   RestoringDivider x 2: (|W| << 28) // Z, 2**56 // Z; the
                                  recip divider also 2**47 // s for NORM
    log                           LogUnit: ln S from Z and R (leading one, table, * ln 2)
    product_a, product_b          ShiftAddMultiplier x 2: N S2, T**2, then N r, |T| r
    norm_lead, root               LeadingOne of U (k); RestoringSquareRoot: s = isqrt(V)
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_back_end import (
    NORM_SHIFT_BITS,
    RECIP_BITS,
    norm_offset_bits,
    norm_scale_bits,
)
from ahasd.hw.aau_layouts import (
    Z_FRAC,
    Mode,
    accumulators_layout,
    check_params,
    count_bits,
    norm_u_bits,
    result_layout,
    sum_bits,
    sum_sq_bits,
    w_bits,
    z_bits,
)
from ahasd.hw.aau_log import LeadingOne, LogUnit
from ahasd.hw.aau_tables import MANTISSA_BITS, N_BITS
from ahasd.hw.arith import decoded, widen
from ahasd.hw.serial_arith import RestoringDivider, RestoringSquareRoot, ShiftAddMultiplier
from ahasd.params import AAUParams

__all__ = [
    "DIVIDER_CYCLES",
    "NORM_EPS_SHIFT",
    "PostPass",
    "PostPhase",
    "norm_post_pass_cycles",
]

MEAN_QUOTIENT_BITS = 32  # q = (|W| << 28) // Z < 2**32
MEAN_SHIFT = 28
ENTROPY_SHIFT = 12  # entropy = round_shift(h, 12): UQ4.12 from 24 fraction bits
TOP1_SHIFT = 24  # top1 = round_shift(M_max * recip, 24): UQ0.16 from 16 + 24 fraction bits
RECIP_NUMERATOR_LOG2 = 56
NORM_EPS_SHIFT = 16  # each X**2 enters S2 shifted by 16, E (< 2**16) below it
NORM_ROOT_BITS = 24  # s = isqrt(V), V in [2**46, 2**48)
NORM_RECIP_NUMERATOR_LOG2 = 2 * NORM_ROOT_BITS - 1  # r = 2**47 // s
OUT_MAX = 65535

# Measured cycle counts (asserted by the tests, see ``docs/aau.md``, section "RTL").
DIVIDER_CYCLES = MEAN_QUOTIENT_BITS  # both dividers run side by side


def _norm_product_cycles(params: AAUParams) -> int:
    """Steps of the post pass's two bit-serial multipliers (``N`` or ``r``, ``|T|`` or ``r``
    one bit per step): the longer multiplier operand."""
    return max(sum_bits(params), RECIP_BITS)


def norm_post_pass_cycles(params: AAUParams) -> int:
    """Edges from a LAYERNORM/RMSNORM vector's copy into the post pass to its result: the
    products ``N S2`` and ``T**2`` (``P`` steps), ``U``, ``k``, the root's start, the root
    (``NORM_ROOT_BITS`` steps), the divider's start, the divider (``RECIP_BITS`` steps), the
    products' start, the products ``N r`` and ``|T| r`` (``P`` steps), the publishing edge:
    ``2 P + 55`` (119 by default)."""
    products = _norm_product_cycles(params)
    return products + 3 + (NORM_ROOT_BITS + 1) + (RECIP_BITS + 1) + products + 1


class PostPhase(enum.Enum, shape=4):
    """What the post pass is doing (``PostPass``)."""

    IDLE = 0  # no vector: ``i.ready``
    DIVIDE = 1  # STATS: both dividers, then the combining cycle
    PRODUCTS = 2  # NORM: N * S2 and T * T, bit-serial
    LEAD = 3  # NORM: k = lead(U) >> 1
    ROOT_START = 4  # NORM: the root takes V = shift(U, 46 - 2k)
    ROOT = 5  # NORM: s = isqrt(V), then the divider takes 2**47 and s
    RECIPROCAL = 6  # NORM: r = 2**47 // s on the recip divider
    SCALE = 7  # NORM: N * r and |T| * r, bit-serial, then publish
    OFFER = 8  # the result is on ``result``


class PostPass(wiring.Component):
    """The AAU's post pass (``docs/aau.md`` sections 5 and 9.2): from a finished reduction
    vector's accumulators to its ``result`` and the state the second passes use.

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(accumulators_layout(params)))
        One finished vector. ``i.ready`` is high while the post pass is idle (no vector in
        it, no result waiting), whatever ``i.valid``.
    result : Out(stream.Signature(result_layout(params)))
        One per vector taken on ``i``, in order; held until taken. The fields of each mode
        are those of :func:`result_layout`.
    stats_ref : Out(signed(N_BITS))
    stats_recip : Out(RECIP_BITS)
        ``R`` and ``recip`` of the last ``STATS`` vector, published when its result is
        (reset: 0, 0), for the SOFTMAX pass.
    stats_busy : Out(1)
        A ``STATS`` vector is being divided: ``stats_ref`` and ``stats_recip`` are about to
        change.
    norm_scale : Out(norm_scale_bits(params))
    norm_offset : Out(signed(norm_offset_bits(params)))
    norm_shift : Out(NORM_SHIFT_BITS)
        ``N * r``, ``T * r`` and ``k`` of the last ``LAYERNORM``/``RMSNORM`` vector,
        published when its result is (reset: 0), for the NORM pass.
    norm_busy : Out(1)
        A ``LAYERNORM``/``RMSNORM`` vector is in the post pass: the ``norm_*`` outputs are
        about to change.

    A ``STATS`` vector taken at edge ``c``: both dividers start at ``c`` (the
    ``mean_divider`` computes ``(|W| << 28) // Z`` in :data:`DIVIDER_CYCLES` steps, the
    ``recip_divider`` ``2**56 // Z`` in 25), the ``log`` pipeline computes ``ln S`` from the
    copy of ``Z`` and ``R`` within 4 cycles, and at edge ``c + DIVIDER_CYCLES + 1`` one cycle
    combines them (``entropy = clamp(round_shift(ln S -+ q, 12))``, ``top1 = min(65535,
    round_shift(M_max * recip, 24))``), publishes ``stats_ref``/``stats_recip`` and raises
    ``result.valid``.

    A ``LAYERNORM``/``RMSNORM`` vector taken at edge ``c`` (``T = S1`` or 0): the bit-serial
    ``product_a`` and ``product_b`` compute ``N * S2`` and ``|T| * |T|`` (``P`` =
    ``max(sum_bits, 25)`` steps, 32 by default); one edge registers ``U = N S2 - 2**16
    T**2``, one ``k = lead(U) >> 1`` (``norm_lead``, a leading-one tree), one starts the
    ``root`` on ``V = shift(U, 46 - 2k)`` (a left shift by ``2 (k_max - k)`` and a fixed
    slice); 24 steps give ``s = isqrt(V)``; the ``recip_divider`` then computes ``r = 2**47
    // s`` (25 steps); the two multipliers compute ``N * r`` and ``|T| * r`` (``P`` steps);
    the next edge publishes ``norm_*`` and raises ``result.valid``:
    :func:`norm_post_pass_cycles` edges after ``c`` (119 by default).

    ``SUM``, ``MAX`` and the reserved codes: ``result.valid`` right after edge ``c``.
    Throughput: one ``STATS`` vector per ``DIVIDER_CYCLES + 3`` cycles when each result is
    taken at once, one NORM vector per ``norm_post_pass_cycles + 2``, one ``SUM``/``MAX``
    per 2. Backpressure: a result not taken holds the post pass and ``i.ready`` low.
    """

    def __init__(self, params: AAUParams):
        check_params(self, params)
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(accumulators_layout(params))),
                "result": Out(stream.Signature(result_layout(params))),
                "stats_ref": Out(signed(N_BITS)),
                "stats_recip": Out(RECIP_BITS),
                "stats_busy": Out(1),
                "norm_scale": Out(norm_scale_bits(params)),
                "norm_offset": Out(signed(norm_offset_bits(params))),
                "norm_shift": Out(NORM_SHIFT_BITS),
                "norm_busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        phase = Signal(PostPhase)
        held = self._held_vector(m)
        stats = self._stats_units(m, held)
        in_phase = {each: decoded(m, phase, each) for each in PostPhase}
        norm = self._norm_units(m, held, stats, in_phase)
        norm_phases = (
            PostPhase.PRODUCTS,
            PostPhase.LEAD,
            PostPhase.ROOT_START,
            PostPhase.ROOT,
            PostPhase.RECIPROCAL,
            PostPhase.SCALE,
        )
        m.d.comb += [
            self.i.ready.eq(in_phase[PostPhase.IDLE]),
            self.result.valid.eq(in_phase[PostPhase.OFFER]),
            self.stats_busy.eq(in_phase[PostPhase.DIVIDE]),
            self.norm_busy.eq(decoded(m, phase, *norm_phases)),
        ]
        self._phases(m, phase, in_phase, held, stats, norm)
        return m

    def _held_vector(self, m: Module) -> SimpleNamespace:
        """The copy of the vector taken from ``i``: it feeds the units until the next copy;
        and the decoding of the vector on ``i``."""
        p = self.params
        accumulators = self.i.payload
        result = self.result.payload
        held = SimpleNamespace(
            z=Signal(z_bits(p), name="z_copy"),
            ref=Signal(signed(N_BITS), name="ref_copy"),
            m_max=Signal(MANTISSA_BITS, name="m_max_copy"),
            w_negative=Signal(name="w_negative"),
            count=Signal(count_bits(p), name="count_copy"),
            # |T|: |S1| for LAYERNORM, 0 for RMSNORM
            centre_magnitude=Signal(sum_bits(p), name="centre_magnitude"),
            centre_negative=Signal(name="centre_negative"),
        )
        m.d.comb += [result.z.eq(held.z), result.z_exp.eq(held.ref)]

        mode = accumulators.mode
        held.stats = decoded(m, mode, Mode.STATS)
        held.norm = decoded(m, mode, Mode.LAYERNORM, Mode.RMSNORM)
        held.centre = Signal(signed(sum_bits(p)), name="centre")  # T
        with m.If(decoded(m, mode, Mode.LAYERNORM)):
            m.d.comb += held.centre.eq(accumulators.sum)
        held.centre_abs = Signal(sum_bits(p), name="centre_abs")
        with m.If(held.centre[-1]):
            m.d.comb += held.centre_abs.eq(-held.centre)
        with m.Else():
            m.d.comb += held.centre_abs.eq(held.centre)
        return held

    def _stats_units(self, m: Module, held: SimpleNamespace) -> SimpleNamespace:
        """STATS (section 5): the two dividers, the log pipeline and the terms of the
        combining cycle."""
        p = self.params
        zw = z_bits(p)
        ww = w_bits(p)
        accumulators = self.i.payload
        m.submodules.mean_divider = mean_divider = RestoringDivider(
            dividend_bits=ww + MEAN_SHIFT,
            divisor_bits=zw,
            quotient_bits=MEAN_QUOTIENT_BITS,
        )
        # The recip divider also computes NORM's r = 2**47 // s (phase RECIPROCAL).
        m.submodules.recip_divider = recip_divider = RestoringDivider(
            dividend_bits=RECIP_NUMERATOR_LOG2 + 1,
            divisor_bits=zw,
            quotient_bits=RECIP_BITS,
        )
        abs_w = Mux(accumulators.w[-1], -accumulators.w, accumulators.w)
        m.d.comb += [
            mean_divider.dividend.eq(Cat(Const(0, MEAN_SHIFT), abs_w[:ww])),  # |W| << 28
            mean_divider.divisor.eq(held.z),
        ]

        m.submodules.log = log = LogUnit(
            z_bits=zw, z_frac_bits=Z_FRAC, exponent_bits=N_BITS, table_bits=p.ln_table_bits
        )
        m.d.comb += [log.z.eq(held.z), log.exponent.eq(held.ref)]

        # The combining cycle: the quotients are ready only at its start, so each output is
        # one sum of its terms (which the synthesiser adds in one tree with one carry
        # propagation), then its saturation. The terms are widened to the sum's width in the
        # branch that uses them (see the phases): equal operand widths.
        # entropy = round_shift(h, 12) with h = ln S - E[x] (24 fraction bits) is
        # (h + 2**11) >> 12. E[x] = q for W >= 0, -q otherwise; with -q = ~q + 1,
        # h + 2**11 = ln S + (q ^ pos) + {2**11, pos}, pos = (W >= 0) in every bit of the
        # second term and the last bit of the third.
        entropy_sum = Signal(log.ln_bits + 2)  # |h| < 2**(ln_bits - 1): a sign bit to spare
        w_positive = ~held.w_negative
        entropy_terms = [
            log.ln,
            mean_divider.quotient ^ w_positive.replicate(len(entropy_sum)),
            Cat(w_positive, Const(0, ENTROPY_SHIFT - 2), Const(1, 1)),
        ]
        # top1 = round_shift(M_max * recip, 24) = (M_max * recip + 2**23) >> 24: one
        # multiply-add.
        top1_sum = Signal(MANTISSA_BITS + RECIP_BITS + 1)
        return SimpleNamespace(
            mean_divider=mean_divider,
            recip_divider=recip_divider,
            entropy_sum=entropy_sum,
            entropy_terms=entropy_terms,
            # h < 0 saturates at 0 (h in [-2**11, 0) rounds to 0 anyway); above 65535 at 65535
            entropy_negative=entropy_sum[-1],
            entropy_high=entropy_sum[ENTROPY_SHIFT + 16 : -1].any(),
            entropy=entropy_sum[ENTROPY_SHIFT : ENTROPY_SHIFT + 16],
            top1_sum=top1_sum,
            top1=top1_sum[TOP1_SHIFT:],
        )

    def _norm_units(
        self, m: Module, held: SimpleNamespace, stats: SimpleNamespace, in_phase: dict
    ) -> SimpleNamespace:
        """NORM (section 9.2): the products, ``U``, ``k``, the root and the operands of the
        recip divider (``2**56 // Z`` for STATS, ``2**47 // s`` for NORM)."""
        p = self.params
        uw = norm_u_bits(p)
        result = self.result.payload
        recip_divider = stats.recip_divider
        # product_a: N * S2, then N * r; product_b: |T| * |T|, then |T| * r.
        m.submodules.product_a = product_a = ShiftAddMultiplier(
            multiplicand_bits=max(sum_sq_bits(p), count_bits(p)),
            multiplier_bits=max(count_bits(p), RECIP_BITS),
        )
        m.submodules.product_b = product_b = ShiftAddMultiplier(
            multiplicand_bits=sum_bits(p),
            multiplier_bits=_norm_product_cycles(p),
        )
        m.submodules.norm_lead = norm_lead = LeadingOne(width=uw)
        m.submodules.root = root = RestoringSquareRoot(radicand_bits=2 * NORM_ROOT_BITS)
        u = Signal(uw)  # U = N S2 - 2**16 T**2 >= 1
        shift_k = Signal(NORM_SHIFT_BITS)  # k = lead(U) >> 1
        m.d.comb += norm_lead.value.eq(u)
        with m.If(in_phase[PostPhase.SCALE]):
            m.d.comb += product_a.multiplicand.eq(held.count)
        with m.Else():
            m.d.comb += product_a.multiplicand.eq(result.sum_sq)  # the copy of S2
        m.d.comb += product_b.multiplicand.eq(held.centre_magnitude)
        # V = shift(U, 46 - 2k) = floor(U * 2**46 / 2**(2k)): a right shift of U << 46 by an
        # even amount, which is below 2**48 because U < 2**(2k + 2).
        scaled_u = Cat(Const(0, 2 * NORM_ROOT_BITS - 2), u) >> Cat(Const(0, 1), shift_k)
        m.d.comb += root.radicand.eq(scaled_u[: 2 * NORM_ROOT_BITS])
        # T**2 * 2**16 <= N S2 (U >= N**2 E > 0), both below 2**uw
        minuend = Signal(uw)
        subtrahend = Signal(uw)
        m.d.comb += [
            minuend.eq(product_a.product),
            subtrahend.eq(Cat(Const(0, NORM_EPS_SHIFT), product_b.product)),
        ]
        offset = Signal(signed(norm_offset_bits(p)))  # T r = -(|T| r) when T < 0
        with m.If(held.centre_negative):
            m.d.comb += offset.eq(-product_b.product)
        with m.Else():
            m.d.comb += offset.eq(product_b.product)
        with m.If(in_phase[PostPhase.ROOT]):
            m.d.comb += recip_divider.dividend.eq(1 << NORM_RECIP_NUMERATOR_LOG2)
        with m.Else():
            m.d.comb += recip_divider.dividend.eq(1 << RECIP_NUMERATOR_LOG2)
        with m.If(in_phase[PostPhase.RECIPROCAL]):
            m.d.comb += recip_divider.divisor.eq(root.root)
        with m.Else():
            m.d.comb += recip_divider.divisor.eq(held.z)
        return SimpleNamespace(
            product_a=product_a,
            product_b=product_b,
            norm_lead=norm_lead,
            root=root,
            u=u,
            shift_k=shift_k,
            difference=minuend - subtrahend,
            offset=offset,
            done=~product_a.busy & ~product_b.busy,
        )

    def _take_vector(
        self, m: Module, phase: Signal, held: SimpleNamespace, stats: SimpleNamespace, norm
    ) -> None:
        """IDLE with a vector on ``i``: start the mode's units, copy the vector, pick the
        next phase."""
        accumulators = self.i.payload
        result = self.result.payload
        is_norm = held.norm
        m.d.comb += [
            stats.mean_divider.start.eq(held.stats),
            stats.recip_divider.start.eq(held.stats),
            norm.product_a.start.eq(is_norm),
            norm.product_a.multiplier.eq(accumulators.count),
            norm.product_b.start.eq(is_norm),
            norm.product_b.multiplier.eq(held.centre_abs),
        ]
        m.d.sync += [
            result.mode.eq(accumulators.mode),
            result.max.eq(accumulators.max),
            result.argmax.eq(accumulators.argmax),
            result.sum.eq(accumulators.sum),
            result.w.eq(Mux(is_norm, 0, accumulators.w)),
            result.recip.eq(0),
            result.top1.eq(0),
            result.entropy.eq(0),
            result.sum_sq.eq(Mux(is_norm, accumulators.sum_sq, 0)),
            result.rstd.eq(0),
            result.rstd_shift.eq(0),
            held.z.eq(Mux(is_norm, 0, accumulators.z)),
            held.ref.eq(Mux(is_norm, 0, accumulators.ref)),
            held.m_max.eq(accumulators.m_max),
            held.w_negative.eq(accumulators.w[-1]),
            held.count.eq(accumulators.count),
            held.centre_magnitude.eq(held.centre_abs),
            held.centre_negative.eq(held.centre[-1]),
        ]
        with m.If(held.stats):
            m.d.sync += phase.eq(PostPhase.DIVIDE)
        with m.Elif(is_norm):
            m.d.sync += phase.eq(PostPhase.PRODUCTS)
        with m.Else():
            m.d.sync += phase.eq(PostPhase.OFFER)

    def _combine(self, m: Module, held: SimpleNamespace, stats: SimpleNamespace) -> None:
        """STATS's combining cycle: ``entropy``, ``top1`` and the published ``R``, ``recip``."""
        result = self.result.payload
        quotient = stats.recip_divider.quotient
        entropy_sum, top1_sum, top1 = stats.entropy_sum, stats.top1_sum, stats.top1
        first, second, third = (
            widen(m, term, len(entropy_sum)).as_unsigned() for term in stats.entropy_terms
        )
        half = widen(m, Const(1 << (TOP1_SHIFT - 1), TOP1_SHIFT), len(top1_sum) - 1)
        m.d.comb += [
            entropy_sum.eq((first + second)[: len(entropy_sum)] + third),
            top1_sum.eq(held.m_max * quotient + half),
        ]
        entropy = Mux(stats.entropy_high, OUT_MAX, stats.entropy)
        m.d.sync += [
            result.recip.eq(quotient),
            result.entropy.eq(Mux(stats.entropy_negative, 0, entropy)),
            result.top1.eq(Mux(top1[16:].any(), OUT_MAX, top1[:16])),
            self.stats_ref.eq(held.ref),
            self.stats_recip.eq(quotient),
        ]

    def _phases(self, m, phase, in_phase, held, stats, norm) -> None:
        """The phase sequence: one branch per phase, each waiting for its units."""
        result = self.result.payload
        recip_divider = stats.recip_divider
        with m.If(in_phase[PostPhase.IDLE]), m.If(self.i.valid):
            self._take_vector(m, phase, held, stats, norm)
        # DIVIDE: the log pipeline has long settled by then (LN_LATENCY < DIVIDER_CYCLES).
        dividers_done = ~stats.mean_divider.busy & ~recip_divider.busy
        with m.Elif(in_phase[PostPhase.DIVIDE]), m.If(dividers_done):
            self._combine(m, held, stats)
            m.d.sync += phase.eq(PostPhase.OFFER)
        with m.Elif(in_phase[PostPhase.PRODUCTS]), m.If(norm.done):
            m.d.sync += [norm.u.eq(norm.difference), phase.eq(PostPhase.LEAD)]
        with m.Elif(in_phase[PostPhase.LEAD]):
            m.d.sync += [
                norm.shift_k.eq(norm.norm_lead.position[1:]),
                phase.eq(PostPhase.ROOT_START),
            ]
        with m.Elif(in_phase[PostPhase.ROOT_START]):
            m.d.comb += norm.root.start.eq(1)
            m.d.sync += phase.eq(PostPhase.ROOT)
        with m.Elif(in_phase[PostPhase.ROOT]), m.If(~norm.root.busy):
            m.d.comb += recip_divider.start.eq(1)
            m.d.sync += phase.eq(PostPhase.RECIPROCAL)
        with m.Elif(in_phase[PostPhase.RECIPROCAL]), m.If(~recip_divider.busy):
            m.d.comb += [
                norm.product_a.start.eq(1),
                norm.product_a.multiplier.eq(recip_divider.quotient),
                norm.product_b.start.eq(1),
                norm.product_b.multiplier.eq(recip_divider.quotient),
            ]
            m.d.sync += phase.eq(PostPhase.SCALE)
        with m.Elif(in_phase[PostPhase.SCALE]), m.If(norm.done):
            m.d.sync += [
                result.rstd.eq(recip_divider.quotient),
                result.rstd_shift.eq(norm.shift_k),
                self.norm_scale.eq(norm.product_a.product),
                self.norm_offset.eq(norm.offset),
                self.norm_shift.eq(norm.shift_k),
                phase.eq(PostPhase.OFFER),
            ]
        with m.Elif(in_phase[PostPhase.OFFER]), m.If(self.result.ready):
            m.d.sync += phase.eq(PostPhase.IDLE)
        with m.Else():  # the unused codes: back to IDLE
            m.d.sync += phase.eq(PostPhase.IDLE)
