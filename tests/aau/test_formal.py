"""AAU sub-components, formal tier: properties over every input (sby; k-induction or BMC).

Every input is free (``AnySeq``) except where a unit's documented precondition says
otherwise (``Assume``). Each property is also run on a planted bug, a copy of the unit's own
source with one line changed (:func:`mutant`), and must fail there: a proof that cannot
fail proves nothing.

- ``RestoringDivider`` at reduced widths (8-bit dividend, 4-bit divisor, 5 quotient bits),
  by k-induction: after every division ``dividend == quotient * divisor + remainder`` and
  ``remainder < divisor``, and ``busy`` is high exactly for the ``quotient_bits`` cycles
  after ``start``.
- ``LeadingOne`` (16 bits): ``value >> position == 1`` for every non-zero value.
- ``Exp2Unit`` at a 3-bit table: for every code ``M`` stays in ``[2**16, 2**17)`` and ``n``
  in ``-185 .. 184``. (Monotonicity in the code is checked over all 65,536 codes in
  ``test_units.py``: a solver relating the two constant multipliers of neighbouring codes
  did not finish in five minutes.)
- ``Exp2Unit`` and ``GateUnit``, one parametrised proof of their shared ``TablePipeline``
  skeleton: with stalls, the output is the input's tag and valid delayed by exactly
  ``PIPELINE_STAGES`` advancing edges and is held while not taken.
- ``LogUnit`` at reduced widths (12-bit ``z`` with 4 fraction bits): the integer part of
  ``log2`` is the position of ``z``'s leading one plus the exponent, ``LOG2_LATENCY`` edges
  after the input; ``log2`` never decreases from ``z`` to ``z + 1``.
- ``PostPass`` (the shortest ``max_length``): ``result.valid``, ``i.ready`` and
  ``stats_busy`` follow the documented timing exactly, the result is held until taken and
  ``stats_ref``/``stats_recip`` change only when a ``STATS`` result is published.
- The whole ``AAU`` at ``harness/small_params.py``'s set (``max_length = 8``, the mutation
  campaign's netlist, so the campaign's mutants run here): the ``mode``, ``max`` and
  ``argmax`` of every ``MAX`` and ``STATS`` result are the spec's ``max_i X_i`` and the
  lowest index holding it, the fields the mode leaves 0 are 0, the first vector streams
  without a stall and its result comes at the documented latency, for every 16-bit input
  and every length 1..8 (bounded from reset over the first vector and its result, which
  makes it complete for that vector; every port free: backpressure, ``param``).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq  # amaranth.hdl does not export it in 0.5
from amaranth.hdl import (
    Assert,
    Assume,
    Cat,
    Elaboratable,
    Module,
    Mux,
    ResetSignal,
    Signal,
    signed,
)
from harness import small_params
from harness.formal import check
from harness.planted import cases, planted

from ahasd.hw.aau import AAU, REDUCTION_LATENCY, RESULT_LATENCY
from ahasd.hw.aau_back_end import BACK_END_LATENCY, BackEnd, ElementKind
from ahasd.hw.aau_layouts import Mode
from ahasd.hw.aau_log import LOG2_LATENCY, LeadingOne, LogUnit
from ahasd.hw.aau_post_pass import PostPass
from ahasd.hw.aau_tables import LOG2_FRAC
from ahasd.hw.aau_units import EXP_LATENCY, GATE_LATENCY, PIPELINE_STAGES, Exp2Unit, GateUnit
from ahasd.hw.serial_arith import RestoringDivider, RestoringSquareRoot, ShiftAddMultiplier
from ahasd.params import AAUParams

pytestmark = pytest.mark.formal


def mutant(cls, old: str, new: str):
    """``cls`` rebuilt with a planted bug (the other classes of its module come along, so a
    unit that instantiates another gets the mutated one)."""
    return planted(cls, old, new)


def fails(design, **options):
    """The check of ``design`` finds a counterexample (not merely any error)."""
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(design, **options)


def delayed(m, value, cycles, *, name, enable=None):
    """``value`` as it was ``cycles`` (enabled) edges ago: a shadow delay line. Call it
    outside any ``m.If``, whose condition would gate the line too."""
    for stage in range(cycles):
        register = Signal.like(value, name=f"{name}_d{stage + 1}")
        if enable is None:
            m.d.sync += register.eq(value)
        else:
            with m.If(enable):
                m.d.sync += register.eq(value)
        value = register
    return value


def warm_up(m, cycles):
    """High from the ``cycles``-th edge after reset on (shadow registers are meaningful)."""
    count = Signal(range(cycles + 1))
    with m.If(count != cycles):
        m.d.sync += count.eq(count + 1)
    return count == cycles


# ---- RestoringDivider ----------------------------------------------------------------

DIVIDER = {"dividend_bits": 8, "divisor_bits": 4, "quotient_bits": 5}


class DividerProperties(Elaboratable):
    def __init__(self, divider_class=RestoringDivider):
        self.divider_class = divider_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.divider_class(**DIVIDER)
        steps = DIVIDER["quotient_bits"]
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [
            dut.start.eq(AnySeq(1)),
            dut.dividend.eq(AnySeq(DIVIDER["dividend_bits"])),
            dut.divisor.eq(AnySeq(DIVIDER["divisor_bits"])),
        ]

        # The division in progress: its dividend (taken at start) and its divisor (read
        # from the cycle after start on, held while busy: the unit's contract).
        dividend = Signal(DIVIDER["dividend_bits"])
        with m.If(dut.start):
            m.d.sync += dividend.eq(dut.dividend)
        first_step = Signal()
        m.d.sync += first_step.eq(dut.start)
        divisor_held = Signal(DIVIDER["divisor_bits"])
        with m.If(first_step):
            m.d.sync += divisor_held.eq(dut.divisor)
        divisor = Mux(first_step, dut.divisor, divisor_held)
        with m.If(dut.busy):
            m.d.comb += [
                Assume(dut.divisor == divisor),
                Assume(dividend < (divisor << steps)),  # the quotient fits
            ]

        # Edges since the last start, saturating one past the division.
        elapsed = Signal(range(steps + 2))
        with m.If(dut.start):
            m.d.sync += elapsed.eq(1)
        with m.Elif((elapsed != 0) & (elapsed <= steps)):
            m.d.sync += elapsed.eq(elapsed + 1)

        m.d.comb += Assert(dut.busy == ((elapsed != 0) & (elapsed <= steps)))
        with m.If(elapsed == steps + 1):
            m.d.comb += [
                Assert(dividend == dut.quotient * divisor + dut.remainder),
                Assert(dut.remainder < divisor),
            ]
        return m


DIVIDER_DEPTH = DIVIDER["quotient_bits"] + 3


def test_divider_quotient_and_remainder():
    check(DividerProperties(), name="aau_divider", mode="prove", depth=DIVIDER_DEPTH)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the trial's top bit forgotten: a trial of 2**width or more reads as "below"
        ("fits = trial[-1] | ~difference[-1]", "fits = ~difference[-1]"),
        # one step short (the divider's count: the other sequential units count alike)
        (
            "low.eq(Cat(fits, low[:-1])),\n                count.eq(count + 1),\n            ]\n"
            "            with m.If(count == steps - 1):",
            "low.eq(Cat(fits, low[:-1])),\n                count.eq(count + 1),\n            ]\n"
            "            with m.If(count == steps - 2):",
        ),
    ],
    ids=["comparison", "steps"],
)
def test_divider_proof_fails_on_planted_bugs(old, new):
    fails(
        DividerProperties(mutant(RestoringDivider, old, new)),
        name="aau_divider_mutant",
        mode="prove",
        depth=DIVIDER_DEPTH,
    )


# ---- LeadingOne ----------------------------------------------------------------------


class LeadingOneProperties(Elaboratable):
    def __init__(self, leading_one_class=LeadingOne, width=16):
        self.leading_one_class = leading_one_class
        self.width = width

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.leading_one_class(width=self.width)
        m.d.comb += dut.value.eq(AnySeq(self.width))
        m.d.comb += Assert(dut.nonzero == (dut.value != 0))
        with m.If(dut.nonzero):
            m.d.comb += Assert((dut.value >> dut.position) == 1)
        with m.Else():
            m.d.comb += Assert(dut.position == 0)
        return m


@pytest.mark.parametrize("width", [16, 13, 2, 1])
def test_leading_one_position(width):
    check(
        LeadingOneProperties(width=width),
        name=f"aau_leading_one_{width}",
        mode="prove",
        depth=1,
    )


# the lower half's answer wins over the upper half's
LOWER_WINS = (
    "Cat(Mux(upper_set, upper_at, lower_at), upper_set)",
    "Cat(Mux(lower_set, lower_at, upper_at), upper_set)",
)


def test_leading_one_proof_fails_on_planted_bug():
    lowest_wins = mutant(LeadingOne, *LOWER_WINS)
    fails(LeadingOneProperties(lowest_wins), name="aau_leading_one_mutant", mode="prove", depth=1)


# ---- Exp2Unit --------------------------------------------------------------------------

EXP_TABLE_BITS = 3
TOO_STEEP = (
    "mantissa_sum = step2 * rest2 +",
    "mantissa_sum = 2 * step2 * rest2 +",
)


class ExpRange(Elaboratable):
    """For every code: ``2**16 <= M < 2**17`` and ``-185 <= n <= 184`` (doc 4.1)."""

    def __init__(self, exp_class=Exp2Unit):
        self.exp_class = exp_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.exp_class(table_bits=EXP_TABLE_BITS)
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [
            dut.i.payload.x.eq(AnySeq(16)),
            dut.i.valid.eq(1),
            dut.o.ready.eq(1),
        ]
        with m.If(warm_up(m, EXP_LATENCY)):
            mantissa, n = dut.o.payload.m, dut.o.payload.n
            m.d.comb += [
                Assert((mantissa >= 1 << 16) & (mantissa < 1 << 17)),
                Assert((n >= -185) & (n <= 184)),
            ]
        return m


def test_exp_mantissa_and_exponent_in_range():
    # the pipeline is a pure function of the code of EXP_LATENCY edges before: a bounded
    # check from reset over a free code covers every code
    check(ExpRange(), name="aau_exp_range", mode="bmc", depth=EXP_LATENCY + 1)


def test_exp_proof_fails_on_planted_bug():
    fails(
        ExpRange(mutant(Exp2Unit, *TOO_STEEP)),
        name="aau_exp_range_mutant",
        mode="bmc",
        depth=EXP_LATENCY + 1,
    )


# ---- LogUnit ---------------------------------------------------------------------------

LOG = {"z_bits": 12, "z_frac_bits": 4, "exponent_bits": 3, "table_bits": 2}


class LogLeadingOne(Elaboratable):
    """``log2 >> 20 == exponent + lead - z_frac_bits`` with ``lead`` the leading one of the
    ``z`` of LOG2_LATENCY edges before."""

    def __init__(self, log_class=LogUnit):
        self.log_class = log_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.log_class(**LOG)
        frac = LOG["z_frac_bits"]
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [dut.z.eq(AnySeq(LOG["z_bits"])), dut.exponent.eq(AnySeq(LOG["exponent_bits"]))]
        m.d.comb += Assume(dut.z >= 1 << frac)  # the unit's precondition
        z = delayed(m, dut.z, LOG2_LATENCY, name="z")
        exponent = delayed(m, dut.exponent, LOG2_LATENCY, name="exponent")
        integer = dut.log2[LOG2_FRAC:].as_signed()
        position = Signal(range(LOG["z_bits"] - frac))
        m.d.comb += position.eq(integer - exponent)
        with m.If(warm_up(m, LOG2_LATENCY)):
            m.d.comb += [
                Assert(integer - exponent >= 0),
                Assert(integer - exponent < LOG["z_bits"] - frac),
                Assert((z >> (position + frac)) == 1),
            ]
        return m


class LogMonotonic(Elaboratable):
    """Two units side by side on ``z`` and ``z + 1`` with the same exponent."""

    def __init__(self, log_class=LogUnit):
        self.log_class = log_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.low = low = self.log_class(**LOG)
        m.submodules.high = high = self.log_class(**LOG)
        m.d.comb += Assume(~ResetSignal())
        z = Signal(LOG["z_bits"])
        exponent = Signal(LOG["exponent_bits"])
        m.d.comb += [z.eq(AnySeq(LOG["z_bits"])), exponent.eq(AnySeq(LOG["exponent_bits"]))]
        m.d.comb += [
            Assume(z >= 1 << LOG["z_frac_bits"]),
            Assume(z != (1 << LOG["z_bits"]) - 1),
            low.z.eq(z),
            high.z.eq(z + 1),
            low.exponent.eq(exponent),
            high.exponent.eq(exponent),
        ]
        with m.If(warm_up(m, LOG2_LATENCY)):
            m.d.comb += Assert(high.log2 >= low.log2)
        return m


def test_log_leading_one():
    check(LogLeadingOne(), name="aau_log_leading_one", mode="prove", depth=LOG2_LATENCY + 1)


def test_log_monotonic():
    check(LogMonotonic(), name="aau_log_monotonic", mode="prove", depth=LOG2_LATENCY + 1)


def test_log_proofs_fail_on_planted_bugs():
    lowest_wins = mutant(LogUnit, *LOWER_WINS)
    fails(
        LogLeadingOne(lowest_wins),
        name="aau_log_leading_one_mutant",
        mode="prove",
        depth=LOG2_LATENCY + 1,
    )
    too_steep = mutant(
        LogUnit,
        "fraction_sum = step2 * rest2 +",
        "fraction_sum = 2 * step2 * rest2 +",
    )
    fails(
        LogMonotonic(too_steep),
        name="aau_log_monotonic_mutant",
        mode="prove",
        depth=LOG2_LATENCY + 1,
    )


# ---- PostPass --------------------------------------------------------------------------

POST_PARAMS = AAUParams(max_length=2, exp_table_bits=1, ln_table_bits=1)
POST_DEPTH = 3


class PostPassHandshake(Elaboratable):
    """The phases (idle, dividing, NORM, offering) are exclusive and ``i.ready`` means idle;
    a SUM/MAX vector is offered at the next edge with its fields, a STATS vector goes to the
    dividers, a LAYERNORM/RMSNORM vector to the NORM phases; the result is held until taken;
    ``stats_ref``/``stats_recip`` change only where a STATS vector leaves the dividers for
    ``result``, the ``norm_*`` outputs only where a NORM vector leaves its phases for it."""

    def __init__(self, post_pass_class=PostPass):
        self.post_pass_class = post_pass_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.post_pass_class(POST_PARAMS)
        m.d.comb += Assume(~ResetSignal())
        vector = dut.i.payload.as_value()
        m.d.comb += [
            dut.i.valid.eq(AnySeq(1)),
            vector.eq(AnySeq(len(vector))),
            dut.result.ready.eq(AnySeq(1)),
        ]
        taken = dut.i.valid & dut.i.ready
        # the mutants bring their own Mode class: compare the codes
        code = dut.i.payload.mode.as_value()
        stats = code == Mode.STATS.value
        norm = (code == Mode.LAYERNORM.value) | (code == Mode.RMSNORM.value)
        result = dut.result.payload
        published = Cat(dut.stats_ref, dut.stats_recip)
        norm_published = Cat(dut.norm_scale, dut.norm_offset, dut.norm_shift)

        busy_before = delayed(m, dut.stats_busy, 1, name="busy")
        norm_busy_before = delayed(m, dut.norm_busy, 1, name="norm_busy")
        held = delayed(m, dut.result.valid & ~dut.result.ready, 1, name="held")
        result_before = delayed(m, result.as_value(), 1, name="result")
        published_before = delayed(m, published, 1, name="published")
        norm_published_before = delayed(m, norm_published, 1, name="norm_published")
        took_stats = delayed(m, taken & stats, 1, name="took_stats")
        took_norm = delayed(m, taken & norm, 1, name="took_norm")
        took_other = delayed(m, taken & ~stats & ~norm, 1, name="took_other")
        vector_before = delayed(m, dut.i.payload, 1, name="vector")

        m.d.comb += [
            Assert(~(dut.stats_busy & dut.result.valid)),
            Assert(~(dut.norm_busy & dut.result.valid)),
            Assert(~(dut.norm_busy & dut.stats_busy)),
            Assert(dut.i.ready == ~(dut.stats_busy | dut.norm_busy | dut.result.valid)),
        ]
        with m.If(held):
            m.d.comb += [Assert(dut.result.valid), Assert(result.as_value() == result_before)]
        with m.If(busy_before & ~dut.stats_busy):
            m.d.comb += Assert(dut.result.valid)
        with m.If(~(busy_before & ~dut.stats_busy)):
            m.d.comb += Assert(published == published_before)
        with m.If(norm_busy_before & ~dut.norm_busy):
            m.d.comb += Assert(dut.result.valid)
        with m.If(~(norm_busy_before & ~dut.norm_busy)):
            m.d.comb += Assert(norm_published == norm_published_before)
        with m.If(took_stats):
            m.d.comb += Assert(dut.stats_busy)
        with m.If(took_norm):
            m.d.comb += Assert(dut.norm_busy)
        with m.If(took_other):
            m.d.comb += [
                Assert(dut.result.valid),
                Assert(result.mode.as_value() == vector_before.mode.as_value()),
                Assert(result.max == vector_before.max),
                Assert(result.argmax == vector_before.argmax),
                Assert(result.sum == vector_before.sum),
                Assert(result.z == vector_before.z),
                Assert(result.z_exp == vector_before.ref),
                Assert(result.w == vector_before.w),
                Assert(Cat(result.recip, result.top1, result.entropy) == 0),
                Assert(Cat(result.sum_sq, result.rstd, result.rstd_shift) == 0),
            ]
        return m


def test_post_pass_handshake():
    check(PostPassHandshake(), name="aau_post_pass", mode="prove", depth=POST_DEPTH)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a STATS vector offered without dividing
        ("m.d.sync += phase.eq(PostPhase.DIVIDE)", "m.d.sync += phase.eq(PostPhase.OFFER)"),
        # a NORM vector offered without its phases
        ("m.d.sync += phase.eq(PostPhase.PRODUCTS)", "m.d.sync += phase.eq(PostPhase.OFFER)"),
    ],
    ids=["stats_offered_early", "norm_offered_early"],
)
def test_post_pass_proof_fails_on_planted_bugs(old, new):
    fails(
        PostPassHandshake(mutant(PostPass, old, new)),
        name="aau_post_pass_mutant",
        mode="prove",
        depth=POST_DEPTH,
    )


# ---- RestoringSquareRoot -------------------------------------------------------------------

ROOT_RADICAND_BITS = 8


class SquareRootProperties(Elaboratable):
    """After every root: ``radicand == root**2 + remainder`` and ``remainder <= 2 * root``
    (so ``root = isqrt(radicand)``), and ``busy`` exactly for the ``root_bits`` cycles after
    ``start``."""

    def __init__(self, root_class=RestoringSquareRoot):
        self.root_class = root_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.root_class(radicand_bits=ROOT_RADICAND_BITS)
        steps = dut.root_bits
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [dut.start.eq(AnySeq(1)), dut.radicand.eq(AnySeq(ROOT_RADICAND_BITS))]
        radicand = Signal(ROOT_RADICAND_BITS)
        with m.If(dut.start):
            m.d.sync += radicand.eq(dut.radicand)
        elapsed = Signal(range(steps + 2))
        with m.If(dut.start):
            m.d.sync += elapsed.eq(1)
        with m.Elif((elapsed != 0) & (elapsed <= steps)):
            m.d.sync += elapsed.eq(elapsed + 1)
        m.d.comb += Assert(dut.busy == ((elapsed != 0) & (elapsed <= steps)))
        with m.If(elapsed == steps + 1):
            m.d.comb += [
                Assert(radicand == dut.root * dut.root + dut.remainder),
                Assert(dut.remainder <= 2 * dut.root),
            ]
        return m


def test_root_is_the_integer_square_root():
    check(
        SquareRootProperties(),
        name="aau_root",
        mode="prove",
        depth=(ROOT_RADICAND_BITS + 1) // 2 + 3,
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # 4 * root subtracted instead of 4 * root + 1
        (
            "difference = trial - Cat(Const(1, 2), self.root)",
            "difference = trial - Cat(Const(0, 2), self.root)",
        ),
        # the radicand's pairs taken one bit apart
        ("pairs.eq(Cat(Const(0, 2), pairs[:-2])),", "pairs.eq(Cat(Const(0, 1), pairs[:-1])),"),
    ],
    ids=["comparison", "pairs"],
)
def test_root_proof_fails_on_planted_bugs(old, new):
    fails(
        SquareRootProperties(mutant(RestoringSquareRoot, old, new)),
        name="aau_root_mutant",
        mode="prove",
        depth=(ROOT_RADICAND_BITS + 1) // 2 + 3,
    )


# ---- ShiftAddMultiplier --------------------------------------------------------------------

PRODUCT = {"multiplicand_bits": 5, "multiplier_bits": 4}


class MultiplierProperties(Elaboratable):
    """After every product: ``product == multiplicand * multiplier`` (the multiplicand held
    while ``busy``, the unit's contract), and ``busy`` exactly for ``multiplier_bits``
    cycles after ``start``."""

    def __init__(self, multiplier_class=ShiftAddMultiplier):
        self.multiplier_class = multiplier_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.multiplier_class(**PRODUCT)
        steps = PRODUCT["multiplier_bits"]
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [
            dut.start.eq(AnySeq(1)),
            dut.multiplier.eq(AnySeq(steps)),
            dut.multiplicand.eq(AnySeq(PRODUCT["multiplicand_bits"])),
        ]
        multiplier = Signal(steps)
        with m.If(dut.start):
            m.d.sync += multiplier.eq(dut.multiplier)
        first_step = Signal()
        m.d.sync += first_step.eq(dut.start)
        multiplicand_held = Signal(PRODUCT["multiplicand_bits"])
        with m.If(first_step):
            m.d.sync += multiplicand_held.eq(dut.multiplicand)
        multiplicand = Mux(first_step, dut.multiplicand, multiplicand_held)
        with m.If(dut.busy):
            m.d.comb += Assume(dut.multiplicand == multiplicand)
        elapsed = Signal(range(steps + 2))
        with m.If(dut.start):
            m.d.sync += elapsed.eq(1)
        with m.Elif((elapsed != 0) & (elapsed <= steps)):
            m.d.sync += elapsed.eq(elapsed + 1)
        m.d.comb += Assert(dut.busy == ((elapsed != 0) & (elapsed <= steps)))
        with m.If(elapsed == steps + 1):
            m.d.comb += Assert(dut.product == multiplicand * multiplier)
        return m


def test_multiplier_product():
    check(
        MultiplierProperties(),
        name="aau_multiplier",
        mode="prove",
        depth=PRODUCT["multiplier_bits"] + 3,
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("with m.If(low[0]):", "with m.If(low[1]):"),  # the wrong multiplier bit
        ("self.product.eq(Cat(low[1:], total)),", "self.product.eq(Cat(low[1:], total[:-1])),"),
    ],
    ids=["bit", "carry"],
)
def test_multiplier_proof_fails_on_planted_bugs(old, new):
    fails(
        MultiplierProperties(mutant(ShiftAddMultiplier, old, new)),
        name="aau_multiplier_mutant",
        mode="prove",
        depth=PRODUCT["multiplier_bits"] + 3,
    )


# ---- GateUnit ------------------------------------------------------------------------------

GATE_TABLE_BITS = 6


class GateShape(Elaboratable):
    """Two units side by side, on ``x`` and on ``x + 1`` (or ``-x``), the same function: for
    every code ``g`` is in ``[0, 2**16]``, never decreases from ``x`` to ``x + 1``
    (``monotonic``), or ``g(x) + g(-x) = 2**16`` (``symmetric``, ``x != -32768``)."""

    def __init__(self, relation, gate_class=GateUnit):
        self.relation = relation
        self.gate_class = gate_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.low = low = self.gate_class(table_bits=GATE_TABLE_BITS)
        m.submodules.high = high = self.gate_class(table_bits=GATE_TABLE_BITS)
        m.d.comb += Assume(~ResetSignal())
        x = Signal(signed(16))
        gelu = Signal()
        m.d.comb += [x.eq(AnySeq(16)), gelu.eq(AnySeq(1))]
        if self.relation == "monotonic":
            m.d.comb += [Assume(x != 32767), high.i.payload.x.eq(x + 1)]
        else:
            m.d.comb += [Assume(x != -32768), high.i.payload.x.eq(-x)]
        for unit in (low, high):
            m.d.comb += [unit.i.valid.eq(1), unit.o.ready.eq(1), unit.i.payload.gelu.eq(gelu)]
        m.d.comb += low.i.payload.x.eq(x)
        with m.If(warm_up(m, GATE_LATENCY)):
            m.d.comb += Assert(low.o.payload.g <= 1 << 16)
            if self.relation == "monotonic":
                m.d.comb += Assert(low.o.payload.g <= high.o.payload.g)
            else:
                m.d.comb += Assert(low.o.payload.g + high.o.payload.g == 1 << 16)
        return m


@pytest.mark.parametrize("relation", ["monotonic", "symmetric"])
def test_gate_shape_for_every_code(relation):
    # a pure function of the codes of GATE_LATENCY edges before: bounded from reset
    check(GateShape(relation), name=f"aau_gate_{relation}", mode="bmc", depth=GATE_LATENCY + 1)


@pytest.mark.parametrize(
    ("relation", "old", "new"),
    [
        # the interpolation one bit too steep: g jumps down at a segment boundary
        (
            "monotonic",
            "*partial_products(step2, rest2)]",
            "*partial_products(step2, Cat(Const(0, 1), rest2))]",
        ),
        # the sign's 2**16 - h forgotten
        ("symmetric", "flip = negative2.replicate(width)", "flip = Const(0, width)"),
    ],
    ids=["steep", "sign"],
)
def test_gate_proofs_fail_on_planted_bugs(relation, old, new):
    fails(
        GateShape(relation, mutant(GateUnit, old, new)),
        name=f"aau_gate_{relation}_mutant",
        mode="bmc",
        depth=GATE_LATENCY + 1,
    )


# ---- TablePipeline: the stall, the valid bits and the tag of Exp2Unit and GateUnit -----------

PIPELINE_UNITS = {"exp": (Exp2Unit, EXP_TABLE_BITS), "gate": (GateUnit, GATE_TABLE_BITS)}
# A stall may last forever, so induction cannot flush the shadow line: bounded, from reset,
# deep enough for every stall pattern around two elements in flight.
PIPELINE_DEPTH = 10


class TablePipelineProperties(Elaboratable):
    """Valid and tag come out exactly PIPELINE_STAGES advancing edges later; a stall holds o."""

    def __init__(self, unit_class, table_bits):
        self.unit_class = unit_class
        self.table_bits = table_bits

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.unit_class(table_bits=self.table_bits, tag_shape=4)
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [
            dut.i.valid.eq(AnySeq(1)),
            dut.i.payload.as_value().eq(AnySeq(len(dut.i.payload.as_value()))),
            dut.o.ready.eq(AnySeq(1)),
        ]
        m.d.comb += Assert(dut.i.ready == dut.o.ready)
        advance = dut.o.ready
        valid = delayed(m, dut.i.valid, PIPELINE_STAGES, name="valid", enable=advance)
        tag = delayed(m, dut.i.payload.tag, PIPELINE_STAGES, name="tag", enable=advance)
        m.d.comb += Assert(dut.o.valid == valid)
        with m.If(dut.o.valid):
            m.d.comb += Assert(dut.o.payload.tag == tag)
        held = delayed(m, dut.o.valid & ~dut.o.ready, 1, name="held")
        output = dut.o.payload.as_value()
        output_before = delayed(m, output, 1, name="o")
        with m.If(held):
            m.d.comb += [Assert(dut.o.valid), Assert(output == output_before)]
        return m


@pytest.mark.parametrize("unit", PIPELINE_UNITS)
def test_pipeline_latency_and_stall(unit):
    check(
        TablePipelineProperties(*PIPELINE_UNITS[unit]),
        name=f"aau_{unit}_pipeline",
        mode="bmc",
        depth=PIPELINE_DEPTH,
    )


@pytest.mark.parametrize("unit", PIPELINE_UNITS)
def test_pipeline_proof_fails_on_planted_bug(unit):
    unit_class, table_bits = PIPELINE_UNITS[unit]
    # the tag line one register short
    short = mutant(
        unit_class,
        'tag = register(tag, f"tag{stage}")',
        'tag = tag if stage == 2 else register(tag, f"tag{stage}")',
    )
    fails(
        TablePipelineProperties(short, table_bits),
        name=f"aau_{unit}_pipeline_mutant",
        mode="bmc",
        depth=PIPELINE_DEPTH,
    )


# ---- BackEnd -------------------------------------------------------------------------------

BACK_END_PARAMS = AAUParams(max_length=2)
BACK_END_DEPTH = 10


class BackEndLane(Elaboratable):
    """Every input free (elements, the held statistics, the parameters, both readies): the
    output register holds the element taken BACK_END_LATENCY advancing edges earlier (or
    nothing once taken), with its ``last``; a RELU element outputs ``max(x, 0)`` for every
    ``x``; a NORM element captured with ``N r = T r = 0`` (the reset state) outputs its
    ``beta``; ``param`` is taken exactly when a NORM element moves into the output register,
    and the lane blocks only for a full output or a missing parameter."""

    def __init__(self, back_end_class=BackEnd):
        self.back_end_class = back_end_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.back_end_class(BACK_END_PARAMS)
        m.d.comb += Assume(~ResetSignal())
        for port in (dut.i.payload, dut.param.payload):
            m.d.comb += port.as_value().eq(AnySeq(len(port.as_value())))
        for port in (
            dut.i.valid, dut.param.valid, dut.o.ready, dut.advance, dut.stats_ref,
            dut.stats_recip, dut.norm_scale, dut.norm_offset, dut.norm_shift,
        ):  # fmt: skip
            m.d.comb += port.eq(AnySeq(len(port)))
        # The AAU's contract: it never advances a blocked lane.
        m.d.comb += Assume(~(dut.advance & dut.blocked))
        advance = dut.advance
        kind = dut.i.payload.kind.as_value()
        relu = kind == ElementKind.RELU.value
        norm = kind == ElementKind.NORM.value
        at_reset = (dut.norm_scale == 0) & (dut.norm_offset == 0)
        lane = BACK_END_LATENCY
        valid = delayed(m, dut.i.valid, lane, name="valid", enable=advance)
        last = delayed(m, dut.i.payload.last, lane, name="last", enable=advance)
        x = delayed(m, dut.i.payload.x, lane, name="x", enable=advance)
        was_relu = delayed(m, relu, lane, name="relu", enable=advance)
        was_norm = delayed(m, norm, lane, name="norm", enable=advance)
        was_reset = delayed(m, at_reset, lane, name="reset", enable=advance)
        # the NORM element one register before the output: it takes the parameters
        norm_before = delayed(m, norm & dut.i.valid, lane - 1, name="norm_before", enable=advance)
        beta = Signal(signed(16))
        with m.If(advance):
            m.d.sync += beta.eq(dut.param.payload.beta)
        # the output was taken since it was loaded (it empties without advancing)
        taken = Signal()
        with m.If(advance):
            m.d.sync += taken.eq(0)
        with m.Elif(dut.o.valid & dut.o.ready):
            m.d.sync += taken.eq(1)

        with m.If(warm_up(m, lane)):
            m.d.comb += Assert(dut.o.valid == (valid & ~taken))
            with m.If(dut.o.valid):
                data = dut.o.payload.data.as_signed()
                m.d.comb += Assert(dut.o.payload.last == last)
                with m.If(was_relu):
                    m.d.comb += Assert(data == Mux(x[-1], 0, x))
                with m.If(was_norm & was_reset):
                    m.d.comb += Assert(data == beta)
            m.d.comb += [
                Assert(dut.param.ready == (advance & norm_before)),
                Assert(
                    dut.blocked == ((dut.o.valid & ~dut.o.ready) | (norm_before & ~dut.param.valid))
                ),
            ]
        return m


def test_back_end_lane():
    check(BackEndLane(), name="aau_back_end", mode="bmc", depth=BACK_END_DEPTH)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # RELU passes negative codes
        ("with m.Elif(entering[ElementKind.RELU]), m.If(element.x[-1]):",
         "with m.Elif(entering[ElementKind.RELU]), m.If(element.x[-1] & element.x[0]):"),
        # the output register kept when taken during a stall
        ("with m.If(~advance & self.o.ready):", "with m.If(~advance & self.o.ready & 0):"),
        # NORM's beta dropped
        (
            "addend = Cat(Const(1 << (NORM_Z_FRAC - 1), NORM_Z_FRAC), beta).as_signed()",
            "addend = Cat(Const(1 << (NORM_Z_FRAC - 1), NORM_Z_FRAC), Const(0, 16)).as_signed()",
        ),
    ],
    ids=["relu", "output", "beta"],
)  # fmt: skip
def test_back_end_proof_fails_on_planted_bugs(old, new):
    fails(
        BackEndLane(mutant(BackEnd, old, new)),
        name="aau_back_end_mutant",
        mode="bmc",
        depth=BACK_END_DEPTH,
    )


class BackEndNormSaturation(Elaboratable):
    """NORM elements of ``x = 1`` with ``gamma = 1`` (LSB) and ``beta = 0``, every held
    ``N r``, ``T r``, ``k`` and every stall: the output is ``round_shift(clamp((N r - T r)
    >> k, -2**24, 2**24 - 1), 16)`` (docs/aau.md 9.3, ``c r = X N r - T r``): ``z`` saturates
    rather than wraps, so the output stays within ``[-256, 256]``. (``x = 1`` keeps the
    lane's multiplier out of the solver's way.)"""

    def __init__(self, back_end_class=BackEnd):
        self.back_end_class = back_end_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.back_end_class(BACK_END_PARAMS)
        m.d.comb += Assume(~ResetSignal())
        for port in (
            dut.i.valid, dut.param.valid, dut.o.ready, dut.advance, dut.norm_scale,
            dut.norm_offset, dut.norm_shift, dut.i.payload.last,
        ):  # fmt: skip
            m.d.comb += port.eq(AnySeq(len(port)))
        m.d.comb += [
            Assume(~(dut.advance & dut.blocked)),
            dut.i.payload.kind.eq(ElementKind.NORM),
            dut.i.payload.x.eq(1),
            dut.param.payload.gamma.eq(1),
            dut.param.payload.beta.eq(0),
        ]
        advance = dut.advance
        lane = BACK_END_LATENCY
        scale = delayed(m, dut.norm_scale, lane, name="scale", enable=advance)
        offset = delayed(m, dut.norm_offset, lane, name="offset", enable=advance)
        shift = delayed(m, dut.norm_shift, lane, name="shift", enable=advance)
        z_top = (1 << 24) - 1
        shifted = Signal(signed(len(offset) + 2))
        m.d.comb += shifted.eq((scale - offset) >> shift)
        z = Mux(shifted > z_top, z_top, Mux(shifted < -z_top - 1, -z_top - 1, shifted))
        with m.If(warm_up(m, lane) & dut.o.valid):
            data = dut.o.payload.data.as_signed()
            m.d.comb += [
                Assert(data == (z + (1 << 15)) >> 16),
                Assert((data >= -256) & (data <= 256)),
            ]
        return m


NORM_SATURATION_DEPTH = BACK_END_LATENCY + 2


def test_back_end_norm_saturates():
    check(
        BackEndNormSaturation(),
        name="aau_back_end_norm",
        mode="bmc",
        depth=NORM_SATURATION_DEPTH,
    )


def test_back_end_norm_proof_fails_on_planted_bug():
    # z wraps instead of saturating
    wraps = mutant(BackEnd, "with m.If(_fits(z_full, NORM_Z_BITS)):", "with m.If(1):")
    fails(
        BackEndNormSaturation(wraps),
        name="aau_back_end_norm_mutant",
        mode="bmc",
        depth=NORM_SATURATION_DEPTH,
    )


# ---- the whole AAU: the reductions' results -------------------------------------------

# The mutation campaign's netlist (harness/small_params.py): every length 1..8 and every
# 16-bit input, the argmax field three bits wide (so an index that wraps or a wrong width
# would show). Every port of the AAU is driven by a free signal, constrained by assumptions
# only: a port driven with a constant is folded into the AAU's own logic, and the campaign
# would no longer recognise its netlist in this wrapper (tests/mutation/formal_tier.py).
# (The exact `sum` is left to the cocotb tier: relating the AAU's pipelined adder to the
# wrapper's did not finish in 200 s at this set; neither did a mode free on the elements
# after the first.)
REDUCTION_PARAMS = small_params.AAU
REDUCTION_LATENCIES = {Mode.MAX: REDUCTION_LATENCY, Mode.STATS: RESULT_LATENCY}


class Reduction(Elaboratable):
    """The results of ``mode`` vectors (``MAX`` or ``STATS``; docs/aau.md 11, spec 2.4), for
    free elements, lengths 1..``max_length``, free backpressure on ``result`` and free
    ``o.ready`` and ``param``.

    Every result carries the mode, ``max_i X_i`` and the lowest index holding it (ties: the
    first wins); ``sum_sq``, ``rstd`` and ``rstd_shift`` are 0, and ``recip``, ``top1`` and
    ``entropy`` too unless ``STATS``. The first vector streams in one element per cycle
    (none of the AAU's stall conditions applies to it) and its result is valid from
    ``RESULT_LATENCY`` (``STATS``) or ``REDUCTION_LATENCY`` (``MAX``) edges after its last
    element's input edge until it is taken (the AAU's latency contract).

    The wrapper offers one vector at a time (the next once the previous result is taken) and
    computes the expected fields itself as the elements are accepted; a result while none is
    expected fails too.
    """

    def __init__(self, mode: Mode, aau_class=AAU):
        self.mode = mode
        self.aau_class = aau_class

    def elaborate(self, platform):
        p = REDUCTION_PARAMS
        m = Module()
        m.submodules.dut = dut = self.aau_class(p)
        m.d.comb += Assume(~ResetSignal())
        index = Signal(range(p.max_length))
        expected_max = Signal(signed(16))
        expected_argmax = Signal(range(p.max_length))
        waiting = Signal()  # a whole vector is in, its result not yet taken
        last = Signal()
        # a planted-bug copy brings its own Mode class: drive and compare the codes
        code = dut.i.payload.mode.as_value()
        m.d.comb += [
            last.eq(AnySeq(1) | (index == p.max_length - 1)),
            dut.i.valid.eq(AnySeq(1) & ~waiting),
            dut.i.payload.data.eq(AnySeq(16)),
            dut.i.payload.last.eq(last),
            code.eq(AnySeq(4)),
            Assume(code == self.mode.value),
            dut.o.ready.eq(AnySeq(1)),
            dut.param.valid.eq(AnySeq(1)),
            dut.param.payload.as_value().eq(AnySeq(len(dut.param.payload.as_value()))),
            dut.result.ready.eq(AnySeq(1)),
        ]
        x = dut.i.payload.data
        accepted = dut.i.valid & dut.i.ready
        with m.If(accepted):
            m.d.sync += index.eq(Mux(last, 0, index + 1))
            with m.If((index == 0) | (x > expected_max)):
                m.d.sync += [expected_max.eq(x), expected_argmax.eq(index)]
            with m.If(last):
                m.d.sync += waiting.eq(1)

        # The first vector: edges since its last element's input edge (1 after that edge),
        # saturating where its result is due.
        latency = REDUCTION_LATENCIES[self.mode]
        first_in = Signal()  # the first vector's last element is in
        first_out = Signal()  # its result has been taken
        since = Signal(range(latency + 2))
        with m.If(first_in & (since != latency + 1)):
            m.d.sync += since.eq(since + 1)
        with m.If(accepted & last & ~first_in):
            m.d.sync += [first_in.eq(1), since.eq(1)]
        with m.If(~first_in):
            m.d.comb += Assert(dut.i.ready)
        with m.If(first_in & ~first_out):
            m.d.comb += Assert(dut.result.valid == (since == latency + 1))

        result = dut.result.payload
        with m.If(dut.result.valid):
            m.d.comb += [
                Assert(waiting),
                Assert(result.mode.as_value() == self.mode.value),
                Assert(result.max == expected_max),
                Assert(result.argmax == expected_argmax),
                Assert(Cat(result.sum_sq, result.rstd, result.rstd_shift) == 0),
            ]
            if self.mode != Mode.STATS:
                m.d.comb += Assert(Cat(result.recip, result.top1, result.entropy) == 0)
            with m.If(dut.result.ready):
                m.d.sync += [waiting.eq(0), first_out.eq(first_in)]
        return m


def reduction_depth(mode: Mode) -> int:
    """Reset, a vector of ``max_length`` elements, its result, one cycle held: every input
    of the first vector, complete for each length."""
    return 1 + REDUCTION_PARAMS.max_length + REDUCTION_LATENCIES[mode] + 2


@pytest.mark.long
@pytest.mark.parametrize("mode", [Mode.MAX, Mode.STATS], ids=["max", "stats"])
def test_reduction_results_equal_the_spec(mode):
    check(
        Reduction(mode),
        name=f"aau_reduction_{mode.name.lower()}",
        mode="bmc",
        depth=reduction_depth(mode),
    )


@pytest.mark.parametrize("bug", cases("aau.reduction_proof"))
def test_reduction_proof_fails_on_planted_bugs(bug):
    """Each planted bug of the catalogue (harness/planted.py) this proof must catch, e.g. the
    max's compare made non-strict (of equal maxima the last wins), or a result offered for
    one cycle whether or not it was taken."""
    fails(
        Reduction(Mode.MAX, bug.build(AAU)),
        name="aau_reduction_planted",
        mode="bmc",
        depth=reduction_depth(Mode.MAX),
    )
