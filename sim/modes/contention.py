"""What slows the NPU's verification down while it runs: contention for its memory stream
and its vector unit (docs/system-model.md, "Contention").

A verification pass has a *nominal* length (its roofline cost, :mod:`ahasd.sim.cost`) and a
*memory-bound fraction* ``phi`` (the share of that time its memory-bound operators take).
While the pass runs, other work can take what it needs:

- **PIM compute on the target's ranks** (a pre-verification, cause ``"pim-compute"``). With
  shared LPDDR5 a rank in PIM compute mode serves no host reads, and the target's weights
  and KV cache live in those ranks: the pass's memory stream stops. A memory-bound operator
  makes no progress; a compute-bound one keeps computing on the tiles already in the
  scratchpad. The pass therefore progresses at ``1 - phi`` of its speed.
- **The nonlinear requests of a PIM without AAU** (cause ``"pim-nonlinear"``): each one moves
  activations over the off-chip bus (taking that bus time from the weight stream:
  ``phi`` of it delays the pass) and runs on the NPU's vector unit (all of it delays the
  pass: the unit serves the request first).

Each is an :class:`Interference`: an interval of time and the shares of it the two resources
are taken. :func:`finish_time` integrates the pass's progress over them and says when it
ends and how much time each cause cost it. The engine calls it when a pass starts and again
when the pass's completion event fires (work that started meanwhile may push the end
further: the completion handler then reschedules itself, paying that debt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CAUSES", "Interference", "finish_time", "overlap"]

#: Causes of lost verification time, in the order they are reported.
CAUSES = ("pim-compute", "pim-nonlinear")


@dataclass(frozen=True, slots=True)
class Interference:
    """Work that takes resources of the NPU's verification from ``start`` to ``end``.

    Parameters
    ----------
    start, end : the interval (seconds).
    cause : one of :data:`CAUSES`.
    memory_share : fraction of the interval during which the NPU's memory stream is blocked
        (1 for PIM compute on the target's ranks; a request's bus time over its length).
    npu_share : fraction of the interval during which the NPU itself serves someone else
        (a request's vector time over its length).
    serve_share : fraction of the interval the NPU and the bus spend serving the PIM (what
        the run reports as serving time; 0 for PIM compute).
    """

    start: float
    end: float
    cause: str
    memory_share: float = 0.0
    npu_share: float = 0.0
    serve_share: float = 0.0

    def rate(self, memory_bound: float) -> float:
        """Speed the pass loses while this runs, for a pass of memory-bound fraction
        ``memory_bound``."""
        return self.memory_share * memory_bound + self.npu_share


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    """Length of the intersection of ``[a0, a1]`` and ``[b0, b1]``."""
    return max(0.0, min(a1, b1) - max(a0, b0))


def finish_time(
    start: float, nominal: float, memory_bound: float, interference
) -> tuple[float, dict[str, float], float]:
    """When a pass of ``nominal`` seconds started at ``start`` ends, given ``interference``.

    The pass progresses at speed ``1 - sum(rate)`` (at least 0) while interference is active.
    When several are active and their rates add up to more than 1, the lost time is shared
    among them in proportion to their rates.

    Returns
    -------
    end : the finishing time.
    lost : seconds of delay per cause (``end - start - nominal`` in total).
    served : seconds the NPU and the bus spent serving the PIM inside ``[start, end]``.
    """
    relevant = [item for item in interference if item.end > start and item.end > item.start]
    lost = dict.fromkeys(CAUSES, 0.0)
    if not relevant:
        return start + nominal, lost, 0.0
    # Sweep the interval ends in time order; between two of them the active set is fixed.
    edges = sorted(
        [(max(start, item.start), 1, n) for n, item in enumerate(relevant)]
        + [(item.end, 0, n) for n, item in enumerate(relevant)]
    )
    rates = [item.rate(memory_bound) for item in relevant]
    active: set[int] = set()
    remaining, served, at = nominal, 0.0, start
    for time, opens, n in [*edges, (math.inf, 0, -1)]:
        if time > at:
            total = sum(rates[k] for k in active)
            speed = max(0.0, 1.0 - total)
            scale = 1.0 / total if total > 1.0 else 1.0
            span = time - at
            if speed > 0.0 and remaining <= span * speed:
                span = remaining / speed
            for k in active:
                lost[relevant[k].cause] += rates[k] * scale * span
                served += relevant[k].serve_share * span
            if at + span < time or time == math.inf:
                return at + span, lost, served
            remaining -= span * speed
            at = time
        if opens:
            active.add(n)
        else:
            active.discard(n)
    raise AssertionError("unreachable: the last segment is unbounded")
