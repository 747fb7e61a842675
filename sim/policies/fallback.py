"""The fallback to autoregression that wraps any policy (the phone-SoC article)."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ahasd.sim.policies.base import DraftToken, Policy, Step, check_int, check_outcome, check_real

__all__ = ["Fallback"]


class Fallback:
    """Fall back to autoregression when speculation stops paying (phone-SoC article).

    The window holds the outcomes of the last ``window`` (32) draft tokens the target judged:
    1 for each accepted token, 0 for the rejected one. Tokens discarded after a rejection were
    never compared with the target and are not outcomes, nor are dropped tokens; so the window
    estimates the per-token acceptance probability, the quantity the traces and the published
    figures call acceptance. (Counting discarded tokens as failures would fall back even where
    speculation clearly pays: at acceptance 0.6 and 4 drafted tokens per round, accepted/drafted
    is only 0.32.) Once the window is full and its mean is below ``threshold`` (0.50),
    ``start_round`` returns 0: the system model then takes plain autoregressive steps.

    How speculation resumes (the article says only "until it recovers"): entering fallback
    clears the window. After ``cooldown`` autoregressive steps (default 8), *probe* rounds run
    with the inner policy, back to back, until they have produced at least ``resume_after``
    judged tokens (default 4). If their acceptance is >= ``threshold``, speculation resumes and
    the window restarts from those outcomes (the 32-token rule applies again once it is full);
    otherwise they are discarded and another ``cooldown`` autoregressive steps follow. So a bad
    stretch costs one short probe per ``cooldown`` tokens, and a recovery is noticed within
    about ``cooldown`` tokens. Stale outcomes from before the fallback never delay recovery.

    Parameters
    ----------
    inner : the wrapped drafting policy.
    window : outcomes in the window. Default 32.
    threshold : minimum acceptance over the window. Default 0.50.
    cooldown : autoregressive steps before each probe. Default 8.
    resume_after : judged probe tokens needed to decide on resuming. Default 4.
    """

    def __init__(
        self,
        inner: Policy,
        *,
        window: int = 32,
        threshold: float = 0.5,
        cooldown: int = 8,
        resume_after: int = 4,
    ):
        check_int("window", window, 1)
        check_real("threshold", threshold, 0.0, 1.0)
        check_int("cooldown", cooldown, 0)
        check_int("resume_after", resume_after, 1)
        self.inner = inner
        self.name = f"{inner.name}+fallback"
        self.window = window
        self.threshold = threshold
        self.cooldown = cooldown
        self.resume_after = resume_after
        self.outcomes: deque[int] = deque(maxlen=window)
        self.probe: list[int] = []
        self.falling_back = False
        self.ar_steps = 0

    def reset(self, rng: np.random.Generator) -> None:
        self.inner.reset(rng)
        self.outcomes.clear()
        self.probe = []
        self.falling_back = False
        self.ar_steps = 0

    def window_rate(self) -> float:
        """Acceptance over the window (NaN while empty)."""
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else math.nan

    def start_round(self) -> int:
        if self.falling_back and self.ar_steps < self.cooldown:
            self.ar_steps += 1
            return 0
        return self.inner.start_round()

    def step(self, i: int, token: DraftToken) -> Step:
        return self.inner.step(i, token)

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None:
        check_outcome(drafted, accepted, seconds)
        if drafted == 0:
            # An autoregressive step (or a round whose only token was dropped): nothing to learn.
            if not self.falling_back:
                self.inner.end_round(drafted, accepted, seconds)
            return
        self.inner.end_round(drafted, accepted, seconds)
        judged = [1] * accepted + ([0] if accepted < drafted else [])
        if not self.falling_back:
            self.outcomes.extend(judged)
            if len(self.outcomes) == self.window and self.window_rate() < self.threshold:
                self.falling_back = True
                self.outcomes.clear()
                self.probe = []
                self.ar_steps = 0
            return
        self.probe.extend(judged)
        if len(self.probe) < self.resume_after:
            return  # keep probing (the cooldown is spent, so start_round speculates)
        if sum(self.probe) / len(self.probe) >= self.threshold:
            self.falling_back = False
            self.outcomes.extend(self.probe)
        self.probe = []
        self.ar_steps = 0
