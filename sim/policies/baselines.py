"""The two non-adaptive policies: a fixed draft length (the classic baseline) and the
phone-SoC article's confidence threshold."""

from __future__ import annotations

from ahasd.sim.policies.base import DraftToken, Stateless, Step, check_int, check_real

__all__ = ["Fixed", "Threshold"]


class Fixed(Stateless):
    """Fixed draft length ``k``: the classic baseline (Leviathan et al. 2023; SpecPIM).

    Parameters
    ----------
    k : tokens drafted every round (>= 1). Default 4.
    """

    name = "fixed"

    def __init__(self, *, k: int = 4) -> None:
        check_int("k", k, 1)
        self.k = k

    def start_round(self) -> int:
        return self.k

    def step(self, i: int, token: DraftToken) -> Step:
        return Step.LAST if i >= self.k else Step.CONTINUE


class Threshold(Stateless):
    """Confidence pruning (phone-SoC article): stop when top-1 probability drops below 0.35.

    A token whose draft top-1 probability is below ``threshold`` is pruned (``DROP``: it is not
    sent for verification) and the round ends, except the first token of a round, which is
    always kept (``LAST``), so every round drafts at least one token.

    Parameters
    ----------
    threshold : top-1 probability below which drafting stops. Default 0.35.
    max_len : upper bound on the round length. Default 8 (the article does not give one).
    """

    name = "threshold"

    def __init__(self, *, threshold: float = 0.35, max_len: int = 8) -> None:
        check_real("threshold", threshold, 0.0, 1.0)
        check_int("max_len", max_len, 1)
        self.threshold = threshold
        self.max_len = max_len

    def start_round(self) -> int:
        return self.max_len

    def step(self, i: int, token: DraftToken) -> Step:
        if token.top1 < self.threshold:
            return Step.LAST if i == 1 else Step.DROP
        return Step.LAST if i >= self.max_len else Step.CONTINUE
