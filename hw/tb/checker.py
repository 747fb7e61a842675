"""Scoreboard pieces: a bounded error log and an in-order checker.

A testbench collects errors rather than failing at the first one, so that one run shows
the first few disagreements; :class:`ErrorLog` keeps the first ``limit`` of them, each
prefixed with where it happened. :class:`InOrderChecker` compares what comes out of a
port with what the model expected, in order, and tells at the end what never came.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["ErrorLog", "InOrderChecker"]


class ErrorLog:
    """The first ``limit`` error messages, each prefixed with ``where()``.

    True when it holds an error.
    """

    def __init__(self, where: Callable[[], str], limit: int = 40) -> None:
        self.where = where
        self.limit = limit
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        if len(self.messages) < self.limit:
            self.messages.append(f"{self.where()}: {message}")

    def __bool__(self) -> bool:
        return bool(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


class InOrderChecker:
    """Items a port must produce, compared in order with what it produces.

    Parameters
    ----------
    what : names the items in error messages (``"EDC decision"``).
    errors : where disagreements go.
    """

    def __init__(self, what: str, errors: ErrorLog) -> None:
        self.what = what
        self.errors = errors
        self.expected: deque[Any] = deque()
        self.checked = 0

    def expect(self, item: Any) -> None:
        self.expected.append(item)

    def check(self, got: Any) -> None:
        """``got`` came out: it must be the oldest expected item."""
        self.checked += 1
        if not self.expected:
            self.errors.add(f"unexpected {self.what} {got}")
            return
        expected = self.expected.popleft()
        if got != expected:
            self.errors.add(f"{self.what}: RTL {got}, golden {expected}")

    @property
    def pending(self) -> int:
        """Expected items that have not come out yet."""
        return len(self.expected)
