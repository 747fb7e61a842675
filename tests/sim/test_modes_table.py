"""The mode table and the seams around it: every mode's hardware follows its row, the
ladder adds one feature per rung, the command line and the sweep list what the table
lists, and the synchronous engine's hooks are a working seam for a subclass."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

from ahasd.cli import main
from ahasd.errors import UserError
from ahasd.sim.engine import EventLoop
from ahasd.sim.library.loading import load_library
from ahasd.sim.metrics import Metrics
from ahasd.sim.modes import (
    LADDER,
    MODE_TABLE,
    Mode,
    SyncRun,
    build_hardware,
    find_mode,
    prepare_run,
)
from ahasd.sim.policies import make_policy
from ahasd.sim.settings import RunSettings
from ahasd.sim.traces.synthetic import iid_trace

# The paper's execution modes (spec section 4 and the ablation): the two GPU-hosted
# baselines (another power class), the two same-chip baselines, then the ladder.
PAPER_MODES = (
    "gpu-only",
    "specpim-gpu",
    "npu-only",
    "specpim-npu",
    "pim-async",
    "pim-async-aau",
    "pim-async-aau-edc",
    "ahasd",
)


def test_the_table_holds_the_papers_modes_in_order():
    assert tuple(mode.name for mode in MODE_TABLE) == PAPER_MODES
    assert PAPER_MODES[4:] == LADDER
    assert [m.name for m in MODE_TABLE if m.other_class] == ["gpu-only", "specpim-gpu"]


def test_the_old_specpim_name_says_what_it_became():
    with pytest.raises(UserError, match="'specpim' is now 'specpim-gpu'"):
        find_mode("specpim")


@pytest.mark.parametrize("mode", MODE_TABLE, ids=lambda mode: mode.name)
def test_every_mode_builds_the_hardware_its_row_names(mode):
    settings = RunSettings(mode=mode.name, pair="opt-1.3b-6.7b", policy="fixed")
    hardware = build_hardware(prepare_run(settings, load_library()))
    assert hardware.devices == mode.devices
    assert (hardware.draft_device, hardware.verify_device) == (
        mode.draft_device,
        mode.verify_device,
    )
    # Only the asynchronous engine pre-verifies on the PIM's target ranks.
    assert (hardware.preverify_pass is not None) == (mode.engine == "async")
    assert set(hardware.static_w) <= {*mode.devices, "memory"}


def test_each_rung_of_the_ladder_adds_exactly_one_feature():
    def features(row):
        return {name for name in ("aau", "edc", "tvc") if getattr(row, name)}

    rows = [find_mode(name) for name in LADDER]
    assert not features(rows[0]), "the first rung is the baseline"
    for lower, upper in pairwise(rows):
        before, after = features(lower), features(upper)
        assert before < after, (lower.name, upper.name)
        assert len(after - before) == 1, (lower.name, upper.name)


def test_an_unknown_mode_is_a_user_error_listing_the_table():
    with pytest.raises(UserError, match="unknown mode 'warp'") as error:
        find_mode("warp")
    for name in PAPER_MODES:
        assert name in str(error.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"engine": "batch"}, "mode 'x': engine must be one of"),
        ({"assembly": "tpu"}, "mode 'x': assembly must be one of"),
        ({"edc": True}, "mode 'x': aau, edc and tvc need the async engine"),
    ],
)
def test_a_bad_table_row_is_rejected(fields, message):
    row = {
        "name": "x",
        "engine": "sync",
        "assembly": "gpu",
        "draft_device": "gpu",
        "verify_device": "gpu",
        "devices": ("gpu",),
        "summary": "",
        **fields,
    }
    with pytest.raises(ValueError, match=message):
        Mode(**row)


def test_simulate_help_lists_every_mode_with_its_summary(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # argparse wraps at hyphens otherwise
    assert main(["simulate", "--help"]) == 0
    text = capsys.readouterr().out
    for mode in MODE_TABLE:
        assert f"{mode.name}: {mode.summary}" in text


def test_a_sweep_without_axes_runs_the_papers_grid(tmp_path, capsys):
    argv = ["sweep", "--tokens", "8", "--trace", "iid:0.6", "--jobs", "1", "--json"]
    spec_tvc = ["--tvc-ratio-bits", "40", "--tvc-cycle-bits", "40"]  # spec 2.2's widths
    assert main([*argv, *spec_tvc, "--out", str(tmp_path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    # SpecPIM on the laptop GPU refuses the two pairs over its 16 GB (4 policies each).
    assert len(rows) == 3 * 4 * 8 - 2 * 4
    assert {r["mode"] for r in rows} == set(PAPER_MODES)
    assert {r["policy"] for r in rows} == {"specdecpp", "svip", "adaedl", "banditspec"}
    assert {r["pair"] for r in rows} == {"opt-1.3b-6.7b", "llama2-7b-13b", "palm-8b-30b"}


class _ThreeRounds(SyncRun):
    """Through the documented hooks only: stop after three rounds, count the hooks."""

    def __init__(self, *args):
        super().__init__(*args)
        self.rounds = 0
        self.calls = {"draft": 0, "verify": 0, "verified": 0, "finish": 0}

    def round_start(self):
        if self.rounds == 3:
            self.finish()
            return
        self.rounds += 1
        self.round_t0 = self.loop.now
        self.begin_round(2)  # the policy (fixed, k = 4) would go on; the hook caps it at 2

    def draft(self, i):
        self.calls["draft"] += 1
        super().draft(i)

    def verify(self, kept):
        self.calls["verify"] += 1
        super().verify(kept)

    def verified(self, kept):
        self.calls["verified"] += 1
        super().verified(kept)

    def finish(self):
        self.calls["finish"] += 1
        super().finish()


def test_the_sync_engine_hooks_are_a_seam_for_subclasses():
    settings = RunSettings(mode="npu-only", pair="opt-1.3b-6.7b", policy="fixed", tokens=64)
    hardware = build_hardware(prepare_run(settings, load_library()))
    trace = iid_trace(64, 0.9, 0)  # the run's accept flags below override its draws
    policy = make_policy("fixed", k=4)
    loop, metrics = EventLoop(), Metrics()
    run = _ThreeRounds(settings, hardware, trace, policy, metrics, loop, [True] * 64)
    run.start()
    loop.run()
    assert run.done
    # Three rounds of two accepted drafts each, plus the target's bonus token per round.
    assert run.calls == {"draft": 6, "verify": 3, "verified": 3, "finish": 1}
    assert run.committed == 3 * (2 + 1)
    assert metrics.counts["accepted"] == 6
    assert metrics.counts["drafted"] == 6
