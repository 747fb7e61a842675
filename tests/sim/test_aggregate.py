"""How the tables match runs and average them (ahasd.sim.aggregate), on figures chosen by hand."""

from __future__ import annotations

import math

import pytest

from ahasd.sim.aggregate import (
    accepted_per_drafted,
    geomean,
    match_index,
    matched,
    mean,
    ratio_geomean,
    ratios,
    run_means,
)


def _run(mode: str, policy: str, tokens_per_s: float, energy: float, **extra) -> dict:
    return {
        "mode": mode,
        "pair": "p",
        "policy": policy,
        "seed": 0,
        "tokens": 100,
        "tokens_per_s": tokens_per_s,
        "energy_per_token_mj": energy,
        "acceptance_rate": 0.5,
        "drafted": 200,
        "accepted": 50,
        **extra,
    }


def test_the_means_leave_out_what_is_not_finite_and_are_nan_of_nothing():
    assert mean([1.0, 2.0, math.nan, 6.0]) == 3.0
    assert geomean([2.0, 8.0, 0.0, -1.0, math.inf]) == pytest.approx(4.0)
    assert math.isnan(mean([]))
    assert math.isnan(geomean([math.nan, 0.0]))


def test_a_ratio_pairs_each_run_with_the_base_run_of_its_policy_only():
    results = [
        _run("fast", "a", 40.0, 10.0),
        _run("fast", "b", 90.0, 30.0),
        _run("base", "a", 10.0, 40.0),
        _run("base", "b", 10.0, 30.0),
        _run("fast", "c", 70.0, 5.0),  # no base run of policy c: left out
    ]
    index = match_index(results)
    pairs = matched([r for r in results if r["mode"] == "fast"], index, "base")
    assert [base is None for _, base in pairs] == [False, False, True]
    assert ratios(pairs, "tokens_per_s") == [4.0, 9.0]
    assert ratio_geomean(pairs, "tokens_per_s") == pytest.approx(6.0)
    # Efficiency is the base's energy over the run's: 4 and 1, geometric mean 2.
    assert ratio_geomean(pairs, "energy_per_token_mj", inverted=True) == pytest.approx(2.0)


def test_runs_of_another_scenario_or_seed_do_not_match():
    results = [
        _run("fast", "a", 40.0, 10.0, scenario="platform=x"),
        _run("base", "a", 10.0, 40.0, scenario="platform=y"),
        _run("fast", "b", 40.0, 10.0, seed=1),
        _run("base", "b", 10.0, 40.0, seed=2),
    ]
    pairs = matched([r for r in results if r["mode"] == "fast"], match_index(results), "base")
    assert all(base is None for _, base in pairs)
    assert math.isnan(ratio_geomean(pairs, "tokens_per_s"))


def test_run_means_prefer_a_runs_own_acceptance_over_drafted():
    runs = [_run("m", "a", 10.0, 20.0), _run("m", "b", 30.0, 40.0, accepted_per_drafted=0.75)]
    assert accepted_per_drafted(runs[0]) == 0.25
    assert run_means(runs) == {
        "runs": 2,
        "tokens_per_s": 20.0,
        "energy_per_token_mj": 30.0,
        "acceptance_rate": 0.5,
        "accepted_per_drafted": 0.5,
        "drafted_per_token": 2.0,
    }
