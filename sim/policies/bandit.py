"""BanditSpec: the draft length chosen each round by a UCB bandit over the lengths."""

from __future__ import annotations

import math

import numpy as np

from ahasd.sim.policies.base import (
    DraftToken,
    Stateless,
    Step,
    check_int,
    check_outcome,
    check_real,
)

__all__ = ["BanditSpec"]


class BanditSpec(Stateless):
    """BanditSpec (Hou et al., arXiv 2505.15141): UCB over draft lengths.

    Follows the authors' ``ucb_length_spec_generate`` (``sail-sg/BanditSpec``): arms are draft
    lengths ``(1, 2, 3, 4)``; the first ``warmup`` rounds (7) pull the arms round-robin; after
    that the arm maximising ``mean_k + sqrt(c * ln(t) / N)`` is pulled, ties to the shorter arm.
    ``t`` counts rounds played so far and ``N`` is the *total* pull count, as in the authors'
    code (``bonus="total"``): the bonus is then the same for every arm, so after warm-up the
    choice is greedy on the mean. ``bonus="arm"`` uses the arm's own pull count ``n_k``
    (textbook UCB1) for comparison.

    Reward of a round: tokens emitted per second of the round's modelled wall time,
    ``(accepted + 1) / seconds`` (the round's tokens include the target's correction or bonus
    token; with ``count_bonus=False`` it is ``accepted / seconds`` as the BanditSpec paper
    phrases it).

    Parameters
    ----------
    arms : candidate draft lengths. Default (1, 2, 3, 4).
    warmup : round-robin rounds. Default 7.
    c : exploration constant. Default 6.0.
    bonus : ``"total"`` (authors' code) or ``"arm"``.
    count_bonus : count the target's extra token in the reward. Default True.
    """

    name = "banditspec"

    def __init__(
        self,
        *,
        arms: tuple[int, ...] = (1, 2, 3, 4),
        warmup: int = 7,
        c: float = 6.0,
        bonus: str = "total",
        count_bonus: bool = True,
    ) -> None:
        arms = tuple(arms)
        if not arms:
            raise ValueError("arms must list at least one draft length")
        for arm in arms:
            check_int("each arm", arm, 1)
        check_int("warmup", warmup, 0)
        check_real("c", c, 0.0, math.inf)
        if bonus not in ("total", "arm"):
            raise ValueError(f"bonus must be 'total' or 'arm', not {bonus!r}")
        self.arms = arms
        self.warmup = warmup
        self.c = c
        self.bonus = bonus
        self.count_bonus = count_bonus
        self._reset_stats()

    def _reset_stats(self) -> None:
        self.pulls = np.zeros(len(self.arms), dtype=np.int64)
        self.reward_sums = np.zeros(len(self.arms), dtype=np.float64)
        self.rounds = 0
        self.current = 0

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._reset_stats()

    def choose(self) -> int:
        """Index of the arm to pull next."""
        if self.rounds < self.warmup or (self.pulls == 0).any():
            if self.rounds < self.warmup:
                return self.rounds % len(self.arms)
            return int(np.argmax(self.pulls == 0))
        means = self.reward_sums / self.pulls
        t = self.rounds
        counts = self.pulls.sum() if self.bonus == "total" else self.pulls
        scores = means + np.sqrt(self.c * math.log(t) / counts)
        return int(np.argmax(scores))

    def start_round(self) -> int:
        self.current = self.choose()
        return self.arms[self.current]

    def step(self, i: int, token: DraftToken) -> Step:
        return Step.LAST if i >= self.arms[self.current] else Step.CONTINUE

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None:
        check_outcome(drafted, accepted, seconds)
        if drafted == 0:
            return
        tokens = accepted + 1 if self.count_bonus else accepted
        self.pulls[self.current] += 1
        self.reward_sums[self.current] += tokens / seconds
        self.rounds += 1
