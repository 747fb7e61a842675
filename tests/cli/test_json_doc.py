"""docs/json.md documents exactly the keys the commands print, and every object has its
``schema``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ahasd.sim.modes import MODES

DOC = Path(__file__).resolve().parents[2] / "docs" / "json.md"
PAIR = ["--pair", "opt-1.3b-6.7b", "--policy", "svip", "--tokens", "16"]
# Keys of ahasd-run/1 that docs/json.md says a phone run does not have.
NOT_IN_PHONE = {
    "pim_draft_ranks",
    "pim_target_ranks",
    "pim_units",
    "rank_split",
    "specpim_planned_draft",
    "specpim_pim_fraction_draft",
    "specpim_pim_fraction_target",
    "gpu_precision",
    "gpu_resident_target",
    "gpu_resident_draft",
    "controller",
}


def _documented() -> dict[str, set[str]]:
    """schema -> keys in the first column of its section's table."""
    sections: dict[str, set[str]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"#{2,3} `([a-z-]+/\d+)`", line)
        if heading:
            current = sections.setdefault(heading.group(1), set())
        elif current is not None and line.startswith("| `"):
            first_cell = line.split("|")[1]
            current.update(re.findall(r"`([a-z0-9_]+)`", first_cell))
    return sections


DOCUMENTED = _documented()


def _printed(ahasd, *argv):
    outcome = ahasd(*argv)
    assert outcome.code == 0, outcome.err
    return json.loads(outcome.out)


def test_the_document_has_a_section_per_schema():
    assert set(DOCUMENTED) == {
        "ahasd-run/1",
        "ahasd-phone-run/1",
        "ahasd-sweep-run/2",
        "ahasd-report/1",
        "ahasd-ablation-row/1",
        "ahasd-comparison-row/1",
        "ahasd-ladder-row/1",
        "ahasd-other-class-row/1",
    }


def test_simulate_keys_over_every_mode_are_the_documented_ones(ahasd):
    seen = set()
    for mode in MODES:
        summary = _printed(ahasd, "simulate", "--mode", mode, *PAIR, "--json")
        assert summary["schema"] == "ahasd-run/1"
        assert next(iter(summary)) == "schema"
        seen |= set(summary)
    # A pair that exceeds a GPU with a host link adds the resident shares of its models.
    offload = ["--gpu", "rtx4090-laptop", "--pair", "palm-8b-30b", "--policy", "fixed"]
    seen |= set(
        _printed(ahasd, "simulate", "--mode", "gpu-only", *offload, "--tokens", "16", "--json")
    )
    assert seen == DOCUMENTED["ahasd-run/1"]


@pytest.mark.parametrize("mode", ["npu-gpu-hetero", "all"])
def test_phone_keys_are_the_documented_ones(ahasd, mode):
    argv = ["simulate", "--platform", "sd8gen3", "--duration", "2", "--tokens", "64"]
    printed = _printed(ahasd, *argv, "--mode", mode, "--json")
    objects = printed if mode == "all" else [printed]
    assert isinstance(printed, list) == (mode == "all")
    expected = (DOCUMENTED["ahasd-run/1"] - NOT_IN_PHONE) | DOCUMENTED["ahasd-phone-run/1"]
    for summary in objects:
        assert summary["schema"] == "ahasd-phone-run/1"
        assert set(summary) == expected


def test_sweep_and_report_keys_are_the_documented_ones(tmp_path, ahasd):
    out = tmp_path / "sweep"
    argv = ["sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--tokens", "16"]
    rows = _printed(ahasd, *argv, "--modes", "gpu-only", "pim-async", "--out", out, "--json")
    seen = set()
    for row in rows:
        assert row["schema"] == "ahasd-sweep-run/2"
        seen |= set(row)
    run_keys = DOCUMENTED["ahasd-run/1"] - {
        "specpim_planned_draft",
        "specpim_pim_fraction_draft",
        "specpim_pim_fraction_target",
        "gpu_resident_target",
        "gpu_resident_draft",
    }
    assert seen == run_keys | (DOCUMENTED["ahasd-sweep-run/2"] - {"error"})
    written = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(row["schema"] == "ahasd-sweep-run/2" for row in written)

    tables = _printed(ahasd, "report", "--results", out, "--json")
    assert tables["schema"] == "ahasd-report/1"
    assert set(tables) == DOCUMENTED["ahasd-report/1"]
    for name, schema in (
        ("ablation", "ahasd-ablation-row/1"),
        ("comparison", "ahasd-comparison-row/1"),
        ("ladder", "ahasd-ladder-row/1"),
        ("other_class", "ahasd-other-class-row/1"),
    ):
        assert tables[name]
        for row in tables[name]:
            assert row["schema"] == schema
            assert set(row) == DOCUMENTED[schema]


def test_simulate_out_writes_the_printed_object(tmp_path, ahasd):
    printed = _printed(ahasd, "simulate", "--mode", "gpu-only", *PAIR, "--json", "--out", tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text()) == printed
