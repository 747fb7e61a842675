"""Two-node RC thermal model of a phone (die and skin) and its throttle governor.

Each node is a first-order RC stage whose response to a power step is the closed form

    T(t) = T_ref + (T0 - T_ref) e^(-t/tau) + P R (1 - e^(-t/tau))

- **skin** (the battery-zone/back-cover node): ``T_ref`` = ambient, driven by the whole
  package power, ``R = r_skin``, ``tau = tau_skin`` (minutes);
- **die**: ``T_ref`` = the skin temperature, driven by the same power, ``R = r_die``,
  ``tau = tau_die`` (seconds); i.e. the die sits ``P r_die`` above the skin once settled.

The two stages are treated as a cascade (the die's reference is the skin's current value):
with ``tau_die`` two orders of magnitude below ``tau_skin`` the coupling is negligible, and
each stage stays exactly its closed form under piecewise-constant power, which is what the
simulator feeds it (a task's power is constant over the task). :meth:`ThermalModel.advance`
applies the closed form over each interval, so splitting an interval changes nothing (a
test checks it against :func:`step_response`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ThermalModel", "ThermalParams", "step_response"]


def step_response(t: float, t0: float, t_ref: float, power_w: float, r: float, tau: float):
    """Temperature of one RC node ``t`` seconds after a power step from ``t0``."""
    decay = math.exp(-t / tau)
    return t_ref + (t0 - t_ref) * decay + power_w * r * (1.0 - decay)


@dataclass(frozen=True)
class ThermalParams:
    """Thermal network of one device (C, K/W, s)."""

    ambient_c: float
    r_skin: float
    tau_skin: float
    r_die: float
    tau_die: float

    def __post_init__(self) -> None:
        for name in ("r_skin", "tau_skin", "r_die", "tau_die"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, not {value!r}")


class ThermalModel:
    """State of the two nodes; :meth:`advance` moves it through a constant-power interval.

    Attributes
    ----------
    skin_c, die_c : current temperatures (C).
    time_s : simulated time the state belongs to.
    """

    def __init__(self, params: ThermalParams, *, start_c: float | None = None) -> None:
        self.params = params
        start = params.ambient_c if start_c is None else start_c
        self.skin_c = start
        self.die_c = start
        self.time_s = 0.0

    def advance(self, power_w: float, seconds: float) -> None:
        """Apply ``power_w`` (package power, W) for ``seconds``."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, not {seconds!r}")
        p = self.params
        rise = self.die_c - self.skin_c
        self.skin_c = step_response(
            seconds, self.skin_c, p.ambient_c, power_w, p.r_skin, p.tau_skin
        )
        self.die_c = self.skin_c + step_response(seconds, rise, 0.0, power_w, p.r_die, p.tau_die)
        self.time_s += seconds
