"""Exactness engine (spec section 6): speculative sampling on small explicit distributions.

Speculative decoding must leave the output distribution of the target unchanged. This module
implements the rule of Leviathan et al. (2023) / Chen et al. (2023) functionally:

1. the draft proposes ``x_1..x_K``, each ``x_i ~ q(. | prefix, x_<i)``;
2. token ``x_i`` is accepted with probability ``min(1, p(x_i) / q(x_i))``, in order, stopping at
   the first rejection;
3. at a rejection, the replacement is drawn from the residual ``norm(max(p - q, 0))``;
4. if all ``K`` are accepted, a bonus token is drawn from ``p(. | prefix, x_1..x_K)``.

The models are first-order Markov chains over a small vocabulary (``P[prev, next]``,
``Q[prev, next]``, initial distribution ``p0``/``q0``), enough to make the proposal depend on the
prefix, which is what makes the residual and bonus rules matter. Everything is vectorised over
independent runs, so 200,000 sequences take well under a second.

The bonus can be taken by ``argmax`` instead (``bonus="argmax"``, as the phone article's code
listing does) to show that this biases the output; and the draft length can be adaptive
(``stop_below``: stop drafting when the draft's top-1 probability is below a threshold), which
does not bias it because the stopping rule only looks at the draft model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "MarkovModel",
    "acceptance_probability",
    "chi_square_critical",
    "chi_square_statistic",
    "exact_sequence_distribution",
    "rejection_step",
    "residual",
    "sample_categorical",
    "speculative_sequences",
    "total_variation",
]


def acceptance_probability(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``beta = sum_v min(p(v), q(v))`` along the last axis: the chance a draft token is kept."""
    return np.minimum(p, q).sum(axis=-1)


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The residual distribution ``norm(max(p - q, 0))`` along the last axis.

    Where ``p == q`` exactly (nothing is ever rejected) the residual is undefined; ``p`` is
    returned there so the result is always a distribution.
    """
    excess = np.maximum(p - q, 0.0)
    total = excess.sum(axis=-1, keepdims=True)
    safe = np.where(total > 0, total, 1.0)
    return np.where(total > 0, excess / safe, p)


def rejection_step(p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> tuple[int, bool]:
    """One position of speculative sampling on explicit distributions (the recorders' rule).

    Draws the draft token from ``q``, keeps it with probability ``min(1, p/q)``, else draws
    the replacement from the residual ``norm(max(p - q, 0))`` (the draft token stands when
    ``p == q`` up to rounding leaves no residual mass). Returns ``(token, kept)``. Random
    numbers are drawn in this order: the draft token, the acceptance test, the replacement.
    """
    drafted = int(rng.choice(len(q), p=q))
    if rng.random() < min(1.0, p[drafted] / q[drafted]):
        return drafted, True
    excess = np.maximum(p - q, 0.0)
    total = excess.sum()
    return (int(rng.choice(len(p), p=excess / total)) if total > 0 else drafted), False


def sample_categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``probs`` (rows sum to 1) by inverse CDF."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cdf[..., -1:]
    return np.minimum((u >= cdf).sum(axis=-1), probs.shape[-1] - 1)


@dataclass(frozen=True)
class MarkovModel:
    """A first-order Markov language model over ``V`` tokens.

    Attributes
    ----------
    initial : shape (V,), distribution of the first token.
    transition : shape (V, V), row ``a`` = distribution of the next token after ``a``.
    """

    initial: np.ndarray
    transition: np.ndarray

    def __post_init__(self) -> None:
        v = self.initial.shape[0]
        if self.initial.shape != (v,) or self.transition.shape != (v, v):
            raise ValueError("initial must have shape (V,) and transition (V, V)")
        for name, probs in (("initial", self.initial), ("transition", self.transition)):
            if (probs < 0).any() or not np.allclose(probs.sum(axis=-1), 1.0):
                raise ValueError(f"{name} rows must be probability distributions")

    @property
    def vocab(self) -> int:
        return self.initial.shape[0]

    def next_distribution(self, last: np.ndarray) -> np.ndarray:
        """Distribution of the next token for each run; ``last = -1`` means empty prefix."""
        rows = self.transition[np.maximum(last, 0)]
        return np.where((last < 0)[:, None], self.initial[None, :], rows)

    @staticmethod
    def random(vocab: int, rng: np.random.Generator, concentration: float = 1.0) -> MarkovModel:
        """A random model with Dirichlet(concentration) rows."""
        alpha = np.full(vocab, concentration)
        return MarkovModel(rng.dirichlet(alpha), rng.dirichlet(alpha, size=vocab))

    def blend(self, other: MarkovModel, weight: float) -> MarkovModel:
        """``(1 - weight) * self + weight * other``, row by row (a draft close to a target)."""
        return MarkovModel(
            (1 - weight) * self.initial + weight * other.initial,
            (1 - weight) * self.transition + weight * other.transition,
        )


def exact_sequence_distribution(model: MarkovModel, length: int) -> np.ndarray:
    """The model's exact distribution of its first ``length`` tokens, flattened (``V**length``).

    Cell index ``x_1 * V**(n-1) + ... + x_n`` (row-major over the token tuple).
    """
    joint = model.initial.copy()
    for _ in range(length - 1):
        last = np.arange(joint.size) % model.vocab
        joint = (joint[:, None] * model.transition[last]).reshape(-1)
    return joint


def speculative_sequences(
    target: MarkovModel,
    draft: MarkovModel,
    *,
    length: int,
    draft_len: int,
    samples: int,
    rng: np.random.Generator,
    bonus: str = "sample",
    stop_below: float | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Generate ``samples`` independent sequences of ``length`` tokens by speculative sampling.

    Parameters
    ----------
    target, draft : the two models (same vocabulary).
    length : tokens per sequence to produce.
    draft_len : tokens the draft proposes per round (the maximum, with ``stop_below``).
    samples : number of independent runs.
    rng : the one random generator used.
    bonus : ``"sample"`` (correct) or ``"argmax"`` (biased) for the all-accepted bonus token.
    stop_below : adaptive drafting: stop the round before proposing a token whose draft top-1
        probability is below this value (at least one token per round).

    Returns
    -------
    sequences : int array (samples, length).
    stats : ``{"drafted", "accepted", "rounds"}`` totals (over all runs, counting only tokens
        up to ``length``-completion of the round they belong to).
    """
    if target.vocab != draft.vocab:
        raise ValueError("target and draft must share the vocabulary")
    if bonus not in ("sample", "argmax"):
        raise ValueError(f"bonus must be 'sample' or 'argmax', not {bonus!r}")
    if draft_len < 1 or length < 1 or samples < 1:
        raise ValueError("length, draft_len and samples must be >= 1")
    width = length + draft_len + 1
    out = np.full((samples, width), -1, dtype=np.int64)
    filled = np.zeros(samples, dtype=np.int64)
    rows = np.arange(samples)
    drafted_total = accepted_total = rounds = 0
    while True:
        active = filled < length
        if not active.any():
            break
        idx = rows[active]
        n = idx.size
        last = np.where(filled[idx] > 0, out[idx, np.maximum(filled[idx] - 1, 0)], -1)
        proposals = np.zeros((n, draft_len), dtype=np.int64)
        p_rows = np.zeros((n, draft_len + 1, target.vocab))
        q_rows = np.zeros((n, draft_len, target.vocab))
        proposed = np.zeros(n, dtype=np.int64)  # tokens actually proposed this round
        still = np.ones(n, dtype=bool)
        context = last
        for i in range(draft_len):
            q = draft.next_distribution(context)
            p = target.next_distribution(context)
            if stop_below is not None and i > 0:
                still &= q.max(axis=1) >= stop_below
            q_rows[:, i] = q
            p_rows[:, i] = p
            token = sample_categorical(q, rng)
            proposals[:, i] = token
            proposed += still
            context = token
        p_rows[:, draft_len] = target.next_distribution(context)
        # Accept in order; a run stops at its first rejection or at its proposal count.
        q_tok = np.take_along_axis(q_rows, proposals[:, :, None], axis=2)[:, :, 0]
        p_tok = np.take_along_axis(p_rows[:, :draft_len], proposals[:, :, None], axis=2)[:, :, 0]
        ok = rng.random((n, draft_len)) < np.minimum(1.0, p_tok / q_tok)
        ok &= np.arange(draft_len)[None, :] < proposed[:, None]
        first_bad = np.where(ok.all(axis=1), draft_len, np.argmin(ok, axis=1))
        n_acc = np.minimum(first_bad, proposed)
        rejected = n_acc < proposed
        # The extra token: residual at a rejection; the target's next token otherwise.
        at = n_acc
        p_at = p_rows[np.arange(n), at]
        q_at = q_rows[np.arange(n), np.minimum(at, draft_len - 1)]
        extra_rejected = sample_categorical(residual(p_at, q_at), rng)
        if bonus == "sample":
            extra_all = sample_categorical(p_at, rng)
        else:
            extra_all = np.argmax(p_at, axis=1)
        extra = np.where(rejected, extra_rejected, extra_all)
        # Write accepted proposals, then the extra token, after what each run already has.
        for i in range(draft_len):
            write = i < n_acc
            target_col = filled[idx] + i
            out[idx[write], target_col[write]] = proposals[write, i]
        out[idx, filled[idx] + n_acc] = extra
        filled[idx] += n_acc + 1
        drafted_total += int(proposed.sum())
        accepted_total += int(n_acc.sum())
        rounds += 1
    stats = {"drafted": drafted_total, "accepted": accepted_total, "rounds": rounds}
    return out[:, :length], stats


def sequence_counts(sequences: np.ndarray, vocab: int) -> np.ndarray:
    """Histogram of whole sequences over the ``vocab**length`` cells (row-major tuple index)."""
    index = np.zeros(sequences.shape[0], dtype=np.int64)
    for column in range(sequences.shape[1]):
        index = index * vocab + sequences[:, column]
    return np.bincount(index, minlength=vocab ** sequences.shape[1])


def chi_square_statistic(counts: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson's statistic and degrees of freedom, pooling cells with expected count < 5."""
    expected = probs * counts.sum()
    big = expected >= 5.0
    observed = np.append(counts[big], counts[~big].sum())
    expect = np.append(expected[big], expected[~big].sum())
    keep = expect > 0
    statistic = float((((observed - expect) ** 2)[keep] / expect[keep]).sum())
    return statistic, int(keep.sum()) - 1


def chi_square_critical(dof: int, alpha: float) -> float:
    """Upper ``alpha`` quantile of chi-square(dof), Wilson-Hilferty approximation.

    Accurate to about 1% of the value for ``dof >= 10`` at the tails used here; no SciPy needed.
    """
    z = _normal_upper_quantile(alpha)
    k = float(dof)
    return k * (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3


def _normal_upper_quantile(alpha: float) -> float:
    """``z`` with ``P(N(0,1) > z) = alpha``, by bisection on ``erfc``."""
    low, high = -10.0, 10.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if 0.5 * math.erfc(middle / math.sqrt(2.0)) > alpha:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def total_variation(counts: np.ndarray, probs: np.ndarray) -> float:
    """Total-variation distance between the empirical distribution and ``probs``."""
    return 0.5 * float(np.abs(counts / counts.sum() - probs).sum())
