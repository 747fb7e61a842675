"""Construction-time checks shared by the components of ``hw/``: exact messages, and a
rejected component is not reported by Amaranth as a forgotten one."""

from __future__ import annotations

from amaranth.lib import wiring

__all__ = ["check_int", "rejected"]


def rejected(component: wiring.Component, error: Exception) -> Exception:
    """``error``, after telling Amaranth that the half-built ``component`` is not a forgotten
    one (it warns about every elaboratable that is never elaborated)."""
    component._MustUse__silence = True
    return error


def check_int(component: wiring.Component, name: str, value: object, low: int, high: int) -> None:
    """Reject ``value`` unless it is an integer (``TypeError``) in ``low .. high``
    (``ValueError``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise rejected(component, TypeError(f"{name} must be an integer, not {value!r}"))
    if not low <= value <= high:
        raise rejected(
            component, ValueError(f"{name} must be between {low} and {high}, not {value!r}")
        )
