"""AAU sub-components, Amaranth-simulator tier: each unit against a plain Python reference.

The references below are written from ``docs/aau.md`` (sections 2, 4.1, 5.1 to 5.4, 9.2,
10), not from the RTL: the tables from the doc's float64 formulas, the front end and the
post pass as the doc's integer formulas, the divider as Python's ``divmod``, the square root
as ``math.isqrt``, the multiplier as ``*``. Directed edge cases plus seeded random ones; the
stream units run with random gaps on the input and random stalls on the output.
"""

from __future__ import annotations

import itertools
import math
import random
from functools import cache

import pytest
from amaranth.hdl import Elaboratable, Module, signed
from amaranth.lib import data
from amaranth.sim import Simulator
from harness.amaranth_sim import simulate
from harness.seeds import choose_seed

from ahasd.hw.aau_back_end import BackEnd
from ahasd.hw.aau_layouts import Mode, accumulators_layout
from ahasd.hw.aau_log import LN_LATENCY, LOG2_LATENCY, LeadingOne, LogUnit
from ahasd.hw.aau_post_pass import DIVIDER_CYCLES, PostPass, norm_post_pass_cycles
from ahasd.hw.aau_tables import gelu_table, silu_table
from ahasd.hw.aau_units import EXP_LATENCY, GATE_LATENCY, Exp2Unit, GateUnit
from ahasd.hw.serial_arith import RestoringDivider, RestoringSquareRoot, ShiftAddMultiplier
from ahasd.params import AAUParams

# docs/aau.md section 2.
DOC_LOG2E_CODE = 24204406
DOC_LN2_CODE = 11629080


@cache
def doc_exp_table(bits):
    """``E[j] = round(2**(16 + j / 2**B))``; float64 is exact enough for ``B <= 12`` (doc 2)."""
    return [math.floor(2.0 ** (16 + j / 2**bits) + 0.5) for j in range(2**bits + 1)]


@cache
def doc_log_table(bits):
    """``L[j] = round(2**20 * log2(1 + j / 2**C))`` (doc 2)."""
    return [math.floor(2**20 * math.log2(1 + j / 2**bits) + 0.5) for j in range(2**bits + 1)]


def doc_shift(value, amount):
    """``shift(a, c)`` of doc section 1: left for ``c >= 0``, floor right otherwise."""
    return value << amount if amount >= 0 else value >> -amount


def doc_exp(code, bits):
    """Doc 4.1 steps 1 to 3: ``(n, M)`` for a Q8.8 code."""
    t = (code * DOC_LOG2E_CODE) >> 16
    n, f = t >> 16, t & 0xFFFF
    table = doc_exp_table(bits)
    low = 16 - bits
    j, r = f >> low, f & ((1 << low) - 1)
    return n, table[j] + (((table[j + 1] - table[j]) * r) >> low)


def doc_log(z, exponent, bits, frac=32):
    """Doc 5.1 with the binary point of ``z`` at ``frac``: ``(log2_s, ln_s)``."""
    lead = z.bit_length() - 1
    mant = doc_shift(z, 20 - lead) - (1 << 20)
    table = doc_log_table(bits)
    low = 20 - bits
    j, r = mant >> low, mant & ((1 << low) - 1)
    fraction = table[j] + (((table[j + 1] - table[j]) * r) >> low)
    log2_s = ((exponent + lead - frac) << 20) + fraction
    return log2_s, (log2_s * DOC_LN2_CODE) >> 20


def doc_post_pass(z, w, ref, m_max, ln_bits):
    """Doc 5.1 to 5.4: ``recip``, ``top1``, ``entropy`` from the accumulators."""
    _, ln_s = doc_log(z, ref, ln_bits)
    q = (abs(w) << 28) // z
    mean_x = q if w >= 0 else -q
    entropy = min(65535, max(0, (ln_s - mean_x + 2048) >> 12))
    recip = 2**56 // z
    top1 = min(65535, (m_max * recip + 2**23) >> 24)
    return {"recip": recip, "top1": top1, "entropy": entropy}


def check_rejection(build, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        build()


# ---- RestoringDivider -------------------------------------------------------------------

DIVIDER_WIDTHS = {"dividend_bits": 8, "divisor_bits": 4, "quotient_bits": 5}


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        (name, value, error, message.format(name=name, value=value))
        for name in DIVIDER_WIDTHS
        for value, error, message in [
            ("8", TypeError, "{name} must be an integer, not '{value}'"),
            (True, TypeError, "{name} must be an integer, not {value}"),
            (0, ValueError, "{name} must be between 1 and 256, not {value}"),
            (257, ValueError, "{name} must be between 1 and 256, not {value}"),
        ]
    ],
)
def test_divider_rejects(name, value, error, message):
    check_rejection(lambda: RestoringDivider(**{**DIVIDER_WIDTHS, name: value}), error, message)


def run_divider(dut, cases, *, gap_seed=None):
    """Divide each ``(dividend, divisor)``; returns ``(quotient, remainder, busy_cycles)``.

    The divisor changes in the start cycle (as in the AAU, whose divisor register loads at
    the same edge) and is held while ``busy``; with ``gap_seed``, idle cycles come between
    divisions and the divisor is scrambled outside them.
    """
    rng = random.Random(gap_seed)
    found = []

    async def testbench(ctx):
        for dividend, divisor in cases:
            for _ in range(rng.randrange(3) if gap_seed is not None else 0):
                ctx.set(dut.divisor, rng.randrange(1 << dut.divisor_bits))
                await ctx.tick()
            ctx.set(dut.start, 1)
            ctx.set(dut.dividend, dividend)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.dividend, rng.randrange(1 << dut.dividend_bits))  # read only at start
            ctx.set(dut.divisor, divisor)
            busy = 0
            while ctx.get(dut.busy):
                busy += 1
                await ctx.tick()
                assert busy <= dut.quotient_bits
            found.append((ctx.get(dut.quotient), ctx.get(dut.remainder), busy))

    simulate(dut, testbench)
    return found


def random_division(rng, dividend_bits, divisor_bits, quotient_bits):
    """A random case inside the precondition ``dividend < divisor * 2**quotient_bits``."""
    divisor = rng.randrange(1, 1 << divisor_bits)
    bound = min(1 << dividend_bits, divisor << quotient_bits)
    # log-uniform magnitudes, so small and large quotients both occur
    dividend = min(bound - 1, int(2 ** rng.uniform(0, math.log2(bound))))
    return dividend, divisor


@pytest.mark.seeded
@pytest.mark.parametrize(
    "widths",
    [
        (8, 4, 5),  # small
        (81, 49, 32),  # the AAU's (|W| << 28) // Z
        (57, 49, 25),  # the AAU's 2**56 // Z
        (3, 6, 8),  # a dividend narrower than the quotient
        (4, 3, 1),  # one quotient bit
    ],
)
def test_divider_against_divmod(widths):
    dividend_bits, divisor_bits, quotient_bits = widths
    rng = random.Random(choose_seed(sum(widths)))
    top = (1 << divisor_bits) - 1
    fits = min((1 << dividend_bits) - 1, (top << quotient_bits) - 1)
    cases = [
        (0, 1),
        (0, top),
        (fits, top),  # the largest dividend whose quotient fits
        ((1 << quotient_bits) - 1, 1) if dividend_bits >= quotient_bits else (1, 1),
        (min(fits, top), top),  # quotient 1 (or 0), remainder 0
    ]
    cases += [random_division(rng, *widths) for _ in range(60)]
    dut = RestoringDivider(
        dividend_bits=dividend_bits, divisor_bits=divisor_bits, quotient_bits=quotient_bits
    )
    found = run_divider(dut, cases, gap_seed=rng.randrange(1 << 30))
    for (dividend, divisor), (quotient, remainder, busy) in zip(cases, found, strict=True):
        assert (quotient, remainder) == divmod(dividend, divisor), (dividend, divisor)
        assert busy == quotient_bits


def test_divider_aau_extremes():
    """The AAU's two divisions at the ends of their ranges (doc 5.2, 5.4, 8): Z from
    ``2**32`` to ``2**49 - 1``, ``|W|`` up to the doc's bound ``8 Z + 18 N``."""
    mean = RestoringDivider(dividend_bits=81, divisor_bits=49, quotient_bits=32)
    recip = RestoringDivider(dividend_bits=57, divisor_bits=49, quotient_bits=25)
    zs = [1 << 32, (1 << 32) + 1, 3 << 40, (1 << 49) - 1]
    mean_cases = [((8 * z + 18 * 65536) << 28, z) for z in zs] + [(1 << 28, z) for z in zs]
    recip_cases = [(1 << 56, z) for z in zs]
    for dut, cases in ((mean, mean_cases), (recip, recip_cases)):
        found = run_divider(dut, cases)
        assert [(q, r) for q, r, _ in found] == [divmod(a, b) for a, b in cases]
    assert run_divider(recip, [(1 << 56, 1 << 32)])[0][0] == 1 << 24  # recip of 1.0


def test_divider_restart_abandons_the_division():
    """``start`` while busy starts over with the new dividend."""
    dut = RestoringDivider(dividend_bits=8, divisor_bits=4, quotient_bits=5)
    results = []

    async def testbench(ctx):
        ctx.set(dut.divisor, 7)
        ctx.set(dut.start, 1)
        ctx.set(dut.dividend, 200)
        await ctx.tick()
        ctx.set(dut.dividend, 0)
        ctx.set(dut.start, 0)
        for _ in range(2):
            await ctx.tick()
        ctx.set(dut.start, 1)
        ctx.set(dut.dividend, 100)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycles = 0
        while ctx.get(dut.busy):
            cycles += 1
            await ctx.tick()
        results.append((ctx.get(dut.quotient), ctx.get(dut.remainder), cycles))

    simulate(dut, testbench)
    assert results == [(14, 2, 5)]


# ---- LeadingOne -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("4", TypeError, "width must be an integer, not '4'"),
        (0, ValueError, "width must be between 1 and 1024, not 0"),
        (1025, ValueError, "width must be between 1 and 1024, not 1025"),
    ],
)
def test_leading_one_rejects(value, error, message):
    check_rejection(lambda: LeadingOne(width=value), error, message)


def leading_one_outputs(dut, values):
    found = []

    async def testbench(ctx):
        for value in values:
            ctx.set(dut.value, value)
            found.append((ctx.get(dut.position), ctx.get(dut.nonzero)))

    sim = Simulator(dut)  # combinational: no clock (the harness always adds one)
    sim.add_testbench(testbench)
    sim.run()
    return found


@pytest.mark.parametrize("width", [1, 2, 5, 10])
def test_leading_one_exhaustive(width):
    values = list(range(1 << width))
    found = leading_one_outputs(LeadingOne(width=width), values)
    assert found == [(max(0, v.bit_length() - 1), int(v != 0)) for v in values]


@pytest.mark.seeded
def test_leading_one_wide():
    rng = random.Random(choose_seed(17))
    values = [0, 1, (1 << 49) - 1, 1 << 48] + [
        rng.randrange(1 << rng.randrange(50)) for _ in range(300)
    ]
    found = leading_one_outputs(LeadingOne(width=49), values)
    assert found == [(max(0, v.bit_length() - 1), int(v != 0)) for v in values]


# ---- Exp2Unit ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"table_bits": "6"}, TypeError, "table_bits must be an integer, not '6'"),
        ({"table_bits": 0}, ValueError, "table_bits must be between 1 and 12, not 0"),
        ({"table_bits": 13}, ValueError, "table_bits must be between 1 and 12, not 13"),
        ({"table_bits": 6, "tag_shape": "x"}, TypeError, "tag_shape must be a shape, not 'x'"),
    ],
)
def test_exp_rejects(kwargs, error, message):
    check_rejection(lambda: Exp2Unit(**kwargs), error, message)


def run_stream(dut, inputs, *, in_idle=0.0, out_stall=0.0, seed=0, max_cycles=400_000):
    """Stream ``inputs`` (payload dicts) through a stream component with random gaps.

    Returns the output payloads and, per cycle, checks the stream rules the unit promises:
    ``i.ready == o.ready`` and an output that is not taken stays as it is.
    """
    rng = random.Random(seed)
    outputs = []

    async def testbench(ctx):
        position, presenting, held = 0, False, None
        for _ in range(max_cycles):
            if not presenting and position < len(inputs) and rng.random() >= in_idle:
                ctx.set(dut.i.payload, inputs[position])
                presenting = True
            ctx.set(dut.i.valid, presenting)
            ctx.set(dut.o.ready, rng.random() >= out_stall)
            sampled = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload.as_value()
            )
            i_ready, o_valid, o_ready, o_bits = sampled[2:]
            assert i_ready == o_ready
            if held is not None:
                assert (o_valid, o_bits) == held, "o changed while not taken"
            held = (o_valid, o_bits) if o_valid and not o_ready else None
            if presenting and i_ready:
                position += 1
                presenting = False
            if o_valid and o_ready:
                outputs.append(o_bits)
            if len(outputs) == len(inputs):
                return
        raise AssertionError(f"timeout: {position}/{len(inputs)} in, {len(outputs)} out")

    simulate(dut, testbench)
    layout = dut.o.payload.shape()
    return [layout.from_bits(bits) for bits in outputs]


class ExpPair(Elaboratable):
    """The default unit (B = 6) and a reduced one (B = 2) on the same codes."""

    def __init__(self):
        self.default = Exp2Unit(table_bits=6)
        self.reduced = Exp2Unit(table_bits=2)

    def elaborate(self, platform):
        m = Module()
        m.submodules.default = self.default
        m.submodules.reduced = self.reduced
        return m


@pytest.mark.slow
@pytest.mark.long
def test_exp_every_code_monotonic():
    """All 65,536 codes in ascending order, back to back, through B = 6 and B = 2: each
    output equals doc 4.1, and ``(n, M)`` never decreases from one code to the next (doc
    4.3 relies on ``n`` being monotone; the tables make ``M`` monotone within each ``n``)."""
    pair = ExpPair()
    units = {6: pair.default, 2: pair.reduced}
    codes = list(range(-32768, 32768))
    found = {bits: [] for bits in units}

    async def testbench(ctx):
        for unit in units.values():
            ctx.set(unit.o.ready, 1)
            ctx.set(unit.i.valid, 1)
        for cycle in range(len(codes) + EXP_LATENCY - 1):
            if cycle < len(codes):
                for unit in units.values():
                    ctx.set(unit.i.payload.x, codes[cycle])
            await ctx.tick()
            if cycle >= EXP_LATENCY - 1:
                for bits, unit in units.items():
                    found[bits].append((ctx.get(unit.o.payload.n), ctx.get(unit.o.payload.m)))

    simulate(pair, testbench)
    for bits, outputs in found.items():
        assert outputs == [doc_exp(code, bits) for code in codes], bits
        assert all(a <= b for a, b in itertools.pairwise(outputs)), bits
        assert {n for n, _ in outputs} == set(range(-185, 185))


@pytest.mark.seeded
@pytest.mark.parametrize("bits", [1, 2, 3, 6, 12])
def test_exp_other_tables_with_stalls(bits):
    """Random codes and the range ends, with a tag, gaps on the input and output stalls (B = 6
    and 2 too: their every-code run is a long check, sampled by ``make test``)."""
    rng = random.Random(choose_seed(bits))
    codes = [-32768, -32767, -1, 0, 1, 177, 178, 32766, 32767]
    codes += [rng.randrange(-32768, 32768) for _ in range(600)]
    tag = data.StructLayout({"index": 12, "flag": 1})
    dut = Exp2Unit(table_bits=bits, tag_shape=tag)
    inputs = [{"x": c, "tag": {"index": n, "flag": n & 1}} for n, c in enumerate(codes)]
    outputs = run_stream(dut, inputs, in_idle=0.3, out_stall=0.4, seed=rng.randrange(1 << 30))
    for n, (code, out) in enumerate(zip(codes, outputs, strict=True)):
        assert (out.n, out.m) == doc_exp(code, bits), code
        assert (out.tag.index, out.tag.flag) == (n, n & 1)  # in order, tag intact


def test_exp_latency_and_stall():
    """An element is on ``o`` after EXP_LATENCY advancing edges, the one that takes it
    included; a low ``o.ready`` freezes the pipeline for as many cycles as it lasts."""
    dut = Exp2Unit(table_bits=6, tag_shape=signed(8))
    seen = []

    async def testbench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.payload, {"x": 256, "tag": -5})
        ctx.set(dut.i.valid, 1)
        await ctx.tick()  # advancing edge 1 takes the element
        ctx.set(dut.i.valid, 0)
        for _ in range(EXP_LATENCY - 2):
            assert not ctx.get(dut.o.valid)
            await ctx.tick()
        ctx.set(dut.o.ready, 0)  # stall with the element one stage before o
        for _ in range(4):
            assert not ctx.get(dut.o.valid)
            await ctx.tick()
        assert not ctx.get(dut.o.valid)
        ctx.set(dut.o.ready, 1)
        await ctx.tick()  # advancing edge EXP_LATENCY
        seen.append((ctx.get(dut.o.valid), ctx.get(dut.o.payload.m), ctx.get(dut.o.payload.tag)))

    simulate(dut, testbench)
    # x = 1.0: t = floor(log2(e) * 2**16) = 94548, n = 1, M = 2**frac(t) * 2**16 ~ e / 2
    assert seen == [(1, doc_exp(256, 6)[1], -5)]
    assert abs(seen[0][1] / 65536 * 2 - math.e) < 1e-4


# ---- LogUnit ---------------------------------------------------------------------------


LOG_WIDTHS = {"z_bits": 12, "z_frac_bits": 4, "exponent_bits": 4, "table_bits": 2}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"z_bits": 0}, ValueError, "z_bits must be between 1 and 256, not 0"),
        ({"z_bits": 1.5}, TypeError, "z_bits must be an integer, not 1.5"),
        ({"z_frac_bits": 12}, ValueError, "z_frac_bits must be between 0 and 11, not 12"),
        ({"z_frac_bits": -1}, ValueError, "z_frac_bits must be between 0 and 11, not -1"),
        ({"exponent_bits": 0}, ValueError, "exponent_bits must be between 1 and 32, not 0"),
        ({"exponent_bits": 33}, ValueError, "exponent_bits must be between 1 and 32, not 33"),
        ({"table_bits": 13}, ValueError, "table_bits must be between 1 and 12, not 13"),
        ({"table_bits": None}, TypeError, "table_bits must be an integer, not None"),
    ],
)
def test_log_rejects(kwargs, error, message):
    check_rejection(lambda: LogUnit(**{**LOG_WIDTHS, **kwargs}), error, message)


def run_log(dut, cases):
    """One ``(z, exponent)`` per cycle: the input sampled at edge ``a`` is on ``log2`` after
    edge ``a + LOG2_LATENCY - 1`` and on ``ln`` after edge ``a + LN_LATENCY - 1``."""
    log2s, lns = [], []

    async def testbench(ctx):
        for cycle in range(len(cases) + LN_LATENCY - 1):
            if cycle < len(cases):
                z, exponent = cases[cycle]
                ctx.set(dut.z, z)
                ctx.set(dut.exponent, exponent)
            await ctx.tick()
            # after edge `cycle`: log2 of the input of cycle - LOG2_LATENCY + 1
            if LOG2_LATENCY - 1 <= cycle < len(cases) + LOG2_LATENCY - 1:
                log2s.append(ctx.get(dut.log2))
            if cycle >= LN_LATENCY - 1:
                lns.append(ctx.get(dut.ln))

    simulate(dut, testbench)
    return log2s, lns


@pytest.mark.seeded
@pytest.mark.parametrize(
    "widths",
    [
        (49, 32, 9, 6),  # the AAU's: Z (UQ17.32) and R
        (49, 32, 9, 8),
        (12, 4, 4, 2),  # a binary point below 20: the mantissa shifts left
        (30, 25, 3, 12),
    ],
)
def test_log_against_doc(widths):
    z_bits, frac, exponent_bits, table_bits = widths
    rng = random.Random(choose_seed(sum(widths)))
    low, high = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    cases = [
        (1 << frac, 0),  # S = 1: log2 = ln = 0
        (1 << frac, high),
        ((1 << z_bits) - 1, low),
        ((1 << z_bits) - 1, high),
        ((1 << frac) + 1, -1),
        (1 << (z_bits - 1), 0),
    ]
    cases += [
        (rng.randrange(1 << frac, 1 << rng.randrange(frac + 1, z_bits + 1)), rng.randint(low, high))
        for _ in range(300)
    ]
    dut = LogUnit(
        z_bits=z_bits, z_frac_bits=frac, exponent_bits=exponent_bits, table_bits=table_bits
    )
    log2s, lns = run_log(dut, cases)
    expected = [doc_log(z, e, table_bits, frac) for z, e in cases]
    assert log2s == [log2 for log2, _ in expected]
    assert lns == [ln for _, ln in expected]
    assert (log2s[0], lns[0]) == (0, 0)


def test_log_exact_points():
    """Hand values: S = 4 is log2 2.0, ln 2 * ln 2 (doc 5.1: L[0] = 0, mant = 0)."""
    dut = LogUnit(z_bits=49, z_frac_bits=32, exponent_bits=9, table_bits=6)
    log2s, lns = run_log(dut, [(1 << 34, 0), (1 << 32, 2), (1 << 32, -3)])
    assert log2s == [2 << 20, 2 << 20, -3 << 20]
    assert lns == [2 * DOC_LN2_CODE, 2 * DOC_LN2_CODE, -3 * DOC_LN2_CODE]


# ---- PostPass ----------------------------------------------------------------------------


def test_post_pass_rejects():
    check_rejection(lambda: PostPass(None), TypeError, "params must be an AAUParams, not None")


def test_log_settles_before_the_dividers():
    """The post pass reads ln S in its combining cycle without waiting for it."""
    assert LN_LATENCY < DIVIDER_CYCLES


def random_accumulators(rng, params):
    """Accumulator states the stream can produce (doc 8): ``2**32 <= Z < N 2**33``, ``|W| <=
    8 Z + 18 N`` inside the W width, any R, ``M_max`` in ``[65536, 131071]``."""
    length = params.max_length
    z_top = min((1 << 49) - 1, length << 33)
    z = int(2 ** rng.uniform(32, math.log2(z_top)))
    w_bound = min(8 * z + 18 * length, (1 << (36 + (length - 1).bit_length())) - 1)
    return {
        "mode": rng.choice([Mode.STATS, Mode.STATS, Mode.SUM, Mode.MAX]),
        "max": rng.randrange(-32768, 32768),
        "argmax": rng.randrange(length),
        "sum": rng.randrange(-(length << 15), length << 15),
        "z": z,
        "w": rng.choice([1, -1]) * int(rng.uniform(0, 1) ** 4 * w_bound),
        "ref": rng.randrange(-185, 185),
        "m_max": rng.randrange(65536, 131072),
    }


def run_post_pass(dut, vectors, *, in_idle=0.0, out_stall=0.0, seed=0):
    """Hand ``vectors`` to the post pass; collect every result with the cycle it was taken,
    the cycle each vector was taken, ``(stats_ref, stats_recip)`` and ``(norm_scale,
    norm_offset, norm_shift)`` at each result."""
    rng = random.Random(seed)
    taken, results = [], []
    result_names = [name for name, _ in dut.result.payload.shape()]

    async def testbench(ctx):
        position, presenting = 0, False
        for cycle in range(200 * len(vectors) + 100):
            if not presenting and position < len(vectors) and rng.random() >= in_idle:
                ctx.set(dut.i.payload, vectors[position])
                presenting = True
            ctx.set(dut.i.valid, presenting)
            ctx.set(dut.result.ready, rng.random() >= out_stall)
            sampled = await ctx.tick().sample(
                dut.i.ready, dut.result.valid, dut.result.ready, dut.result.payload
            )
            i_ready, r_valid, r_ready, payload = sampled[2:]
            if presenting and i_ready:
                taken.append(cycle)
                position += 1
                presenting = False
            if r_valid and r_ready:
                fields = {name: getattr(payload, name) for name in result_names}
                fields = {k: Mode(v) if k == "mode" else int(v) for k, v in fields.items()}
                published = (ctx.get(dut.stats_ref), ctx.get(dut.stats_recip))
                norm = (ctx.get(dut.norm_scale), ctx.get(dut.norm_offset), ctx.get(dut.norm_shift))
                results.append((cycle, fields, published, norm))
            if len(results) == len(vectors):
                return
        raise AssertionError(f"timeout: {position} in, {len(results)} results")

    simulate(dut, testbench)
    return taken, results


@pytest.mark.seeded
@pytest.mark.parametrize(
    "params", [AAUParams(), AAUParams(max_length=1000, ln_table_bits=8)], ids=str
)
def test_post_pass_against_doc(params):
    rng = random.Random(choose_seed(params.max_length))
    vectors = [
        # length 1 at X = 0: Z = 2**32, W = 0, R = 0: recip = 2**24, top1 saturates
        {"mode": Mode.STATS, "max": 0, "argmax": 0, "sum": 0, "z": 1 << 32, "w": 0,
         "ref": 0, "m_max": 65536},
        # four zeros (doc 15's hand case): Z = 2**34, entropy = ln 4
        {"mode": Mode.STATS, "max": 0, "argmax": 0, "sum": 0, "z": 1 << 34, "w": 0,
         "ref": 0, "m_max": 65536},
    ]  # fmt: skip
    vectors += [random_accumulators(rng, params) for _ in range(40)]
    dut = PostPass(params)
    _, results = run_post_pass(
        dut, vectors, in_idle=0.3, out_stall=0.3, seed=rng.randrange(1 << 30)
    )
    published = (0, 0)
    for vector, (_, result, stats, _) in zip(vectors, results, strict=True):
        expected = {
            "mode": vector["mode"],
            "max": vector["max"],
            "argmax": vector["argmax"],
            "sum": vector["sum"],
            "z": vector["z"],
            "z_exp": vector["ref"],
            "w": vector["w"],
            "recip": 0,
            "top1": 0,
            "entropy": 0,
            "sum_sq": 0,
            "rstd": 0,
            "rstd_shift": 0,
        }
        if vector["mode"] == Mode.STATS:
            expected.update(
                doc_post_pass(vector["z"], vector["w"], vector["ref"], vector["m_max"],
                              params.ln_table_bits)
            )  # fmt: skip
            published = (vector["ref"], expected["recip"])
        assert result == expected
        assert stats == published  # R and recip of the last STATS vector, from its result on
    assert (results[0][1]["recip"], results[0][1]["top1"]) == (1 << 24, 65535)
    assert (results[1][1]["top1"], results[1][1]["entropy"]) == (16384, 5678)


def test_post_pass_latency():
    """STATS: result valid DIVIDER_CYCLES + 1 edges after the vector is taken; SUM/MAX: at
    the next edge; one STATS vector per DIVIDER_CYCLES + 3 cycles back to back."""
    params = AAUParams()
    base = {"max": 1, "argmax": 0, "sum": 1, "z": 1 << 33, "w": 5, "ref": 3, "m_max": 70000}
    modes = [Mode.STATS, Mode.SUM, Mode.STATS, Mode.STATS, Mode.MAX, Mode.SUM]
    vectors = [{**base, "mode": mode} for mode in modes]
    taken, results = run_post_pass(PostPass(params), vectors)
    # the result is taken at the edge after the one that raises result.valid
    waits = [done - start for start, (done, *_) in zip(taken, results, strict=True)]
    assert waits == [DIVIDER_CYCLES + 2 if mode == Mode.STATS else 1 for mode in modes]
    assert taken[3] - taken[2] == DIVIDER_CYCLES + 3


def test_post_pass_busy_and_ready():
    """``stats_busy`` exactly while a STATS vector divides; ``i.ready`` only when idle."""
    layout = accumulators_layout(AAUParams())
    dut = PostPass(AAUParams())
    trace = []

    async def testbench(ctx):
        ctx.set(dut.result.ready, 0)
        ctx.set(dut.i.payload, layout.const({"mode": Mode.STATS, "z": 1 << 32, "m_max": 65536}))
        ctx.set(dut.i.valid, 1)
        for _ in range(DIVIDER_CYCLES + 6):
            trace.append((ctx.get(dut.i.ready), ctx.get(dut.stats_busy), ctx.get(dut.result.valid)))
            await ctx.tick()
            ctx.set(dut.i.valid, 0)

    simulate(dut, testbench)
    assert trace[0] == (1, 0, 0)
    assert trace[1 : DIVIDER_CYCLES + 2] == [(0, 1, 0)] * (DIVIDER_CYCLES + 1)
    assert trace[DIVIDER_CYCLES + 2 :] == [(0, 0, 1)] * 4  # held until taken


# ---- RestoringSquareRoot -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("8", TypeError, "radicand_bits must be an integer, not '8'"),
        (0, ValueError, "radicand_bits must be between 1 and 256, not 0"),
        (257, ValueError, "radicand_bits must be between 1 and 256, not 257"),
    ],
)
def test_root_rejects(value, error, message):
    check_rejection(lambda: RestoringSquareRoot(radicand_bits=value), error, message)


def run_sequential(dut, cases, load, read, *, gap_seed=None):
    """Start ``dut`` once per case (``load(ctx, case)`` in the start cycle), wait while
    ``busy``, then ``read(ctx)``; returns ``(read(ctx), busy_cycles)`` per case. With
    ``gap_seed``, idle cycles come between the cases."""
    rng = random.Random(gap_seed)
    found = []

    async def testbench(ctx):
        for case in cases:
            for _ in range(rng.randrange(3) if gap_seed is not None else 0):
                await ctx.tick()
            ctx.set(dut.start, 1)
            load(ctx, case)
            await ctx.tick()
            ctx.set(dut.start, 0)
            busy = 0
            while ctx.get(dut.busy):
                busy += 1
                await ctx.tick()
            found.append((read(ctx), busy))

    simulate(dut, testbench)
    return found


def run_root(dut, radicands, *, gap_seed=None):
    def load(ctx, radicand):
        ctx.set(dut.radicand, radicand)

    return run_sequential(
        dut, radicands, load, lambda ctx: (ctx.get(dut.root), ctx.get(dut.remainder)),
        gap_seed=gap_seed,
    )  # fmt: skip


@pytest.mark.parametrize("bits", [1, 2, 3, 8, 9])
def test_root_exhaustive(bits):
    dut = RestoringSquareRoot(radicand_bits=bits)
    values = list(range(1 << bits))
    for value, ((root, remainder), busy) in zip(values, run_root(dut, values), strict=True):
        assert (root, remainder) == (math.isqrt(value), value - math.isqrt(value) ** 2), value
        assert busy == (bits + 1) // 2


@pytest.mark.seeded
def test_root_at_the_norm_width():
    """The NORM post pass's V in [2**46, 2**48) (docs/aau.md 9.2) and the ends of 48 bits."""
    rng = random.Random(choose_seed(48))
    values = [0, 1, 2**46, 2**46 + 1, 2**48 - 1, (2**24 - 1) ** 2, (2**24 - 1) ** 2 - 1]
    values += [rng.randrange(2**46, 2**48) for _ in range(60)] + [rng.randrange(2**48)]
    dut = RestoringSquareRoot(radicand_bits=48)
    found = run_root(dut, values, gap_seed=rng.randrange(1 << 30))
    for value, ((root, remainder), busy) in zip(values, found, strict=True):
        assert (root, remainder) == (math.isqrt(value), value - math.isqrt(value) ** 2), value
        assert busy == 24
    assert found[2][0][0] == 2**23  # sqrt(2**46)


# ---- ShiftAddMultiplier --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("multiplicand_bits", 0, ValueError, "multiplicand_bits must be between 1 and 256, not 0"),
        ("multiplier_bits", 257, ValueError, "multiplier_bits must be between 1 and 256, not 257"),
        ("multiplier_bits", 2.0, TypeError, "multiplier_bits must be an integer, not 2.0"),
    ],
)
def test_multiplier_rejects(name, value, error, message):
    widths = {"multiplicand_bits": 4, "multiplier_bits": 3, name: value}
    check_rejection(lambda: ShiftAddMultiplier(**widths), error, message)


def run_multiplier(dut, cases, *, gap_seed=None):
    """``(multiplicand, multiplier)`` per case; the multiplicand is held while busy and
    scrambled outside (it is read only then)."""
    rng = random.Random(gap_seed)

    def load(ctx, case):
        multiplicand, multiplier = case
        ctx.set(dut.multiplier, multiplier)
        ctx.set(dut.multiplicand, multiplicand)

    found = run_sequential(
        dut, cases, load, lambda ctx: ctx.get(dut.product),
        gap_seed=rng.randrange(1 << 30) if gap_seed is not None else None,
    )  # fmt: skip
    return found


def test_multiplier_exhaustive():
    dut = ShiftAddMultiplier(multiplicand_bits=4, multiplier_bits=3)
    cases = [(a, b) for a in range(16) for b in range(8)]
    for (a, b), (product, busy) in zip(cases, run_multiplier(dut, cases), strict=True):
        assert (product, busy) == (a * b, 3)


@pytest.mark.seeded
@pytest.mark.parametrize(
    "widths", [(63, 25), (32, 32), (1, 5), (9, 1)], ids=["n_s2", "t_t", "narrow", "one_bit"]
)
def test_multiplier_at_the_norm_widths(widths):
    """The NORM post pass's N * S2 and N * r (63 x 25), T * T and |T| * r (32 x 32)."""
    multiplicand_bits, multiplier_bits = widths
    rng = random.Random(choose_seed(sum(widths)))
    top_a, top_b = (1 << multiplicand_bits) - 1, (1 << multiplier_bits) - 1
    cases = [(0, 0), (top_a, top_b), (top_a, 1), (1, top_b), (top_a, 0)]
    cases += [(rng.randrange(top_a + 1), rng.randrange(top_b + 1)) for _ in range(60)]
    dut = ShiftAddMultiplier(multiplicand_bits=multiplicand_bits, multiplier_bits=multiplier_bits)
    found = run_multiplier(dut, cases, gap_seed=rng.randrange(1 << 30))
    for (a, b), (product, busy) in zip(cases, found, strict=True):
        assert (product, busy) == (a * b, multiplier_bits), (a, b)


@pytest.mark.seeded
def test_leading_one_at_the_norm_width():
    """U of the NORM post pass: 79 bits (docs/aau.md 9.5)."""
    rng = random.Random(choose_seed(79))
    values = [0, 1, (1 << 79) - 1, 1 << 78, 3] + [1 << bit for bit in range(79)]
    values += [rng.randrange(1 << rng.randrange(1, 80)) for _ in range(300)]
    found = leading_one_outputs(LeadingOne(width=79), values)
    assert found == [(max(0, v.bit_length() - 1), int(v != 0)) for v in values]


# ---- GateUnit -----------------------------------------------------------------------------


@cache
def doc_gate_tables(bits):
    """``HS``, ``HG`` of docs/aau.md section 2 from its float64 formulas (no entry is near
    a rounding tie)."""
    size = 2**bits
    silu = [math.floor(65536 / (1 + math.exp(-16 * j / size)) + 0.5) for j in range(size + 1)]

    def gelu_gate(a):
        return (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))) / 2

    gelu = [math.floor(65536 * gelu_gate(4 * j / size) + 0.5) for j in range(size + 1)]
    return silu, gelu


def doc_gate(code, gelu, bits):
    """docs/aau.md section 10: the gate g of a code (UQ1.16)."""
    table = doc_gate_tables(bits)[gelu]
    span = 10 if gelu else 12
    a = abs(code)
    if a >= 1 << span:
        h = 65536
    else:
        low = span - bits
        j, f = a >> low, a & ((1 << low) - 1)
        h = table[j] + (((table[j + 1] - table[j]) * f) >> low)
    return h if code >= 0 else 65536 - h


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"table_bits": "6"}, TypeError, "table_bits must be an integer, not '6'"),
        ({"table_bits": 0}, ValueError, "table_bits must be between 1 and 10, not 0"),
        ({"table_bits": 11}, ValueError, "table_bits must be between 1 and 10, not 11"),
        ({"table_bits": 6, "tag_shape": "x"}, TypeError, "tag_shape must be a shape, not 'x'"),
    ],
)
def test_gate_rejects(kwargs, error, message):
    check_rejection(lambda: GateUnit(**kwargs), error, message)


def test_gate_rtl_tables_match_the_doc():
    for bits in range(1, 11):
        assert (silu_table(bits), gelu_table(bits)) == doc_gate_tables(bits), bits


@pytest.mark.seeded
@pytest.mark.parametrize("bits", [1, 6, 10])
def test_gate_with_stalls(bits):
    """Random codes of both functions and the span ends, with a tag, gaps and stalls."""
    rng = random.Random(choose_seed(bits + 100))
    codes = [-32768, -32767, -4096, -4095, -1024, -1023, -1, 0, 1, 1023, 1024, 4095, 4096, 32767]
    codes += [rng.randrange(-5000, 5000) for _ in range(500)]
    codes += [rng.randrange(-32768, 32768) for _ in range(100)]
    tag = data.StructLayout({"index": 12})
    dut = GateUnit(table_bits=bits, tag_shape=tag)
    inputs = [{"x": c, "gelu": n % 2, "tag": {"index": n}} for n, c in enumerate(codes)]
    outputs = run_stream(dut, inputs, in_idle=0.3, out_stall=0.4, seed=rng.randrange(1 << 30))
    for n, (code, out) in enumerate(zip(codes, outputs, strict=True)):
        assert out.g == doc_gate(code, n % 2, bits), (code, n % 2)
        assert out.tag.index == n


@pytest.mark.slow
@pytest.mark.long
def test_gate_every_code():
    """All 65,536 codes of both functions (G = 6), back to back: g from docs/aau.md 10, and
    g never decreases in the code."""
    dut = GateUnit(table_bits=6)
    codes = list(range(-32768, 32768))
    found = {0: [], 1: []}

    async def testbench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        for gelu in (0, 1):
            ctx.set(dut.i.payload.gelu, gelu)
            for cycle in range(len(codes) + GATE_LATENCY - 1):
                if cycle < len(codes):
                    ctx.set(dut.i.payload.x, codes[cycle])
                await ctx.tick()
                if cycle >= GATE_LATENCY - 1:
                    found[gelu].append(ctx.get(dut.o.payload.g))

    simulate(dut, testbench)
    for gelu, gates in found.items():
        assert gates == [doc_gate(code, gelu, 6) for code in codes], gelu
        assert all(a <= b for a, b in itertools.pairwise(gates)), gelu


def test_gate_without_a_tag_has_no_tag_field():
    dut = GateUnit(table_bits=4)
    assert [name for name, _ in dut.o.payload.shape()] == ["g"]
    outputs = run_stream(dut, [{"x": c, "gelu": 0} for c in (-100, 0, 100)])
    assert [out.g for out in outputs] == [doc_gate(c, 0, 4) for c in (-100, 0, 100)]


# ---- PostPass: NORM ------------------------------------------------------------------------


def doc_norm_post_pass(count, total, sum_sq, rms):
    """docs/aau.md 9.2: ``(r, k, N r, T r)`` of a first pass."""
    centre = 0 if rms else total
    u = count * sum_sq - (centre * centre << 16)
    k = (u.bit_length() - 1) >> 1
    v = doc_shift(u, 46 - 2 * k)
    r = 2**47 // math.isqrt(v)
    return r, k, count * r, centre * r


def random_norm_vector(rng, params):
    """A first pass's (count, S1, S2) from an actual vector (so that U >= N**2 E holds)."""
    count = rng.choice([1, 2, rng.randrange(1, params.max_length + 1)])
    scale = rng.choice([1, 30, 3000, 32767])
    codes = [max(-32768, min(32767, round(rng.gauss(rng.gauss(0, scale), scale)))) for _ in
             range(min(count, 200))]  # fmt: skip
    codes = (codes * (count // len(codes) + 1))[:count]
    total = sum(codes)
    sum_sq = sum(c * c for c in codes) * 65536 + count * params.norm_eps
    return codes, total, sum_sq


@pytest.mark.seeded
@pytest.mark.parametrize(
    "params", [AAUParams(), AAUParams(max_length=1000, norm_eps=4295)], ids=["default", "small"]
)
def test_post_pass_norm_against_doc(params):
    rng = random.Random(choose_seed(params.max_length + 7))
    vectors, expected = [], []
    extremes = [
        ([-32768] * params.max_length, False),  # the largest |T|, var = 0
        ([-32768] * params.max_length, True),  # the largest S2
        ([0], False),  # U = E
    ]
    for codes, rms in extremes:
        total, sum_sq = sum(codes), len(codes) * (sum(c * c for c in codes[:1]) * 65536)
        sum_sq += len(codes) * params.norm_eps
        expected.append((codes, total, sum_sq, rms))
    for _ in range(40):
        codes, total, sum_sq = random_norm_vector(rng, params)
        expected.append((codes, total, sum_sq, rng.random() < 0.5))
    for codes, total, sum_sq, rms in expected:
        vectors.append(
            {"mode": Mode.RMSNORM if rms else Mode.LAYERNORM, "max": 0, "argmax": 0,
             "sum": total, "count": len(codes), "sum_sq": sum_sq}
        )  # fmt: skip
    # a STATS vector in between: the two sets of held values are independent
    vectors.insert(5, {"mode": Mode.STATS, "z": 1 << 33, "w": 0, "ref": 2, "m_max": 65536})
    expected.insert(5, None)
    _, results = run_post_pass(PostPass(params), vectors, in_idle=0.2, out_stall=0.2, seed=3)
    for case, (_, result, _, norm) in zip(expected, results, strict=True):
        if case is None:
            assert result["mode"] == Mode.STATS
            continue
        codes, total, sum_sq, rms = case
        r, k, scale, offset = doc_norm_post_pass(len(codes), total, sum_sq, rms)
        assert result["mode"] == (Mode.RMSNORM if rms else Mode.LAYERNORM)
        assert (result["sum"], result["sum_sq"]) == (total, sum_sq)
        assert (result["rstd"], result["rstd_shift"]) == (r, k), (len(codes), rms)
        assert result["z"] == result["z_exp"] == result["w"] == 0
        assert result["recip"] == result["top1"] == result["entropy"] == 0
        assert norm == (scale, offset, k)  # published with the result


def test_post_pass_norm_publishes_and_times():
    """``norm_busy`` from the copy to the result, which is valid norm_post_pass_cycles edges
    after the copy; ``norm_scale``, ``norm_offset``, ``norm_shift`` change at that edge only,
    to N r, T r and k (docs/aau.md 9.2)."""
    params = AAUParams()
    layout = accumulators_layout(params)
    codes = [-300, 5, -900, -7, 12]  # T < 0: T r is published negative
    total, sum_sq = sum(codes), sum(c * c for c in codes) * 65536 + len(codes) * params.norm_eps
    r, k, scale, offset = doc_norm_post_pass(len(codes), total, sum_sq, False)
    vector = {"mode": Mode.LAYERNORM, "sum": total, "count": len(codes), "sum_sq": sum_sq}
    dut = PostPass(params)
    trace = []

    async def testbench(ctx):
        ctx.set(dut.result.ready, 0)
        ctx.set(dut.i.payload, layout.const(vector))
        ctx.set(dut.i.valid, 1)
        for _ in range(norm_post_pass_cycles(params) + 4):
            trace.append(
                (ctx.get(dut.i.ready), ctx.get(dut.norm_busy), ctx.get(dut.result.valid),
                 (ctx.get(dut.norm_scale), ctx.get(dut.norm_offset), ctx.get(dut.norm_shift)))
            )  # fmt: skip
            await ctx.tick()
            ctx.set(dut.i.valid, 0)

    simulate(dut, testbench)
    cycles = norm_post_pass_cycles(params)
    assert trace[0] == (1, 0, 0, (0, 0, 0))
    assert trace[1 : cycles + 1] == [(0, 1, 0, (0, 0, 0))] * cycles
    assert trace[cycles + 1 :] == [(0, 0, 1, (scale, offset, k))] * 3
    assert offset < 0
    assert scale == len(codes) * r


# ---- BackEnd -------------------------------------------------------------------------------


def test_back_end_rejects():
    check_rejection(lambda: BackEnd(3), TypeError, "params must be an AAUParams, not 3")
