"""Synchronous modes against the closed forms of Leviathan et al. (2023).

With i.i.d. acceptance ``a``, a fixed draft length ``g`` and a draft/target cost ratio ``c``,
tokens per iteration X follow P(X = k) = a^(k-1) (1 - a) for k = 1..g and P(X = g+1) = a^g,
so E[X] = (1 - a^(g+1)) / (1 - a), and the walltime speedup over autoregression is
E[X] / (g c + 1). The engine runs with fixed task costs (draft c, any verification 1, which
is the closed form's assumption) so only its scheduling and acceptance logic are under test.

Tolerance: 4 standard errors of the mean of X over the R simulated iterations, with the
variance computed exactly from the distribution above (a correct engine fails one check with
probability about 6e-5), plus, for the speedup, a bound on the end-of-generation effect: at
most g + 1 final rounds are shortened, moving tokens and time by at most (g + 1)^2 / R.
"""

from __future__ import annotations

import math

import pytest
from harness.seeds import choose_seed as seed_for

from ahasd.sim.cost import Cost
from ahasd.sim.modes import SYNC_MODES, Hardware, simulate
from ahasd.sim.policies import make_policy
from ahasd.sim.settings import RunSettings
from ahasd.sim.traces.synthetic import iid_trace

TOKENS = 6000


def _fixed_cost_hardware(c: float) -> Hardware:
    draft = Cost(seconds=c, energy_j=0.0)
    verify = Cost(seconds=1.0, energy_j=0.0)
    return Hardware(
        draft_pass=lambda tokens, context: draft,
        verify_pass=lambda tokens, context: verify,
        preverify_pass=None,
        draft_device="npu",
        verify_device="npu",
        devices=("npu",),
        static_w={},
    )


def _moments(a: float, g: int) -> tuple[float, float]:
    pmf = {k: a ** (k - 1) * (1 - a) for k in range(1, g + 1)}
    pmf[g + 1] = a**g
    mean = sum(k * p for k, p in pmf.items())
    var = sum((k - mean) ** 2 * p for k, p in pmf.items())
    return mean, var


@pytest.mark.parametrize("mode", SYNC_MODES)
@pytest.mark.parametrize(("a", "g", "c"), [(0.6, 2, 0.1), (0.8, 4, 0.05), (0.5, 6, 0.2)])
def test_sync_modes_match_the_closed_forms(mode, a, g, c):
    seed = seed_for(1000 + g)
    settings = RunSettings(
        mode=mode, pair="opt-1.3b-6.7b", policy="fixed", tokens=TOKENS, seed=seed
    )
    result = simulate(
        settings,
        trace=iid_trace(TOKENS, a, seed),
        hardware=_fixed_cost_hardware(c),
        policy=make_policy("fixed", k=g),
    )
    rounds = result.metrics.round_tokens
    mean, var = _moments(a, g)
    assert mean == pytest.approx((1 - a ** (g + 1)) / (1 - a))
    # tokens per iteration, final (possibly shortened) rounds excluded
    body = rounds[: -(g + 1)]
    observed = sum(body) / len(body)
    stderr = math.sqrt(var / len(body))
    assert abs(observed - mean) < 4 * stderr, (observed, mean, stderr)
    # walltime speedup over autoregression (an AR step costs 1)
    summary = result.summary
    speedup = summary["tokens"] * 1.0 / summary["seconds"]
    expected = mean / (g * c + 1)
    r = len(rounds)
    tolerance = 4 * stderr / (g * c + 1) + expected * (g + 1) ** 2 / r
    assert abs(speedup - expected) < tolerance, (speedup, expected, tolerance)
    assert summary["tokens"] == TOKENS


def test_autoregressive_steps_cost_one_target_pass_each():
    settings = RunSettings(mode="npu-only", pair="opt-1.3b-6.7b", policy="fixed", tokens=50)

    class NeverDraft:
        name = "never"

        def reset(self, rng):
            pass

        def start_round(self):
            return 0

        def step(self, i, token):
            raise AssertionError("no round drafts")

        def end_round(self, drafted, accepted, seconds):
            assert drafted == accepted == 0

    result = simulate(
        settings,
        trace=iid_trace(50, 0.5, 1),
        hardware=_fixed_cost_hardware(0.1),
        policy=NeverDraft(),
    )
    assert result.summary["seconds"] == pytest.approx(50.0)
    assert result.summary["ar_steps"] == 50
    assert result.summary["drafted"] == 0
