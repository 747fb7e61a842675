"""A plain discrete-event loop (after vidur): a heap of time-stamped events.

Each event is ``(time, sequence, handler, args)``; ties in time are broken by the sequence
number, so events scheduled earlier run first and a run is a pure function of its inputs.
A handler may schedule more events through the loop or return an iterable of follow-up
``(time, handler, args)`` tuples. There is no global state: every run owns its loop, its
seeded RNG (held by the mode that uses it) and its metrics, so two runs in one process are
independent and identical.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["EventLoop"]


class EventLoop:
    """Time-ordered event dispatch.

    Attributes
    ----------
    now : float
        Time of the event being handled (seconds of simulated time).
    dispatched : int
        Events handled so far.
    """

    def __init__(self) -> None:
        self._heap: list = []
        self._sequence = 0
        self._stopped = False
        self.now = 0.0
        self.dispatched = 0

    def at(self, time: float, handler: Callable, *args) -> None:
        """Run ``handler(*args)`` at simulated ``time`` (never before ``now``)."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time!r}, before now ({self.now!r})")
        heapq.heappush(self._heap, (time, self._sequence, handler, args))
        self._sequence += 1

    def after(self, delay: float, handler: Callable, *args) -> None:
        """Run ``handler(*args)`` ``delay`` seconds from now."""
        self.at(self.now + delay, handler, *args)

    def stop(self) -> None:
        """End :meth:`run` after the current event; pending events are left unhandled."""
        self._stopped = True

    def pending(self) -> int:
        return len(self._heap)

    def run(self, max_events: int | None = None) -> None:
        """Dispatch events in time order until none is left, :meth:`stop` or ``max_events``."""
        heap = self._heap
        while heap and not self._stopped:
            if max_events is not None and self.dispatched >= max_events:
                raise RuntimeError(f"event budget of {max_events} exhausted at t={self.now}")
            time, _, handler, args = heapq.heappop(heap)
            self.now = time
            self.dispatched += 1
            follow = handler(*args)
            if follow:
                for event_time, event_handler, event_args in follow:
                    self.at(event_time, event_handler, *event_args)
