"""``ahasd simulate | sweep | report``: outputs, resumable sweeps, bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahasd.cli import main
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR
from ahasd.sim.traces.format import save_trace
from ahasd.sim.traces.synthetic import iid_trace

BASE = ["--pair", "opt-1.3b-6.7b", "--policy", "svip", "--tokens", "64"]
# Spec 2.2's TVC widths (UQ32.8 ratios, 40-bit cycles): narrower ones saturate on the paper's
# platform and are refused in the modes that use the TVC.
SPEC_TVC = ["--tvc-ratio-bits", "40", "--tvc-cycle-bits", "40"]


def _error(capsys) -> str:
    return capsys.readouterr().err


def test_simulate_json_prints_one_object_with_the_required_keys(capsys):
    assert main(["simulate", "--mode", "ahasd", *BASE, *SPEC_TVC, "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    summary = json.loads(out[0])
    for key in ("tokens_per_s", "acceptance_rate", "energy_per_token_mj", "mode", "pair", "policy"):
        assert key in summary
    assert (summary["mode"], summary["pair"], summary["policy"]) == (
        "ahasd",
        "opt-1.3b-6.7b",
        "svip",
    )


def test_simulate_out_writes_summary_queue_chrome_trace_and_png(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--mode", "pim-async", *BASE, "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["chrome_trace.json", "queue.csv", "run.png", "summary.csv", "summary.json"]
    trace = json.loads((out / "chrome_trace.json").read_text())
    devices = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"pim", "npu"} <= devices
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert spans
    assert all(e["dur"] > 0 for e in spans)
    assert (out / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "tpu-only", *BASE], "unknown mode 'tpu-only'"),
        (["--mode", "ahasd", "--pair", "gpt-9", "--policy", "svip"], "unknown pair 'gpt-9'"),
        (["--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "oracle"], "unknown policy"),
        (["--mode", "ahasd", *BASE, "--npu", "npu-nope"], "unknown device 'npu-nope'"),
        (["--mode", "ahasd", *BASE, "--npu", "lpddr5-pim"], "is a pim, not a npu"),
        (["--mode", "ahasd", *BASE, "--draft-model", "opt-175b"], "unknown model 'opt-175b'"),
        (["--mode", "ahasd", *BASE, "--trace", "no-such-trace"], "neither a file"),
        (["--mode", "ahasd", *BASE, "--policy-param", "h"], "expected KEY=VALUE"),
        (["--mode", "ahasd", *BASE, "--tokens", "0"], "--tokens: must be an integer in 1..65534"),
    ],
)
def test_simulate_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["simulate", *argv, "--out", str(out)]) == 2
    assert message in _error(capsys)
    assert not out.exists()


def test_a_trace_shorter_than_the_generation_is_refused(tmp_path, capsys):
    path = tmp_path / "short.jsonl"
    save_trace(iid_trace(50, 0.6, 1), path)
    out = tmp_path / "out"
    assert (
        main(["simulate", "--mode", "ahasd", *BASE, "--trace", str(path), "--out", str(out)]) == 2
    )
    assert "50 positions, fewer than the generation length 64" in _error(capsys)
    assert not out.exists()


def _spec_dir_with(tmp_path: Path, device_text: str) -> Path:
    spec_dir = tmp_path / "specs"
    (spec_dir / "devices").mkdir(parents=True)
    (spec_dir / "devices" / "npu-mobile.toml").write_text(device_text)
    return spec_dir


def test_non_positive_bandwidth_in_a_spec_file_names_file_and_field(tmp_path, capsys):
    text = (BUILTIN_SPEC_DIR / "devices" / "npu-mobile.toml").read_text()
    broken = text.replace("value = 51.2e9", "value = 0.0")
    assert broken != text
    spec_dir = _spec_dir_with(tmp_path, broken)
    out = tmp_path / "out"
    argv = ["simulate", "--mode", "npu-only", *BASE, "--spec-dir", str(spec_dir), "--out", str(out)]
    assert main(argv) == 2
    err = _error(capsys)
    assert "npu-mobile.toml: field 'memory_bandwidth': value must be positive, not 0.0" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('norm = { value = "layernorm"', 'norm = { value = "batchnorm"',
         "opt-1.3b.toml: field 'norm': value must be one of layernorm, rmsnorm, not 'batchnorm'"),
        ('activation = { value = "relu"', 'activation = { value = 3',
         "opt-1.3b.toml: field 'activation': value must be one of relu, gelu, silu, not 3"),
        ('activation = { value = "relu", source', 'activation = { value = "relu", unit',
         "opt-1.3b.toml: field 'activation': needs a 'source' string"),
        ("\nnorm = ", "\n# norm = ",
         "opt-1.3b.toml: field 'norm': required for a model"),
    ],
    ids=["unknown_norm", "activation_not_a_name", "no_source", "missing"],
)  # fmt: skip
def test_a_bad_model_operator_field_names_file_and_field(tmp_path, capsys, old, new, message):
    text = (BUILTIN_SPEC_DIR / "models" / "opt-1.3b.toml").read_text()
    assert text.count(old) == 1
    spec_dir = tmp_path / "specs"
    (spec_dir / "models").mkdir(parents=True)
    (spec_dir / "models" / "opt-1.3b.toml").write_text(text.replace(old, new))
    out = tmp_path / "out"
    argv = ["simulate", "--mode", "npu-only", *BASE, "--spec-dir", str(spec_dir), "--out", str(out)]
    assert main(argv) == 2
    assert message in _error(capsys)
    assert not out.exists()


def test_a_user_spec_dir_overrides_a_device(tmp_path, capsys):
    text = (BUILTIN_SPEC_DIR / "devices" / "npu-mobile.toml").read_text()
    faster = _spec_dir_with(tmp_path, text.replace("value = 51.2e9", "value = 102.4e9"))
    argv = ["simulate", "--mode", "npu-only", *BASE, "--json"]
    assert main(argv) == 0
    slow = json.loads(capsys.readouterr().out)
    assert main([*argv, "--spec-dir", str(faster)]) == 0
    fast = json.loads(capsys.readouterr().out)
    # memory-bound on both models: twice the bandwidth, nearly twice the speed
    assert 1.9 < fast["tokens_per_s"] / slow["tokens_per_s"] <= 2.0


SWEEP = [
    "sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "svip", "adaedl",
    "--modes", "npu-only", "pim-async", "ahasd", "--tokens", "48", "--jobs", "1", *SPEC_TVC,
]  # fmt: skip


def test_sweep_appends_one_line_per_run_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main([*SWEEP, "--out", str(out)]) == 0
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    assert len(lines) == 6
    assert "6 new, 0 already" in capsys.readouterr().out
    # an interrupted sweep: the last run half-written, one run missing
    results.write_text("\n".join(lines[:4]) + "\n" + lines[4][: len(lines[4]) // 2])
    assert main([*SWEEP, "--out", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 6
    assert len(results.read_text().splitlines()) == 6
    assert all(json.loads(line) for line in results.read_text().splitlines())
    assert main([*SWEEP, "--out", str(out)]) == 0
    assert "0 new, 6 already" in capsys.readouterr().out


def test_sweep_bad_names_exit_2_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", "--modes", "ahasd", "warp", "--out", str(out)]) == 2
    assert "unknown mode 'warp'" in _error(capsys)
    assert main(["sweep", "--policies", "oracle", "--out", str(out)]) == 2
    assert not out.exists()


def test_tvc_widths_that_would_saturate_are_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    narrow = ["--tvc-ratio-bits", "32", "--tvc-cycle-bits", "32"]
    assert main(["simulate", "--mode", "ahasd", *BASE, *narrow, "--out", str(out)]) == 2
    assert "--tvc-ratio-bits 32: " in _error(capsys)
    assert not out.exists()
    # A sweep checks every run first: nothing is run, nothing is written.
    assert main([*SWEEP, *narrow, "--out", str(out)]) == 2
    err = _error(capsys)
    assert "PVCT needs" in err
    assert "opt-1.3b-6.7b" in err
    assert not out.exists()
    # The modes without the TVC do not care.
    assert main(["simulate", "--mode", "pim-async-aau-edc", *BASE, *narrow, "--json"]) == 0


def test_report_writes_tables_and_figures(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main([*SWEEP, "--modes", "gpu-only", "pim-async", "ahasd", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", "--results", str(out)]) == 0
    text = capsys.readouterr().out
    assert "The ladder on the same chip" in text
    assert "Another power class" in text
    assert "x pim-async" in text
    for name in ("ablation.csv", "comparison.csv", "ablation.png", "comparison.png"):
        assert (out / name).stat().st_size > 0
    assert main(["report", "--results", str(tmp_path / "nothing")]) == 2
    assert "no results" in _error(capsys)


def test_sweep_runs_every_configuration_on_every_trace(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = [*SWEEP, "--modes", "pim-async", "--trace", "iid:0.5", "iid:0.9", "--out", str(out)]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["trace"], r["policy"]) for r in rows) == [
        ("iid:0.5", "adaedl"),
        ("iid:0.5", "svip"),
        ("iid:0.9", "adaedl"),
        ("iid:0.9", "svip"),
    ]
    low, high = (
        [r["acceptance_rate"] for r in rows if r["trace"] == t] for t in ("iid:0.5", "iid:0.9")
    )
    assert max(low) < min(high)
