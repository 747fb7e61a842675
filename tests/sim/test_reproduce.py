"""``ahasd reproduce``: the report's sections, its numbers against direct runs, resume."""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import pytest

from ahasd.cli import main
from ahasd.sim.library.loading import load_library
from ahasd.sim.modes import simulate
from ahasd.sim.reproduce.regime import regime_figure
from ahasd.sim.reproduce.study import RUNGS, SETTING_READINGS, uncertain_numbers
from ahasd.sim.settings import RunSettings

SMALL = [
    "--platforms",
    "table2",
    "artifact",
    "--gpus",
    "rtx4090-laptop",
    "rtx4090-laptop-fp16",
    "--pairs",
    "opt-1.3b-6.7b",
    "--policies",
    "adaedl",
    "--tokens",
    "32",
    "--regime-npu-bandwidth",
    "25.6e9",
    "204.8e9",
    "--regime-pim-scale",
    "1",
    "16",
    "--jobs",
    "2",
]


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    assert main(["reproduce", *SMALL, "--out", str(out)]) == 0
    return out


def test_the_report_has_every_section_table_and_figure(reproduced):
    text = (reproduced / "report.md").read_text()
    for heading in (
        "## 1. The ladder per platform",
        "## 2. Against each GPU baseline",
        "## 3. Memory sharing",
        "## 4. Sensitivity of each rung's gain (table2)",
        "## 5. Regime map (table2)",
    ):
        assert heading in text
    for name in ("ladder.png", "tornado.png", "regime.png"):
        assert (reproduced / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text
    for label, _, _ in RUNGS:
        assert f"| {label} |" in text  # one sensitivity row per rung
    assert "- On **table2** the largest rung is" in text
    assert "- On **artifact** the largest rung is" in text


def test_the_ladder_gains_match_direct_runs(reproduced):
    ladder = (reproduced / "ladder.csv").read_text().splitlines()
    header = ladder[0].split(",")
    rows = {
        line.split(",")[0]: dict(zip(header, line.split(","), strict=True)) for line in ladder[1:]
    }

    def speed(mode, **extra):
        settings = RunSettings(mode=mode, pair="opt-1.3b-6.7b", policy="adaedl", tokens=32, **extra)
        return simulate(settings).summary["tokens_per_s"]

    for platform in ("table2", "artifact"):
        for label, mode, base in RUNGS[:4]:
            expected = speed(mode, platform=platform) / speed(base, platform=platform)
            assert float(rows[platform][label]) == pytest.approx(expected, rel=1e-9)
    baselines = (reproduced / "baselines.csv").read_text()
    fp16 = speed("gpu-only", gpu="rtx4090-laptop-fp16")
    assert f"{speed('ahasd', platform='artifact') / fp16!r}"[:10] in baselines


def test_the_sensitivity_varies_every_uncertain_number_at_both_ends(reproduced):
    numbers = [n for n in uncertain_numbers(load_library(), "table2") if n.span]
    with (reproduced / "sensitivity.csv").open() as handle:
        speed_rows = [row for row in csv.DictReader(handle) if row["metric"] == "speed"]
    # Every number, and the platform options' readings (rank split, KV reuse), per rung.
    assert len(speed_rows) == (len(numbers) + len(SETTING_READINGS)) * len(RUNGS)
    # One number by hand: the NPU's bandwidth at the low end of its efficiency range.
    npu_eta = next(n for n in numbers if n.path == "devices.npu-mobile.eta_memory")
    override = (("devices.npu-mobile.eta_memory", npu_eta.span[1]),)
    run = {"pair": "opt-1.3b-6.7b", "policy": "adaedl", "tokens": 32}
    fast = simulate(RunSettings(mode="npu-only", spec_overrides=override, **run)).summary
    async_fast = simulate(RunSettings(mode="pim-async", spec_overrides=override, **run)).summary
    expected = async_fast["tokens_per_s"] / fast["tokens_per_s"]
    row = next(
        row
        for row in speed_rows
        if row["rung"] == "pim-async / npu-only" and row["number"] == npu_eta.path
    )
    assert float(row["gain_high"]) == pytest.approx(expected, rel=1e-9)
    # The rank split: table2 reads target-first; its other readings are the two ends
    # (footprint, fixed). The fixed end by hand, from direct runs:
    fixed = {"rank_split": "fixed", **run}
    expected = (
        simulate(RunSettings(mode="pim-async", **fixed)).summary["tokens_per_s"]
        / simulate(RunSettings(mode="npu-only", **fixed)).summary["tokens_per_s"]
    )
    row = next(
        row
        for row in speed_rows
        if row["rung"] == "pim-async / npu-only" and row["number"] == "settings.rank_split"
    )
    assert float(row["gain_high"]) == pytest.approx(expected, rel=1e-9)


def test_reproduce_resumes_without_simulating_again(reproduced, capsys):
    assert main(["reproduce", *SMALL, "--out", str(reproduced)]) == 0
    assert "(0 simulated" in capsys.readouterr().out


def test_reproduce_refuses_bad_names(tmp_path, capsys):
    assert main(["reproduce", "--platforms", "tpu", "--out", str(tmp_path / "r")]) == 2
    assert "unknown platform 'tpu'" in capsys.readouterr().err
    assert main(["reproduce", "--gpus", "npu-mobile", "--out", str(tmp_path / "r")]) == 2
    assert "is a npu, not a gpu" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_each_regime_panel_is_titled_with_the_rung_it_shows():
    # (The title once took the last cell's number: the cell loop reused the label's name.)
    config = SimpleNamespace(regime_pim_scale=(1.0, 2.0), regime_npu_bandwidth=(1e9,))
    table = {"pim-async / npu-only": [[1.1, 0.9]], "ahasd / specpim-npu": [[0.8, math.nan]]}
    fig = regime_figure(SimpleNamespace(config=config), table)
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == list(table)
