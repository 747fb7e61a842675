"""The interface every drafting policy implements, and what they share.

:class:`Step` (a policy's answer per drafted token), :class:`DraftToken` (what it may look
at), the :class:`Policy` protocol the system model drives (:mod:`ahasd.sim.policies`), the
checks of constructor arguments with their exact messages, and :class:`Stateless`, the
no-op hooks of policies that keep no history.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DraftToken",
    "Policy",
    "Stateless",
    "Step",
    "check_int",
    "check_outcome",
    "check_real",
    "finite_number",
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


def check_int(name: str, value: object, low: int) -> None:
    """ValueError naming ``name`` unless ``value`` is an integer (not a bool) >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")


def check_real(name: str, value: object, low: float, high: float) -> None:
    """ValueError naming ``name`` unless ``value`` is a finite number in ``[low, high]``."""
    # Finite only, even where the range is open above: an infinite (or overflowing) parameter
    # turns the policy's arithmetic into inf - inf = NaN or an OverflowError mid-run.
    if not (finite_number(value) and low <= value <= high):
        span = f"in [{low}, {high}]" if math.isfinite(high) else f">= {low}"
        reads = "a number" if math.isfinite(high) else "a finite number"
        raise ValueError(f"{name} must be {reads} {span}, not {value!r}")


def check_outcome(drafted: int, accepted: int, seconds: float) -> None:
    """ValueError unless a round's outcome is possible: ``0 <= accepted <= drafted`` and a
    positive time for a round that drafted."""
    if drafted < 0 or not 0 <= accepted <= drafted:
        raise ValueError(
            f"need 0 <= accepted <= drafted, got drafted={drafted}, accepted={accepted}"
        )
    if not seconds > 0 and drafted > 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")


class Stateless:
    """Shared no-op hooks for policies that keep no history."""

    name = "base"

    def reset(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def end_round(self, drafted: int, accepted: int, seconds: float) -> None:
        check_outcome(drafted, accepted, seconds)


def finite_number(value: object) -> bool:
    """A number (not a bool) that is finite as a float (an integer of 400 digits is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past a float's range
        return False
