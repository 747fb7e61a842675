"""Roofline sanity of the cost model against hand calculations from the spec files' numbers.

Expected values are computed here from the published model shapes and Table 2 figures (the
formulas are in the comments), not taken from the code under test.
"""

from __future__ import annotations

import pytest

from ahasd.sim.cost import PassModel, executor_for
from ahasd.sim.library.loading import load_library

LIB = load_library()


def _executor(device, **kwargs):
    spec = LIB.device(device)
    return executor_for(spec, LIB.power_of(device), **kwargs)


def test_opt_6_7b_decode_on_npu_takes_weight_bytes_over_effective_bandwidth():
    # OPT-6.7B INT8: 32 layers x (4 h^2 + 2 h f) + vocab x h, h = 4096, f = 16384, vocab 50272
    weight_bytes = 32 * (4 * 4096**2 + 2 * 4096 * 16384) + 50272 * 4096
    assert weight_bytes == 6_648_365_056
    # Table 2 bus at the NPU's memory efficiency from make validate (docs/validation.md):
    # SCALE-Sim's 0.980 x LPDDR5 refresh availability 1 - (32 + 560) / 6240, rounded 0.887
    expected = weight_bytes / (51.2e9 * 0.887)
    step = PassModel(_executor("npu-mobile"), LIB.model("opt-6.7b"))(1, 0)
    assert step.seconds == pytest.approx(expected, rel=1e-3)
    assert step.memory_bytes == pytest.approx(weight_bytes, rel=1e-3)


def test_npu_verification_of_up_to_16_tokens_stays_memory_bound():
    # Ridge 16e12 / 51.2e9 = 312 MAC/B >> 17 MAC/B of a 17-token pass: the time hardly moves.
    model = PassModel(_executor("npu-mobile"), LIB.model("opt-6.7b"))
    one, seventeen = model(1, 128).seconds, model(17, 128).seconds
    assert 1.0 <= seventeen / one < 1.01


def test_pim_draft_step_runs_at_the_rate_derived_from_table2_timing():
    # 8 of 16 ranks. Per rank 8 bank-pair units x 32 INT8 MACs per column access every
    # tCCD_S = 4 cycles at 1.6 GHz = 102.4e9 MAC/s (docs/validation.md section 2), sustained
    # at 0.583 of it; one MAC per weight byte, so the weight stream takes the same time.
    macs = 24 * (4 * 2048**2 + 2 * 2048 * 8192) + 50272 * 2048
    # Plus the AAU (8 of them at 800 MHz, docs/aau.md: passes * N + fixed) at context 0 (one
    # key): per layer 32 softmaxes of 1 (2 + 44), two LayerNorms of 2048 (2 * 2048 + 130), a
    # ReLU of 8192 (8192 + 10); the final LayerNorm and the logits' STATS (50272 + 41).
    aau = 24 * (32 * 46 + 2 * (2 * 2048 + 130) + 8202) + (2 * 2048 + 130) + (50272 + 41)
    expected = macs / (16 * 8 * 32 / 4 * 1.6e9 * 0.5 * 0.583) + aau / (8 * 800e6)
    pim = _executor("lpddr5-pim", share=0.5, aau=True)
    step = PassModel(pim, LIB.model("opt-1.3b"))(1, 0)
    assert step.seconds == pytest.approx(expected, rel=5e-3)
    assert step.macs == pytest.approx(macs, rel=1e-3)


def test_pim_draft_step_with_table2_read_for_the_whole_memory_is_compute_bound():
    # 8 of 16 ranks: 102.4e9 MAC/s x 8/16 x 0.78; one MAC per weight (1 MAC = 1 op).
    macs = 24 * (4 * 2048**2 + 2 * 2048 * 8192) + 50272 * 2048
    expected = macs / (102.4e9 * 0.5 * 0.78)
    pim = _executor("lpddr5-pim-whole-memory", share=0.5, aau=True)
    step = PassModel(pim, LIB.model("opt-1.3b"))(1, 0)
    assert step.seconds == pytest.approx(expected, rel=5e-3)


def test_without_aau_the_nonlinear_ops_cost_a_bus_round_trip():
    model = LIB.model("opt-1.3b")
    cpu = LIB.device("host-cpu")
    with_aau = PassModel(_executor("lpddr5-pim", share=0.5, aau=True), model)(1, 500)
    without = PassModel(
        _executor("lpddr5-pim", share=0.5, aau=False, host=cpu, host_power=LIB.power_of(cpu.name)),
        model,
    )(1, 500)
    # Elements of one draft step at context 500 (501 keys): per layer heads x keys (softmax)
    # + 2 h (norms) + f (activation); plus the final norm and the logits.
    elements = 24 * (32 * 501 + 2 * 2048 + 8192) + 2048 + 50272
    assert without.nonlinear_elements == elements
    # Host path: CPU time + 4 B per element over the bus (51.2 GB/s at the PIM's eta_memory,
    # 0.583) + 2 us per nonlinear operator
    # (4 per layer + 2 final). AAU path, on 8 AAUs at 800 MHz, each operator's cycles from
    # docs/aau.md (passes * N + fixed): per layer 32 softmaxes of 501 keys (2 * 501 + 44),
    # two LayerNorms of 2048 (2 * 2048 + 130) and a ReLU of 8192 (8192 + 10); then the
    # final LayerNorm and the logits' STATS (50272 + 41).
    per_layer = 32 * (2 * 501 + 44) + 2 * (2 * 2048 + 130) + (8192 + 10)
    cycles = 24 * per_layer + (2 * 2048 + 130) + (50272 + 41)
    assert cycles == 1_257_563
    host = elements / 2e9 + 4 * elements / (51.2e9 * 0.583) + (24 * 4 + 2) * 2e-6
    aau = cycles / (8 * 800e6)
    assert without.seconds - with_aau.seconds == pytest.approx(host - aau, rel=1e-6)
    assert without.link_bytes == 4 * elements


def test_without_aau_the_nonlinear_ops_are_requests_to_the_npus_vector_unit():
    # Paper 4.1: without the AAU the activations go to the NPU. Same elements as above; the
    # NPU's vector unit does 8.2e12 x 0.75 / 4 elements/s; each of the 98 operators is one
    # request with a 2 us hand-off (npu-mobile.toml); every element crosses the off-chip bus
    # twice (INT16 out and back) at the NPU's bus efficiency (npu-mobile eta_memory 0.887).
    model = LIB.model("opt-1.3b")
    npu = LIB.device("npu-mobile")
    with_aau = PassModel(_executor("lpddr5-pim", share=0.5, aau=True), model)(1, 500)
    pim = _executor("lpddr5-pim", share=0.5, aau=False, host=npu, host_power=LIB.power_of(npu.name))
    without = PassModel(pim, model)(1, 500)
    elements = 24 * (32 * 501 + 2 * 2048 + 8192) + 2048 + 50272
    vector = elements / (8.2e12 * 0.75 / 4)
    link = 4 * elements / (51.2e9 * 0.887)
    npu_path = vector + link + (24 * 4 + 2) * 2e-6
    aau = 1_257_563 / (8 * 800e6)  # the AAU cycles of the test above
    assert without.seconds - with_aau.seconds == pytest.approx(npu_path - aau, rel=1e-6)
    assert without.offload_device == "npu"
    assert without.offload_requests == 24 * 4 + 2
    assert without.offload_compute_s == pytest.approx(vector, rel=1e-9)
    assert without.offload_link_s == pytest.approx(link, rel=1e-9)
    assert with_aau.offload_device == ""
    # The longest operator on the NPU's vector unit: the logits' softmax over 50,272.
    assert without.longest_nonlinear_s == pytest.approx(50272 / (8.2e12 * 0.75 / 4), rel=1e-9)


def test_a_verification_on_the_npu_is_memory_bound_in_every_matrix_operator():
    # 5 tokens of OPT-6.7B at context 128: every matrix operator reads more bytes per second
    # of bandwidth than it computes per second of peak (312 MAC/B ridge), so the
    # memory-bound time is the whole matrix time: the pass minus its vector-unit time.
    model = LIB.model("opt-6.7b")
    cost = PassModel(_executor("npu-mobile"), model)(5, 128)
    vector = cost.nonlinear_elements / (8.2e12 * 0.75 / 4)
    assert cost.memory_bound_s == pytest.approx(cost.seconds - vector, rel=1e-9)


def test_gpu_vendor_tops_are_halved_to_mac_per_second():
    # 264 dense INT8 TOPS count 2 ops per MAC; the model's convention is 1 MAC = 1 op.
    assert LIB.device("rtx4090-laptop").matrix_macs_per_s == 132e12


def test_kv_cache_bytes_match_the_published_sizes():
    # docs/sources.md: the INT8 KV cache at L = 1024 is 2 x layers x hidden x L bytes, by hand
    # 2 x 32 x 4096 x 1024 = 268 MB (OPT-6.7B) and 2 x 40 x 5120 x 1024 = 419 MB (LLaMA2-13B)
    assert LIB.model("opt-6.7b").kv_bytes_per_token() * 1024 / 1e6 == pytest.approx(268, abs=1)
    assert LIB.model("llama2-13b").kv_bytes_per_token() * 1024 / 1e6 == pytest.approx(419, abs=1)


def test_every_spec_number_has_a_source_and_a_confidence():
    for group in (LIB.devices, LIB.power, LIB.models):
        for spec in group.values():
            assert spec.sources, spec
            for name, sourced in spec.sources:
                assert sourced.source.strip(), (spec.name, name)
                assert sourced.confidence.strip(), (spec.name, name)


def test_the_aau_charges_each_model_its_own_norm_and_activation():
    # LLaMA2-7B: RMSNorm and SiLU, as in its spec file; the AAU energy follows its cycles.
    model = LIB.model("llama2-7b")
    assert (model.norm, model.activation) == ("rmsnorm", "silu")
    assert (LIB.model("opt-6.7b").norm, LIB.model("opt-6.7b").activation) == ("layernorm", "relu")
    pim = _executor("lpddr5-pim", share=0.5, aau=True)
    cost = PassModel(pim, model)(1, 99)
    # per layer 32 softmaxes of 100 keys, two RMSNorms of 4096, a SiLU of 11008; final
    # RMSNorm and STATS over 32000
    per_layer = 32 * (2 * 100 + 44) + 2 * (2 * 4096 + 130) + (11008 + 10)
    cycles = 32 * per_layer + (2 * 4096 + 130) + (32000 + 41)
    matrix_only = PassModel(pim, model).matrix_seconds(1, 99)
    assert cost.seconds - matrix_only == pytest.approx(cycles / (8 * 800e6), rel=1e-9)
    power = LIB.power_of("lpddr5-pim")
    matrix_energy = cost.macs * power.pj_per_mac + cost.memory_bytes * (
        power.pj_per_byte_memory + power.pj_per_byte_sram
    )
    aau_energy = cycles * power.pj_per_aau_element
    assert cost.energy_j == pytest.approx((matrix_energy + aau_energy) * 1e-12, rel=1e-9)
