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

This package's table (:data:`POLICY_NAMES`) registers each policy by name; the classes live
by family: the interface and argument checks in :mod:`.base`, the non-adaptive baselines in
:mod:`.baselines`, the entropy-bound stops in :mod:`.entropy`, SpecDec++ in
:mod:`.specdecpp`, BanditSpec in :mod:`.bandit`, the fallback wrapper in :mod:`.fallback`.
"""

from __future__ import annotations

import inspect

from ahasd.errors import UserError
from ahasd.sim.policies.bandit import BanditSpec
from ahasd.sim.policies.base import Policy, finite_number
from ahasd.sim.policies.baselines import Fixed, Threshold
from ahasd.sim.policies.entropy import SVIP, AdaEDL
from ahasd.sim.policies.fallback import Fallback
from ahasd.sim.policies.specdecpp import SpecDecPP

__all__ = [
    "PAPER_POLICIES",
    "POLICY_NAMES",
    "SVIP",
    "AdaEDL",
    "BanditSpec",
    "Fallback",
    "Fixed",
    "Policy",
    "SpecDecPP",
    "Threshold",
    "make_policy",
]

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
            good, reads = finite_number(value), "a finite number"
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
