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

Pipeline (one register per line; a global stall holds every element register)::

    reg0  input register                      X, last, mode, first
    reg1  t = (X * log2 e) >> 16              n = t >> 16, f = t & 0xFFFF    (16 x 25 mult)
    reg2  exp-table read                      E[j], D[j], r
    reg3  M = E[j] + (D[j] * r) >> (16 - B)                                  (D x r mult)
    reg4  P = M * X                           (17 x 16 mult); R loop: R := max(R, n),
                                              k = R_new - R, s = R_new - n   (1-cycle loop)
    reg5  e = (M << 16) >> s, w = (P << 4) >> s                (barrel shifters, 6-bit s)
    acc   Z := (Z >> k) + e, W := (W >> k) + w, SUM, max/argmax/M_max      (1-cycle loops)
    reg6  SOFTMAX elements only (M, n)
    reg7  s_i = R_stats - n, M * recip_stats                                 (17 x 25 mult)
    reg8  p_i = min(65535, round_shift(M * recip, 24 + s_i))                 -> ``o``

After a reduction vector's last element is accumulated, the accumulators are copied into the
post-pass registers (so the next vector streams on while the post pass runs), both dividers
are loaded, and a free-running four-stage pipeline computes ``ln S`` from the copy (leading
one of ``Z``, log2 table, ``* ln 2``) while the dividers run. One cycle combines the
quotients into ``top1`` and ``entropy``; the result is then offered on ``result``.

Critical path: no multiplier sits in a loop. The accumulate loop (a 6-level barrel shifter of
53 bits, then a 53-bit adder) and the divider step (one 50-bit subtract whose borrow selects
the remainder) are each one adder deep; generic synthesis (yosys ``synth; ltp``) finds the
divider step the longest path (104 gate levels with ripple-carry adders), ahead of the
single-stage multipliers (16 x 25 at reg1, 17 x 25 at reg7 and in the post pass's ``top1``,
29 x 24 for ``ln 2``), each of which could take a second stage without changing a result.
The stall net fans ``o.ready`` out to the enables of every element register (see ``i``).
"""

from __future__ import annotations

import itertools
from decimal import Decimal, localcontext

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

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

LOG2E_CODE = 24204406  # round(log2(e) * 2**24), UQ1.24
LN2_CODE = 11629080  # round(ln(2) * 2**24), UQ0.24
T_BITS = 25  # t = (X * LOG2E_CODE) >> 16, Q9.16
N_BITS = 9  # n = t >> 16 in -185 .. 184; R has the same range
M_BITS = 17  # mantissa M, UQ1.16
P_BITS = 33  # P = M * X, |P| < 2**32
E_BITS = 33  # e = shift(M, 16 - s) < 2**33
WCONTRIB_BITS = 37  # w = shift(P, 4 - s), |w| < 2**36
SHIFT_BITS = 6  # shift amounts saturate at 63: beyond every accumulator's width
MEAN_QUOTIENT_BITS = 32  # q = (|W| << 28) // Z < 2**32
MEAN_SHIFT = 28
RECIP_QUOTIENT_BITS = 25  # recip = 2**56 // Z <= 2**24
RECIP_NUMERATOR_LOG2 = 56
LOG2_FRAC = 20
LN_S_BITS = 33  # |ln S| < 2**28 * ln 2 * 2**4 < 2**32
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
    return 33 + _clog2(params.max_length)


def w_bits(params: AAUParams) -> int:
    """``W`` (20 fraction bits, signed): ``|W| < N * 2**36`` (``docs/aau.md`` section 8)."""
    return 37 + _clog2(params.max_length)


def sum_bits(params: AAUParams) -> int:
    """SUM is exact: ``16 + clog2(max_length)`` bits, signed, Q(8 + clog2 N).8."""
    return 16 + _clog2(params.max_length)


def exp2_table(bits: int) -> list[int]:
    """``E[j] = round(2**(16 + j / 2**bits))``, ``j = 0 .. 2**bits`` (UQ1.16).

    Computed in 50-digit decimal arithmetic (round half up; no entry is a tie).
    """
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        return [
            int(
                (Decimal(2) ** (16 + Decimal(j) / size) + Decimal("0.5")).to_integral_value(
                    "ROUND_FLOOR"
                )
            )
            for j in range(size + 1)
        ]


def log2_table(bits: int) -> list[int]:
    """``L[j] = round(2**20 * log2(1 + j / 2**bits))``, ``j = 0 .. 2**bits`` (UQ1.20)."""
    with localcontext() as ctx:
        ctx.prec = 50
        size = 1 << bits
        ln2 = Decimal(2).ln()
        return [
            int(
                (
                    Decimal(1 << LOG2_FRAC) * (1 + Decimal(j) / size).ln() / ln2 + Decimal("0.5")
                ).to_integral_value("ROUND_FLOOR")
            )
            for j in range(size + 1)
        ]


def input_layout(params: AAUParams) -> data.StructLayout:
    """An input element: Q8.8 ``data``, ``last`` of its vector, and the vector's ``mode``
    (read from the first element of each vector, ignored on the others)."""
    return data.StructLayout({"data": signed(16), "last": 1, "mode": Mode})


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
            "max": signed(16),
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


def _width(values: list[int]) -> int:
    return max(1, max(values).bit_length())


def _round_shift(value, amount: int):
    """``round_shift(value, amount) = (value + 2**(amount - 1)) >> amount``, written as
    ``(floor(value / 2**(amount - 1)) + 1) >> 1`` (the same integer), which adds 1 rather
    than a wide constant."""
    return (value.shift_right(amount - 1) + 1).shift_right(1)


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
        if not isinstance(params, AAUParams):
            self._MustUse__silence = True
            raise TypeError(f"params must be an AAUParams, not {params!r}")
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

        exp_bits = p.exp_table_bits
        ln_bits = p.ln_table_bits
        zw = z_bits(p)
        ww = w_bits(p)
        index_bits = argmax_bits(p)

        exp_entries = exp2_table(exp_bits)
        exp_base = exp_entries[:-1]
        exp_step = [b - a for a, b in itertools.pairwise(exp_entries)]
        log_entries = log2_table(ln_bits)
        log_base = log_entries[:-1]
        log_step = [b - a for a, b in itertools.pairwise(log_entries)]
        exp_step_bits = _width(exp_step)
        log_step_bits = _width(log_step)
        exp_base_rom = Array(Const(v, M_BITS) for v in exp_base)
        exp_step_rom = Array(Const(v, exp_step_bits) for v in exp_step)
        log_base_rom = Array(Const(v, LOG2_FRAC) for v in log_base)  # L[j] < 2**20
        log_step_rom = Array(Const(v, log_step_bits) for v in log_step)
        exp_r_bits = 16 - exp_bits
        log_r_bits = LOG2_FRAC - ln_bits

        def widen(value, width):
            """``value`` zero- or sign-extended to ``width`` bits in a wire of its own, so
            that both operands of an operator have the result's width (Verilator's lint
            wants that, and the synthesiser narrows them back)."""
            value = Value.cast(value)
            shape = value.shape()
            if width < shape.width:
                raise ValueError(f"cannot extend {shape.width} bits to {width}")
            wide = Signal(signed(width) if shape.signed else width)
            m.d.comb += wide.eq(value)
            return wide

        # ---- global enable -------------------------------------------------------------
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

        # Every element carries its vector's mode, decoded once at the input.
        meta = {"last": 1, "first": 1, "mode": Mode, "soft": 1, "stats": 1}

        def carry(src):
            return {key: src[key] for key in ("valid", *meta)}

        # ---- reg0: input register -----------------------------------------------------
        s0 = stage("s0", {**meta, "x": signed(16)})
        in_first = Signal(init=1)  # the next accepted element starts a vector
        in_mode = Signal(Mode)  # the current vector's mode
        payload = self.i.payload
        mode_now = Signal(Mode)
        with m.If(in_first):
            m.d.comb += mode_now.eq(payload.mode)
        with m.Else():
            m.d.comb += mode_now.eq(in_mode)
        advance(
            s0,
            {
                "valid": self.i.valid,
                "x": payload.data,
                "last": payload.last,
                "first": in_first,
                "mode": mode_now,
                "soft": ~mode_now.as_value()[1] & mode_now.as_value()[0],  # SOFTMAX = 1
                "stats": ~mode_now.as_value().any(),  # STATS = 0
            },
        )
        with m.If(en & self.i.valid):
            m.d.sync += [in_first.eq(payload.last), in_mode.eq(mode_now)]

        # ---- reg1: t = (X * log2 e) >> 16; n, f ----------------------------------------
        s1 = stage("s1", {**meta, "x": signed(16), "n": signed(N_BITS), "f": 16})
        t = Signal(signed(T_BITS))
        m.d.comb += t.eq((s0["x"] * Const(LOG2E_CODE, 25)).shift_right(16))
        advance(s1, {**carry(s0), "x": s0["x"], "n": t[16:].as_signed(), "f": t[:16]})

        # ---- reg2: exp table ----------------------------------------------------------
        s2 = stage(
            "s2",
            {
                **meta,
                "x": signed(16),
                "n": signed(N_BITS),
                "base": M_BITS,
                "step": M_BITS,  # wider than needed: equal operand widths below
                "r": max(1, exp_r_bits),
            },
        )
        exp_j = s1["f"][exp_r_bits:]
        advance(
            s2,
            {
                **carry(s1),
                "x": s1["x"],
                "n": s1["n"],
                "base": exp_base_rom[exp_j],
                "step": exp_step_rom[exp_j],
                "r": s1["f"][:exp_r_bits] if exp_r_bits else 0,
            },
        )

        # ---- reg3: mantissa by interpolation -------------------------------------------
        s3 = stage("s3", {**meta, "x": signed(16), "n": signed(N_BITS), "m": M_BITS})
        # (D * r) >> (16 - B) < D since r < 2**(16 - B); M < E[j + 1] <= 2**17
        exp_interp = (s2["step"] * s2["r"]).shift_right(exp_r_bits)[:M_BITS]
        mantissa = s2["base"] + exp_interp
        advance(s3, {**carry(s2), "x": s2["x"], "n": s2["n"], "m": mantissa[:M_BITS]})

        # ---- reg4: P = M * X; the R loop -----------------------------------------------
        s4 = stage(
            "s4",
            {
                **meta,
                "x": signed(16),
                "n": signed(N_BITS),
                "m": M_BITS,
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
            ref_new.eq(Mux(s3["first"] | (s3["n"] > ref), s3["n"], ref)),
            rescale.eq(Mux(s3["first"], 0, ref_new - ref)),
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
                **carry(s3),
                "x": s3["x"],
                "n": s3["n"],
                "m": s3["m"],
                "p": s3["m"] * s3["x"],
                "k": saturate_shift(rescale),
                "s": saturate_shift(element_shift),
            },
        )

        # ---- reg5: contributions (barrel shifters) -------------------------------------
        s5 = stage(
            "s5",
            {
                **meta,
                "x": signed(16),
                "n": signed(N_BITS),
                "m": M_BITS,
                "ref": signed(N_BITS),
                "k": SHIFT_BITS,
                "e": E_BITS,
                "w": signed(WCONTRIB_BITS),
            },
        )
        advance(
            s5,
            {
                **carry(s4),
                "x": s4["x"],
                "n": s4["n"],
                "m": s4["m"],
                "ref": ref,  # R after this element (the register was loaded with it)
                "k": s4["k"],
                "e": s4["m"].shift_left(16) >> s4["s"],  # shift(M, 16 - s), floor
                "w": s4["p"].shift_left(4) >> s4["s"],  # shift(P, 4 - s), floor (arithmetic)
            },
        )

        # ---- accumulate stage -----------------------------------------------------------
        acc_z = Signal(zw)
        acc_w = Signal(signed(ww))
        acc_sum = Signal(signed(sum_bits(p)))
        acc_max = Signal(signed(16))
        acc_argmax = Signal(index_bits)
        acc_m_max = Signal(M_BITS)
        acc_ref = Signal(signed(N_BITS))
        acc_index = Signal(index_bits)  # index of the element last accumulated
        acc_mode = Signal(Mode)
        acc_stats = Signal()
        pending = Signal()  # the accumulators hold a finished vector not yet copied
        copy = Signal()  # the post pass takes it in this cycle

        reducing = s5["valid"] & ~s5["soft"]
        accumulate = Signal()
        m.d.comb += accumulate.eq(en & reducing)
        index_now = Mux(s5["first"], 0, acc_index + 1)
        with m.If(accumulate):
            m.d.sync += [
                acc_z.eq(Mux(s5["first"], 0, acc_z >> s5["k"]) + widen(s5["e"], zw)),
                acc_w.eq(Mux(s5["first"], 0, acc_w >> s5["k"]) + widen(s5["w"], ww)),
                acc_sum.eq(Mux(s5["first"], 0, acc_sum) + widen(s5["x"], sum_bits(p))),
                acc_index.eq(index_now),
                acc_ref.eq(s5["ref"]),
                acc_mode.eq(s5["mode"]),
                acc_stats.eq(s5["stats"]),
            ]
            # strict compare: the first of equal maxima (the lowest index) wins
            with m.If(s5["first"] | (s5["x"] > acc_max)):
                m.d.sync += [
                    acc_max.eq(s5["x"]),
                    acc_argmax.eq(index_now),
                    acc_m_max.eq(s5["m"]),
                ]
        with m.If(accumulate & s5["last"]):
            m.d.sync += pending.eq(1)
        with m.Elif(copy):
            m.d.sync += pending.eq(0)

        # ---- reg6: SOFTMAX elements only -----------------------------------------------
        s6 = stage("s6", {"last": 1, "n": signed(N_BITS), "m": M_BITS})
        advance(
            s6,
            {"valid": s5["valid"] & s5["soft"], "last": s5["last"], "n": s5["n"], "m": s5["m"]},
        )

        # ---- reg7: s_i and M * recip ----------------------------------------------------
        stats_ref = Signal(signed(N_BITS))  # R of the last STATS pass
        stats_recip = Signal(RECIP_QUOTIENT_BITS)  # recip of the last STATS pass
        soft_bits = N_BITS + 1
        s7 = stage("s7", {"last": 1, "above": 1, "s": 5, "product": SOFT_PRODUCT_BITS})
        soft_shift = Signal(signed(soft_bits))
        m.d.comb += soft_shift.eq(stats_ref - s6["n"])
        advance(
            s7,
            {
                "valid": s6["valid"],
                "last": s6["last"],
                "above": soft_shift[-1],  # s_i < 0: above the STATS pass's reference
                # round_shift by 24 + s is 0 for 24 + s >= 42: saturate s at 18
                "s": Mux(soft_shift[5:].any() | (soft_shift[:5] >= 18), 18, soft_shift[:5]),
                "product": s6["m"] * stats_recip,
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

        # ---- post pass ------------------------------------------------------------------
        computing = Signal()  # dividing or combining a STATS vector
        post_z = Signal(zw + 1)  # one bit wider than Z: the divider compares zw + 1 bits
        post_w_negative = Signal()
        post_ref = Signal(signed(N_BITS))
        post_m_max = Signal(M_BITS)
        res = self.result.payload
        res_fields = {
            "mode": Signal(Mode, name="res_mode"),
            "max": Signal(signed(16), name="res_max"),
            "argmax": Signal(index_bits, name="res_argmax"),
            "sum": Signal(signed(sum_bits(p)), name="res_sum"),
            "z": post_z,
            "z_exp": post_ref,
            "w": Signal(signed(ww), name="res_w"),
            "recip": Signal(RECIP_QUOTIENT_BITS, name="res_recip"),
            "top1": Signal(16, name="res_top1"),
            "entropy": Signal(16, name="res_entropy"),
        }
        m.d.comb += [res[key].eq(value) for key, value in res_fields.items()]

        # Dividers: restoring, one quotient bit per cycle each. The remainder stays below
        # the divisor Z; the numerator's low bits shift out of the top of `mean_low` while
        # the quotient bits shift in at its bottom.
        mean_rem = Signal(zw)
        mean_low = Signal(MEAN_QUOTIENT_BITS)
        recip_rem = Signal(zw)
        recip_q = Signal(RECIP_QUOTIENT_BITS)
        divide_count = Signal(range(DIVIDER_CYCLES))
        divisor = post_z

        def restoring_step(rem, next_bit):
            # one subtractor: its borrow is the comparison
            trial = Cat(next_bit, rem)
            difference = trial - divisor
            fits = ~difference[-1]
            return Mux(fits, difference[:zw], trial[:zw]), fits

        mean_rem_next, mean_bit = restoring_step(mean_rem, mean_low[-1])
        recip_rem_next, recip_bit = restoring_step(recip_rem, 0)

        # ln S from the copy: a free-running pipeline that settles within four cycles of
        # the copy, long before the dividers finish.
        lead_high = Signal(range(zw - 32 + 1))  # lead - 32 (Z >= 2**32)
        for bit in range(32, zw):
            with m.If(post_z[bit]):
                m.d.comb += lead_high.eq(bit - 32)
        log_hi = Signal(signed(N_BITS))
        log_mant = Signal(LOG2_FRAC)  # the 20 bits below the leading one, truncated
        m.d.sync += [
            log_hi.eq(lead_high),
            log_mant.eq(post_z.shift_right(32 - LOG2_FRAC) >> lead_high),
        ]
        log_j = log_mant[log_r_bits:]
        log_hi2 = Signal(signed(N_BITS))
        log_base_v = Signal(LOG2_FRAC)
        log_step_v = Signal(LOG2_FRAC)  # wider than needed: equal operand widths below
        log_r = Signal(max(1, log_r_bits))
        m.d.sync += [
            log_hi2.eq(log_hi),
            log_base_v.eq(log_base_rom[log_j]),
            log_step_v.eq(log_step_rom[log_j]),
            log_r.eq(log_mant[:log_r_bits] if log_r_bits else 0),
        ]
        # l = L[j] + interpolation < L[j + 1] <= 2**20, so (exponent << 20) + l is a
        # concatenation
        log_fraction = (log_base_v + (log_step_v * log_r).shift_right(log_r_bits))[:LOG2_FRAC]
        log2_s = Signal(signed(LOG2_FRAC + N_BITS + 1))  # log2 S, 20 fraction bits
        m.d.sync += log2_s.eq(Cat(log_fraction, post_ref + log_hi2))
        ln_s = Signal(signed(LN_S_BITS))  # ln S, 24 fraction bits
        m.d.sync += ln_s.eq((log2_s * Const(LN2_CODE, 24)).shift_right(LOG2_FRAC))

        abs_w = Mux(acc_w[-1], -acc_w, acc_w)
        mean_x = Signal(signed(LN_S_BITS))  # E[x] = +-q, 24 fraction bits
        m.d.comb += mean_x.eq(Mux(post_w_negative, -mean_low, mean_low))
        h_fine = Signal(signed(LN_S_BITS + 1))  # ln S - E[x], 24 fraction bits
        m.d.comb += h_fine.eq(ln_s - mean_x)
        # round_shift(h, 12) <= 0 when h < 2**11: then the entropy saturates at 0
        entropy_halves = h_fine.shift_right(11)
        entropy = (entropy_halves.as_unsigned() + 1).shift_right(1)
        top1 = _round_shift(post_m_max * recip_q, 24)

        # The post pass's state, one-hot: idle when none is set.
        dividing = Signal()
        combining = Signal()
        done = Signal()
        m.d.comb += [computing.eq(dividing | combining), self.result.valid.eq(done)]
        with m.If(~(dividing | combining | done) & pending):
            m.d.comb += copy.eq(1)
            m.d.sync += [
                res_fields["mode"].eq(acc_mode),
                res_fields["max"].eq(acc_max),
                res_fields["argmax"].eq(acc_argmax),
                res_fields["sum"].eq(acc_sum),
                res_fields["w"].eq(acc_w),
                res_fields["recip"].eq(0),
                res_fields["top1"].eq(0),
                res_fields["entropy"].eq(0),
                post_z.eq(acc_z),
                post_ref.eq(acc_ref),
                post_m_max.eq(acc_m_max),
                post_w_negative.eq(acc_w[-1]),
                # mean: A = |W| << 28 over 32 quotient bits, rem = A >> 32
                mean_rem.eq(abs_w.shift_right(MEAN_QUOTIENT_BITS - MEAN_SHIFT)),
                mean_low.eq(Cat(Const(0, MEAN_SHIFT), abs_w[: MEAN_QUOTIENT_BITS - MEAN_SHIFT])),
                # recip: A = 2**56 over 25 quotient bits, rem = A >> 25
                recip_rem.eq(1 << (RECIP_NUMERATOR_LOG2 - RECIP_QUOTIENT_BITS)),
                recip_q.eq(0),
                divide_count.eq(0),
                dividing.eq(acc_stats),
                done.eq(~acc_stats),
            ]
        with m.If(dividing):
            m.d.sync += [
                mean_rem.eq(mean_rem_next),
                mean_low.eq(Cat(mean_bit, mean_low[:-1])),
                divide_count.eq(divide_count + 1),
            ]
            with m.If(divide_count < RECIP_QUOTIENT_BITS):
                m.d.sync += [
                    recip_rem.eq(recip_rem_next),
                    recip_q.eq(Cat(recip_bit, recip_q[:-1])),
                ]
            with m.If(divide_count == DIVIDER_CYCLES - 1):
                m.d.sync += [dividing.eq(0), combining.eq(1)]
        with m.If(combining):
            m.d.sync += [
                res_fields["recip"].eq(recip_q),
                res_fields["entropy"].eq(
                    Mux(entropy_halves[-1], 0, Mux(entropy[16:].any(), OUT_MAX, entropy[:16]))
                ),
                res_fields["top1"].eq(Mux(top1[16:].any(), OUT_MAX, top1[:16])),
                stats_ref.eq(post_ref),
                stats_recip.eq(recip_q),
                combining.eq(0),
                done.eq(1),
            ]
        with m.If(done & self.result.ready):
            m.d.sync += done.eq(0)

        # ---- stall conditions -> global enable -----------------------------------------
        output_blocked = s8["valid"] & ~self.o.ready
        accumulators_busy = reducing & pending & ~copy
        recip_not_ready = s6["valid"] & ((pending & acc_stats) | computing)
        m.d.comb += en.eq(~(output_blocked | accumulators_busy | recip_not_ready))

        return m
