"""Tests of the phone-SoC scenario (sim/phone/, sim/thermal.py). About 5 s in total.

Expected values come from closed forms (the RC step response, the memory-bound decode
bound computed here from the published model configuration) or from round structures worked
out by hand for hand-built sequences; none is copied from the code under test.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from ahasd.cli import main
from ahasd.errors import UserError
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR, load_library
from ahasd.sim.phone import (
    PHONE_MODE_TABLE,
    PhoneSettings,
    build_phone_hardware,
    find_platform,
    load_platform,
    prepare_phone_run,
    simulate_phone,
)
from ahasd.sim.thermal import ThermalModel, ThermalParams
from ahasd.sim.traces.format import Trace, TraceHeader

SEED = int(os.environ.get("AHASD_SEED", "20261129"))


def _ahasd(capsys, *args):
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- thermal model ------------------------------------------------------------------------------


def test_thermal_step_response_matches_closed_form():
    """Constant power from T0, advanced in irregular (seeded) steps: each node equals
    T(t) = T_ref + (T0 - T_ref) e^(-t/tau) + P R (1 - e^(-t/tau)) at every step."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    params = ThermalParams(ambient_c=25.0, r_skin=5.5, tau_skin=540.0, r_die=4.0, tau_die=3.0)
    t0, power = 31.0, 6.0
    model = ThermalModel(params, start_c=t0)
    elapsed = 0.0
    for dt in rng.uniform(0.001, 20.0, size=200):
        model.advance(power, float(dt))
        elapsed += float(dt)
        skin = 25.0 + (t0 - 25.0) * math.exp(-elapsed / 540.0)
        skin += power * 5.5 * (1 - math.exp(-elapsed / 540.0))
        # The die starts at the skin's temperature (zero rise) and settles P r_die above it.
        die = skin + power * 4.0 * (1 - math.exp(-elapsed / 3.0))
        assert model.skin_c == pytest.approx(skin, abs=1e-9)
        assert model.die_c == pytest.approx(die, abs=1e-9)
    # Settled: ambient + P (R_skin + R_die) after many time constants.
    model.advance(power, 540.0 * 40)
    assert model.die_c == pytest.approx(25.0 + power * (5.5 + 4.0), abs=1e-9)


def test_thermal_cooling_is_the_zero_power_step():
    params = ThermalParams(ambient_c=20.0, r_skin=5.0, tau_skin=100.0, r_die=2.0, tau_die=1.0)
    model = ThermalModel(params, start_c=50.0)
    model.advance(0.0, 100.0)
    assert model.skin_c == pytest.approx(20.0 + 30.0 * math.exp(-1.0), abs=1e-12)


# -- energy -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["gpu-ar", "gpu-spec", "npu-gpu-hetero"])
def test_power_integrated_over_time_equals_reported_energy(mode):
    """Start just below the skin limit so the run crosses clock levels too."""
    settings = PhoneSettings(platform="sd8gen3", mode=mode, duration_s=25.0, start_c=44.5, seed=3)
    result = simulate_phone(settings, record_power=True)
    s = result.summary
    integral = sum(watts * seconds for _, seconds, watts in result.power_intervals)
    assert integral == pytest.approx(s["energy_j"], rel=1e-9)
    assert s["package_power_w"] * s["seconds"] == pytest.approx(s["energy_j"], rel=1e-9)
    assert sum(s["energy_breakdown_j"].values()) == pytest.approx(s["energy_j"], rel=1e-12)
    # The intervals tile [0, makespan] without gaps or overlaps (one device at a time).
    end = 0.0
    for start, seconds, _ in result.power_intervals:
        assert start == pytest.approx(end, abs=1e-9)
        end = start + seconds
    assert end == pytest.approx(s["seconds"], abs=1e-9)
    assert s["throttle_events"] >= 1
    assert s["drafted"] == s["accepted"] + s["rejected"] + s["squashed"]


def test_ar_decode_rate_is_bounded_by_bandwidth():
    """Cold start, no throttling: each token reads the whole INT4 Llama-3.1-8B (computed here
    from its published config) and its KV cache at eta x 76.8 GB/s."""
    h, layers, kv, ffn, vocab = 4096, 32, 8 * 128, 14336, 128256
    params = layers * (2 * h * h + 2 * h * kv + 3 * h * ffn) + vocab * h
    weight_bytes = params * 0.5
    settings = PhoneSettings(platform="sd8gen3", mode="gpu-ar", duration_s=20.0, tokens=256)
    s = simulate_phone(settings).summary
    bandwidth = 76.8e9 * 0.85
    mean_context = 128 + 128  # prompt + half a request on average
    kv_bytes = mean_context * 2 * layers * kv * 2
    bound = bandwidth / weight_bytes
    assert s["tokens_per_s"] < bound
    assert s["tokens_per_s"] == pytest.approx(bandwidth / (weight_bytes + kv_bytes), rel=0.01)


# -- mechanisms on hand-built sequences ----------------------------------------------------------


def _trace(top1, accept) -> Trace:
    n = len(top1)
    header = TraceHeader(
        pair="hand",
        draft_model="d",
        target_model="t",
        prompt_id="hand",
        temperature=1.0,
        source="synthetic",
        meta={},
    )
    return Trace(
        header=header,
        draft_entropy=np.full(n, 2.5),  # exp(-2.5) = 0.082 <= every top1 used here
        draft_top1=np.asarray(top1, dtype=float),
        beta=np.asarray(accept, dtype=float),
        accept=np.asarray(accept, dtype=np.int8),
        target_entropy=np.full(n, math.nan),
    )


def _rounds(trace, task, mode="npu-gpu-hetero"):
    settings = PhoneSettings(platform="sd8gen3", mode=mode, tokens=len(trace), duration_s=1e6)
    result = simulate_phone(
        settings, traces=lambda index: (trace, task), requests=1, record_rounds=True
    )
    return result.round_log, result.summary


def test_confidence_pruning_ends_the_draft_at_top1_below_threshold():
    """Code task (draft length 5), every draft accepted, top-1 0.2 at positions 3 and 9.

    Round at 0: drafts 0, 1, 2, then 3 is below 0.35: dropped, 3 kept, target token at 3.
    Round at 4: drafts 4..8 (length 5), bonus at 9. Round at 10: 10..14, bonus at 15 = end.
    """
    top1 = [0.9] * 16
    top1[3] = top1[9] = 0.2
    rounds, summary = _rounds(_trace(top1, [1] * 16), "code")
    assert rounds == [(0, 3, 1, 3), (4, 5, 0, 5), (10, 5, 0, 5)]
    assert summary["dropped"] == 1
    assert summary["tokens"] == 16


def test_threshold_is_strict_and_first_token_is_kept():
    """top-1 exactly 0.35 does not prune; a low first token is kept and ends the round."""
    top1 = [0.9] * 12
    top1[0] = 0.1  # first token of round 1: kept alone, bonus at 1
    top1[4] = 0.35  # not below the threshold
    rounds, _ = _rounds(_trace(top1, [1] * 12), "dialogue")
    # Dialogue: draft length 3. Round at 0: kept 1, commit 2. Round at 2: 2, 3, 4 kept, bonus
    # at 5. Round at 6: 6, 7, 8, bonus at 9. Round at 10: only 10 fits before the end (11).
    assert rounds == [(0, 1, 0, 1), (2, 3, 0, 3), (6, 3, 0, 3), (10, 1, 0, 1)]


def _fallback_accepts(outcomes, length):
    """Accept flags such that one-token rounds (text task) see ``outcomes`` in order: an
    accepted draft at c commits c and the bonus c + 1; a rejected one commits c only."""
    accept = [1] * length
    c = 0
    for outcome in outcomes:
        accept[c] = outcome
        c += 2 if outcome else 1
    return accept


@pytest.mark.parametrize(("accepted", "falls_back"), [(15, True), (16, False)])
def test_fallback_fires_exactly_below_half_over_32_tokens(accepted, falls_back):
    rng = np.random.default_rng(SEED + accepted)
    print(f"seed {SEED + accepted}")
    outcomes = [1] * accepted + [0] * (32 - accepted)
    rng.shuffle(outcomes)
    outcomes = [int(o) for o in outcomes]
    length = 90
    rounds, summary = _rounds(_trace([0.9] * length, _fallback_accepts(outcomes, length)), "text")
    assert [r[3] for r in rounds[:32]] == outcomes  # the 32 judged tokens, as built
    assert all(r[1] == 1 for r in rounds[:32])  # speculation until the window is full
    if falls_back:
        # Acceptance 15/32 < 0.50: the next 8 steps (the cooldown) are autoregressive.
        assert [r[1] for r in rounds[32:40]] == [0] * 8
        assert rounds[40][1] == 1  # then a probe round speculates again
    else:
        assert summary["ar_steps"] == 0


def test_thermal_arbiter_shortens_drafts_above_41c():
    top1 = [0.9] * 24
    hot = PhoneSettings(
        platform="sd8gen3", mode="npu-gpu-hetero", tokens=24, duration_s=1e6, start_c=41.5
    )
    result = simulate_phone(
        hot, traces=lambda i: (_trace(top1, [1] * 24), "code"), requests=1, record_rounds=True
    )
    # Code length 5 halved to 2: rounds at 0, 3, 6, ... of 2 drafts each (2 + bonus).
    assert [r[1] for r in result.round_log[:7]] == [2] * 7
    assert result.summary["arbiter_shortened"] == len(result.round_log)


# -- determinism, inputs, CLI ----------------------------------------------------------------------


def test_same_seed_same_run_other_seed_differs():
    settings = PhoneSettings(platform="m4", mode="gpu-spec", duration_s=15.0, seed=7)
    first = simulate_phone(settings).summary
    simulate_phone(PhoneSettings(platform="m4", mode="npu-gpu-hetero", duration_s=5.0))
    assert simulate_phone(settings).summary == first
    other = simulate_phone(PhoneSettings(platform="m4", mode="gpu-spec", duration_s=15.0, seed=8))
    assert (
        other.summary["tokens"] != first["tokens"] or other.summary["energy_j"] != first["energy_j"]
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"platform": "nokia"}, "unknown platform 'nokia' (known: m4, sd8gen3)"),
        ({"platform": "m4", "mode": "gpu-only"}, "unknown phone mode 'gpu-only'"),
        ({"platform": "m4", "skin_limit_c": 46.0}, "skin-limit must be a temperature in 42..45 C"),
        ({"platform": "m4", "duration_s": 0}, "duration must be a positive number"),
        ({"platform": "m4", "task": "poetry"}, "unknown task 'poetry'"),
        ({"platform": "m4", "dram_pj_per_bit": -5}, "dram-pj-per-bit must be a positive number"),
    ],
)
def test_bad_settings_are_user_errors(kwargs, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        simulate_phone(PhoneSettings(**{"duration_s": 1.0, **kwargs}))


def test_platform_number_without_source_is_refused(tmp_path):
    text = (
        (BUILTIN_SPEC_DIR / "platforms" / "m4.toml")
        .read_text()
        .replace('source = "Assumption: as for the Snapdragon file"\n', "", 1)
    )
    (tmp_path / "platforms").mkdir()
    path = tmp_path / "platforms" / "m4.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=r"m4.toml: field 'npu_sram_bandwidth': needs a 'source'"):
        load_platform(path)


def test_cli_phone_json_keeps_the_simulate_keys(capsys):
    classic = _ahasd(
        capsys,
        "simulate",
        "--mode",
        "gpu-only",
        "--pair",
        "opt-1.3b-6.7b",
        "--policy",
        "fixed",
        "--tokens",
        "64",
        "--json",
    )
    assert classic[0] == 0, classic[2]
    phone = _ahasd(capsys, "simulate", "--platform", "sd8gen3", "--duration", "5", "--json")
    assert phone[0] == 0, phone[2]
    classic_keys = set(json.loads(classic[1])) - {"controller", "gpu_precision"}
    summary = json.loads(phone[1])
    assert classic_keys <= set(summary)
    assert summary["mode"] == "npu-gpu-hetero"
    assert summary["platform"] == "sd8gen3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--platform", "pixel"], "unknown platform 'pixel'"),
        (["--duration", "5"], "--duration needs --platform"),
        (["--platform", "m4", "--skin-limit", "41"], "--skin-limit: must be a number in 42..45"),
        (["--platform", "m4", "--trace", "iid:0.5"], "--trace does not apply with --platform"),
        (["--platform", "m4", "--specpim-pim", "x"], "--specpim-pim does not apply with"),
        (["--platform", "m4", "--draft-model", "x"], "--draft-model does not apply with"),
        (["--platform", "m4", "--mode", "ahasd"], "unknown phone mode 'ahasd'"),
        (["--draft-weights", "spill"], "--draft-weights needs --platform"),
        (["--no-arbiter"], "--no-arbiter needs --platform"),
        (["--mode", "gpu-only"], "simulate needs --pair, --policy"),
    ],
)
def test_cli_bad_input_exits_2(capsys, args, message):
    code, out, err = _ahasd(capsys, "simulate", *args)
    assert code == 2
    assert message in err
    assert out == ""


@pytest.mark.parametrize("mode", PHONE_MODE_TABLE, ids=lambda mode: mode.name)
def test_each_phone_mode_drafts_where_its_row_says(mode):
    platform = find_platform("sd8gen3")
    settings = PhoneSettings(platform="sd8gen3", mode=mode.name)
    hardware = build_phone_hardware(prepare_phone_run(settings))
    assert hardware.draft_device == mode.draft_device
    assert hardware.verify_device == "gpu"
    has_draft = [passes is not None for passes in hardware.draft_passes]
    assert has_draft == [mode.draft_device is not None] * len(platform.clock_levels)


def test_any_device_option_is_refused_with_a_phone_platform(capsys):
    # The NPU+PIM devices have no command-line default any more (their platform file names
    # them), so even the table2 platform's NPU is an explicit choice a phone SoC refuses.
    args = ["simulate", "--platform", "m4", "--duration", "2", "--json", "--npu", "npu-mobile"]
    code, out, err = _ahasd(capsys, *args)
    assert code == 2
    assert "--npu does not apply with --platform" in err
    assert out == ""


def test_the_draft_streams_what_the_npu_sram_cannot_hold_by_default():
    # SmolLM-135M at INT4 (models/smollm-135m.toml: its weight count x 0.5 B) against the
    # sd8gen3 NPU's 8 MiB of SRAM: the SRAM holds 8 MiB / footprint of the weights, the rest
    # streams from LPDDR5X; --draft-weights sram keeps the reading where all of it fits.
    library = load_library()
    platform = find_platform("sd8gen3")
    draft = library.model("smollm-135m")
    footprint = draft.params * 0.5
    sram = library.device(platform.npu).sram_bytes
    settings = PhoneSettings(platform="sd8gen3", mode="npu-gpu-hetero")
    assert settings.draft_weights == "spill"
    spilled = build_phone_hardware(prepare_phone_run(settings))
    assert spilled.details["draft_sram_fraction"] == pytest.approx(sram / footprint)
    resident = PhoneSettings(platform="sd8gen3", mode="npu-gpu-hetero", draft_weights="sram")
    sram_only = build_phone_hardware(prepare_phone_run(resident))
    assert sram_only.details["draft_sram_fraction"] == 1.0
