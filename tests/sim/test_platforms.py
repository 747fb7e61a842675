"""NPU+PIM platforms, GPU baseline variants, spec-field and controller overrides, ranges."""

from __future__ import annotations

import json
import shutil

import pytest

from ahasd.cli import main
from ahasd.errors import UserError
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR, load_library
from ahasd.sim.modes import build_hardware, prepare_run, simulate
from ahasd.sim.phone.platform import known_platforms
from ahasd.sim.settings import RunSettings, controller_params, field_default, resolve

LIB = load_library()
RUN = {"pair": "opt-1.3b-6.7b", "policy": "svip", "tokens": 64}


def _settings(mode: str, **extra) -> RunSettings:
    return RunSettings(mode=mode, **{**RUN, **extra})


def test_the_three_platforms_load_and_table2_is_the_default():
    assert {"table2", "table2-per-unit", "artifact"} <= set(LIB.platforms)
    resolved, _ = resolve(_settings("ahasd"), LIB)
    assert (resolved.platform, resolved.npu, resolved.pim) == ("table2", "npu-mobile", "lpddr5-pim")
    assert resolved.memory_sharing == "shared"
    artifact, _ = resolve(_settings("ahasd", platform="artifact"), LIB)
    assert (artifact.npu, artifact.pim) == ("npu-hbm2-artifact", "hbm2-pim-artifact")
    assert artifact.memory_sharing == "separate"


def test_an_explicit_device_or_sharing_model_overrides_the_platform():
    resolved, _ = resolve(
        _settings("ahasd", platform="artifact", pim="lpddr5-pim", memory_sharing="shared"), LIB
    )
    assert (resolved.npu, resolved.pim, resolved.memory_sharing) == (
        "npu-hbm2-artifact",
        "lpddr5-pim",
        "shared",
    )


def test_resolving_twice_changes_nothing():
    settings = _settings(
        "ahasd", platform="artifact", spec_overrides=(("devices.@npu.clock_hz", 2e9),)
    )
    once, library = resolve(settings, LIB)
    twice, again = resolve(once, library)
    assert once == twice
    assert again is library


def test_phone_platforms_and_npu_pim_platforms_share_the_folder_but_not_the_lists():
    assert set(known_platforms()) == {"sd8gen3", "m4"}
    assert not {"sd8gen3", "m4"} & set(LIB.platforms)


def test_the_per_unit_reading_multiplies_tables_figures_by_the_16_units():
    pim = LIB.device("lpddr5-pim-per-unit")
    assert pim.matrix_macs_per_s == pytest.approx(16 * 102.4e9)
    assert pim.memory_bandwidth == pytest.approx(16 * 256e9)
    assert pim.units == 16


def test_the_artifact_numbers_follow_from_its_configuration():
    # ONNXim: 4 cores of 128x128 at 1 GHz; HBM2: 16 channels x 128 bit x 2.5 Gb/s.
    npu = LIB.device("npu-hbm2-artifact")
    assert npu.matrix_macs_per_s == pytest.approx(4 * 128 * 128 * 1e9)
    assert npu.memory_bandwidth == pytest.approx(16 * 128 * 2.5e9 / 8)
    # PIMSimulator/HBM-PIM: 64 channels x 8 PCUs x 16 FP16 lanes, one 32 B column per tCCD_L.
    pim = LIB.device("hbm2-pim-artifact")
    accesses_per_s = 1e9 / 4
    assert pim.matrix_macs_per_s == pytest.approx(64 * 8 * 16 * accesses_per_s)
    assert pim.memory_bandwidth == pytest.approx(64 * 8 * (64 * 4 // 8) * accesses_per_s)
    assert pim.units == 64


def test_the_artifact_runs_its_npu_and_pim_at_fp16():
    hardware = build_hardware(prepare_run(_settings("ahasd", platform="artifact"), LIB))
    target = LIB.model("opt-6.7b")
    cost = hardware.verify_pass(1, 128)
    kv = 2 * target.layers * target.kv_dim * 2 * (128 + 1)  # K and V, FP16, 129 positions
    assert cost.memory_bytes == pytest.approx(2 * target.params + kv)
    draft = LIB.model("opt-1.3b")
    assert hardware.draft_pass(1, 128).memory_bytes > 2 * draft.params
    # The table2 platform keeps the models' INT8.
    int8 = build_hardware(prepare_run(_settings("ahasd"), LIB)).verify_pass(1, 128)
    assert int8.memory_bytes < 1.1 * target.params


def test_the_fp16_eager_efficiency_is_the_measured_one():
    # LLaMA-7B FP16 (6.74e9 x 2 B) on a 936 GB/s RTX 3090: 32.89 ms per token measured.
    measured = (6.74e9 * 2 / 936e9) / 32.89e-3
    gpu = LIB.device("rtx4090-laptop-fp16")
    assert gpu.eta_memory == pytest.approx(measured, abs=0.005)
    assert gpu.weight_bytes == 2
    # LLM.int8: 154.55 ms per token on the same GPU, INT8 weights.
    bnb = LIB.device("rtx4090-laptop-int8-bnb")
    assert bnb.eta_memory == pytest.approx((6.74e9 / 936e9) / 154.55e-3, abs=0.0005)


def test_offload_streams_what_does_not_fit_over_pcie_and_nothing_when_it_fits():
    upper = simulate(_settings("gpu-only", gpu="rtx4090-laptop-upper-bound")).summary
    enforced = simulate(_settings("gpu-only", gpu="rtx4090-laptop")).summary
    assert enforced["tokens_per_s"] == upper["tokens_per_s"]  # OPT-1.3B + 6.7B fit 16 GiB
    settings = _settings("gpu-only", pair="palm-8b-30b", gpu="rtx4090-laptop")
    hardware = build_hardware(prepare_run(settings, LIB))
    gpu = LIB.device("rtx4090-laptop")
    draft, target = LIB.model("palm-like-8b"), LIB.model("palm-like-30b")
    # INT8: 1 B per weight; the KV cache of both models at the run's length stays on the GPU
    positions = settings.prompt_tokens + settings.tokens
    kv = positions * (draft.kv_bytes_per_token() + target.kv_bytes_per_token())
    excess = draft.params + target.params + kv - gpu.capacity_bytes
    pass_s = hardware.verify_pass(1, 128).seconds
    assert pass_s >= excess / gpu.host_link_bandwidth
    assert pass_s <= excess / gpu.host_link_bandwidth * 1.2
    assert "stream over the host link" in " ".join(hardware.notes)


def test_a_pair_that_does_not_fit_the_gpu_is_refused_with_the_shortfall_without_a_host_link():
    # llama2-7b + 13b at INT8: 6.74e9 + 13.0e9 weights (exact counts from the model files)
    # plus the KV cache; SpecPIM's split needs them all in the GPU's memory.
    settings = _settings("specpim-gpu", pair="llama2-7b-13b")
    draft, target = LIB.model("llama2-7b"), LIB.model("llama2-13b")
    positions = settings.prompt_tokens + settings.tokens
    need = draft.params + target.params
    need += positions * (draft.kv_bytes_per_token() + target.kv_bytes_per_token())
    short = (need - 16 * 2**30) / 1e9
    with pytest.raises(UserError, match=rf"by {short:.1f} GB .SpecPIM's split needs them"):
        build_hardware(prepare_run(settings, LIB))
    # The upper bound ignores the capacity: the same pair runs.
    assert simulate(_settings("specpim-gpu", pair="llama2-7b-13b",
                              gpu="rtx4090-laptop-upper-bound")).summary["tokens"] > 0  # fmt: skip


def test_every_uncertain_number_of_the_shipped_platforms_has_a_range_around_its_value():
    names = {device for p in LIB.platforms.values() for _, device in p.devices}
    names |= {g for p in LIB.platforms.values() for g in p.gpu_baselines}
    missing = []
    for name in names:
        for spec in (LIB.device(name), LIB.power_of(name)):
            for field_name, sourced in spec.sources:
                if sourced.level in ("medium", "low"):
                    if sourced.span is None or not sourced.span_source:
                        missing.append(f"{name}.{field_name}")
                    else:
                        low, high = sourced.span
                        assert low <= sourced.value <= high
                        assert low < high, f"{name}.{field_name}: an empty range"
    assert missing == []


def _spec_dir_with(tmp_path, relative: str, text: str):
    target = tmp_path / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            (
                'confidence = "medium: sweepable"\nrange = [0.75, 0.8]',
                'confidence = "medium"\nrange = [0.8, 0.9]',
            ),
            "range [0.8, 0.9] must contain the value 0.75",
        ),
        (
            ("range_source = \"the authors' 0.75 to AttAcc's compute factor 0.8\"\n", ""),
            "a range needs a 'range_source' string",
        ),
        (("range = [0.75, 0.8]", "range = [0.75]"), "range must be [lo, hi]"),
    ],
)
def test_a_bad_range_is_refused_naming_the_file_and_field(tmp_path, edit, message):
    text = (BUILTIN_SPEC_DIR / "devices/npu-mobile.toml").read_text()
    old, new = edit
    assert old in text
    directory = _spec_dir_with(tmp_path, "devices/npu-mobile.toml", text.replace(old, new, 1))
    with pytest.raises(UserError, match=r"npu-mobile\.toml: field 'eta_compute'") as error:
        load_library([directory])
    assert message in str(error.value)


PLATFORM = """name = "mine"
kind = "npu-pim"
[devices]
npu = "npu-mobile"
pim = "lpddr5-pim"
cpu = "host-cpu"
gpu = "rtx4090-laptop"
specpim_pim = "gddr6-aim"
[memory_sharing]
value = "shared"
source = "test"
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('value = "shared"', 'value = "pooled"'), "value must be one of shared, separate"),
        (
            ('npu = "npu-mobile"', 'npu = "lpddr5-pim"'),
            "devices.npu: 'lpddr5-pim' is a pim, not a npu",
        ),
        (('cpu = "host-cpu"', 'cpu = "host-cpu"\ndsp = "x"'), "unknown role 'dsp'"),
        (('pim = "lpddr5-pim"\n', ""), "field 'pim': must be a non-empty string"),
        (('npu = "npu-mobile"', 'npu = "npu-nope"'), "devices.npu: unknown device 'npu-nope'"),
    ],
)
def test_a_bad_platform_file_is_refused(tmp_path, edit, message):
    old, new = edit
    directory = _spec_dir_with(tmp_path, "platforms/mine.toml", PLATFORM.replace(old, new, 1))
    with pytest.raises(UserError, match=r"mine\.toml") as error:
        load_library([directory])
    assert message in str(error.value)


def test_a_dropped_platform_file_is_a_platform(tmp_path, capsys):
    text = PLATFORM.replace('pim = "lpddr5-pim"', 'pim = "lpddr5-pim-per-unit"')
    directory = _spec_dir_with(tmp_path, "platforms/mine.toml", text)
    argv = ["simulate", "--mode", "pim-async", "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
    argv += ["--tokens", "64", "--json", "--spec-dir", str(directory)]
    assert main([*argv, "--platform", "mine"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine["platform"] == "mine"
    assert main([*argv, "--platform", "table2-per-unit"]) == 0
    per_unit = json.loads(capsys.readouterr().out)
    assert mine["tokens_per_s"] == per_unit["tokens_per_s"]


def test_an_unknown_platform_lists_both_kinds(capsys):
    assert main(["simulate", "--platform", "tpu-pod", "--mode", "ahasd", "--json"]) == 2
    err = capsys.readouterr().err
    assert "unknown platform 'tpu-pod'" in err
    assert "npu-pim: artifact" in err  # the platforms of every kind, by kind
    assert "phone: m4, sd8gen3" in err


def test_a_spec_override_changes_the_number_it_names_and_nothing_else():
    base = simulate(_settings("npu-only")).summary
    faster = simulate(
        _settings("npu-only", spec_overrides=(("devices.npu-mobile.memory_bandwidth", 102.4e9),))
    ).summary
    # npu-only is memory-bound on the weights: twice the bandwidth, about twice the speed.
    assert faster["tokens_per_s"] / base["tokens_per_s"] == pytest.approx(2.0, rel=0.05)
    by_role = simulate(
        _settings("npu-only", spec_overrides=(("devices.@npu.memory_bandwidth", 102.4e9),))
    ).summary
    assert by_role["tokens_per_s"] == faster["tokens_per_s"]
    assert LIB.device("npu-mobile").memory_bandwidth == 51.2e9  # the files are untouched


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "devices.npu-mobile.memory_bandwith",
            1e9,
            "unknown spec field 'devices.npu-mobile.memory_bandwith' (known fields of devices: "
            "clock_hz",
        ),
        ("devices.npu-nope.clock_hz", 1e9, "unknown device 'npu-nope'"),
        ("gadgets.npu-mobile.clock_hz", 1e9, "unknown spec field 'gadgets.npu-mobile.clock_hz'"),
        ("devices.lpddr5-pim.draft_ranks", 8.5, "value must be an integer"),
        ("devices.npu-mobile.memory_bandwidth", -1.0, "value must be positive"),
        ("devices.npu-mobile.eta_memory", 1.5, "'eta_memory': value must be at most 1"),
        ("devices.@tpu.clock_hz", 1e9, "unknown role @tpu"),
        ("models.opt-1.3b.ffn_matrices", 4, "'ffn_matrices': value must be 2 or 3"),
        # a model's norm and activation are names in its file, not numbers to override
        ("models.opt-1.3b.norm", 1, "unknown spec field 'models.opt-1.3b.norm'"),
    ],
)
def test_a_bad_spec_override_is_a_user_error(path, value, message):
    with pytest.raises(UserError) as error:
        resolve(_settings("ahasd", spec_overrides=((path, value),)), LIB)
    assert message in str(error.value)


def test_controller_parameters_reach_the_controller_and_bad_ones_are_refused():
    edc, tvc, gtsu = controller_params(
        _settings("ahasd", controller_params=(("edc.llr_bits", 2), ("gtsu.t_on", 8)))
    )
    assert (edc.llr_bits, edc.llr_max, gtsu.t_on) == (2, 3, 8)
    assert tvc.ratio_bits == field_default(RunSettings, "tvc_ratio_bits")  # not overridden
    with pytest.raises(UserError, match=r"unknown controller parameter 'edc\.llr_bitz'"):
        controller_params(_settings("ahasd", controller_params=(("edc.llr_bitz", 2),)))
    with pytest.raises(UserError, match="llr_bits"):
        controller_params(_settings("ahasd", controller_params=(("edc.llr_bits", 99),)))
    with pytest.raises(UserError, match=r"BLOCK\.FIELD"):
        _settings("ahasd", controller_params=(("aau.x", 1),))
    shorter = simulate(_settings("ahasd", controller_params=(("edc.llr_bits", 1),))).summary
    default = simulate(_settings("ahasd")).summary
    assert shorter["drafted"] != default["drafted"]


def test_simulate_takes_platform_override_and_controller_options(capsys):
    argv = ["simulate", "--mode", "npu-only", "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
    argv += ["--tokens", "64", "--json", "--platform", "artifact"]
    assert main(argv) == 0
    artifact = json.loads(capsys.readouterr().out)
    assert artifact["platform"] == "artifact"
    override = "--spec-override=devices.@npu.memory_bandwidth=1280e9"
    assert main([*argv, override, "--controller-param", "edc.llr_bits=2"]) == 0
    faster = json.loads(capsys.readouterr().out)
    assert faster["tokens_per_s"] > 1.5 * artifact["tokens_per_s"]
    assert main([*argv, "--spec-override", "devices.npu-mobile.nope=1"]) == 2
    assert "unknown spec field" in capsys.readouterr().err


def test_a_phone_platform_refuses_npu_pim_options(capsys):
    argv = ["simulate", "--platform", "m4", "--duration", "2", "--json"]
    assert main([*argv, "--spec-override", "devices.@npu.clock_hz=1e9"]) == 2
    assert "applies to the NPU+PIM modes" in capsys.readouterr().err
    assert main([*argv, "--memory-sharing", "separate"]) == 2
    assert "--memory-sharing does not apply with --platform" in capsys.readouterr().err


def test_builtin_spec_tree_is_unchanged_by_a_copy(tmp_path):
    # A user copies a built-in device, changes a number, and selects it by name.
    copy = tmp_path / "devices" / "npu-fast.toml"
    copy.parent.mkdir()
    shutil.copy(BUILTIN_SPEC_DIR / "devices/npu-mobile.toml", copy)
    copy.write_text(
        copy.read_text()
        .replace('name = "npu-mobile"', 'name = "npu-fast"')
        .replace("value = 51.2e9", "value = 102.4e9")
    )
    library = load_library([tmp_path])
    fast = simulate(
        _settings("npu-only", npu="npu-fast", spec_dirs=(str(tmp_path),)), library=library
    )
    base = simulate(_settings("npu-only")).summary
    assert fast.summary["tokens_per_s"] > 1.8 * base["tokens_per_s"]
