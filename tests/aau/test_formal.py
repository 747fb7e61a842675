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
  in ``-185 .. 184``; with stalls, the output is the input's tag and valid delayed by
  exactly ``EXP_LATENCY`` advancing edges and is held while not taken. (Monotonicity in the
  code is checked over all 65,536 codes in ``test_units.py``: a solver relating the two
  constant multipliers of neighbouring codes did not finish in five minutes.)
- ``LogUnit`` at reduced widths (12-bit ``z`` with 4 fraction bits): the integer part of
  ``log2`` is the position of ``z``'s leading one plus the exponent, ``LOG2_LATENCY`` edges
  after the input; ``log2`` never decreases from ``z`` to ``z + 1``.
- ``PostPass`` (the shortest ``max_length``): ``result.valid``, ``i.ready`` and
  ``stats_busy`` follow the documented timing exactly, the result is held until taken and
  ``stats_ref``/``stats_recip`` change only when a ``STATS`` result is published.
"""

from __future__ import annotations

import inspect
import sys

import pytest
from amaranth.asserts import AnySeq  # amaranth.hdl does not export it in 0.5
from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, Mux, ResetSignal, Signal
from harness.formal import check

from ahasd.hw.aau import Mode, PostPass
from ahasd.hw.aau_units import (
    EXP_LATENCY,
    LOG2_FRAC,
    LOG2_LATENCY,
    Exp2Unit,
    LeadingOne,
    LogUnit,
    RestoringDivider,
)
from ahasd.params import AAUParams

pytestmark = pytest.mark.formal


def mutant(cls, old: str, new: str):
    """``cls`` rebuilt from its module's source with the one occurrence of ``old`` replaced
    by ``new``: a planted bug in the real RTL (the other classes of the module come along,
    so a unit that instantiates another gets the mutated one)."""
    module = sys.modules[cls.__module__]
    source = inspect.getsource(module)
    assert source.count(old) == 1, f"mutation target must occur once in {module.__name__}: {old}"
    namespace = {"__name__": f"{module.__name__}_mutant"}
    exec(compile(source.replace(old, new), module.__file__, "exec"), namespace)
    return namespace[cls.__name__]


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
        # one step short
        ("with m.If(count == steps - 1):", "with m.If(count == steps - 2):"),
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


def test_leading_one_position():
    check(LeadingOneProperties(), name="aau_leading_one", mode="prove", depth=1)


def test_leading_one_proof_fails_on_planted_bug():
    lowest_wins = mutant(
        LeadingOne, "for bit in range(self.width):", "for bit in reversed(range(self.width)):"
    )
    fails(LeadingOneProperties(lowest_wins), name="aau_leading_one_mutant", mode="prove", depth=1)


# ---- Exp2Unit --------------------------------------------------------------------------

EXP_TABLE_BITS = 3
TOO_STEEP = (
    "interpolation = (step2 * rest2).shift_right(r_bits)[:MANTISSA_BITS]",
    "interpolation = (step2 * rest2).shift_right(r_bits - 1)[:MANTISSA_BITS]",
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


class ExpPipeline(Elaboratable):
    """Valid and tag come out exactly EXP_LATENCY advancing edges later; a stall holds o."""

    def __init__(self, exp_class=Exp2Unit):
        self.exp_class = exp_class

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.exp_class(table_bits=EXP_TABLE_BITS, tag_shape=4)
        m.d.comb += Assume(~ResetSignal())
        m.d.comb += [
            dut.i.valid.eq(AnySeq(1)),
            dut.i.payload.as_value().eq(AnySeq(len(dut.i.payload.as_value()))),
            dut.o.ready.eq(AnySeq(1)),
        ]
        m.d.comb += Assert(dut.i.ready == dut.o.ready)
        advance = dut.o.ready
        valid = delayed(m, dut.i.valid, EXP_LATENCY, name="valid", enable=advance)
        tag = delayed(m, dut.i.payload.tag, EXP_LATENCY, name="tag", enable=advance)
        m.d.comb += Assert(dut.o.valid == valid)
        with m.If(dut.o.valid):
            m.d.comb += Assert(dut.o.payload.tag == tag)
        held = delayed(m, dut.o.valid & ~dut.o.ready, 1, name="held")
        output = dut.o.payload.as_value()
        output_before = delayed(m, output, 1, name="o")
        with m.If(held):
            m.d.comb += [Assert(dut.o.valid), Assert(output == output_before)]
        return m


def test_exp_mantissa_and_exponent_in_range():
    # the pipeline is a pure function of the code of EXP_LATENCY edges before: a bounded
    # check from reset over a free code covers every code
    check(ExpRange(), name="aau_exp_range", mode="bmc", depth=EXP_LATENCY + 1)


# A stall may last forever, so induction cannot flush the shadow line: bounded, from reset,
# deep enough for every stall pattern around two elements in flight.
EXP_PIPELINE_DEPTH = 10


def test_exp_latency_and_stall():
    check(ExpPipeline(), name="aau_exp_pipeline", mode="bmc", depth=EXP_PIPELINE_DEPTH)


def test_exp_proofs_fail_on_planted_bugs():
    fails(
        ExpRange(mutant(Exp2Unit, *TOO_STEEP)),
        name="aau_exp_range_mutant",
        mode="bmc",
        depth=EXP_LATENCY + 1,
    )
    # the tag skips a stage
    skipping = mutant(Exp2Unit, "tag3.eq(tag2),", "tag3.eq(tag1),")
    fails(
        ExpPipeline(skipping),
        name="aau_exp_pipeline_mutant",
        mode="bmc",
        depth=EXP_PIPELINE_DEPTH,
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
    lowest_wins = mutant(
        LogUnit, "for bit in range(self.width):", "for bit in reversed(range(self.width)):"
    )
    fails(
        LogLeadingOne(lowest_wins),
        name="aau_log_leading_one_mutant",
        mode="prove",
        depth=LOG2_LATENCY + 1,
    )
    too_steep = mutant(
        LogUnit,
        "fraction = (base2 + (step2 * rest2).shift_right(r_bits))[:LOG2_FRAC]",
        "fraction = (base2 + (step2 * rest2).shift_right(r_bits - 1))[:LOG2_FRAC]",
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
    """The phases (idle, dividing, offering) are exclusive and ``i.ready`` means idle; a
    SUM/MAX vector is offered at the next edge with its fields, a STATS vector goes to the
    dividers; the result is held until taken; ``stats_ref``/``stats_recip`` change only
    where a STATS vector leaves the dividers for ``result``."""

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
        # the mutants bring their own Mode class: compare the code (STATS = 0)
        stats = dut.i.payload.mode.as_value() == Mode.STATS.value
        result = dut.result.payload
        published = Cat(dut.stats_ref, dut.stats_recip)

        busy_before = delayed(m, dut.stats_busy, 1, name="busy")
        held = delayed(m, dut.result.valid & ~dut.result.ready, 1, name="held")
        result_before = delayed(m, result.as_value(), 1, name="result")
        published_before = delayed(m, published, 1, name="published")
        took_stats = delayed(m, taken & stats, 1, name="took_stats")
        took_other = delayed(m, taken & ~stats, 1, name="took_other")
        vector_before = delayed(m, dut.i.payload, 1, name="vector")

        m.d.comb += [
            Assert(~(dut.stats_busy & dut.result.valid)),
            Assert(dut.i.ready == ~(dut.stats_busy | dut.result.valid)),
        ]
        with m.If(held):
            m.d.comb += [Assert(dut.result.valid), Assert(result.as_value() == result_before)]
        with m.If(busy_before & ~dut.stats_busy):
            m.d.comb += Assert(dut.result.valid)
        with m.If(~(busy_before & ~dut.stats_busy)):
            m.d.comb += Assert(published == published_before)
        with m.If(took_stats):
            m.d.comb += Assert(dut.stats_busy)
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
            ]
        return m


def test_post_pass_handshake():
    check(PostPassHandshake(), name="aau_post_pass", mode="prove", depth=POST_DEPTH)


def test_post_pass_proof_fails_on_planted_bug():
    # a STATS vector offered while still dividing
    early = mutant(PostPass, "offering.eq(~stats),", "offering.eq(1),")
    fails(PostPassHandshake(early), name="aau_post_pass_mutant", mode="prove", depth=POST_DEPTH)
