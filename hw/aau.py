"""AAU: attention algorithm unit (spec 2.4, ``docs/aau.md``).

A streaming unit at one INT16 Q8.8 element per cycle. Per vector, in one of four modes:

=============  =============================================================================
``STATS``      online max with rescaling: ``max``, ``argmax``, the accumulators ``Z`` and
               ``W`` with their exponent ``R``, ``recip = 2**56 // Z``, top-1 probability
               (UQ0.16) and entropy (UQ4.12 nats); one ``result``
``SOFTMAX``    second pass over the vector of the last ``STATS`` pass: ``p_i`` (UQ0.16), one
               ``o`` element per input element, same order, same ``last``
``SUM``        ``sum_i X_i`` (exact, Q24.8 for the default length); one ``result``
``MAX``        ``max_i X_i`` and the lowest index holding it; one ``result``
=============  =============================================================================

The arithmetic is ``docs/aau.md`` sections 2 to 8, bit for bit: base-2 exponent with an
integer reference ``R``, so the online rescaling of the accumulators is a right shift and no
multiplier sits in a feedback loop; ``exp`` and ``log2`` from small interpolated tables; the
two post-pass divisions (``W / Z`` and ``2**56 / Z``) by two radix-2 restoring dividers that
run side by side (32 and 25 cycles). Ties in ``argmax``: the lowest index wins (strict ``>``),
in every mode.

Structure (``m.submodules`` names; the arithmetic units are in ``hw/aau_units.py``)::

    reg0      input register                  X, last, mode, first
    exp       Exp2Unit, 3 stages              t = X * log2 e; table read; M    (reg1..reg3)
    reg4      P = M * X                       (17 x 16 mult); R loop: R := max(R, n),
                                              k = R_new - R, s = R_new - n   (1-cycle loop)
    reg5      e = (M << 16) >> s, w = (P << 4) >> s                (barrel shifters, 6-bit s)
    acc       Z := (Z >> k) + e, W := (W >> k) + w, SUM, max/argmax/M_max      (1-cycle loops)
    reg6      SOFTMAX elements only (M, n)
    reg7      s_i = R_stats - n, M * recip_stats                                 (17 x 25 mult)
    reg8      p_i = min(65535, round_shift(M * recip, 24 + s_i))                 -> ``o``
    post_pass PostPass: the finished accumulators in, the result out
      mean_divider, recip_divider   RestoringDivider x 2: (|W| << 28) // Z, 2**56 // Z
      log                           LogUnit: ln S from Z and R (leading one, table, * ln 2)

After a reduction vector's last element is accumulated, the post pass takes a copy of the
accumulators (so the next vector streams on while it runs), starts both dividers and lets
the log pipeline settle; one cycle combines the quotients into ``top1`` and ``entropy``; the
result is then offered on ``result``.

Critical path: no multiplier sits in a loop. The accumulate loop (a 6-level barrel shifter of
53 bits, then a 53-bit adder) and the divider step (one 50-bit subtract whose borrow selects
the remainder) are each one adder deep; generic synthesis (yosys ``synth; ltp``) finds the
divider step the longest path (104 gate levels with ripple-carry adders), ahead of the
single-stage multipliers (16 x 25 in ``exp``, 17 x 25 at reg7 and in the post pass's
``top1``, 30 x 24 for ``ln 2``), each of which could take a second stage without changing a
result. The stall net fans ``o.ready`` out to the enables of every element register (see
``i``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.aau_units import (
    LN2_CODE,
    LOG2E_CODE,
    LOGIT_BITS,
    MANTISSA_BITS,
    N_BITS,
    Exp2Unit,
    LogUnit,
    RestoringDivider,
    exp2_table,
    log2_table,
)
from ahasd.params import AAUParams

__all__ = [
    "AAU",
    "DIVIDER_CYCLES",
    "ELEMENT_LATENCY",
    "LN2_CODE",
    "LOG2E_CODE",
    "REDUCTION_LATENCY",
    "RESULT_LATENCY",
    "SOFTMAX_LATENCY",
    "Mode",
    "PostPass",
    "accumulators_layout",
    "argmax_bits",
    "element_layout",
    "exp2_table",
    "input_layout",
    "log2_table",
    "result_layout",
    "sum_bits",
    "w_bits",
    "z_bits",
]

P_BITS = 33  # P = M * X, |P| < 2**32
E_BITS = 33  # e = shift(M, 16 - s) < 2**33
WCONTRIB_BITS = 37  # w = shift(P, 4 - s), |w| < 2**36
SHIFT_BITS = 6  # shift amounts saturate at 63: beyond every accumulator's width
Z_FRAC = 32  # Z is UQ(1 + clog2 N).32
MEAN_QUOTIENT_BITS = 32  # q = (|W| << 28) // Z < 2**32
MEAN_SHIFT = 28
RECIP_QUOTIENT_BITS = 25  # recip = 2**56 // Z <= 2**24
RECIP_NUMERATOR_LOG2 = 56
SOFT_PRODUCT_BITS = 42  # M * recip < 2**41
OUT_MAX = 65535

# Measured cycle counts (asserted by the tests, see ``docs/aau.md``, section "RTL").
DIVIDER_CYCLES = MEAN_QUOTIENT_BITS  # both dividers run side by side
ELEMENT_LATENCY = 6  # input edge of an element to the edge that accumulates it
# Input edge of a reduction vector's last element to the edge after which ``result.valid`` is
# high: ELEMENT_LATENCY, the copy, the dividers, the combining cycle.
RESULT_LATENCY = ELEMENT_LATENCY + 1 + DIVIDER_CYCLES + 1
# SUM and MAX skip the dividers.
REDUCTION_LATENCY = ELEMENT_LATENCY + 1
# Input edge of a SOFTMAX element to the edge after which it is on ``o``.
SOFTMAX_LATENCY = 8


class Mode(enum.Enum, shape=2):
    """What the unit computes over a vector (taken from the vector's first element)."""

    STATS = 0
    SOFTMAX = 1
    SUM = 2
    MAX = 3


def _clog2(value: int) -> int:
    return (value - 1).bit_length()


def argmax_bits(params: AAUParams) -> int:
    """Width of an element index: ``clog2(max_length)``, at least one bit."""
    return max(1, _clog2(params.max_length))


def z_bits(params: AAUParams) -> int:
    """``Z`` is UQ(1 + clog2 N).32 (``docs/aau.md`` section 8)."""
    return Z_FRAC + 1 + _clog2(params.max_length)


def w_bits(params: AAUParams) -> int:
    """``W`` (20 fraction bits, signed): ``|W| < N * 2**36`` (``docs/aau.md`` section 8)."""
    return 37 + _clog2(params.max_length)


def sum_bits(params: AAUParams) -> int:
    """SUM is exact: ``16 + clog2(max_length)`` bits, signed, Q(8 + clog2 N).8."""
    return LOGIT_BITS + _clog2(params.max_length)


def input_layout(params: AAUParams) -> data.StructLayout:
    """An input element: Q8.8 ``data``, ``last`` of its vector, and the vector's ``mode``
    (read from the first element of each vector, ignored on the others)."""
    return data.StructLayout({"data": signed(LOGIT_BITS), "last": 1, "mode": Mode})


def element_layout(params: AAUParams) -> data.StructLayout:
    """A SOFTMAX output element: ``p`` (UQ0.16) and the ``last`` flag of its input element."""
    return data.StructLayout({"p": 16, "last": 1})


def result_layout(params: AAUParams) -> data.StructLayout:
    """The result of a ``STATS``, ``SUM`` or ``MAX`` vector.

    ``mode``, ``max``, ``argmax``, ``sum``, ``z``, ``z_exp`` (``R``) and ``w`` are computed
    in all three modes; ``recip``, ``top1`` and ``entropy`` in ``STATS`` only (0 otherwise).
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
            "recip": RECIP_QUOTIENT_BITS,
            "top1": 16,
            "entropy": 16,
        }
    )


def accumulators_layout(params: AAUParams) -> data.StructLayout:
    """A finished reduction vector, as the accumulate stage hands it to the post pass:
    its ``mode``, ``max``, ``argmax``, ``sum``, the accumulators ``z`` and ``w``, their
    exponent ``ref`` (``R``) and ``m_max``, the mantissa of the max element (UQ1.16)."""
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
        }
    )


def _element_tag_layout() -> data.StructLayout:
    """What travels with an element through the exp unit: its code and its vector's flags
    (``soft`` and ``stats``: the mode, decoded once at the input)."""
    return data.StructLayout(
        {"x": signed(LOGIT_BITS), "last": 1, "first": 1, "mode": Mode, "soft": 1, "stats": 1}
    )


def _round_shift(value, amount: int):
    """``round_shift(value, amount) = (value + 2**(amount - 1)) >> amount``, written as
    ``(floor(value / 2**(amount - 1)) + 1) >> 1`` (the same integer), which adds 1 rather
    than a wide constant."""
    return (value.shift_right(amount - 1) + 1).shift_right(1)


def _check_params(component: wiring.Component, params: object) -> None:
    if not isinstance(params, AAUParams):
        component._MustUse__silence = True  # a rejected component is not a forgotten one
        raise TypeError(f"params must be an AAUParams, not {params!r}")


class PostPass(wiring.Component):
    """The AAU's post pass (``docs/aau.md`` section 5): from a finished reduction vector's
    accumulators to its ``result``.

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(accumulators_layout(params)))
        One finished vector. ``i.ready`` is high while the post pass is idle (no vector in
        it, no result waiting), whatever ``i.valid``.
    result : Out(stream.Signature(result_layout(params)))
        One per vector taken on ``i``, in order; held until taken. ``recip``, ``top1`` and
        ``entropy`` are computed for ``STATS`` and read 0 otherwise.
    stats_ref : Out(signed(N_BITS))
    stats_recip : Out(RECIP_QUOTIENT_BITS)
        ``R`` and ``recip`` of the last ``STATS`` vector, published when its result is
        (reset: 0, 0), for the SOFTMAX pass.
    stats_busy : Out(1)
        A ``STATS`` vector is being divided: ``stats_ref`` and ``stats_recip`` are about to
        change.

    For a ``STATS`` vector taken at edge ``c``: both dividers start at ``c`` (the
    ``mean_divider`` computes ``(|W| << 28) // Z`` in :data:`DIVIDER_CYCLES` steps, the
    ``recip_divider`` ``2**56 // Z`` in 25), the ``log`` pipeline computes ``ln S`` from the
    copy of ``Z`` and ``R`` within 4 cycles, and at edge ``c + DIVIDER_CYCLES + 1`` one cycle
    combines them (``entropy = clamp(round_shift(ln S -+ q, 12))``, ``top1 = min(65535,
    round_shift(M_max * recip, 24))``), publishes ``stats_ref``/``stats_recip`` and raises
    ``result.valid``. ``SUM`` and ``MAX``: ``result.valid`` right after edge ``c``.
    Throughput: one ``STATS`` vector per ``DIVIDER_CYCLES + 3`` cycles when each result is
    taken at once (copy, divide, combine, hand over), one ``SUM``/``MAX`` per 2 cycles.
    Backpressure: a result not taken holds the post pass and ``i.ready`` low.
    """

    def __init__(self, params: AAUParams):
        _check_params(self, params)
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(accumulators_layout(params))),
                "result": Out(stream.Signature(result_layout(params))),
                "stats_ref": Out(signed(N_BITS)),
                "stats_recip": Out(RECIP_QUOTIENT_BITS),
                "stats_busy": Out(1),
            }
        )

    def elaborate(self, platform):
        p = self.params
        m = Module()
        zw = z_bits(p)
        ww = w_bits(p)
        accumulators = self.i.payload
        result = self.result.payload

        # The copy of the vector: Z and R feed the units below until the next copy.
        z_copy = Signal(zw)
        ref_copy = Signal(signed(N_BITS))
        m_max_copy = Signal(MANTISSA_BITS)
        w_negative = Signal()
        m.d.comb += [result.z.eq(z_copy), result.z_exp.eq(ref_copy)]

        m.submodules.mean_divider = mean_divider = RestoringDivider(
            dividend_bits=ww + MEAN_SHIFT,
            divisor_bits=zw,
            quotient_bits=MEAN_QUOTIENT_BITS,
        )
        m.submodules.recip_divider = recip_divider = RestoringDivider(
            dividend_bits=RECIP_NUMERATOR_LOG2 + 1,
            divisor_bits=zw,
            quotient_bits=RECIP_QUOTIENT_BITS,
        )
        abs_w = Mux(accumulators.w[-1], -accumulators.w, accumulators.w)
        m.d.comb += [
            mean_divider.dividend.eq(Cat(Const(0, MEAN_SHIFT), abs_w[:ww])),  # |W| << 28
            mean_divider.divisor.eq(z_copy),
            recip_divider.dividend.eq(1 << RECIP_NUMERATOR_LOG2),
            recip_divider.divisor.eq(z_copy),
        ]

        m.submodules.log = log = LogUnit(
            z_bits=zw, z_frac_bits=Z_FRAC, exponent_bits=N_BITS, table_bits=p.ln_table_bits
        )
        m.d.comb += [log.z.eq(z_copy), log.exponent.eq(ref_copy)]

        # The combining cycle.
        # E[x] = +-q, 24 fraction bits, as wide as ln S (assigned by branches rather than
        # Mux(), which would be one bit narrower: equal operand widths for the subtraction)
        mean_x = Signal(signed(log.ln_bits))
        with m.If(w_negative):
            m.d.comb += mean_x.eq(-mean_divider.quotient)
        with m.Else():
            m.d.comb += mean_x.eq(mean_divider.quotient)
        entropy_fine = Signal(signed(log.ln_bits + 1))  # ln S - E[x], 24 fraction bits
        m.d.comb += entropy_fine.eq(log.ln - mean_x)
        # round_shift(h, 12) <= 0 when h < 2**11: then the entropy saturates at 0
        entropy_halves = entropy_fine.shift_right(11)
        entropy = (entropy_halves.as_unsigned() + 1).shift_right(1)
        top1 = _round_shift(m_max_copy * recip_divider.quotient, 24)

        # The state, one flag per phase (idle when neither is set): flags rather than an
        # Amaranth FSM, whose state comparisons Verilator's lint reports as width mismatches.
        dividing = Signal()  # a STATS vector in the dividers, then its combining cycle
        offering = Signal()  # the result is on ``result``
        idle = ~(dividing | offering)
        stats = ~accumulators.mode.as_value().any()  # Mode.STATS == 0
        m.d.comb += [
            self.i.ready.eq(idle),
            self.result.valid.eq(offering),
            self.stats_busy.eq(dividing),
        ]
        with m.If(idle & self.i.valid):
            m.d.comb += [mean_divider.start.eq(stats), recip_divider.start.eq(stats)]
            m.d.sync += [
                result.mode.eq(accumulators.mode),
                result.max.eq(accumulators.max),
                result.argmax.eq(accumulators.argmax),
                result.sum.eq(accumulators.sum),
                result.w.eq(accumulators.w),
                result.recip.eq(0),
                result.top1.eq(0),
                result.entropy.eq(0),
                z_copy.eq(accumulators.z),
                ref_copy.eq(accumulators.ref),
                m_max_copy.eq(accumulators.m_max),
                w_negative.eq(accumulators.w[-1]),
                dividing.eq(stats),
                offering.eq(~stats),
            ]
        # The log pipeline has long settled by then (LN_LATENCY < DIVIDER_CYCLES).
        with m.If(dividing & ~mean_divider.busy & ~recip_divider.busy):
            m.d.sync += [
                result.recip.eq(recip_divider.quotient),
                result.entropy.eq(
                    Mux(entropy_halves[-1], 0, Mux(entropy[16:].any(), OUT_MAX, entropy[:16]))
                ),
                result.top1.eq(Mux(top1[16:].any(), OUT_MAX, top1[:16])),
                self.stats_ref.eq(ref_copy),
                self.stats_recip.eq(recip_divider.quotient),
                dividing.eq(0),
                offering.eq(1),
            ]
        with m.If(offering & self.result.ready):
            m.d.sync += offering.eq(0)
        return m


class AAU(wiring.Component):
    """Attention algorithm unit (spec 2.4).

    Parameters
    ----------
    params : AAUParams

    Members
    -------
    i : In(stream.Signature(input_layout(params)))
        Elements, one per cycle at full rate. A vector is one or more elements ending with
        ``last``; its mode is the ``mode`` of its first element. ``ready`` is the pipeline's
        global enable, combinational from ``o.ready`` and the stall conditions below (it
        does not depend on ``i.valid``).
    o : Out(stream.Signature(element_layout(params)))
        SOFTMAX outputs, in input order. Held until taken; while held the whole element
        pipeline stalls.
    result : Out(stream.Signature(result_layout(params)))
        One per ``STATS``, ``SUM`` or ``MAX`` vector, in order. Held until taken.

    Stalls (the element pipeline holds, nothing is lost): ``o`` holding an element that is
    not taken; a reduction element about to be accumulated while the previous vector's
    accumulators still wait for the post pass (the post pass is busy with an older vector
    or its result has not been taken); a SOFTMAX element about to use ``R``/``recip``
    while a ``STATS`` vector ahead of it is still in the post pass.

    Latency and throughput, back to back without stalls (see ``docs/aau.md``): one
    element per cycle; ``result`` of a ``STATS`` vector whose last element is accepted at
    edge ``a`` is valid after edge ``a + RESULT_LATENCY`` (``a + REDUCTION_LATENCY`` for
    ``SUM``/``MAX``); a SOFTMAX element accepted at edge ``a`` is on ``o`` after edge ``a +
    SOFTMAX_LATENCY``. A ``STATS`` vector of ``N`` elements thus takes ``N - 1 +
    RESULT_LATENCY`` cycles from its first element to its result; a following vector
    streams on during the post pass unless it is shorter than the post pass
    (``DIVIDER_CYCLES + 2`` cycles), when its accumulation waits.
    """

    def __init__(self, params: AAUParams):
        _check_params(self, params)
        self.params = params
        super().__init__(
            {
                "i": In(stream.Signature(input_layout(params))),
                "o": Out(stream.Signature(element_layout(params))),
                "result": Out(stream.Signature(result_layout(params))),
            }
        )

    def elaborate(self, platform):
        p = self.params
        m = Module()
        zw = z_bits(p)
        ww = w_bits(p)
        index_bits = argmax_bits(p)

        def widen(value, width):
            """``value`` zero- or sign-extended to ``width`` bits in a wire of its own, so
            that both operands of an add have the result's width (Verilator's lint wants
            that, and the synthesiser narrows them back). Call it inside the ``m.If`` that
            uses it: the assignment is then conditional and the wire reaches the Verilog;
            an unconditional one is folded back into a narrow operand."""
            value = Value.cast(value)
            if width < len(value):
                raise ValueError(f"cannot extend {len(value)} bits to {width}")
            wide = Signal(signed(width) if value.shape().signed else width)
            m.d.comb += wide.eq(value)
            return wide

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

        # ---- reg0: input register; every element carries its vector's mode -------------
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
        head = s0["tag"]
        with m.If(en):
            m.d.sync += [
                s0["valid"].eq(self.i.valid),
                head.x.eq(payload.data),
                head.last.eq(payload.last),
                head.first.eq(in_first),
                head.mode.eq(mode_now),
                head.soft.eq(~mode_now.as_value()[1] & mode_now.as_value()[0]),  # SOFTMAX = 1
                head.stats.eq(~mode_now.as_value().any()),  # STATS = 0
            ]
        with m.If(en & self.i.valid):
            m.d.sync += [in_first.eq(payload.last), in_mode.eq(mode_now)]

        # ---- reg1..reg3: exp(x) = M * 2**(n - 16) ----------------------------------------
        m.submodules.exp = exp = Exp2Unit(table_bits=p.exp_table_bits, tag_shape=tag_layout)
        m.d.comb += [
            exp.i.valid.eq(s0["valid"]),
            exp.i.payload.x.eq(s0["tag"].x),
            exp.i.payload.tag.eq(s0["tag"]),
            exp.o.ready.eq(en),  # so exp.i.ready is en too
        ]
        s3 = {"valid": exp.o.valid, "n": exp.o.payload.n, "m": exp.o.payload.m}
        s3_tag = exp.o.payload.tag

        # ---- reg4: P = M * X; the R loop -----------------------------------------------
        s4 = stage(
            "s4",
            {
                "tag": tag_layout,
                "n": signed(N_BITS),
                "m": MANTISSA_BITS,
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
                "p": s3["m"] * s3_tag.x,
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
                "ref": signed(N_BITS),
                "k": SHIFT_BITS,
                "e": E_BITS,
                "w": signed(WCONTRIB_BITS),
            },
        )
        advance(
            s5,
            {
                "valid": s4["valid"],
                "tag": s4["tag"],
                "n": s4["n"],
                "m": s4["m"],
                "ref": ref,  # R after this element (the register was loaded with it)
                "k": s4["k"],
                "e": s4["m"].shift_left(16) >> s4["s"],  # shift(M, 16 - s), floor
                "w": s4["p"].shift_left(4) >> s4["s"],  # shift(P, 4 - s), floor (arithmetic)
            },
        )
        s5_tag = s5["tag"]

        # ---- accumulate stage -----------------------------------------------------------
        acc_z = Signal(zw)
        acc_w = Signal(signed(ww))
        acc_sum = Signal(signed(sum_bits(p)))
        acc_max = Signal(signed(LOGIT_BITS))
        acc_argmax = Signal(index_bits)
        acc_m_max = Signal(MANTISSA_BITS)
        acc_ref = Signal(signed(N_BITS))
        acc_index = Signal(index_bits)  # index of the element last accumulated
        acc_mode = Signal(Mode)
        pending = Signal()  # the accumulators hold a finished vector not yet copied

        reducing = s5["valid"] & ~s5_tag.soft
        accumulate = Signal()
        m.d.comb += accumulate.eq(en & reducing)
        first = s5_tag.first
        index_now = Mux(first, 0, acc_index + 1)
        with m.If(accumulate):
            m.d.sync += [
                acc_z.eq(Mux(first, 0, acc_z >> s5["k"]) + widen(s5["e"], zw)),
                acc_w.eq(Mux(first, 0, acc_w >> s5["k"]) + widen(s5["w"], ww)),
                acc_sum.eq(Mux(first, 0, acc_sum) + widen(s5_tag.x, sum_bits(p))),
                acc_index.eq(index_now),
                acc_ref.eq(s5["ref"]),
                acc_mode.eq(s5_tag.mode),
            ]
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
        m.d.comb += [
            post_pass.i.valid.eq(pending),
            finished.mode.eq(acc_mode),
            finished.max.eq(acc_max),
            finished.argmax.eq(acc_argmax),
            finished.sum.eq(acc_sum),
            finished.z.eq(acc_z),
            finished.w.eq(acc_w),
            finished.ref.eq(acc_ref),
            finished.m_max.eq(acc_m_max),
        ]
        wiring.connect(m, post_pass.result, wiring.flipped(self.result))
        copy = post_pass.i.valid & post_pass.i.ready  # the post pass takes the vector
        with m.If(accumulate & s5_tag.last):
            m.d.sync += pending.eq(1)
        with m.Elif(copy):
            m.d.sync += pending.eq(0)

        # ---- reg6: SOFTMAX elements only -----------------------------------------------
        s6 = stage("s6", {"last": 1, "n": signed(N_BITS), "m": MANTISSA_BITS})
        advance(
            s6,
            {
                "valid": s5["valid"] & s5_tag.soft,
                "last": s5_tag.last,
                "n": s5["n"],
                "m": s5["m"],
            },
        )

        # ---- reg7: s_i and M * recip of the last STATS pass -----------------------------
        soft_bits = N_BITS + 1
        s7 = stage("s7", {"last": 1, "above": 1, "s": 5, "product": SOFT_PRODUCT_BITS})
        soft_shift = Signal(signed(soft_bits))
        m.d.comb += soft_shift.eq(post_pass.stats_ref - s6["n"])
        advance(
            s7,
            {
                "valid": s6["valid"],
                "last": s6["last"],
                "above": soft_shift[-1],  # s_i < 0: above the STATS pass's reference
                # round_shift by 24 + s is 0 for 24 + s >= 42: saturate s at 18
                "s": Mux(soft_shift[5:].any() | (soft_shift[:5] >= 18), 18, soft_shift[:5]),
                "product": s6["m"] * post_pass.stats_recip,
            },
        )

        # ---- reg8: rounding shift and saturation -> o ----------------------------------
        s8 = stage("s8", {"last": 1, "p": 16})
        rounded = _round_shift(s7["product"] >> s7["s"], 24)  # shift by 24 + s in two steps
        advance(
            s8,
            {
                "valid": s7["valid"],
                "last": s7["last"],
                "p": Mux(s7["above"] | rounded[16:].any(), OUT_MAX, rounded[:16]),
            },
        )
        # The output register empties when taken, even while a stall holds the rest.
        with m.If(~en & self.o.ready):
            m.d.sync += s8["valid"].eq(0)
        m.d.comb += [
            self.o.valid.eq(s8["valid"]),
            self.o.payload.p.eq(s8["p"]),
            self.o.payload.last.eq(s8["last"]),
        ]

        # ---- stall conditions -> global enable -----------------------------------------
        output_blocked = s8["valid"] & ~self.o.ready
        accumulators_busy = reducing & pending & ~copy
        acc_stats = ~acc_mode.as_value().any()  # Mode.STATS == 0
        stats_ahead = (pending & acc_stats) | post_pass.stats_busy
        recip_not_ready = s6["valid"] & stats_ahead
        m.d.comb += en.eq(~(output_blocked | accumulators_busy | recip_not_ready))

        return m
