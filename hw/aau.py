"""AAU: attention algorithm unit (spec 2.4, ``docs/aau.md``).

A streaming unit at one INT16 Q8.8 element per cycle. Per vector, in one of ten modes
(``docs/aau.md`` section 11):

=================  =========================================================================
``STATS``          online max with rescaling: ``max``, ``argmax``, the accumulators ``Z``
                   and ``W`` with their exponent ``R``, ``recip = 2**56 // Z``, top-1
                   probability (UQ0.16) and entropy (UQ4.12 nats); one ``result``
``SOFTMAX``        second pass over the vector of the last ``STATS`` pass: ``p_i`` (UQ0.16),
                   one ``o`` element per input element, same order, same ``last``
``SUM``            ``sum_i X_i`` (exact, Q24.8 for the default length); one ``result``
``MAX``            ``max_i X_i`` and the lowest index holding it; one ``result``
``LAYERNORM``,     first pass of a LayerNorm (RMSNorm): ``S1 = sum X``, ``S2 = sum (X**2
``RMSNORM``        2**16 + E)``; the post pass computes ``1/sqrt(var + eps)`` as ``r``, ``k``
                   (integer square root and a division) and holds it; one ``result``
``NORM``           second pass: ``z_i = clamp(((N X_i - T) r) >> k)``, ``y_i =
                   clamp(round_shift(z_i G_i, 16) + B_i)`` in Q8.8, ``(G_i, B_i)`` from the
                   ``param`` stream; one ``o`` element each
``RELU``           ``max(X, 0)``; one ``o`` element each
``SILU``/``GELU``  ``x * g(x)``, the gate ``g(|x|)`` from an interpolated table and
                   ``g(-a) = 1 - g(a)``; Q8.8, one ``o`` element each
=================  =========================================================================

The arithmetic is ``docs/aau.md`` sections 2 to 11, bit for bit: base-2 exponent with an
integer reference ``R``, so the online rescaling of the accumulators is a right shift and no
multiplier sits in a feedback loop; ``exp`` and ``log2`` from small interpolated tables; the
two post-pass divisions (``W / Z`` and ``2**56 / Z``) by two radix-2 restoring dividers that
run side by side (32 and 25 cycles); NORM's ``U = N S2 - 2**16 T**2`` by two bit-serial
multipliers, its root by a digit recurrence and its ``r = 2**47 // s`` on the recip divider.
Ties in ``argmax``: the lowest index wins (strict ``>``), in every mode.

Structure (``m.submodules`` names; the arithmetic units are in ``hw/aau_units.py``, the
element lane in ``hw/aau_back_end.py``)::

    reg0      input register                  X, last, mode (decoded), first
    exp       Exp2Unit, 3 stages              t = X * log2 e; table read; M    (reg1..reg3)
    gate      GateUnit, 3 stages, beside exp  |x|; gate-table read; g      (SILU, GELU)
    reg4      P = M * X (X * X: NORM modes)   (18 x 16 mult); R loop: R := max(R, n),
                                              k = R_new - R, s = R_new - n   (1-cycle loop)
    reg5      e = (M << 16) >> s, w = (P << 4) >> s                (barrel shifters, 6-bit s)
    acc       Z := (Z >> k) + e, W := (W >> k) + w, SUM, S2, max/argmax/M_max  (1-cycle loops)
    back_end  BackEnd, 4 registers: operands (the held R/recip or N r/T r/k read here),
              a * b - c (18 x 41 mult), rounding per mode, NORM's z * G + B   -> ``o``
    post_pass PostPass: the finished accumulators in, the result out
      mean_divider, recip_divider   RestoringDivider x 2: (|W| << 28) // Z, 2**56 // Z;
                                    the recip divider also 2**47 // s for NORM
      log                           LogUnit: ln S from Z and R (leading one, table, * ln 2)
      product_a, product_b          ShiftAddMultiplier x 2: N S2, T**2, then N r, |T| r
      norm_lead, root               LeadingOne of U (k); RestoringSquareRoot: s = isqrt(V)

After a reduction vector's last element is accumulated, the post pass takes a copy of the
accumulators (so the next vector streams on while it runs) and runs the mode's phases:
STATS starts both dividers and lets the log pipeline settle, then one cycle combines the
quotients into ``top1`` and ``entropy``; LAYERNORM/RMSNORM run products, normalisation,
root, division and products again (``norm_post_pass_cycles``); the result is then offered on
``result``.

Critical path: no multiplier sits in a loop. The accumulate loop (a 6-level barrel shifter of
53 bits, then a 53-bit adder), the divider and root steps (one subtract whose borrow selects
the remainder) and the bit-serial multipliers' steps (one add, up to 63 bits) are each one
adder deep; with ripple-carry adders (yosys ``synth; ltp``) the 63-bit add of ``N * S2`` is
the longest path (129 gate levels); with delay-mapped gates (``ahasd timing``) the longest
are the element lane's single-stage multipliers (16 x 25 in ``exp``, 18 x 16 at reg4, 18 x
41 and 25 x 16 in the back end), at 41 levels; each could take a second stage without
changing a result, at one cycle of ``OUTPUT_LATENCY``. The STATS combining cycle computes
each of its outputs as one sum of its terms (one carry propagation, ``docs/aau.md`` 15).
The stall net fans ``o.ready`` and ``param.valid`` out to the enables of every element
register (see ``i``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_back_end import (
    BACK_END_LATENCY,
    NORM_SHIFT_BITS,
    RECIP_BITS,
    BackEnd,
    ElementKind,
    element_layout,
    norm_offset_bits,
    norm_scale_bits,
    param_layout,
)
from ahasd.hw.aau_units import (
    EXP_LATENCY,
    GATE_BITS,
    LN2_CODE,
    LOG2E_CODE,
    LOGIT_BITS,
    MANTISSA_BITS,
    N_BITS,
    Exp2Unit,
    GateUnit,
    LeadingOne,
    LogUnit,
    RestoringDivider,
    RestoringSquareRoot,
    ShiftAddMultiplier,
    decoded,
    exp2_table,
    log2_table,
    widen,
)
from ahasd.params import AAUParams

__all__ = [
    "AAU",
    "DIVIDER_CYCLES",
    "ELEMENT_LATENCY",
    "LN2_CODE",
    "LOG2E_CODE",
    "OUTPUT_LATENCY",
    "REDUCTION_LATENCY",
    "RESULT_LATENCY",
    "Mode",
    "PostPass",
    "PostPhase",
    "accumulators_layout",
    "argmax_bits",
    "count_bits",
    "element_layout",
    "exp2_table",
    "input_layout",
    "log2_table",
    "norm_post_pass_cycles",
    "norm_result_latency",
    "norm_u_bits",
    "param_layout",
    "result_layout",
    "sum_bits",
    "sum_sq_bits",
    "w_bits",
    "z_bits",
]

P_BITS = 33  # P = M * X, |P| < 2**32 (X * X <= 2**30 for the NORM modes)
E_BITS = 33  # e = shift(M, 16 - s) < 2**33
WCONTRIB_BITS = 37  # w = shift(P, 4 - s), |w| < 2**36
SQUARE_BITS = 31  # X**2 <= 2**30
SHIFT_BITS = 6  # shift amounts saturate at 63: beyond every accumulator's width
Z_FRAC = 32  # Z is UQ(1 + clog2 N).32
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
ELEMENT_LATENCY = 6  # input edge of an element to the edge that accumulates it
# Input edge of a reduction vector's last element to the edge after which ``result.valid`` is
# high: ELEMENT_LATENCY, the copy, the dividers, the combining cycle.
RESULT_LATENCY = ELEMENT_LATENCY + 1 + DIVIDER_CYCLES + 1
# SUM, MAX and the reserved codes skip the dividers.
REDUCTION_LATENCY = ELEMENT_LATENCY + 1
# Input edge of an element of an element mode to the edge after which it is on ``o``: the
# input register, the exp and gate units, reg4, reg5, the back end.
OUTPUT_LATENCY = 1 + EXP_LATENCY + 2 + BACK_END_LATENCY - 1


class Mode(enum.Enum, shape=4):
    """What the unit computes over a vector (taken from the vector's first element).

    Codes 10 to 15 are reserved: the unit treats them as ``SUM`` (``docs/aau.md`` 11).
    """

    STATS = 0
    SOFTMAX = 1
    SUM = 2
    MAX = 3
    LAYERNORM = 4
    RMSNORM = 5
    NORM = 6
    RELU = 7
    SILU = 8
    GELU = 9


def _clog2(value: int) -> int:
    return (value - 1).bit_length()


def argmax_bits(params: AAUParams) -> int:
    """Width of an element index: ``clog2(max_length)``, at least one bit."""
    return max(1, _clog2(params.max_length))


def count_bits(params: AAUParams) -> int:
    """Width of an element count ``N <= max_length``: ``clog2(max_length) + 1``."""
    return _clog2(params.max_length) + 1


def z_bits(params: AAUParams) -> int:
    """``Z`` is UQ(1 + clog2 N).32 (``docs/aau.md`` section 8)."""
    return Z_FRAC + 1 + _clog2(params.max_length)


def w_bits(params: AAUParams) -> int:
    """``W`` (20 fraction bits, signed): ``|W| < N * 2**36`` (``docs/aau.md`` section 8)."""
    return 37 + _clog2(params.max_length)


def sum_bits(params: AAUParams) -> int:
    """SUM is exact: ``16 + clog2(max_length)`` bits, signed, Q(8 + clog2 N).8."""
    return LOGIT_BITS + _clog2(params.max_length)


def sum_sq_bits(params: AAUParams) -> int:
    """NORM's ``S2 = sum (X**2 * 2**16 + E) < 2**(47 + clog2 N)`` (``docs/aau.md`` 9.5)."""
    return 47 + _clog2(params.max_length)


def norm_u_bits(params: AAUParams) -> int:
    """NORM's ``U <= N * S2 < 2**(47 + 2 clog2 N)`` (``docs/aau.md`` 9.5)."""
    return 47 + 2 * _clog2(params.max_length)


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


def norm_result_latency(params: AAUParams) -> int:
    """Input edge of a LAYERNORM/RMSNORM vector's last element to the edge after which its
    ``result.valid`` is high (126 by default)."""
    return ELEMENT_LATENCY + 1 + norm_post_pass_cycles(params)


def input_layout(params: AAUParams) -> data.StructLayout:
    """An input element: Q8.8 ``data``, ``last`` of its vector, and the vector's ``mode``
    (read from the first element of each vector, ignored on the others)."""
    return data.StructLayout({"data": signed(LOGIT_BITS), "last": 1, "mode": Mode})


def result_layout(params: AAUParams) -> data.StructLayout:
    """The result of a reduction vector (``docs/aau.md`` 11).

    ``mode``, ``max``, ``argmax`` and ``sum`` in every reduction mode; ``z``, ``z_exp``
    (``R``) and ``w`` in STATS, SUM, MAX (0 in the NORM modes); ``recip``, ``top1`` and
    ``entropy`` in STATS only; ``sum_sq`` (``S2``), ``rstd`` (``r``) and ``rstd_shift``
    (``k``) in LAYERNORM and RMSNORM only (0 otherwise).
    """
    return data.StructLayout(
        {
            "mode": Mode,
            "max": signed(LOGIT_BITS),
            "argmax": argmax_bits(params),
            "sum": signed(sum_bits(params)),
            "z": z_bits(params),
            "z_exp": signed(N_BITS),
            "w": signed(w_bits(params)),
            "recip": RECIP_BITS,
            "top1": 16,
            "entropy": 16,
            "sum_sq": sum_sq_bits(params),
            "rstd": RECIP_BITS,
            "rstd_shift": NORM_SHIFT_BITS,
        }
    )


def accumulators_layout(params: AAUParams) -> data.StructLayout:
    """A finished reduction vector, as the accumulate stage hands it to the post pass:
    its ``mode``, ``max``, ``argmax``, ``sum``, the accumulators ``z`` and ``w``, their
    exponent ``ref`` (``R``), ``m_max``, the mantissa of the max element (UQ1.16), the
    element ``count`` and NORM's sum of squares ``sum_sq``."""
    return data.StructLayout(
        {
            "mode": Mode,
            "max": signed(LOGIT_BITS),
            "argmax": argmax_bits(params),
            "sum": signed(sum_bits(params)),
            "z": z_bits(params),
            "w": signed(w_bits(params)),
            "ref": signed(N_BITS),
            "m_max": MANTISSA_BITS,
            "count": count_bits(params),
            "sum_sq": sum_sq_bits(params),
        }
    )


def _element_tag_layout() -> data.StructLayout:
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


def _check_params(component: wiring.Component, params: object) -> None:
    if not isinstance(params, AAUParams):
        component._MustUse__silence = True  # a rejected component is not a forgotten one
        raise TypeError(f"params must be an AAUParams, not {params!r}")


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
        _check_params(self, params)
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
        p = self.params
        m = Module()
        zw = z_bits(p)
        ww = w_bits(p)
        uw = norm_u_bits(p)
        accumulators = self.i.payload
        result = self.result.payload
        phase = Signal(PostPhase)

        # ---- the copy of the vector: it feeds the units below until the next copy ------
        z_copy = Signal(zw)
        ref_copy = Signal(signed(N_BITS))
        m_max_copy = Signal(MANTISSA_BITS)
        w_negative = Signal()
        count_copy = Signal(count_bits(p))
        centre_magnitude = Signal(sum_bits(p))  # |T|: |S1| for LAYERNORM, 0 for RMSNORM
        centre_negative = Signal()
        m.d.comb += [result.z.eq(z_copy), result.z_exp.eq(ref_copy)]

        mode = accumulators.mode
        stats = decoded(m, mode, Mode.STATS)
        norm = decoded(m, mode, Mode.LAYERNORM, Mode.RMSNORM)
        centre = Signal(signed(sum_bits(p)))  # T
        with m.If(decoded(m, mode, Mode.LAYERNORM)):
            m.d.comb += centre.eq(accumulators.sum)
        centre_abs = Signal(sum_bits(p))
        with m.If(centre[-1]):
            m.d.comb += centre_abs.eq(-centre)
        with m.Else():
            m.d.comb += centre_abs.eq(centre)

        # ---- STATS: two dividers and the log pipeline (section 5) -------------------------
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
            mean_divider.divisor.eq(z_copy),
        ]

        m.submodules.log = log = LogUnit(
            z_bits=zw, z_frac_bits=Z_FRAC, exponent_bits=N_BITS, table_bits=p.ln_table_bits
        )
        m.d.comb += [log.z.eq(z_copy), log.exponent.eq(ref_copy)]

        # The combining cycle: the quotients are ready only at its start, so each output is
        # one sum of its terms (which the synthesiser adds in one tree with one carry
        # propagation), then its saturation. The terms are widened to the sum's width in the
        # branch that uses them (see the phases below): equal operand widths.
        # entropy = round_shift(h, 12) with h = ln S - E[x] (24 fraction bits) is
        # (h + 2**11) >> 12. E[x] = q for W >= 0, -q otherwise; with -q = ~q + 1,
        # h + 2**11 = ln S + (q ^ pos) + {2**11, pos}, pos = (W >= 0) in every bit of the
        # second term and the last bit of the third.
        entropy_sum = Signal(log.ln_bits + 2)  # |h| < 2**(ln_bits - 1): a sign bit to spare
        w_positive = ~w_negative
        entropy_terms = [
            log.ln,
            mean_divider.quotient ^ w_positive.replicate(len(entropy_sum)),
            Cat(w_positive, Const(0, ENTROPY_SHIFT - 2), Const(1, 1)),
        ]
        # h < 0 saturates at 0 (h in [-2**11, 0) rounds to 0 anyway); above 65535 at 65535
        entropy_negative = entropy_sum[-1]
        entropy_high = entropy_sum[ENTROPY_SHIFT + 16 : -1].any()
        entropy = entropy_sum[ENTROPY_SHIFT : ENTROPY_SHIFT + 16]
        # top1 = round_shift(M_max * recip, 24) = (M_max * recip + 2**23) >> 24: one
        # multiply-add.
        top1_sum = Signal(MANTISSA_BITS + RECIP_BITS + 1)
        top1 = top1_sum[TOP1_SHIFT:]

        # ---- NORM: products, U, k, root, reciprocal, products (section 9.2) ---------------
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
        in_phase = {each: decoded(m, phase, each) for each in PostPhase}
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
        with m.If(in_phase[PostPhase.SCALE]):
            m.d.comb += product_a.multiplicand.eq(count_copy)
        with m.Else():
            m.d.comb += product_a.multiplicand.eq(result.sum_sq)  # the copy of S2
        m.d.comb += product_b.multiplicand.eq(centre_magnitude)
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
        with m.If(centre_negative):
            m.d.comb += offset.eq(-product_b.product)
        with m.Else():
            m.d.comb += offset.eq(product_b.product)
        # The recip divider's operands: 2**56 // Z for STATS, 2**47 // s for NORM.
        with m.If(in_phase[PostPhase.ROOT]):
            m.d.comb += recip_divider.dividend.eq(1 << NORM_RECIP_NUMERATOR_LOG2)
        with m.Else():
            m.d.comb += recip_divider.dividend.eq(1 << RECIP_NUMERATOR_LOG2)
        with m.If(in_phase[PostPhase.RECIPROCAL]):
            m.d.comb += recip_divider.divisor.eq(root.root)
        with m.Else():
            m.d.comb += recip_divider.divisor.eq(z_copy)

        # ---- the phases ------------------------------------------------------------------

        products_done = ~product_a.busy & ~product_b.busy
        with m.If(in_phase[PostPhase.IDLE]), m.If(self.i.valid):
            m.d.comb += [
                mean_divider.start.eq(stats),
                recip_divider.start.eq(stats),
                product_a.start.eq(norm),
                product_a.multiplier.eq(accumulators.count),
                product_b.start.eq(norm),
                product_b.multiplier.eq(centre_abs),
            ]
            m.d.sync += [
                result.mode.eq(mode),
                result.max.eq(accumulators.max),
                result.argmax.eq(accumulators.argmax),
                result.sum.eq(accumulators.sum),
                result.w.eq(Mux(norm, 0, accumulators.w)),
                result.recip.eq(0),
                result.top1.eq(0),
                result.entropy.eq(0),
                result.sum_sq.eq(Mux(norm, accumulators.sum_sq, 0)),
                result.rstd.eq(0),
                result.rstd_shift.eq(0),
                z_copy.eq(Mux(norm, 0, accumulators.z)),
                ref_copy.eq(Mux(norm, 0, accumulators.ref)),
                m_max_copy.eq(accumulators.m_max),
                w_negative.eq(accumulators.w[-1]),
                count_copy.eq(accumulators.count),
                centre_magnitude.eq(centre_abs),
                centre_negative.eq(centre[-1]),
            ]
            with m.If(stats):
                m.d.sync += phase.eq(PostPhase.DIVIDE)
            with m.Elif(norm):
                m.d.sync += phase.eq(PostPhase.PRODUCTS)
            with m.Else():
                m.d.sync += phase.eq(PostPhase.OFFER)
        # DIVIDE: the log pipeline has long settled by then (LN_LATENCY < DIVIDER_CYCLES).
        with m.Elif(in_phase[PostPhase.DIVIDE]), m.If(~mean_divider.busy & ~recip_divider.busy):
            first, second, third = (
                widen(m, term, len(entropy_sum)).as_unsigned() for term in entropy_terms
            )
            half = widen(m, Const(1 << (TOP1_SHIFT - 1), TOP1_SHIFT), len(top1_sum) - 1)
            m.d.comb += [
                entropy_sum.eq((first + second)[: len(entropy_sum)] + third),
                top1_sum.eq(m_max_copy * recip_divider.quotient + half),
            ]
            m.d.sync += [
                result.recip.eq(recip_divider.quotient),
                result.entropy.eq(Mux(entropy_negative, 0, Mux(entropy_high, OUT_MAX, entropy))),
                result.top1.eq(Mux(top1[16:].any(), OUT_MAX, top1[:16])),
                self.stats_ref.eq(ref_copy),
                self.stats_recip.eq(recip_divider.quotient),
                phase.eq(PostPhase.OFFER),
            ]
        with m.Elif(in_phase[PostPhase.PRODUCTS]), m.If(products_done):
            m.d.sync += [u.eq(minuend - subtrahend), phase.eq(PostPhase.LEAD)]
        with m.Elif(in_phase[PostPhase.LEAD]):
            m.d.sync += [
                shift_k.eq(norm_lead.position[1:]),
                phase.eq(PostPhase.ROOT_START),
            ]
        with m.Elif(in_phase[PostPhase.ROOT_START]):
            m.d.comb += root.start.eq(1)
            m.d.sync += phase.eq(PostPhase.ROOT)
        with m.Elif(in_phase[PostPhase.ROOT]), m.If(~root.busy):
            m.d.comb += recip_divider.start.eq(1)
            m.d.sync += phase.eq(PostPhase.RECIPROCAL)
        with m.Elif(in_phase[PostPhase.RECIPROCAL]), m.If(~recip_divider.busy):
            m.d.comb += [
                product_a.start.eq(1),
                product_a.multiplier.eq(recip_divider.quotient),
                product_b.start.eq(1),
                product_b.multiplier.eq(recip_divider.quotient),
            ]
            m.d.sync += phase.eq(PostPhase.SCALE)
        with m.Elif(in_phase[PostPhase.SCALE]), m.If(products_done):
            m.d.sync += [
                result.rstd.eq(recip_divider.quotient),
                result.rstd_shift.eq(shift_k),
                self.norm_scale.eq(product_a.product),
                self.norm_offset.eq(offset),
                self.norm_shift.eq(shift_k),
                phase.eq(PostPhase.OFFER),
            ]
        with m.Elif(in_phase[PostPhase.OFFER]), m.If(self.result.ready):
            m.d.sync += phase.eq(PostPhase.IDLE)
        with m.Else():  # the unused codes: back to IDLE
            m.d.sync += phase.eq(PostPhase.IDLE)
        return m


class AAU(wiring.Component):
    """Attention algorithm unit (spec 2.4, ``docs/aau.md``).

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(input_layout(params)))
        Elements, one per cycle at full rate. A vector is one or more elements ending with
        ``last``; its mode is the ``mode`` of its first element. ``ready`` is the pipeline's
        global enable, combinational from ``o.ready``, ``param.valid`` and the stall
        conditions below (it does not depend on ``i.valid``).
    o : Out(stream.Signature(element_layout(params)))
        The outputs of the element modes (SOFTMAX, NORM, RELU, SILU, GELU), in input order.
        Held until taken; while held the whole element pipeline stalls.
    result : Out(stream.Signature(result_layout(params)))
        One per reduction vector (STATS, SUM, MAX, LAYERNORM, RMSNORM, the reserved codes),
        in order. Held until taken.
    param : In(stream.Signature(param_layout(params)))
        ``(gamma, beta)``, one per NORM element, in order; the other modes take none. Taken
        as each NORM element reaches the output register; while it is empty there, the whole
        element pipeline stalls.

    Stalls (the element pipeline holds, nothing is lost): ``o`` holding an element that is
    not taken; a NORM element waiting for its parameters; a reduction element about to be
    accumulated while the previous vector's accumulators still wait for the post pass (the
    post pass is busy with an older vector or its result has not been taken); a SOFTMAX
    (NORM) element about to enter the back end, where it reads ``R``/``recip`` (``N r``,
    ``T r``, ``k``), while a STATS (LAYERNORM/RMSNORM) vector ahead of it is still pending
    or in the post pass.

    Latency and throughput, back to back without stalls (see ``docs/aau.md``): one
    element per cycle in every mode; ``result`` of a ``STATS`` vector whose last element is
    accepted at edge ``a`` is valid after edge ``a + RESULT_LATENCY`` (``a +
    REDUCTION_LATENCY`` for ``SUM``/``MAX``, ``a + norm_result_latency(params)`` for
    ``LAYERNORM``/``RMSNORM``); an element of an element mode accepted at edge ``a`` is on
    ``o`` after edge ``a + OUTPUT_LATENCY``. A ``STATS`` vector of ``N`` elements thus takes
    ``N - 1 + RESULT_LATENCY`` cycles from its first element to its result; a following
    vector streams on during the post pass unless it is a reduction shorter than the post
    pass, when its accumulation waits, or the second pass that needs the post pass's result.
    """

    def __init__(self, params: AAUParams):
        _check_params(self, params)
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(input_layout(params))),
                "o": Out(stream.Signature(element_layout(params))),
                "result": Out(stream.Signature(result_layout(params))),
                "param": In(stream.Signature(param_layout(params))),
            }
        )

    def elaborate(self, platform):
        p = self.params
        m = Module()
        zw = z_bits(p)
        ww = w_bits(p)
        index_bits = argmax_bits(p)

        # ---- global enable: every element register below moves with it -----------------
        en = Signal()
        m.d.comb += self.i.ready.eq(en)

        def stage(name, fields):
            """A pipeline register with a valid bit, loaded when the pipeline advances."""
            regs = {key: Signal(shape, name=f"{name}_{key}") for key, shape in fields.items()}
            regs["valid"] = Signal(name=f"{name}_valid")
            return regs

        def advance(dst, values):
            with m.If(en):
                m.d.sync += [dst[key].eq(value) for key, value in values.items()]

        # ---- reg0: input register; every element carries its vector's mode, decoded ----
        tag_layout = _element_tag_layout()
        s0 = stage("s0", {"tag": tag_layout})
        in_first = Signal(init=1)  # the next accepted element starts a vector
        in_mode = Signal(Mode)  # the current vector's mode
        payload = self.i.payload
        mode_now = Signal(Mode)
        with m.If(in_first):
            m.d.comb += mode_now.eq(payload.mode)
        with m.Else():
            m.d.comb += mode_now.eq(in_mode)
        # The mode decoded once: (reduce, back-end kind, square, gelu) for each mode, every
        # field in every case (the reserved codes are reductions, as SUM).
        decode = {
            Mode.SOFTMAX: (0, ElementKind.SOFTMAX, 0, 0),
            Mode.NORM: (0, ElementKind.NORM, 0, 0),
            Mode.RELU: (0, ElementKind.RELU, 0, 0),
            Mode.SILU: (0, ElementKind.GATE, 0, 0),
            Mode.GELU: (0, ElementKind.GATE, 0, 1),
            Mode.LAYERNORM: (1, ElementKind.SOFTMAX, 1, 0),
            Mode.RMSNORM: (1, ElementKind.SOFTMAX, 1, 0),
        }
        reduce_now, kind_now, square_now, gelu_now = (
            Signal(name="reduce_now"),
            Signal(ElementKind, name="kind_now"),
            Signal(name="square_now"),
            Signal(name="gelu_now"),
        )

        def decode_as(flags):
            reduce, kind, square, gelu = flags
            m.d.comb += [
                reduce_now.eq(reduce),
                kind_now.eq(kind),
                square_now.eq(square),
                gelu_now.eq(gelu),
            ]

        with m.Switch(mode_now):
            for mode, flags in decode.items():
                with m.Case(mode):
                    decode_as(flags)
            with m.Default():  # STATS, SUM, MAX and the reserved codes
                decode_as((1, ElementKind.SOFTMAX, 0, 0))
        head = s0["tag"]
        with m.If(en):
            m.d.sync += [
                s0["valid"].eq(self.i.valid),
                head.x.eq(payload.data),
                head.last.eq(payload.last),
                head.first.eq(in_first),
                head.mode.eq(mode_now),
                head.reduce.eq(reduce_now),
                head.kind.eq(kind_now),
                head.square.eq(square_now),
                head.gelu.eq(gelu_now),
            ]
        with m.If(en & self.i.valid):
            m.d.sync += [in_first.eq(payload.last), in_mode.eq(mode_now)]

        # ---- reg1..reg3: exp(x) = M * 2**(n - 16), and the gate g(x), side by side -------
        m.submodules.exp = exp = Exp2Unit(table_bits=p.exp_table_bits, tag_shape=tag_layout)
        m.submodules.gate = gate = GateUnit(table_bits=p.gate_table_bits)
        m.d.comb += [
            exp.i.valid.eq(s0["valid"]),
            exp.i.payload.x.eq(head.x),
            exp.i.payload.tag.eq(head),
            exp.o.ready.eq(en),  # so exp.i.ready is en too
            gate.i.valid.eq(s0["valid"]),
            gate.i.payload.x.eq(head.x),
            gate.i.payload.gelu.eq(head.gelu),
            gate.o.ready.eq(en),  # in step with the exp unit: same latency, same stall
        ]
        s3 = {"valid": exp.o.valid, "n": exp.o.payload.n, "m": exp.o.payload.m}
        s3_tag = exp.o.payload.tag

        # ---- reg4: P = M * X (X * X for the NORM modes); the R loop -----------------------
        s4 = stage(
            "s4",
            {
                "tag": tag_layout,
                "n": signed(N_BITS),
                "m": MANTISSA_BITS,
                "g": GATE_BITS,
                "p": signed(P_BITS),
                "k": SHIFT_BITS,
                "s": SHIFT_BITS,
            },
        )
        ref = Signal(signed(N_BITS))  # R of the vector streaming through this stage
        ref_new = Signal(signed(N_BITS))
        rescale = Signal(N_BITS + 1)  # R_new - R in 0 .. 369
        element_shift = Signal(N_BITS + 1)  # R_new - n in 0 .. 369
        m.d.comb += [
            ref_new.eq(Mux(s3_tag.first | (s3["n"] > ref), s3["n"], ref)),
            rescale.eq(Mux(s3_tag.first, 0, ref_new - ref)),
            element_shift.eq(ref_new - s3["n"]),
        ]
        factor = Signal(signed(MANTISSA_BITS + 1))  # M (unsigned 17) or X
        with m.If(s3_tag.square):
            m.d.comb += factor.eq(s3_tag.x)
        with m.Else():
            m.d.comb += factor.eq(s3["m"])

        def saturate_shift(amount):
            # shifts of 63 and more leave 0 (or the sign) in every accumulator and term
            return Mux(amount[SHIFT_BITS:].any(), (1 << SHIFT_BITS) - 1, amount[:SHIFT_BITS])

        with m.If(en & s3["valid"]):
            m.d.sync += ref.eq(ref_new)
        advance(
            s4,
            {
                "valid": s3["valid"],
                "tag": s3_tag,
                "n": s3["n"],
                "m": s3["m"],
                "g": gate.o.payload.g,
                "p": factor * s3_tag.x,
                "k": saturate_shift(rescale),
                "s": saturate_shift(element_shift),
            },
        )

        # ---- reg5: contributions (barrel shifters) -------------------------------------
        s5 = stage(
            "s5",
            {
                "tag": tag_layout,
                "n": signed(N_BITS),
                "m": MANTISSA_BITS,
                "g": GATE_BITS,
                "ref": signed(N_BITS),
                "k": SHIFT_BITS,
                "e": E_BITS,
                "w": signed(WCONTRIB_BITS),
                "square": SQUARE_BITS,
            },
        )
        advance(
            s5,
            {
                "valid": s4["valid"],
                "tag": s4["tag"],
                "n": s4["n"],
                "m": s4["m"],
                "g": s4["g"],
                "ref": ref,  # R after this element (the register was loaded with it)
                "k": s4["k"],
                "e": s4["m"].shift_left(16) >> s4["s"],  # shift(M, 16 - s), floor
                "w": s4["p"].shift_left(4) >> s4["s"],  # shift(P, 4 - s), floor (arithmetic)
                "square": s4["p"][:SQUARE_BITS],  # X**2 for the NORM modes
            },
        )
        s5_tag = s5["tag"]

        # ---- accumulate stage -----------------------------------------------------------
        acc_z = Signal(zw)
        acc_w = Signal(signed(ww))
        acc_sum = Signal(signed(sum_bits(p)))
        acc_sum_sq = Signal(sum_sq_bits(p))
        acc_max = Signal(signed(LOGIT_BITS))
        acc_argmax = Signal(index_bits)
        acc_m_max = Signal(MANTISSA_BITS)
        acc_ref = Signal(signed(N_BITS))
        acc_index = Signal(index_bits)  # index of the element last accumulated
        acc_mode = Signal(Mode)
        pending = Signal()  # the accumulators hold a finished vector not yet copied

        reducing = s5["valid"] & s5_tag.reduce
        accumulate = Signal()
        m.d.comb += accumulate.eq(en & reducing)
        first = s5_tag.first
        index_now = Mux(first, 0, acc_index + 1)
        with m.If(accumulate):
            m.d.sync += [
                acc_z.eq(Mux(first, 0, acc_z >> s5["k"]) + widen(m, s5["e"], zw)),
                acc_w.eq(Mux(first, 0, acc_w >> s5["k"]) + widen(m, s5["w"], ww)),
                acc_sum.eq(Mux(first, 0, acc_sum) + widen(m, s5_tag.x, sum_bits(p))),
                acc_index.eq(index_now),
                acc_ref.eq(s5["ref"]),
                acc_mode.eq(s5_tag.mode),
            ]
            # NORM's S2: X**2 * 2**16 + E, a concatenation (E < 2**16)
            with m.If(s5_tag.square):
                term = Cat(Const(p.norm_eps, NORM_EPS_SHIFT), s5["square"])
                m.d.sync += acc_sum_sq.eq(
                    Mux(first, 0, acc_sum_sq) + widen(m, term, sum_sq_bits(p))
                )
            # strict compare: the first of equal maxima (the lowest index) wins
            with m.If(first | (s5_tag.x > acc_max)):
                m.d.sync += [
                    acc_max.eq(s5_tag.x),
                    acc_argmax.eq(index_now),
                    acc_m_max.eq(s5["m"]),
                ]

        # ---- post pass: the finished vector's accumulators -> result --------------------
        m.submodules.post_pass = post_pass = PostPass(p)
        finished = post_pass.i.payload
        count = Signal(count_bits(p))
        m.d.comb += [
            count.eq(acc_index + 1),
            post_pass.i.valid.eq(pending),
            finished.mode.eq(acc_mode),
            finished.max.eq(acc_max),
            finished.argmax.eq(acc_argmax),
            finished.sum.eq(acc_sum),
            finished.z.eq(acc_z),
            finished.w.eq(acc_w),
            finished.ref.eq(acc_ref),
            finished.m_max.eq(acc_m_max),
            finished.count.eq(count),
            finished.sum_sq.eq(acc_sum_sq),
        ]
        wiring.connect(m, post_pass.result, wiring.flipped(self.result))
        copy = post_pass.i.valid & post_pass.i.ready  # the post pass takes the vector
        with m.If(accumulate & s5_tag.last):
            m.d.sync += pending.eq(1)
        with m.Elif(copy):
            m.d.sync += pending.eq(0)

        # ---- the back end: elements of the element modes -> o --------------------------
        m.submodules.back_end = back_end = BackEnd(p)
        element = back_end.i.payload
        m.d.comb += [
            back_end.advance.eq(en),
            back_end.i.valid.eq(s5["valid"] & ~s5_tag.reduce),
            element.kind.eq(s5_tag.kind),
            element.last.eq(s5_tag.last),
            element.x.eq(s5_tag.x),
            element.m.eq(s5["m"]),
            element.n.eq(s5["n"]),
            element.g.eq(s5["g"]),
            back_end.stats_ref.eq(post_pass.stats_ref),
            back_end.stats_recip.eq(post_pass.stats_recip),
            back_end.norm_scale.eq(post_pass.norm_scale),
            back_end.norm_offset.eq(post_pass.norm_offset),
            back_end.norm_shift.eq(post_pass.norm_shift),
        ]
        wiring.connect(m, back_end.o, wiring.flipped(self.o))
        wiring.connect(m, wiring.flipped(self.param), back_end.param)

        # ---- stall conditions -> global enable -----------------------------------------
        # Every vector ahead of the element in reg5 has been accumulated: a STATS (NORM)
        # one still pending or in the post pass is the one whose R and recip (N r, T r, k)
        # the element must read as it enters the back end.
        accumulators_busy = reducing & pending & ~copy
        acc_stats = decoded(m, acc_mode, Mode.STATS)
        acc_norm = decoded(m, acc_mode, Mode.LAYERNORM, Mode.RMSNORM)
        entering = s5["valid"] & ~s5_tag.reduce
        softmax_waits = (
            entering
            & decoded(m, s5_tag.kind, ElementKind.SOFTMAX)
            & ((pending & acc_stats) | post_pass.stats_busy)
        )
        norm_waits = (
            entering
            & decoded(m, s5_tag.kind, ElementKind.NORM)
            & ((pending & acc_norm) | post_pass.norm_busy)
        )
        m.d.comb += en.eq(~(back_end.blocked | accumulators_busy | softmax_waits | norm_waits))

        return m
