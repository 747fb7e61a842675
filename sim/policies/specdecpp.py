"""SpecDec++: stop when the predicted chance that a drafted token is rejected crosses a
threshold, with the trace's acceptance probability as its acceptance head."""

from __future__ import annotations

import math

import numpy as np

from ahasd.sim.policies.base import DraftToken, Stateless, Step, check_int, check_real

__all__ = ["SpecDecPP"]


class SpecDecPP(Stateless):
    """SpecDec++ (Huang, Guo, Wang; arXiv 2405.19715), trace-driven.

    The paper trains an acceptance-prediction head giving ``a_i`` for draft step ``i`` and stops
    when the predicted chance that some drafted token is rejected exceeds a threshold:
    ``1 - prod(a_1..a_i) > threshold``, with the length forced into ``[min_len, max_len]``.
    Defaults are the authors' code's (``Kaffaljidhmah2/SpecDec_pp``): threshold 0.3, 2..20.

    Here the head is replaced by the trace's acceptance probability ``beta`` (an oracle head),
    optionally degraded by Gaussian noise of standard deviation ``noise`` on the logit (a real
    head is imperfect). Where ``beta`` is unknown the SVIP-style bound ``1 - sqrt(0.2 H)``
    stands in. "The first step counts as 1" (the SpecDec++ paper's convention): with
    ``first_is_one`` the product starts at step 2, i.e. ``a_1 := 1``. The token that crosses
    the threshold is kept (``LAST``): the head scores a token already drafted, and SpecDec++
    stops *after* it.

    Parameters
    ----------
    threshold : stop when ``1 - cum > threshold``. Default 0.3.
    min_len, max_len : length bounds. Defaults 2 and 20.
    noise : logit noise of the stand-in head. Default 0.0 (oracle).
    first_is_one : treat ``a_1`` as 1. Default True.
    """

    name = "specdecpp"

    def __init__(
        self,
        *,
        threshold: float = 0.3,
        min_len: int = 2,
        max_len: int = 20,
        noise: float = 0.0,
        first_is_one: bool = True,
    ) -> None:
        check_real("threshold", threshold, 0.0, 1.0)
        check_int("min_len", min_len, 1)
        check_int("max_len", max_len, min_len)
        check_real("noise", noise, 0.0, math.inf)
        self.threshold = threshold
        self.min_len = min_len
        self.max_len = max_len
        self.noise = noise
        self.first_is_one = first_is_one
        self._rng = np.random.default_rng(0)
        self.cum = 1.0

    def start_round(self) -> int:
        self.cum = 1.0
        return self.max_len

    def predicted_acceptance(self, token: DraftToken) -> float:
        """The stand-in head's ``a_i`` for this token."""
        a = token.beta
        if math.isnan(a):
            a = max(0.0, 1.0 - math.sqrt(0.2 * token.entropy))
        if self.noise > 0.0:
            a = min(max(a, 1e-9), 1 - 1e-9)
            logit = math.log(a / (1.0 - a)) + self._rng.normal(0.0, self.noise)
            # The logistic function in its overflow-free form: a large noise draws logits
            # far beyond exp's range (about 709), where 1 / (1 + exp(-x)) overflows.
            a = 0.5 * (1.0 + math.tanh(0.5 * logit))
        return a

    def step(self, i: int, token: DraftToken) -> Step:
        a = 1.0 if (i == 1 and self.first_is_one) else self.predicted_acceptance(token)
        self.cum *= a
        if i >= self.max_len:
            return Step.LAST
        if i >= self.min_len and 1.0 - self.cum > self.threshold:
            return Step.LAST
        return Step.CONTINUE
