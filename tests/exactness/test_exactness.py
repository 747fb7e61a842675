"""Spec section 6: speculative sampling leaves the target's output distribution unchanged.

Statistical design: each exactness case draws 200,000 independent sequences of 4 tokens over a
4-token vocabulary (256 cells) and applies Pearson's chi-square test (cells with expected count
below 5 pooled) at a false-alarm rate of 1e-3 per case; with the 5 exact cases below the chance
that a correct engine fails any of them is at most 0.5% for a fresh seed (the default seeds are
fixed, so the suite is deterministic). The argmax-bonus case must exceed the critical value by
a factor of 10: it is a power check, showing the test does catch a biased rule.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from harness import seeds

from ahasd.sim.exactness import (
    MarkovModel,
    acceptance_probability,
    chi_square_critical,
    chi_square_statistic,
    exact_sequence_distribution,
    residual,
    sequence_counts,
    speculative_sequences,
    total_variation,
)

SAMPLES = 200_000
VOCAB = 4
LENGTH = 4
FALSE_ALARM = 1e-3


def test_acceptance_and_residual_by_hand():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.5, 0.3])
    assert acceptance_probability(p, q) == pytest.approx(0.2 + 0.3 + 0.2)
    np.testing.assert_allclose(residual(p, q), [1.0, 0.0, 0.0])
    p2 = np.array([0.4, 0.4, 0.2])
    q2 = np.array([0.2, 0.3, 0.5])
    # max(p - q, 0) = [0.2, 0.1, 0] -> normalised [2/3, 1/3, 0].
    np.testing.assert_allclose(residual(p2, q2), [2 / 3, 1 / 3, 0.0])
    np.testing.assert_allclose(residual(p, p), p)


def test_exact_sequence_distribution_brute_force():
    rng = np.random.default_rng(seeds.choose_seed(1))
    model = MarkovModel.random(3, rng)
    expected = []
    for tokens in itertools.product(range(3), repeat=3):
        prob = model.initial[tokens[0]]
        for a, b in itertools.pairwise(tokens):
            prob *= model.transition[a, b]
        expected.append(prob)
    np.testing.assert_allclose(exact_sequence_distribution(model, 3), expected)


def test_chi_square_critical_against_tables():
    # Standard chi-square tables: chi2_{0.95}(10) = 18.307, chi2_{0.999}(100) = 149.449.
    assert chi_square_critical(10, 0.05) == pytest.approx(18.307, rel=0.01)
    assert chi_square_critical(100, 0.001) == pytest.approx(149.449, rel=0.01)


def make_pair(seed: int, distance: float, concentration: float = 1.0):
    rng = np.random.default_rng(seed)
    target = MarkovModel.random(VOCAB, rng, concentration)
    other = MarkovModel.random(VOCAB, rng, concentration)
    return target, target.blend(other, distance)


# (pair seed, draft distance from target, Dirichlet concentration, draft length, stop_below)
CASES = [
    (101, 0.3, 1.0, 2, None),  # close draft, high acceptance
    (102, 0.7, 1.0, 3, None),  # middling
    (103, 1.0, 0.5, 2, None),  # unrelated, peaky draft: low acceptance, many residual draws
    (104, 0.5, 3.0, 4, None),  # flat distributions, long drafts
    (105, 0.5, 1.0, 3, 0.45),  # adaptive length: stop when draft top-1 < 0.45
]


@pytest.mark.parametrize(("pair_seed", "distance", "concentration", "draft_len", "stop"), CASES)
def test_output_distribution_equals_target(pair_seed, distance, concentration, draft_len, stop):
    target, draft = make_pair(pair_seed, distance, concentration)
    seed = seeds.choose_seed(pair_seed + 1000)
    sequences, stats = speculative_sequences(
        target,
        draft,
        length=LENGTH,
        draft_len=draft_len,
        samples=SAMPLES,
        rng=np.random.default_rng(seed),
        stop_below=stop,
    )
    counts = sequence_counts(sequences, VOCAB)
    probs = exact_sequence_distribution(target, LENGTH)
    statistic, dof = chi_square_statistic(counts, probs)
    critical = chi_square_critical(dof, FALSE_ALARM)
    print(f"chi2 {statistic:.1f} dof {dof} critical {critical:.1f} "
          f"tv {total_variation(counts, probs):.4f} stats {stats}")  # fmt: skip
    assert statistic < critical
    # The engine really speculates: some drafts accepted, some rejected.
    assert 0 < stats["accepted"] < stats["drafted"]


def test_argmax_bonus_token_biases_the_output():
    target, draft = make_pair(101, 0.3)
    sequences, _ = speculative_sequences(
        target,
        draft,
        length=LENGTH,
        draft_len=2,
        samples=SAMPLES,
        rng=np.random.default_rng(seeds.choose_seed(7)),
        bonus="argmax",
    )
    counts = sequence_counts(sequences, VOCAB)
    probs = exact_sequence_distribution(target, LENGTH)
    statistic, dof = chi_square_statistic(counts, probs)
    assert statistic > 10 * chi_square_critical(dof, FALSE_ALARM)


def test_accepted_per_round_matches_closed_form():
    """Context-free models (identical rows): E[accepted in a round] = sum_{i=1..K} a**i."""
    rng = np.random.default_rng(seeds.choose_seed(9))
    p = rng.dirichlet(np.ones(VOCAB))
    q = rng.dirichlet(np.ones(VOCAB))
    target = MarkovModel(p, np.tile(p, (VOCAB, 1)))
    draft = MarkovModel(q, np.tile(q, (VOCAB, 1)))
    a = float(np.minimum(p, q).sum())
    k = 3
    _, stats = speculative_sequences(
        target, draft, length=1, draft_len=k, samples=SAMPLES, rng=rng
    )  # length 1: exactly one round per run
    expected = sum(a**i for i in range(1, k + 1))
    # Per-run accepted count lies in [0, 3]: sd <= 1.5, so 5 sd of the mean is 0.017.
    assert stats["accepted"] / SAMPLES == pytest.approx(expected, abs=0.017)


def test_rejects_bad_arguments():
    rng = np.random.default_rng(0)
    small, big = MarkovModel.random(3, rng), MarkovModel.random(4, rng)
    with pytest.raises(ValueError, match="share the vocabulary"):
        speculative_sequences(small, big, length=2, draft_len=2, samples=10, rng=rng)
    with pytest.raises(ValueError, match="bonus must be 'sample' or 'argmax'"):
        speculative_sequences(big, big, length=2, draft_len=2, samples=10, rng=rng, bonus="max")
    with pytest.raises(ValueError, match="rows must be probability distributions"):
        MarkovModel(np.array([0.5, 0.6]), np.eye(2))


def test_resampling_from_target_instead_of_residual_is_caught(monkeypatch):
    """Power check for the residual rule: a common bug, drawing the replacement from p."""
    from ahasd.sim import exactness

    monkeypatch.setattr(exactness, "residual", lambda p, q: p)
    target, draft = make_pair(102, 0.7)
    sequences, _ = speculative_sequences(
        target,
        draft,
        length=LENGTH,
        draft_len=3,
        samples=SAMPLES,
        rng=np.random.default_rng(seeds.choose_seed(8)),
    )
    counts = sequence_counts(sequences, VOCAB)
    statistic, dof = chi_square_statistic(counts, exact_sequence_distribution(target, LENGTH))
    assert statistic > 10 * chi_square_critical(dof, FALSE_ALARM)
