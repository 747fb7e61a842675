"""Policies that stop drafting on an entropy bound of the draft distribution: SVIP (a fixed
threshold) and AdaEDL (a threshold that adapts to the acceptance it sees)."""

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

__all__ = ["SVIP", "AdaEDL"]


class SVIP(Stateless):
    """SVIP (Zhang et al., arXiv 2411.18462): stop at the first token with ``sqrt(H) > h``.

    SVIP bounds acceptance below by ``1 - sqrt(c * H_q)``: a high-entropy draft distribution
    promises little, so the token that would be sampled from it is not proposed. The check uses
    the distribution the token is drawn from, so the draft pass is spent and the token dropped
    (``DROP``), except that rounds keep at least ``min_len`` tokens (``LAST`` instead).

    Parameters
    ----------
    h : entropy threshold on ``sqrt(H)`` (nats**0.5). The paper's default was not confirmed; one
        public implementation uses 2.5, which is the default here (``H > 6.25`` nats). Lower
        values stop earlier; sweep it.
    min_len : tokens always kept per round. Default 1.
    max_len : upper bound on the round length. Default 8.
    """

    name = "svip"

    def __init__(self, *, h: float = 2.5, min_len: int = 1, max_len: int = 8) -> None:
        check_real("h", h, 0.0, math.inf)
        check_int("min_len", min_len, 1)
        check_int("max_len", max_len, min_len)
        self.h = h
        self.min_len = min_len
        self.max_len = max_len

    def start_round(self) -> int:
        return self.max_len

    def step(self, i: int, token: DraftToken) -> Step:
        if math.sqrt(token.entropy) > self.h:
            return Step.LAST if i <= self.min_len else Step.DROP
        return Step.LAST if i >= self.max_len else Step.CONTINUE


class AdaEDL(Stateless):
    """AdaEDL (Agrawal, Jeon, Lee; arXiv 2410.18351): entropy-based early draft stopping.

    Stop drafting when the entropy-based acceptance lower bound ``1 - sqrt(gamma * H)`` falls
    below ``lam`` (``gamma = 0.2`` as in the paper's experiments). Like SVIP, the check is on
    the distribution the next token would come from: the token is dropped (``DROP``), except
    within the first ``min_len`` tokens (``LAST``).

    ``lam`` adapts online. The paper's exact update rule was not found in public material; this
    is a documented simple rule with the behaviour the paper describes (raised when acceptance
    is low, lowered when high): after each round with ``drafted > 0``,
    ``rate_ema = (1 - ema) * rate_ema + ema * accepted / drafted`` and
    ``lam = clip(lam + step * (target - rate_ema), lam_min, lam_max)``.

    Parameters
    ----------
    gamma : entropy scale of the bound. Default 0.2.
    lam : initial threshold. Default 0.4 (stops when ``H > 1.8`` nats with ``gamma = 0.2``).
    adapt : adapt ``lam`` online (False: the static EDL rule).
    target : acceptance rate ``lam`` steers toward. Default 0.7.
    step : adaptation gain. Default 0.1.
    ema : weight of the newest round in the acceptance average. Default 0.1.
    lam_min, lam_max : clamp of ``lam``. Defaults 0.0 and 0.9.
    min_len, max_len : round-length bounds. Defaults 1 and 8.
    """

    name = "adaedl"

    def __init__(
        self,
        *,
        gamma: float = 0.2,
        lam: float = 0.4,
        adapt: bool = True,
        target: float = 0.7,
        step: float = 0.1,
        ema: float = 0.1,
        lam_min: float = 0.0,
        lam_max: float = 0.9,
        min_len: int = 1,
        max_len: int = 8,
    ) -> None:
        check_real("gamma", gamma, 0.0, math.inf)
        check_real("lam_min", lam_min, -1.0, 1.0)
        check_real("lam_max", lam_max, lam_min, 1.0)
        check_real("lam", lam, lam_min, lam_max)
        check_real("target", target, 0.0, 1.0)
        check_real("step", step, 0.0, math.inf)
        check_real("ema", ema, 0.0, 1.0)
        check_int("min_len", min_len, 1)
        check_int("max_len", max_len, min_len)
        self.gamma = gamma
        self.initial_lam = lam
        self.adapt = adapt
        self.target = target
        self.gain = step
        self.ema = ema
        self.lam_min = lam_min
        self.lam_max = lam_max
        self.min_len = min_len
        self.max_len = max_len
        self.lam = lam
        self.rate_ema = target

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.lam = self.initial_lam
        self.rate_ema = self.target

    def bound(self, entropy: float) -> float:
        """The acceptance lower bound ``1 - sqrt(gamma * H)``."""
        return 1.0 - math.sqrt(self.gamma * entropy)

    def start_round(self) -> int:
        return self.max_len

    def step(self, i: int, token: DraftToken) -> Step:
        if self.bound(token.entropy) < self.lam:
            return Step.LAST if i <= self.min_len else Step.DROP
        return Step.LAST if i >= self.max_len else Step.CONTINUE

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None:
        check_outcome(drafted, accepted, seconds)
        if not self.adapt or drafted == 0:
            return
        self.rate_ema = (1.0 - self.ema) * self.rate_ema + self.ema * accepted / drafted
        self.lam = min(
            self.lam_max, max(self.lam_min, self.lam + self.gain * (self.target - self.rate_ema))
        )
