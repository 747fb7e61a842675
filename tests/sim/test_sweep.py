"""Sweeps: grid files, run identity and resume, the results lock, the Ray backend."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ahasd
from ahasd.cli import main
from ahasd.errors import UserError
from ahasd.sim.grid_files import expand, load_grid
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR, load_library
from ahasd.sim.results import ResultsDir
from ahasd.sim.run_identity import run_identity
from ahasd.sim.settings import RunSettings
from ahasd.sim.sweep import run_sweep
from ahasd.sim.traces.format import save_trace
from ahasd.sim.traces.sources import builtin_trace_names
from ahasd.sim.traces.synthetic import iid_trace

LIB = load_library()
SMALL = ["--pairs", "opt-1.3b-6.7b", "--policies", "svip", "--tokens", "48"]


def _rows(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "results.jsonl").read_text().splitlines()]


def _grid_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_a_grid_file_expands_to_the_product_of_its_axes_first_axis_outermost(tmp_path):
    grid = load_grid(
        _grid_file(
            tmp_path,
            """description = "test"
[axes]
"devices.npu-mobile.memory_bandwidth" = [25.6e9, 51.2e9]
mode = ["npu-only", "pim-async", "ahasd"]
"policy_params.max_draft" = 4
"edc.llr_bits" = [2, 3]
trace = ["builtin", "none"]
""",
        )
    )
    base = {"pair": "opt-1.3b-6.7b", "policy": "fixed", "tokens": 32}
    points = expand(grid.axes, base)
    traces = len(builtin_trace_names()) + 1
    assert len(points) == 2 * 3 * 2 * traces
    first, last = points[0], points[-1]
    assert first.spec_overrides == (("devices.npu-mobile.memory_bandwidth", 25.6e9),)
    assert last.spec_overrides == (("devices.npu-mobile.memory_bandwidth", 51.2e9),)
    assert (first.mode, last.mode) == ("npu-only", "ahasd")
    assert first.policy_params == (("max_draft", 4),)
    assert first.controller_params == (("edc.llr_bits", 2),)
    assert (first.trace, last.trace) == (builtin_trace_names()[0], None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[axes]\nwarp = [1, 2]\n", "grid axis 'warp' is unknown"),
        ('[axes]\n"devices.npu-mobile" = [1]\n', "grid axis 'devices.npu-mobile' is unknown"),
        ("[axes]\nmode = []\n", "axis 'mode' has no values"),
        ('title = "x"\n[axes]\nmode = "ahasd"\n', "unknown top-level key 'title'"),
        ('description = "x"\n', "needs an [axes] table"),
        ("[axes\n", "not valid TOML"),
    ],
)
def test_a_bad_grid_file_is_refused(tmp_path, text, message):
    with pytest.raises(UserError) as error:
        load_grid(_grid_file(tmp_path, text))
    assert message in str(error.value)


def test_sweep_runs_a_grid_file_and_rows_carry_their_identity(tmp_path, capsys):
    grid = _grid_file(
        tmp_path,
        """[axes]
"devices.@npu.memory_bandwidth" = [25.6e9, 102.4e9]
platform = ["table2", "artifact"]
mode = ["npu-only", "gpu-only"]
""",
    )
    out = tmp_path / "sweep"
    argv = ["sweep", "--grid", str(grid), *SMALL, "--out", str(out), "--jobs", "1"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8
    for row in rows:
        assert {"run_id", "config_hash", "trace_hash", "version", "scenario"} <= set(row)
        assert re.fullmatch(re.escape(ahasd.__version__) + r"\+[0-9a-f]{12}", row["version"])
    npu = [r for r in rows if r["mode"] == "npu-only"]
    gpu = [r for r in rows if r["mode"] == "gpu-only"]
    assert len({r["config_hash"] for r in npu}) == 4  # bandwidth x platform all differ
    # The GPU-only baseline reads neither the NPU nor the platform's name: one run.
    assert len({r["run_id"] for r in gpu}) == 1
    assert len({r["scenario"] for r in rows}) == 4
    assert "platform=artifact" in npu[-1]["scenario"]
    slow, fast = (r["tokens_per_s"] for r in npu if r["platform"] == "table2")
    assert fast > 3 * slow
    assert len(_rows(out)) == 8
    assert main(argv) == 0
    assert "8 runs (0 new, 8 already in" in capsys.readouterr().out
    # The report compares runs within a scenario, never across platforms or overrides.
    assert main(["report", "--results", str(out), "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)["comparison"]
    assert len({row["scenario"] for row in comparison}) == 4
    for row in comparison:
        scenario_rows = [r for r in rows if r["scenario"] == row["scenario"]]
        base = next(r for r in scenario_rows if r["mode"] == "gpu-only")
        mine = next(r for r in scenario_rows if r["mode"] == row["mode"])
        assert row["speedup_vs_gpu_only"] == pytest.approx(
            mine["tokens_per_s"] / base["tokens_per_s"]
        )


def test_grid_axes_and_sweep_options_must_not_collide(tmp_path, capsys):
    grid = _grid_file(tmp_path, '[axes]\nmode = ["ahasd"]\n')
    argv = ["sweep", "--grid", str(grid), *SMALL, "--modes", "ahasd", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "--modes and the grid file" in capsys.readouterr().err


def test_resume_reruns_exactly_the_runs_a_changed_spec_or_trace_file_affects(tmp_path, capsys):
    specs = tmp_path / "specs"
    (specs / "devices").mkdir(parents=True)
    device = specs / "devices" / "npu-mobile.toml"
    shutil.copy(BUILTIN_SPEC_DIR / "devices/npu-mobile.toml", device)
    trace = tmp_path / "trace.jsonl"
    save_trace(iid_trace(64, 0.6, 3), trace)
    out = tmp_path / "sweep"
    argv = ["sweep", *SMALL, "--modes", "npu-only", "gpu-only", "ahasd", "--out", str(out)]
    argv += ["--spec-dir", str(specs), "--trace", str(trace), "none", "--jobs", "1", "--json"]
    assert main(argv) == 0
    first = {(r["mode"], r["trace"]): r for r in json.loads(capsys.readouterr().out)}
    assert len(first) == 6
    device.write_text(device.read_text().replace("value = 51.2e9", "value = 25.6e9"))
    assert main(argv) == 0
    second = {(r["mode"], r["trace"]): r for r in json.loads(capsys.readouterr().out)}
    # Every run that reads the NPU reran (new hash, new numbers); the GPU's did not.
    for key, row in second.items():
        same = row["run_id"] == first[key]["run_id"]
        assert same == (key[0] == "gpu-only"), key
    assert (
        second[("npu-only", str(trace))]["tokens_per_s"]
        < first[("npu-only", str(trace))]["tokens_per_s"]
    )
    save_trace(iid_trace(64, 0.9, 3), trace)
    assert main(argv) == 0
    third = {(r["mode"], r["trace"]): r for r in json.loads(capsys.readouterr().out)}
    for key, row in third.items():
        assert (row["trace_hash"] == second[key]["trace_hash"]) == (key[1] != str(trace))
    assert len(_rows(out)) == 6 + 4 + 3


def test_the_run_identity_ignores_what_the_run_does_not_read():
    def identity(**extra):
        settings = RunSettings(mode="gpu-only", pair="opt-1.3b-6.7b", policy="svip", **extra)
        return run_identity(settings, LIB)["run_id"]

    base = identity()
    assert identity(platform="artifact") == base
    assert identity(spec_overrides=(("devices.npu-mobile.clock_hz", 2e9),)) == base
    assert identity(controller_params=(("edc.llr_bits", 2),)) == base  # sync mode
    assert identity(spec_overrides=(("devices.@gpu.memory_bandwidth", 1e12),)) != base
    assert identity(policy_params=(("max_draft", 3),)) != base
    assert identity(seed=1) != base


def test_a_half_written_last_line_is_dropped_on_resume(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", *SMALL, "--modes", "npu-only", "ahasd", "--out", str(out), "--jobs", "1"]
    assert main(argv) == 0
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n" + lines[1][:40])
    assert main(argv) == 0
    assert "2 runs (1 new, 1 already in" in capsys.readouterr().out
    assert [json.loads(line)["mode"] for line in results.read_text().splitlines()] == [
        "npu-only",
        "ahasd",
    ]


def test_a_second_sweep_into_a_locked_directory_stops_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "sweep"
    with ResultsDir(out):
        code = main(["sweep", *SMALL, "--modes", "npu-only", "--out", str(out)])
        err = capsys.readouterr().err
    assert code == 2
    assert f"{out} is in use by another sweep (pid " in err
    assert "started " in err
    assert not (out / "results.jsonl").read_text()
    assert main(["sweep", *SMALL, "--modes", "npu-only", "--out", str(out)]) == 0


def test_two_sweeps_started_together_never_duplicate_or_lose_a_row(tmp_path):
    out = tmp_path / "sweep"
    argv = [sys.executable, "-m", "ahasd.cli", "sweep", *SMALL, "--out", str(out), "--jobs", "1"]
    argv += ["--modes", "npu-only", "pim-async", "ahasd", "--seeds", "0", "1", "2"]
    processes = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = [(p.wait(timeout=120), p.stderr.read()) for p in processes]
    for process in processes:
        process.stdout.close()
        process.stderr.close()
    codes = sorted(code for code, _ in outcomes)
    assert codes in ([0, 0], [0, 2])
    for code, err in outcomes:
        if code == 2:
            assert "is in use by another sweep" in err
    keys = [(r["key"], r["run_id"]) for r in _rows(out)]
    assert len(keys) == 9
    assert len(set(keys)) == 9


def test_the_ray_backend_gives_the_rows_of_the_process_pool(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'ahasd[ray]')")
    points = [
        RunSettings(mode=mode, pair="opt-1.3b-6.7b", policy=policy, tokens=48, platform=platform)
        for mode in ("npu-only", "ahasd", "gpu-only")
        for policy in ("svip", "adaedl")
        for platform in ("table2", "artifact")
    ]
    local, simulated_local = run_sweep(points, tmp_path / "local", jobs=2)
    ray, simulated_ray = run_sweep(points, tmp_path / "ray", jobs=2, backend="ray")
    assert simulated_local == simulated_ray == 10  # the two gpu-only pairs are shared
    assert ray == local
    assert _sorted(_rows(tmp_path / "ray")) == _sorted(_rows(tmp_path / "local"))


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["key"], row["run_id"]))


def test_a_run_the_model_refuses_is_kept_as_an_error_row_and_not_retried(tmp_path, capsys):
    short = tmp_path / "short.jsonl"
    save_trace(iid_trace(40, 0.6, 1), short)
    good = RunSettings(mode="npu-only", pair="opt-1.3b-6.7b", policy="svip", tokens=48)
    bad = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="svip", tokens=48, trace=str(short)
    )
    rows, simulated = run_sweep([good, bad], tmp_path / "sweep")
    assert simulated == 2
    assert "error" not in rows[0]
    assert "40 positions, fewer than the generation length 48" in rows[1]["error"]
    again, simulated = run_sweep([good, bad], tmp_path / "sweep")
    assert (simulated, again) == (0, rows)
    assert main(["report", "--results", str(tmp_path / "sweep"), "--json"]) == 0
    ablation = json.loads(capsys.readouterr().out)["ablation"]
    assert [row["mode"] for row in ablation] == ["npu-only"]


def test_the_version_in_a_row_changes_with_the_model_source(monkeypatch):
    """A resumed sweep must not reuse rows of an edited model: the digest covers its code."""
    from ahasd.sim import run_identity as identity

    before = identity.model_version()
    original = Path.read_bytes

    def edited(path):
        data = original(path)
        return data + b"\n# edited" if path.name == "ladder.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    identity.model_version.cache_clear()
    try:
        assert identity.model_version() != before
    finally:
        monkeypatch.undo()
        identity.model_version.cache_clear()
    assert identity.model_version() == before
