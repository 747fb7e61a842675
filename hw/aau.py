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

Structure (``m.submodules`` names; the front end is ``hw/aau_front_end.py``, the post pass
``hw/aau_post_pass.py``, the element lane ``hw/aau_back_end.py``, the arithmetic units
``hw/aau_units.py`` and the shared layouts ``hw/aau_layouts.py``)::

    front_end FrontEnd, 6 registers:
      reg0    input register                  X, last, mode (decoded), first
      exp     Exp2Unit, 3 stages              t = X * log2 e; table read; M    (reg1..reg3)
      gate    GateUnit, 3 stages, beside exp  |x|; gate-table read; g      (SILU, GELU)
      reg4    P = M * X (X * X: NORM modes)   (18 x 16 mult); R loop: R := max(R, n),
                                              k = R_new - R, s = R_new - n   (1-cycle loop)
      reg5    e = (M << 16) >> s, w = (P << 4) >> s                (barrel shifters, 6-bit s)
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
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_back_end import (
    BACK_END_LATENCY,
    BackEnd,
    ElementKind,
    element_layout,
    param_layout,
)
from ahasd.hw.aau_front_end import FRONT_END_LATENCY, FrontEnd
from ahasd.hw.aau_layouts import (
    Mode,
    argmax_bits,
    check_params,
    count_bits,
    input_layout,
    result_layout,
    sum_bits,
    sum_sq_bits,
    w_bits,
    z_bits,
)
from ahasd.hw.aau_post_pass import DIVIDER_CYCLES, NORM_EPS_SHIFT, PostPass, norm_post_pass_cycles
from ahasd.hw.aau_tables import LOGIT_BITS, MANTISSA_BITS, N_BITS
from ahasd.hw.arith import decoded, widen
from ahasd.params import AAUParams

__all__ = [
    "AAU",
    "ELEMENT_LATENCY",
    "OUTPUT_LATENCY",
    "REDUCTION_LATENCY",
    "RESULT_LATENCY",
    "norm_result_latency",
]

# Measured cycle counts (asserted by the tests, see ``docs/aau.md``, section "RTL").
ELEMENT_LATENCY = FRONT_END_LATENCY  # input edge of an element to the edge that accumulates it
# Input edge of a reduction vector's last element to the edge after which ``result.valid`` is
# high: ELEMENT_LATENCY, the copy, the dividers, the combining cycle.
RESULT_LATENCY = ELEMENT_LATENCY + 1 + DIVIDER_CYCLES + 1
# SUM, MAX and the reserved codes skip the dividers.
REDUCTION_LATENCY = ELEMENT_LATENCY + 1
# Input edge of an element of an element mode to the edge after which it is on ``o``: the
# front end, the back end.
OUTPUT_LATENCY = FRONT_END_LATENCY + BACK_END_LATENCY - 1


def norm_result_latency(params: AAUParams) -> int:
    """Input edge of a LAYERNORM/RMSNORM vector's last element to the edge after which its
    ``result.valid`` is high (126 by default)."""
    return ELEMENT_LATENCY + 1 + norm_post_pass_cycles(params)


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
        check_params(self, params)
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
        m = Module()
        en = Signal()  # the global enable: every element register moves with it
        m.submodules.front_end = front_end = FrontEnd(self.params)
        wiring.connect(m, wiring.flipped(self.i), front_end.i)
        m.d.comb += front_end.o.ready.eq(en)
        lane = front_end.o.payload
        reducing = front_end.o.valid & lane.tag.reduce
        accumulate = Signal()
        m.d.comb += accumulate.eq(en & reducing)
        acc = self._accumulators(m, accumulate, lane)

        # ---- post pass: the finished vector's accumulators -> result --------------------
        m.submodules.post_pass = post_pass = PostPass(self.params)
        finished = post_pass.i.payload
        m.d.comb += [
            post_pass.i.valid.eq(acc["pending"]),
            finished.mode.eq(acc["mode"]),
            finished.max.eq(acc["max"]),
            finished.argmax.eq(acc["argmax"]),
            finished.sum.eq(acc["sum"]),
            finished.z.eq(acc["z"]),
            finished.w.eq(acc["w"]),
            finished.ref.eq(acc["ref"]),
            finished.m_max.eq(acc["m_max"]),
            finished.count.eq(acc["count"]),
            finished.sum_sq.eq(acc["sum_sq"]),
        ]
        wiring.connect(m, post_pass.result, wiring.flipped(self.result))
        copy = post_pass.i.valid & post_pass.i.ready  # the post pass takes the vector
        with m.If(accumulate & lane.tag.last):
            m.d.sync += acc["pending"].eq(1)
        with m.Elif(copy):
            m.d.sync += acc["pending"].eq(0)

        # ---- the back end: elements of the element modes -> o --------------------------
        m.submodules.back_end = back_end = BackEnd(self.params)
        element = back_end.i.payload
        m.d.comb += [
            back_end.advance.eq(en),
            back_end.i.valid.eq(front_end.o.valid & ~lane.tag.reduce),
            element.kind.eq(lane.tag.kind),
            element.last.eq(lane.tag.last),
            element.x.eq(lane.tag.x),
            element.m.eq(lane.m),
            element.n.eq(lane.n),
            element.g.eq(lane.g),
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
        pending = acc["pending"]
        accumulators_busy = reducing & pending & ~copy
        acc_stats = decoded(m, acc["mode"], Mode.STATS)
        acc_norm = decoded(m, acc["mode"], Mode.LAYERNORM, Mode.RMSNORM)
        entering = front_end.o.valid & ~lane.tag.reduce
        softmax_waits = (
            entering
            & decoded(m, lane.tag.kind, ElementKind.SOFTMAX)
            & ((pending & acc_stats) | post_pass.stats_busy)
        )
        norm_waits = (
            entering
            & decoded(m, lane.tag.kind, ElementKind.NORM)
            & ((pending & acc_norm) | post_pass.norm_busy)
        )
        m.d.comb += en.eq(~(back_end.blocked | accumulators_busy | softmax_waits | norm_waits))
        return m

    def _accumulators(self, m: Module, accumulate, lane) -> dict:
        """The accumulate stage: ``Z``, ``W``, the sums, the max and its index, updated by
        each reduction element leaving the front end (1-cycle loops)."""
        p = self.params
        zw, ww, index_bits = z_bits(p), w_bits(p), argmax_bits(p)
        acc = {
            "z": Signal(zw, name="acc_z"),
            "w": Signal(signed(ww), name="acc_w"),
            "sum": Signal(signed(sum_bits(p)), name="acc_sum"),
            "sum_sq": Signal(sum_sq_bits(p), name="acc_sum_sq"),
            "max": Signal(signed(LOGIT_BITS), name="acc_max"),
            "argmax": Signal(index_bits, name="acc_argmax"),
            "m_max": Signal(MANTISSA_BITS, name="acc_m_max"),
            "ref": Signal(signed(N_BITS), name="acc_ref"),
            "index": Signal(index_bits, name="acc_index"),  # the element last accumulated
            "mode": Signal(Mode, name="acc_mode"),
            "count": Signal(count_bits(p), name="count"),
            # the accumulators hold a finished vector not yet copied
            "pending": Signal(name="pending"),
        }
        m.d.comb += acc["count"].eq(acc["index"] + 1)
        tag = lane.tag
        first = tag.first
        index_now = Mux(first, 0, acc["index"] + 1)
        with m.If(accumulate):
            m.d.sync += [
                acc["z"].eq(Mux(first, 0, acc["z"] >> lane.k) + widen(m, lane.e, zw)),
                acc["w"].eq(Mux(first, 0, acc["w"] >> lane.k) + widen(m, lane.w, ww)),
                acc["sum"].eq(Mux(first, 0, acc["sum"]) + widen(m, tag.x, sum_bits(p))),
                acc["index"].eq(index_now),
                acc["ref"].eq(lane.ref),
                acc["mode"].eq(tag.mode),
            ]
            # NORM's S2: X**2 * 2**16 + E, a concatenation (E < 2**16)
            with m.If(tag.square):
                term = Cat(Const(p.norm_eps, NORM_EPS_SHIFT), lane.square)
                m.d.sync += acc["sum_sq"].eq(
                    Mux(first, 0, acc["sum_sq"]) + widen(m, term, sum_sq_bits(p))
                )
            # strict compare: the first of equal maxima (the lowest index) wins
            with m.If(first | (tag.x > acc["max"])):
                m.d.sync += [
                    acc["max"].eq(tag.x),
                    acc["argmax"].eq(index_now),
                    acc["m_max"].eq(lane.m),
                ]
        return acc
