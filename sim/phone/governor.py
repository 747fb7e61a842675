"""The thermal governor of a phone run (the Linux ``step_wise`` policy on the skin sensor).

The run (:mod:`ahasd.sim.phone.run`) advances the two-node RC model of
:mod:`ahasd.sim.thermal` with the package power of every task and polls the
:class:`Governor` every ``governor_period_s`` for a new clock level.
"""

from __future__ import annotations

from ahasd.sim.phone.platform import PlatformSpec

__all__ = ["Governor"]


class Governor:
    """Step-wise thermal governor (the Linux ``step_wise`` policy, on the skin sensor).

    Polled every ``period_s``, it compares the skin temperature with the limit and with its
    value at the previous poll (the trend):

    - skin >= limit and rising (or the die at its limit): one clock level down;
    - skin >= limit and not rising: hold (the current power is sustainable);
    - skin < limit - hysteresis and not rising: one level up;
    - otherwise hold.

    Level 0 is the full clock; the last level is the floor (the OS frequency floor). On a
    slow skin node this settles at the highest level whose package power the chassis can
    shed at the limit, instead of banging down to the floor.
    """

    def __init__(self, platform: PlatformSpec, skin_limit_c: float, start_c: float) -> None:
        self.levels = len(platform.clock_levels)
        self.skin_limit = skin_limit_c
        self.die_limit = platform.die_limit_c
        self.hysteresis = platform.hysteresis_c
        self.period = platform.governor_period_s
        self.level = 0
        self.next_check = self.period
        self.last_skin = start_c

    def decide(self, skin_c: float, die_c: float) -> tuple[int, str] | None:
        """New level and reason, or None to hold; updates the trend reference."""
        rising = skin_c > self.last_skin
        self.last_skin = skin_c
        if die_c >= self.die_limit:
            return (self.level + 1, "die") if self.level < self.levels - 1 else None
        if skin_c >= self.skin_limit:
            if rising and self.level < self.levels - 1:
                return self.level + 1, "skin"
            return None
        if skin_c < self.skin_limit - self.hysteresis and not rising and self.level > 0:
            return self.level - 1, "recovered"
        return None
