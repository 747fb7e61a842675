"""Argument checks shared by the golden models.

A golden model is driven the way the hardware is: every argument stands for a port of a
given width. A value that does not fit is a testbench bug, so it raises (``TypeError`` or
``ValueError`` with an exact message) instead of being truncated.
"""

from __future__ import annotations

import numbers


def is_integer(value: object) -> bool:
    """An integer and not a bool. A plain ``int`` is answered first: the ABC check costs
    about a microsecond, and a testbench checks several ports per event."""
    if type(value) is int:
        return True
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def check_port(name: str, value: object, bits: int, low: int = 0) -> int:
    """Return ``value`` as an int if it fits an unsigned ``bits``-wide port, else raise."""
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    high = (1 << bits) - 1
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, not {value!r}")
    return int(value)
