"""Synthetic generator: calibration against the cited acceptance figures, shape, determinism.

Expected values come from the sources in ``docs/sources.md`` (Spec-Bench: 2.29 accepted
tokens per step at draft length 4; Qwen2.5 0.5B/7B: rejection 23.8% later, 33.0% before token
20, 13.7% code, 33.5% translation), not from the generator.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from harness import seeds

from ahasd.errors import UserError
from ahasd.sim.traces import synthetic

LONG = 200_000


def leviathan_tokens_per_step(alpha: float, draft_len: int) -> float:
    return (1 - alpha ** (draft_len + 1)) / (1 - alpha)


def test_spec_bench_alpha_inversion():
    # Hand: a = 0.5962 gives 1 + .5962 + .35545 + .21192 + .12635 = 2.28992.
    alpha = synthetic.SPEC_BENCH_ALPHA
    assert alpha == pytest.approx(0.5962, abs=2e-4)
    assert leviathan_tokens_per_step(alpha, 4) == pytest.approx(2.29, abs=1e-9)


@pytest.mark.parametrize("preset", ["opt-1.3b-6.7b", "llama2-7b-13b", "palm-8b-30b"])
def test_paper_pairs_match_spec_bench(preset):
    seed = seeds.choose_seed(11)
    trace = synthetic.generate(preset, LONG, seed)
    alpha = float(np.mean(trace.beta))
    # Spec-Bench: 2.29 tokens per step at g = 4 <=> alpha = 0.5962.
    assert alpha == pytest.approx(0.5962, abs=0.015)
    assert leviathan_tokens_per_step(alpha, 4) == pytest.approx(2.29, abs=0.06)


def test_smollm_preset_matches_qwen_figures():
    seed = seeds.choose_seed(12)
    rng = np.random.default_rng(seed)
    early, late = [], []
    for _ in range(600):
        trace = synthetic.generate("smollm-135m-llama3.1-8b", 60, int(rng.integers(1 << 30)))
        early.append(trace.beta[:20])
        late.append(trace.beta[20:])
    # 33.0% rejection before token 20, 23.8% after.
    assert 1 - np.mean(early) == pytest.approx(0.330, abs=0.02)
    assert 1 - np.mean(late) == pytest.approx(0.238, abs=0.02)


@pytest.mark.parametrize(("task", "rejection"), [("code", 0.137), ("translation", 0.335)])
def test_smollm_task_figures(task, rejection):
    seed = seeds.choose_seed(13)
    trace = synthetic.generate("smollm-135m-llama3.1-8b", LONG, seed, task=task)
    assert 1 - np.mean(trace.beta[20:]) == pytest.approx(rejection, abs=0.015)


def test_acceptance_override_and_realised_flags():
    seed = seeds.choose_seed(14)
    trace = synthetic.generate("llama2-7b-13b", LONG, seed, acceptance=0.8, realise=True)
    assert np.mean(trace.beta) == pytest.approx(0.8, abs=0.015)
    # Realised flags are Bernoulli(beta): their mean matches beta's within 5 sigma.
    sigma = np.sqrt(np.sum(trace.beta * (1 - trace.beta))) / LONG
    assert abs(trace.accept.mean() - trace.beta.mean()) < 5 * sigma


@pytest.mark.parametrize("preset", sorted(synthetic.PRESETS))
def test_acceptance_falls_with_entropy(preset):
    """SVIP/AdaEDL: acceptance falls monotonically with draft entropy."""
    seed = seeds.choose_seed(15)
    trace = synthetic.generate(preset, LONG, seed)
    edges = np.quantile(trace.draft_entropy, np.linspace(0, 1, 6))
    which = np.clip(np.searchsorted(edges, trace.draft_entropy, side="right") - 1, 0, 4)
    means = [trace.beta[which == b].mean() for b in range(5)]
    assert all(a > b for a, b in itertools.pairwise(means)), means


def test_regimes_and_identities():
    seed = seeds.choose_seed(16)
    preset = synthetic.PRESETS["opt-1.3b-6.7b"]
    trace = synthetic.generate(preset, LONG, seed)
    # Stationary share of the strong regime of a two-state chain with geometric stretches.
    expected = preset.strong_stretch / (preset.strong_stretch + preset.weak_stretch)
    assert trace.header.meta["strong_fraction"] == pytest.approx(expected, abs=0.02)
    assert (trace.draft_top1 >= np.exp(-trace.draft_entropy)).all()
    assert trace.draft_entropy.max() <= np.log(50272) + 1e-12
    assert trace.header.meta["citation"].startswith("Spec-Bench")


def test_deterministic_by_seed():
    a = synthetic.generate("palm-8b-30b", 500, 7)
    b = synthetic.generate("palm-8b-30b", 500, 7)
    c = synthetic.generate("palm-8b-30b", 500, 8)
    np.testing.assert_array_equal(a.beta, b.beta)
    np.testing.assert_array_equal(a.draft_entropy, b.draft_entropy)
    assert not np.array_equal(a.beta, c.beta)


def test_iid_trace():
    seed = seeds.choose_seed(17)
    trace = synthetic.iid_trace(100_000, 0.7, seed, realise=True)
    assert (trace.beta == 0.7).all()
    # Binomial(100000, 0.7): sigma = sqrt(0.21 / 100000) = 0.00145.
    assert abs(trace.accept.mean() - 0.7) < 5 * 0.00145
    # Entropy carries no information about acceptance.
    assert abs(np.corrcoef(trace.draft_entropy, trace.accept)[0, 1]) < 0.02


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: synthetic.generate("gpt-5", 10, 0), r"unknown preset 'gpt-5' \(known: opt-1.3b"),
        (
            lambda: synthetic.generate("opt-1.3b-6.7b", 0, 0),
            r"trace length must be an integer in 1\.\.1000000, not 0",
        ),
        (
            lambda: synthetic.generate("opt-1.3b-6.7b", 10**13, 0),
            r"trace length must be an integer in 1\.\.1000000, not 10000000000000",
        ),
        (
            lambda: synthetic.generate("opt-1.3b-6.7b", 10, -1),
            "seed must be a non-negative integer",
        ),
        (lambda: synthetic.iid_trace(10, 0.5, -1), "seed must be a non-negative integer"),
        (
            lambda: synthetic.generate("opt-1.3b-6.7b", 10, 0, acceptance=1.0),
            "strictly between 0 and 1",
        ),
        (lambda: synthetic.generate("opt-1.3b-6.7b", 10, 0, task="code"), "has no task 'code'"),
        (lambda: synthetic.iid_trace(10, -0.5, 0), "strictly between 0 and 1"),
    ],
)
def test_rejections(call, message):
    with pytest.raises(UserError, match=message):
        call()
