"""Engine invariants: token conservation, determinism, the swappable controller, event order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness.seeds import choose_seed as seed_for

from ahasd.sim.controller import GoldenController
from ahasd.sim.engine import EventLoop
from ahasd.sim.modes import MODES, find_mode, simulate
from ahasd.sim.settings import RunSettings

POLICIES = ("specdecpp", "svip", "adaedl", "banditspec", "fixed", "threshold")
# Spec 2.2's TVC widths (UQ32.8 ratios, 40-bit cycles); narrower ones saturate on the paper's
# platform and the TVC modes refuse them.
SPEC_TVC = {"tvc_ratio_bits": 40, "tvc_cycle_bits": 40}
TEST_SPECS = Path(__file__).parent / "specs"


def _check_conservation(summary: dict, tokens: int) -> None:
    # every drafted token ends exactly once as accepted, rejected or squashed
    assert summary["drafted"] == summary["accepted"] + summary["rejected"] + summary["squashed"]
    # committed tokens = accepted drafts + tokens the target produced itself
    assert summary["tokens"] == tokens == summary["accepted"] + summary["target_tokens"]
    # each rejection ends a pass with the target's correction token
    assert summary["rejected"] <= summary["target_tokens"]
    assert summary["dropped"] <= summary["squashed"]
    for device, busy in summary["busy_s"].items():
        assert 0 <= busy <= summary["seconds"] * (1 + 1e-9), device


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", POLICIES)
def test_conservation_on_synthetic_traces(mode, policy):
    seed = seed_for(7)
    tokens = 200
    # The laptop GPU's 16 GB hold only the small pair (SpecPIM's split refuses the others).
    pair = "opt-1.3b-6.7b" if find_mode(mode).other_class else "llama2-7b-13b"
    settings = RunSettings(
        mode=mode, pair=pair, policy=policy, tokens=tokens, seed=seed, **SPEC_TVC
    )
    summary = simulate(settings).summary
    _check_conservation(summary, tokens)
    if "controller" in summary:
        assert not summary["controller"]["edc_error"]
        assert not summary["controller"]["tvc_error"]


@pytest.mark.parametrize("mode", ["pim-async", "pim-async-aau-edc", "ahasd"])
@pytest.mark.parametrize("acceptance", [0.2, 0.95])
def test_conservation_at_extreme_acceptance_with_fallback(mode, acceptance):
    settings = RunSettings(
        mode=mode,
        pair="opt-1.3b-6.7b",
        policy="adaedl",
        tokens=300,
        seed=seed_for(11),
        trace=f"iid:{acceptance}",
        fallback=True,
        # The per-unit PIM reading, on which TVC orders pre-verifications (tests/sim/specs).
        pim="lpddr5-pim-x16",
        spec_dirs=(str(TEST_SPECS),),
        **SPEC_TVC,
    )
    _check_conservation(simulate(settings).summary, 300)


def test_same_seed_same_result_in_one_process_and_different_seed_differs():
    common = {"mode": "ahasd", "pair": "opt-1.3b-6.7b", "policy": "banditspec", **SPEC_TVC}
    settings = RunSettings(tokens=256, seed=3, **common)
    first = simulate(settings).summary
    simulate(RunSettings(**{**common, "pair": "palm-8b-30b", "policy": "svip"}, tokens=64, seed=9))
    again = simulate(settings).summary
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    other = simulate(RunSettings(tokens=256, seed=4, **common)).summary
    assert other["seconds"] != first["seconds"]


def test_same_seed_same_result_across_processes():
    argv = [
        "simulate", "--mode", "pim-async-aau-edc", "--pair", "llama2-7b-13b",
        "--policy", "specdecpp", "--tokens", "128", "--seed", "5", "--json",
    ]  # fmt: skip
    code = "import sys; from ahasd.cli import main; sys.exit(main(sys.argv[1:]))"
    outputs = [
        subprocess.run(
            [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1]
    in_process = simulate(
        RunSettings(
            mode="pim-async-aau-edc", pair="llama2-7b-13b", policy="specdecpp", tokens=128, seed=5
        )
    ).summary
    printed = json.loads(outputs[0])
    assert printed.pop("schema") == "ahasd-run/1"
    assert printed == json.loads(json.dumps(in_process))


class AlwaysContinue(GoldenController):
    """A swapped-in controller whose EDC never suppresses (and never fills up)."""

    def edc_full(self):
        return False

    def edc_draft(self, entropy_sum, length):
        return True

    def edc_verify(self, full, entropy_sum, accepted):
        pass


def test_a_swapped_controller_that_never_suppresses_gives_the_mode_without_edc():
    # Without suppression, pim-async-aau-edc schedules exactly like pim-async-aau (the
    # batch cap of 31 tokens never binds: the policies draft at most 20).
    common = {"pair": "opt-1.3b-6.7b", "policy": "specdecpp", "tokens": 300, "seed": 2}
    swapped = simulate(
        RunSettings(mode="pim-async-aau-edc", **common), controller=AlwaysContinue()
    ).summary
    plain = simulate(RunSettings(mode="pim-async-aau", **common)).summary
    for key in ("seconds", "drafted", "accepted", "rejected", "squashed", "energy_j"):
        assert swapped[key] == plain[key], key
    assert swapped["edc_suppressions"] == 0


def test_edc_suppression_reduces_wasted_drafts():
    common = {"pair": "opt-1.3b-6.7b", "policy": "adaedl", "tokens": 512, "seed": 1}
    plain = simulate(RunSettings(mode="pim-async-aau", **common)).summary
    edc = simulate(RunSettings(mode="pim-async-aau-edc", **common)).summary
    assert edc["edc_suppressions"] > 0
    assert edc["squashed"] < plain["squashed"]


def test_event_loop_orders_by_time_then_insertion():
    loop = EventLoop()
    seen = []
    loop.at(2.0, seen.append, "c")
    loop.at(1.0, seen.append, "a")
    loop.at(1.0, seen.append, "b")
    loop.at(0.5, lambda: [(3.0, seen.append, ("d",))])  # a follow-up returned by a handler
    loop.run()
    assert seen == ["a", "b", "c", "d"]
    assert loop.now == 3.0
    with pytest.raises(ValueError, match="before now"):
        loop.at(1.0, seen.append, "late")
