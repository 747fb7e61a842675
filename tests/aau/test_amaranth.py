"""AAU, Amaranth-simulator tier: directed cases against hand calculations and float64.

Expected values come from hand calculation (where the fixed-point result is exact, e.g. a
vector of equal elements) or from a float64 softmax/entropy/norm/activation computed here,
within the accuracy the doc states (``docs/aau.md`` section 12: probabilities within
``2**-16``, entropy within ``2e-3`` nats, NORM within the bound of 9.4, SILU/GELU within
``2**-8``); never from the RTL or the golden model.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from harness.amaranth_sim import simulate
from harness.seeds import choose_seed

from ahasd.hw.aau import AAU, OUTPUT_LATENCY, REDUCTION_LATENCY, RESULT_LATENCY, norm_result_latency
from ahasd.hw.aau_layouts import Mode, input_layout
from ahasd.hw.aau_tables import exp2_table, log2_table
from ahasd.params import AAUParams
from ahasd.sim.cost import AAU_OPERATOR_CYCLES

# docs/aau.md section 2, "Default tables" (B = C = 6), copied from the doc.
DOC_E = [
    65536, 66250, 66971, 67700, 68438, 69183, 69936, 70698, 71468, 72246, 73032, 73828, 74632,
    75444, 76266, 77096, 77936, 78785, 79642, 80510, 81386, 82273, 83169, 84074, 84990, 85915,
    86851, 87796, 88752, 89719, 90696, 91684, 92682, 93691, 94711, 95743, 96785, 97839, 98905,
    99982, 101070, 102171, 103283, 104408, 105545, 106694, 107856, 109031, 110218, 111418,
    112631, 113858, 115098, 116351, 117618, 118899, 120194, 121502, 122825, 124163, 125515,
    126882, 128263, 129660, 131072,
]  # fmt: skip
DOC_L = [
    0, 23454, 46551, 69300, 91711, 113796, 135563, 157021, 178179, 199045, 219628, 239934,
    259971, 279746, 299266, 318537, 337566, 356359, 374920, 393257, 411375, 429278, 446971,
    464460, 481749, 498843, 515745, 532461, 548995, 565349, 581529, 597537, 613378, 629054,
    644570, 659928, 675132, 690185, 705089, 719848, 734464, 748941, 763280, 777484, 791557,
    805500, 819315, 833005, 846573, 860020, 873348, 886561, 899658, 912644, 925518, 938284,
    950944, 963498, 975949, 988298, 1000547, 1012698, 1024752, 1036711, 1048576,
]  # fmt: skip

PROB_TOL = 2**-15  # codes: 2 LSB of UQ0.16 (measured maximum error: 1 LSB)
ENTROPY_TOL = 2e-3  # nats


ELEMENT_MODES = {Mode.SOFTMAX, Mode.NORM, Mode.RELU, Mode.SILU, Mode.GELU}
SIGNED_OUTPUT = {Mode.NORM, Mode.RELU, Mode.SILU, Mode.GELU}  # Q8.8; SOFTMAX is UQ0.16


def run(dut, vectors, *, params=(), in_idle=0.0, out_stall=0.0, seed=0, max_cycles=100_000):
    """Stream ``vectors`` (a list of ``(mode, codes)``; ``mode`` a :class:`Mode` or a raw
    code) through ``dut``, and ``params`` (``(gamma, beta)`` codes) on its parameter
    stream.

    Returns ``(results, elements, log)``: the ``result`` payloads as dicts, the ``o``
    payloads as ``(data, last)`` (``data`` signed for the Q8.8 modes) and a log of
    ``(cycle, event)`` for latency measurements (``"in"`` for every accepted element,
    ``"param"``, ``"result"``, ``"o"``).
    """
    rng = random.Random(seed)
    layout = input_layout(dut.params)
    items = [
        (int(code), int(n == len(codes) - 1), int(getattr(mode, "value", mode)))
        for mode, codes in vectors
        for n, code in enumerate(codes)
    ]
    output_signed = [
        mode in SIGNED_OUTPUT for mode, codes in vectors if mode in ELEMENT_MODES for _ in codes
    ]
    expected_results = sum(1 for mode, _ in vectors if mode not in ELEMENT_MODES)
    expected_elements = len(output_signed)
    results, elements, log = [], [], []
    result_names = [name for name, _ in dut.result.payload.shape()]

    def packed(code, last, mode):
        fields = ((code & 0xFFFF, "data"), (last, "last"), (mode, "mode"))
        return sum(value << layout[name].offset for value, name in fields)

    async def testbench(ctx):
        position = param_position = 0
        presenting = param_presenting = False
        for cycle in range(max_cycles):
            if not presenting and position < len(items) and rng.random() >= in_idle:
                ctx.set(dut.i.payload.as_value(), packed(*items[position]))
                presenting = True
            waiting = not param_presenting and param_position < len(params)
            if waiting and rng.random() >= in_idle:
                gamma, beta = params[param_position]
                ctx.set(dut.param.payload, {"gamma": gamma, "beta": beta})
                param_presenting = True
            ctx.set(dut.i.valid, presenting)
            ctx.set(dut.param.valid, param_presenting)
            ctx.set(dut.o.ready, rng.random() >= out_stall)
            ctx.set(dut.result.ready, rng.random() >= out_stall)
            sampled = await ctx.tick().sample(
                dut.i.ready,
                dut.param.ready,
                dut.o.valid,
                dut.o.ready,
                dut.o.payload,
                dut.result.valid,
                dut.result.ready,
                dut.result.payload,
            )
            i_ready, param_ready, o_valid, o_ready, o_payload = sampled[2:7]
            r_valid, r_ready, r_payload = sampled[7:]
            if presenting and i_ready:
                log.append((cycle, "in"))
                position += 1
                presenting = False
            if param_presenting and param_ready:
                log.append((cycle, "param"))
                param_position += 1
                param_presenting = False
            if o_valid and o_ready:
                log.append((cycle, "o"))
                data = int(o_payload.data)
                if output_signed[len(elements)] and data >= 1 << 15:
                    data -= 1 << 16
                elements.append((data, int(o_payload.last)))
            if r_valid and r_ready:
                log.append((cycle, "result"))
                results.append({name: _field(r_payload, name) for name in result_names})
            finished = len(results) == expected_results and len(elements) == expected_elements
            if finished and position == len(items) and param_position == len(params):
                return
        raise AssertionError(
            f"timeout: {position}/{len(items)} in, {len(results)}/{expected_results} results, "
            f"{len(elements)}/{expected_elements} elements, {param_position}/{len(params)} "
            "params"
        )

    # No deadline: the testbench bounds itself (max_cycles) and run() ends with it.
    simulate(dut, testbench)
    return results, elements, log


def _field(payload, name):
    if name == "mode":  # a Mode, or the raw code of a reserved one (not a Mode member)
        field = payload.shape()["mode"]
        code = (payload.as_bits() >> field.offset) & ((1 << field.width) - 1)
        return Mode(code) if code in {mode.value for mode in Mode} else code
    return int(getattr(payload, name))


def float_stats(codes):
    """float64 reference: max, argmax (lowest index), top-1 probability, entropy, softmax."""
    x = np.asarray(codes, dtype=np.float64) / 256
    shifted = x - x.max()
    weights = np.exp(shifted)
    z = weights.sum()
    return {
        "max": int(max(codes)),
        "argmax": int(np.argmax(np.asarray(codes))),  # numpy: the first occurrence
        "top1": 1 / z,
        "entropy": math.log(z) - float((weights * shifted).sum()) / z,
        "softmax": weights / z,
        "sum": int(sum(int(c) for c in codes)),
    }


def check_stats(result, codes):
    ref = float_stats(codes)
    assert result["mode"] == Mode.STATS
    assert result["max"] == ref["max"]
    assert result["argmax"] == ref["argmax"]
    assert result["sum"] == ref["sum"]
    assert abs(result["top1"] / 65536 - ref["top1"]) <= PROB_TOL, (result["top1"], ref["top1"])
    assert abs(result["entropy"] / 4096 - ref["entropy"]) <= ENTROPY_TOL, (
        result["entropy"] / 4096,
        ref["entropy"],
    )


def check_softmax(elements, codes):
    ref = float_stats(codes)["softmax"]
    assert [last for _, last in elements] == [0] * (len(codes) - 1) + [1]
    got = np.array([p for p, _ in elements], dtype=np.float64) / 65536
    assert np.max(np.abs(got - ref)) <= PROB_TOL, np.max(np.abs(got - ref))


def test_tables_match_the_doc():
    assert exp2_table(6) == DOC_E
    assert log2_table(6) == DOC_L
    # Spot checks of other sizes against float64 (no entry is near a rounding tie).
    for bits in (1, 3, 8):
        table = exp2_table(bits)
        assert table == [math.floor(2.0 ** (16 + j / 2**bits) + 0.5) for j in range(len(table))]


def test_rejects_wrong_params():
    with pytest.raises(TypeError, match=r"^params must be an AAUParams, not 'x'$"):
        AAU("x")


def test_length_one():
    """Hand calculation: X = 0 gives t = 0, M = 65536, Z = 2**32, W = 0, R = 0, so
    recip = 2**24, top1 = min(65535, 65536) and ln S = 0, entropy = 0; p_0 = 65535."""
    dut = AAU(AAUParams())
    vectors = [(Mode.STATS, [0]), (Mode.SOFTMAX, [0]), (Mode.SUM, [0]), (Mode.MAX, [0])]
    results, elements, _ = run(dut, vectors)
    stats, total, maximum = results
    assert stats == {
        "mode": Mode.STATS,
        "max": 0,
        "argmax": 0,
        "sum": 0,
        "z": 1 << 32,
        "z_exp": 0,
        "w": 0,
        "recip": 1 << 24,
        "top1": 65535,
        "entropy": 0,
        "sum_sq": 0,
        "rstd": 0,
        "rstd_shift": 0,
    }
    assert elements == [(65535, 1)]
    assert (total["mode"], total["sum"]) == (Mode.SUM, 0)
    assert (maximum["mode"], maximum["max"], maximum["argmax"]) == (Mode.MAX, 0, 0)
    # SUM and MAX do not run the dividers.
    assert total["recip"] == total["top1"] == total["entropy"] == 0


def test_length_one_any_value():
    """Length 1: top1 saturates at 65535, entropy is 0 or 1 LSB, p_0 = 65535 (doc 7)."""
    dut = AAU(AAUParams())
    codes = [1000, -32768, 32767, -1]
    vectors = [v for code in codes for v in ((Mode.STATS, [code]), (Mode.SOFTMAX, [code]))]
    results, elements, _ = run(dut, vectors)
    for code, result in zip(codes, results, strict=True):
        assert (result["max"], result["argmax"], result["sum"]) == (code, 0, code)
        assert result["top1"] == 65535
        assert result["entropy"] <= 1
    assert elements == [(65535, 1)] * len(codes)


def test_all_equal_zero_is_exact():
    """Four zeros: Z = 4 * 2**32 = 2**34, recip = 2**22, top1 = 65536 / 4 = 16384;
    lead = 34, mant = 0, log2 S = 2.0, ln S = 2 * LN2_CODE = 23258160 (24 fraction bits),
    W = 0, entropy = (23258160 + 2048) >> 12 = 5678; every p_i = 2**16 * 2**22 / 2**24."""
    dut = AAU(AAUParams())
    results, elements, _ = run(dut, [(Mode.STATS, [0] * 4), (Mode.SOFTMAX, [0] * 4)])
    (stats,) = results
    assert (stats["z"], stats["z_exp"], stats["w"]) == (1 << 34, 0, 0)
    assert (stats["recip"], stats["top1"], stats["entropy"]) == (1 << 22, 16384, 5678)
    assert stats["argmax"] == 0
    assert elements == [(16384, 0), (16384, 0), (16384, 0), (16384, 1)]


@pytest.mark.parametrize("code", [-300, -32768, 32767, 1])
def test_all_equal(code):
    """N equal elements: top1 = round(2**16 / N) (the reciprocal's floor is far below half
    an LSB), argmax = 0 (first of equal maxima), entropy = ln N."""
    length = 5
    dut = AAU(AAUParams())
    results, elements, _ = run(dut, [(Mode.STATS, [code] * length), (Mode.SOFTMAX, [code] * 5)])
    (stats,) = results
    assert stats["argmax"] == 0
    assert stats["top1"] == round(65536 / length)
    assert stats["sum"] == code * length
    assert abs(stats["entropy"] / 4096 - math.log(length)) <= ENTROPY_TOL
    assert [p for p, _ in elements] == [round(65536 / length)] * length


def test_max_first_and_last_and_extremes():
    cases = [
        [2000, 10, -5, 300, 1999],  # max first
        [10, -5, 300, 1999, 2000],  # max last
        [32767, -32768, -32768],  # extremes, max first: the others' terms vanish
        [-32768, -32768, 32767],  # extremes, max last
        [-32768, -32767, -32768],  # everything at the bottom of the range
        [0, 256, 512, -256, 128, 64, -1024, 700],  # a few nats of spread
    ]
    dut = AAU(AAUParams())
    vectors = [v for codes in cases for v in ((Mode.STATS, codes), (Mode.SOFTMAX, codes))]
    results, elements, _ = run(dut, vectors)
    position = 0
    for codes, result in zip(cases, results, strict=True):
        check_stats(result, codes)
        check_softmax(elements[position : position + len(codes)], codes)
        position += len(codes)
    # An element 256 nats below the max contributes nothing (e = 0, w = -1 for X < 0).
    assert results[2]["top1"] == 65535
    assert results[2]["entropy"] <= 1


def test_ties_take_the_lowest_index():
    codes = [5, 7, 7, 3, 7]
    dut = AAU(AAUParams())
    results, _, _ = run(dut, [(Mode.STATS, codes), (Mode.MAX, codes), (Mode.MAX, [-9, -9])])
    assert [(r["max"], r["argmax"]) for r in results] == [(7, 1), (7, 1), (-9, 0)]


@pytest.mark.seeded
def test_sum_and_max():
    rng = random.Random(choose_seed(11))
    vectors = [
        (Mode.SUM, [32767] * 40),
        (Mode.SUM, [-32768] * 40),
        (Mode.MAX, [-32768] * 3 + [-32767] + [-32768]),
    ]
    vectors += [
        (rng.choice([Mode.SUM, Mode.MAX]), [rng.randrange(-32768, 32768) for _ in range(n)])
        for n in (1, 2, 17, 64)
    ]
    dut = AAU(AAUParams())
    results, _, _ = run(dut, vectors)
    for (mode, codes), result in zip(vectors, results, strict=True):
        assert result["mode"] == mode
        assert result["sum"] == sum(codes)
        assert result["max"] == max(codes)
        assert result["argmax"] == codes.index(max(codes))


def test_softmax_before_any_stats_pass():
    """Reset state R = 0, recip = 0 (doc 6): 0 where s_i >= 0, 65535 where n_i > 0
    (x * log2 e >= 1, i.e. X >= 178)."""
    dut = AAU(AAUParams())
    _, elements, _ = run(dut, [(Mode.SOFTMAX, [0, -100, 177, 178, 32767])])
    assert elements == [(0, 0), (0, 0), (0, 0), (65535, 0), (65535, 1)]


def random_vectors(rng, count):
    vectors = []
    for _ in range(count):
        length = rng.choice([1, 2, 3, 8, 30, 45, 100])
        sigma = rng.choice([64, 256, 1536])
        codes = [max(-32768, min(32767, round(rng.gauss(0, sigma)))) for _ in range(length)]
        mode = rng.choice([Mode.STATS, Mode.STATS, Mode.SUM, Mode.MAX])
        vectors.append((mode, codes))
        if mode == Mode.STATS and rng.random() < 0.7:
            vectors.append((Mode.SOFTMAX, codes))
    return vectors


@pytest.mark.seeded
def test_stalls_on_both_sides_change_nothing():
    seed = choose_seed()
    rng = random.Random(seed)
    vectors = random_vectors(rng, 24)
    smooth = run(AAU(AAUParams()), vectors, seed=seed)
    stalled = run(AAU(AAUParams()), vectors, in_idle=0.3, out_stall=0.5, seed=seed + 1)
    assert stalled[0] == smooth[0]
    assert stalled[1] == smooth[1]
    results = iter(smooth[0])
    elements = iter(smooth[1])
    for mode, codes in vectors:
        if mode == Mode.SOFTMAX:
            check_softmax([next(elements) for _ in codes], codes)
        else:
            result = next(results)
            assert (result["mode"], result["sum"], result["max"]) == (mode, sum(codes), max(codes))
            if mode == Mode.STATS:
                check_stats(result, codes)
    # The stalled run really stalled: it took longer.
    assert stalled[2][-1][0] > smooth[2][-1][0]


def test_latency_back_to_back():
    """A STATS vector of N elements: result N - 1 + RESULT_LATENCY cycles after its first
    element; SUM the same with REDUCTION_LATENCY; SOFTMAX elements OUTPUT_LATENCY cycles
    after they are accepted, one per cycle."""
    length = 50
    codes = [((n * 37) % 200) - 100 for n in range(length)]
    dut = AAU(AAUParams())
    vectors = [(Mode.STATS, codes), (Mode.SOFTMAX, codes), (Mode.SOFTMAX, codes), (Mode.SUM, codes)]
    _, _, log = run(dut, vectors)
    inputs = [cycle for cycle, event in log if event == "in"]
    results = [cycle for cycle, event in log if event == "result"]
    outputs = [cycle for cycle, event in log if event == "o"]
    assert inputs[:length] == list(range(inputs[0], inputs[0] + length))
    # result.valid rises RESULT_LATENCY cycles after the last element's input edge and is
    # taken at the next edge.
    assert results[0] - inputs[length - 1] == RESULT_LATENCY + 1
    assert results[1] - inputs[4 * length - 1] == REDUCTION_LATENCY + 1
    # The first SOFTMAX pass waits for the STATS pass's recip, then streams at one per
    # cycle; the second one streams straight through.
    assert outputs[:length] == list(range(outputs[0], outputs[0] + length))
    assert outputs[0] > results[0]
    second = inputs[2 * length : 3 * length]
    assert second == list(range(second[0], second[0] + length))
    assert [o - i for o, i in zip(outputs[length:], second, strict=True)] == [
        OUTPUT_LATENCY + 1
    ] * length


# ---- NORM, RELU, SILU, GELU (docs/aau.md sections 9 to 11) -------------------------------

EPS = 42950 / 2**32  # the default norm_eps
ACTIVATION_TOL = 2**-8  # spec 2.4, absolute


def float_norm(codes, gamma, beta, *, rms=False):
    """float64 LayerNorm (population variance) or RMSNorm of Q8.8 codes, in Q8.8 codes,
    saturated to the output range."""
    x = np.asarray(codes, dtype=np.float64) / 256
    centred = x if rms else x - x.mean()
    scale = 1 / math.sqrt(float(np.mean(centred * centred)) + EPS)
    y = centred * scale * (np.asarray(gamma) / 256) + np.asarray(beta) / 256
    return np.clip(y * 256, -32768, 32767)


def norm_bound(codes, gamma, *, rms=False):
    """Per element, docs/aau.md 9.4's bound in codes: 2**-9 + |gamma| (|z| 2**-22 + 2**-16)."""
    x = np.asarray(codes, dtype=np.float64) / 256
    centred = x if rms else x - x.mean()
    z = centred / math.sqrt(float(np.mean(centred * centred)) + EPS)
    return (2**-9 + np.abs(np.asarray(gamma) / 256) * (np.abs(z) * 2**-22 + 2**-16)) * 256


def float_silu(codes):
    x = np.asarray(codes, dtype=np.float64) / 256
    return x / (1 + np.exp(-x)) * 256


def float_gelu(codes):
    x = np.asarray(codes, dtype=np.float64) / 256
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))) * 256


def test_norm_by_hand():
    """x = [0, 1], gamma 1, beta 0 (docs/aau.md 9.2, worked in test_golden_modes.py's
    hand case): S2 = 2**32 + 2 E, U = 2**32 + 4 E, k = 16, s = isqrt(U << 14) = 8388775,
    r = 2**47 // s = 16776882; y = [-1, 1]. RMSNORM of [1, 1]: y = 1 / sqrt(1 + eps)."""
    dut = AAU(AAUParams())
    vectors = [
        (Mode.LAYERNORM, [0, 256]),
        (Mode.NORM, [0, 256]),
        (Mode.RMSNORM, [256, 256]),
        (Mode.NORM, [256, 256]),
    ]
    results, elements, _ = run(dut, vectors, params=[(256, 0)] * 4)
    layer, rms = results
    assert layer["mode"] == Mode.LAYERNORM
    assert (layer["sum"], layer["sum_sq"]) == (256, 2**32 + 2 * 42950)
    assert (layer["rstd"], layer["rstd_shift"]) == (16776882, 16)
    assert (layer["max"], layer["argmax"]) == (256, 1)
    assert layer["z"] == layer["z_exp"] == layer["w"] == 0  # 0 in the NORM modes
    assert layer["recip"] == layer["top1"] == layer["entropy"] == 0
    assert rms["mode"] == Mode.RMSNORM
    assert (rms["sum"], rms["sum_sq"], rms["rstd_shift"]) == (512, 2 * (2**32 + 42950), 17)
    assert rms["rstd"] == 2**47 // math.isqrt((4 * (2**32 + 42950)) << 12)
    assert elements == [(-256, 0), (256, 1), (256, 0), (256, 1)]


@pytest.mark.seeded
def test_norm_before_any_first_pass_and_of_a_constant_vector_is_beta():
    """Reset N = T = r = k = 0 (docs/aau.md 9.2): c = 0, y = B. A constant vector: c = N X -
    T = 0 for every element, y = B exactly."""
    rng = random.Random(choose_seed(23))
    betas = [rng.randrange(-32768, 32768) for _ in range(12)]
    params = [(rng.randrange(-32768, 32768), beta) for beta in betas]
    vectors = [
        (Mode.NORM, [rng.randrange(-32768, 32768) for _ in range(6)]),
        (Mode.LAYERNORM, [-777] * 6),
        (Mode.NORM, [-777] * 6),
    ]
    _, elements, _ = run(AAU(AAUParams()), vectors, params=params)
    assert [y for y, _ in elements] == betas


@pytest.mark.seeded
def test_relu_is_exact():
    codes = [-32768, -32767, -256, -1, 0, 1, 255, 32766, 32767]
    rng = random.Random(choose_seed(29))
    codes += [rng.randrange(-32768, 32768) for _ in range(100)]
    _, elements, _ = run(AAU(AAUParams()), [(Mode.RELU, codes)])
    assert [y for y, _ in elements] == [max(code, 0) for code in codes]
    assert [last for _, last in elements] == [0] * (len(codes) - 1) + [1]


@pytest.mark.seeded
@pytest.mark.parametrize(
    ("mode", "reference"), [(Mode.SILU, float_silu), (Mode.GELU, float_gelu)], ids=["silu", "gelu"]
)
def test_gated_activations(mode, reference):
    """Within 2**-8 of float64 (spec 2.4); y(X) - y(-X) = X exactly (g(-a) = 1 - g(a),
    docs/aau.md 10); beyond the table's span the gate is exactly 0 or 1."""
    rng = random.Random(choose_seed(31))
    span = 16 * 256 if mode == Mode.SILU else 4 * 256
    codes = [0, 1, -1, span - 1, span, -span, 32767, -32767, -32768]
    codes += [rng.randrange(-span - 300, span + 300) for _ in range(150)]
    codes += [rng.randrange(-32767, 32768) for _ in range(30)]
    mirrored = [-code for code in codes if code != -32768]
    _, elements, _ = run(AAU(AAUParams()), [(mode, codes), (mode, mirrored)])
    got = [y for y, _ in elements[: len(codes)]]
    error = np.abs(np.array(got) - reference(codes)) / 256
    assert error.max() <= ACTIVATION_TOL, error.max()
    pairs = [(code, y) for code, y in zip(codes, got, strict=True) if code != -32768]
    twins = [y for y, _ in elements[len(codes) :]]
    assert [y - twin for (_, y), twin in zip(pairs, twins, strict=True)] == [c for c, _ in pairs]
    for code, y in zip(codes, got, strict=True):
        if abs(code) >= span:
            assert y == max(code, 0), code


@pytest.mark.seeded
@pytest.mark.parametrize("rms", [False, True], ids=["layernorm", "rmsnorm"])
def test_norm_random_vectors(rms):
    """Random vectors (OPT-like: Gaussian with a few large channels; a mean far above the
    spread) against float64 within docs/aau.md 9.4's bound, element by element."""
    rng = random.Random(choose_seed(37))
    first = Mode.RMSNORM if rms else Mode.LAYERNORM
    vectors, params, cases = [], [], []
    for length in (1, 2, 3, 17, 64, 300):
        for kind in ("gauss", "outliers", "offset"):
            if kind == "offset":
                codes = [round(rng.gauss(20, 0.05) * 256) for _ in range(length)]
            else:
                codes = [round(rng.gauss(0, 1) * 256) for _ in range(length)]
            if kind == "outliers":
                codes[rng.randrange(length)] = rng.choice([-60, 60]) * 256
            gamma = [round(rng.gauss(1, 0.3) * 256) for _ in codes]
            beta = [0 if rms else round(rng.gauss(0, 0.1) * 256) for _ in codes]
            vectors += [(first, codes), (Mode.NORM, codes)]
            params += list(zip(gamma, beta, strict=True))
            cases.append((codes, gamma, beta))
    results, elements, _ = run(AAU(AAUParams()), vectors, params=params)
    position = 0
    for (codes, gamma, beta), result in zip(cases, results, strict=True):
        got = np.array([y for y, _ in elements[position : position + len(codes)]])
        position += len(codes)
        expected = float_norm(codes, gamma, beta, rms=rms)
        bound = norm_bound(codes, gamma, rms=rms)
        assert np.all(np.abs(got - expected) <= bound + 1e-6), np.max(np.abs(got - expected))
        assert result["mode"] == first
        assert result["sum"] == sum(codes)
        assert result["sum_sq"] == sum(c * c * 65536 + 42950 for c in codes)


def test_reserved_mode_codes_are_sums():
    """Codes 10 to 15 are reserved and behave as SUM, the result carrying the code."""
    vectors = [(code, [code * 100, -7, 3]) for code in range(10, 16)]
    results, elements, _ = run(AAU(AAUParams()), vectors)
    assert elements == []
    for (code, codes), result in zip(vectors, results, strict=True):
        assert (result["mode"], result["sum"]) == (code, sum(codes))
        assert (result["max"], result["argmax"]) == (max(codes), codes.index(max(codes)))
        assert result["recip"] == result["sum_sq"] == result["rstd"] == 0


def mixed_vectors(rng, count):
    """Every mode interleaved, with the NORM second passes' parameters."""
    vectors, params = [], []
    modes = [Mode.STATS, Mode.SUM, Mode.MAX, Mode.LAYERNORM, Mode.RMSNORM]
    modes += [Mode.RELU, Mode.SILU, Mode.GELU]
    for _ in range(count):
        length = rng.choice([1, 2, 5, 30, 45])
        codes = [max(-32768, min(32767, round(rng.gauss(0, 768)))) for _ in range(length)]
        mode = rng.choice(modes)
        vectors.append((mode, codes))
        if mode == Mode.STATS and rng.random() < 0.7:
            vectors.append((Mode.SOFTMAX, codes))
        if mode in (Mode.LAYERNORM, Mode.RMSNORM) and rng.random() < 0.8:
            vectors.append((Mode.NORM, codes))
            params += [(rng.randrange(-600, 600), rng.randrange(-300, 300)) for _ in codes]
    return vectors, params


@pytest.mark.seeded
def test_every_mode_interleaved_with_stalls_changes_nothing():
    """All modes interleaved, once back to back and once with random gaps on the input, the
    parameter stream and both outputs: the same outputs, in the same order."""
    seed = choose_seed()
    rng = random.Random(seed)
    vectors, params = mixed_vectors(rng, 30)
    smooth = run(AAU(AAUParams()), vectors, params=params, seed=seed)
    stalled = run(
        AAU(AAUParams()), vectors, params=params, in_idle=0.3, out_stall=0.5, seed=seed + 1
    )
    assert stalled[0] == smooth[0]
    assert stalled[1] == smooth[1]
    assert stalled[2][-1][0] > smooth[2][-1][0]
    elements = iter(smooth[1])
    for mode, codes in vectors:
        if mode == Mode.RELU:
            assert [next(elements)[0] for _ in codes] == [max(c, 0) for c in codes]
        elif mode in ELEMENT_MODES:
            for _ in codes:
                next(elements)


def test_latency_of_the_new_modes():
    """Back to back: RELU, SILU, GELU and NORM elements on o OUTPUT_LATENCY cycles after
    they are accepted, one per cycle; a LAYERNORM vector's result norm_result_latency
    cycles after its last element; its NORM pass waits for that result, then streams."""
    length = 40
    codes = [((n * 53) % 400) - 200 for n in range(length)]
    params = [(256, 0)] * length
    vectors = [(Mode.RELU, codes), (Mode.LAYERNORM, codes), (Mode.NORM, codes)]
    vectors += [(Mode.SILU, codes), (Mode.GELU, codes)]
    _, _, log = run(AAU(AAUParams()), vectors, params=params)
    inputs = [cycle for cycle, event in log if event == "in"]
    outputs = [cycle for cycle, event in log if event == "o"]
    (result,) = [cycle for cycle, event in log if event == "result"]
    relu_in, norm_in = inputs[:length], inputs[2 * length : 3 * length]
    assert relu_in == list(range(relu_in[0], relu_in[0] + length))
    assert [o - i for o, i in zip(outputs[:length], relu_in, strict=True)] == [
        OUTPUT_LATENCY + 1
    ] * length
    assert result - inputs[2 * length - 1] == norm_result_latency(AAUParams()) + 1
    # the NORM pass's first element waits in reg5 until the result is published
    assert outputs[length] > result
    assert outputs[length : 2 * length] == list(range(outputs[length], outputs[length] + length))
    tail_in, tail_out = inputs[3 * length :], outputs[2 * length :]
    assert [o - i for o, i in zip(tail_out, tail_in, strict=True)] == [OUTPUT_LATENCY + 1] * (
        2 * length
    )
    # the NORM pass's input stops once (its first element waiting in reg5), then streams
    assert sum(b - a > 1 for a, b in itertools.pairwise(norm_in)) == 1


@pytest.mark.parametrize("operator", sorted(AAU_OPERATOR_CYCLES))
def test_the_system_model_charges_the_measured_cycles(operator):
    """The system model's AAU cost (``AAU_OPERATOR_CYCLES``, ``sim/cost.py``) is this RTL's:
    from the cycle that takes the first element to the one that delivers the last output
    (or the result), both included, back to back from an idle unit, at two lengths."""
    passes, fixed = AAU_OPERATOR_CYCLES[operator]
    for length in (50, 130):
        codes = [((n * 41) % 500) - 250 for n in range(length)]
        params = []
        if operator == "softmax":
            vectors = [(Mode.STATS, codes), (Mode.SOFTMAX, codes)]
        elif operator == "stats":
            vectors = [(Mode.STATS, codes)]
        elif operator in ("layernorm", "rmsnorm"):
            vectors = [(Mode[operator.upper()], codes), (Mode.NORM, codes)]
            params = [(256, 0)] * length
        else:
            vectors = [(Mode[operator.upper()], codes)]
        _, _, log = run(AAU(AAUParams()), vectors, params=params)
        first = min(cycle for cycle, event in log if event == "in")
        last = max(cycle for cycle, event in log if event in ("o", "result"))
        assert last - first + 1 == passes * length + fixed, (operator, length)
