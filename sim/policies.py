"""Adaptive drafting policies: how far the draft model drafts, decided token by token.

Every policy has the same small interface, which the system model calls in this order::

    policy.reset(rng)
    loop:
        n_max = policy.start_round()      # 0: no speculation this step (autoregressive step)
        for i in 1..n_max:                # the draft model computes token i's distribution
            step = policy.step(i, DraftToken(pos, entropy, top1, beta))
            CONTINUE: keep token i, draft another; LAST: keep it, end the round;
            DROP: discard token i (its draft pass was spent) and end the round
        policy.end_round(drafted, accepted, seconds)   # after verification

``DraftToken`` carries what the draft model knows about position ``pos`` (entropy, top-1
probability) plus the trace's acceptance probability ``beta``; only SpecDec++ reads ``beta``
(as the stand-in for its trained acceptance head, see :class:`SpecDecPP`).

Each class cites its paper (``docs/policies.md`` lists their arXiv ids) and says
where the paper was silent and what was chosen. ``make_policy(name, fallback=True)`` wraps any
policy in :class:`Fallback` (the phone-SoC article's switch to autoregression).
"""

from __future__ import annotations

import enum
import inspect
import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ahasd.errors import UserError

__all__ = [
    "PAPER_POLICIES",
    "POLICY_NAMES",
    "SVIP",
    "AdaEDL",
    "BanditSpec",
    "DraftToken",
    "Fallback",
    "Fixed",
    "Policy",
    "SpecDecPP",
    "Step",
    "Threshold",
    "make_policy",
]


class Step(enum.Enum):
    """A policy's answer for one drafted token."""

    CONTINUE = "continue"  # keep this token, draft another
    LAST = "last"  # keep this token, end the round
    DROP = "drop"  # discard this token (its draft pass was spent) and end the round


@dataclass(frozen=True)
class DraftToken:
    """What the policy may look at for draft token ``pos`` (a target-output position)."""

    pos: int
    entropy: float  # draft entropy, nats
    top1: float  # draft top-1 probability
    beta: float  # acceptance probability from the trace (NaN where unknown)


@runtime_checkable
class Policy(Protocol):
    """The interface the system model drives (module docstring)."""

    name: str

    def reset(self, rng: np.random.Generator) -> None: ...

    def start_round(self) -> int: ...

    def step(self, i: int, token: DraftToken) -> Step: ...

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None: ...


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")


def _check_real(name: str, value: object, low: float, high: float) -> None:
    # Finite only, even where the range is open above: an infinite (or overflowing) parameter
    # turns the policy's arithmetic into inf - inf = NaN or an OverflowError mid-run.
    if not (_finite_number(value) and low <= value <= high):
        span = f"in [{low}, {high}]" if math.isfinite(high) else f">= {low}"
        reads = "a number" if math.isfinite(high) else "a finite number"
        raise ValueError(f"{name} must be {reads} {span}, not {value!r}")


def _check_outcome(drafted: int, accepted: int, seconds: float) -> None:
    if drafted < 0 or not 0 <= accepted <= drafted:
        raise ValueError(
            f"need 0 <= accepted <= drafted, got drafted={drafted}, accepted={accepted}"
        )
    if not seconds > 0 and drafted > 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")


class _Stateless:
    """Shared no-op hooks for policies that keep no history."""

    name = "base"

    def reset(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None:
        _check_outcome(drafted, accepted, seconds)


class Fixed(_Stateless):
    """Fixed draft length ``k``: the classic baseline (Leviathan et al. 2023; SpecPIM).

    Parameters
    ----------
    k : tokens drafted every round (>= 1). Default 4.
    """

    name = "fixed"

    def __init__(self, *, k: int = 4) -> None:
        _check_int("k", k, 1)
        self.k = k

    def start_round(self) -> int:
        return self.k

    def step(self, i: int, token: DraftToken) -> Step:
        return Step.LAST if i >= self.k else Step.CONTINUE


class Threshold(_Stateless):
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
        _check_real("threshold", threshold, 0.0, 1.0)
        _check_int("max_len", max_len, 1)
        self.threshold = threshold
        self.max_len = max_len

    def start_round(self) -> int:
        return self.max_len

    def step(self, i: int, token: DraftToken) -> Step:
        if token.top1 < self.threshold:
            return Step.LAST if i == 1 else Step.DROP
        return Step.LAST if i >= self.max_len else Step.CONTINUE


class SVIP(_Stateless):
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
        _check_real("h", h, 0.0, math.inf)
        _check_int("min_len", min_len, 1)
        _check_int("max_len", max_len, min_len)
        self.h = h
        self.min_len = min_len
        self.max_len = max_len

    def start_round(self) -> int:
        return self.max_len

    def step(self, i: int, token: DraftToken) -> Step:
        if math.sqrt(token.entropy) > self.h:
            return Step.LAST if i <= self.min_len else Step.DROP
        return Step.LAST if i >= self.max_len else Step.CONTINUE


class AdaEDL(_Stateless):
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
        _check_real("gamma", gamma, 0.0, math.inf)
        _check_real("lam_min", lam_min, -1.0, 1.0)
        _check_real("lam_max", lam_max, lam_min, 1.0)
        _check_real("lam", lam, lam_min, lam_max)
        _check_real("target", target, 0.0, 1.0)
        _check_real("step", step, 0.0, math.inf)
        _check_real("ema", ema, 0.0, 1.0)
        _check_int("min_len", min_len, 1)
        _check_int("max_len", max_len, min_len)
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
        _check_outcome(drafted, accepted, seconds)
        if not self.adapt or drafted == 0:
            return
        self.rate_ema = (1.0 - self.ema) * self.rate_ema + self.ema * accepted / drafted
        self.lam = min(
            self.lam_max, max(self.lam_min, self.lam + self.gain * (self.target - self.rate_ema))
        )


class SpecDecPP(_Stateless):
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
        _check_real("threshold", threshold, 0.0, 1.0)
        _check_int("min_len", min_len, 1)
        _check_int("max_len", max_len, min_len)
        _check_real("noise", noise, 0.0, math.inf)
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


class BanditSpec(_Stateless):
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
            _check_int("each arm", arm, 1)
        _check_int("warmup", warmup, 0)
        _check_real("c", c, 0.0, math.inf)
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
        _check_outcome(drafted, accepted, seconds)
        if drafted == 0:
            return
        tokens = accepted + 1 if self.count_bonus else accepted
        self.pulls[self.current] += 1
        self.reward_sums[self.current] += tokens / seconds
        self.rounds += 1


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
        _check_int("window", window, 1)
        _check_real("threshold", threshold, 0.0, 1.0)
        _check_int("cooldown", cooldown, 0)
        _check_int("resume_after", resume_after, 1)
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
        _check_outcome(drafted, accepted, seconds)
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


_CLASSES = {
    "specdecpp": SpecDecPP,
    "svip": SVIP,
    "adaedl": AdaEDL,
    "banditspec": BanditSpec,
    "fixed": Fixed,
    "threshold": Threshold,
}
# Every policy name, and the paper's four adaptive drafting algorithms (its grid; the
# others are a fixed-length baseline and the phone-SoC confidence threshold).
POLICY_NAMES = tuple(_CLASSES)
PAPER_POLICIES = ("specdecpp", "svip", "adaedl", "banditspec")
_FALLBACK_PARAMS = ("window", "threshold", "cooldown", "resume_after")


def _finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past a float's range
        return False


def _check_kinds(name: str, cls: type, params: dict, prefix: str) -> None:
    """UserError unless each of ``params`` is of its default's kind: a switch takes only
    true or false (the string "no" is not false), a count an integer, a number a finite
    int or float, a list a list. The constructors check ranges; this catches what they would
    take silently because Python's truthiness or duck typing accepts it."""
    defaults = {
        p.name: p.default
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    for key, value in params.items():
        default = defaults.get(key)
        if isinstance(default, bool):
            good, reads = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            good, reads = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif isinstance(default, float):
            good, reads = _finite_number(value), "a finite number"
        elif isinstance(default, tuple | list):
            good, reads = isinstance(value, tuple | list), "a list"
        elif isinstance(default, str):
            good, reads = isinstance(value, str), "a string"
        else:
            continue
        if not good:
            raise UserError(f"policy {name!r}: {prefix}{key} must be {reads}, not {value!r}")


def make_policy(name: str, *, fallback: bool = False, **params) -> Policy:
    """Build a policy by name, optionally wrapped in :class:`Fallback`.

    Parameters prefixed ``fallback_`` (``fallback_window``, ``fallback_threshold``,
    ``fallback_cooldown``) go to the wrapper, the rest to the policy.

    Raises
    ------
    ahasd.errors.UserError
        unknown name (listing the known ones), unknown parameter (listing the policy's), or a
        parameter value out of range.
    """
    if name not in _CLASSES:
        raise UserError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    cls = _CLASSES[name]
    wrapper_params = {
        key.removeprefix("fallback_"): params.pop(key)
        for key in list(params)
        if key.startswith("fallback_")
    }
    known = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    for key in params:
        if key not in known:
            raise UserError(f"policy {name!r} has no parameter {key!r} (known: {', '.join(known)})")
    for key in wrapper_params:
        if key not in _FALLBACK_PARAMS:
            raise UserError(
                f"fallback has no parameter {key!r} (known: "
                f"{', '.join('fallback_' + p for p in _FALLBACK_PARAMS)})"
            )
    if wrapper_params and not fallback:
        raise UserError("fallback_* parameters given without fallback=True")
    _check_kinds(name, cls, params, "")
    _check_kinds(name, Fallback, wrapper_params, "fallback_")
    try:
        policy = cls(**params)
        return Fallback(policy, **wrapper_params) if fallback else policy
    except ValueError as error:
        raise UserError(f"policy {name!r}: {error}") from None
