"""What both engines share: the run's state over the trace, and the acceptance draws.

:class:`RunState` holds one run's inputs (settings, hardware, policy, metrics, event loop),
the trace as per-position columns, the accept flag of every position and the committed
prefix; its helpers account a device task and count leading accepts.
:func:`draw_outcomes` makes the accept flags (module docstring of :mod:`ahasd.sim.modes`:
acceptance is a property of the position).
"""

from __future__ import annotations

import numpy as np

from ahasd.sim.policies.base import DraftToken
from ahasd.sim.traces.format import Trace

__all__ = ["RunState", "draw_outcomes"]


def draw_outcomes(trace: Trace, rng: np.random.Generator) -> list[bool]:
    """Accept flag per position: recorded, else one Bernoulli(beta) draw per position.

    The draws are made (and ``rng`` advanced) even when the trace has recorded flags, so a
    run's later random numbers do not depend on the kind of trace.
    """
    draws = rng.random(len(trace))
    if trace.accept is not None:
        return [bool(a) for a in trace.accept]
    return (draws < trace.beta).tolist()


class RunState:
    """State shared by both engines: trace columns, outcomes, policy, metrics.

    Parameters
    ----------
    settings : the run's settings (a :class:`~ahasd.sim.settings.RunSettings`, or any object
        with ``tokens`` and ``prompt_tokens``).
    hardware : the cost models (a :class:`~ahasd.sim.modes.hardware.Hardware` or an engine
        subclass's own).
    trace : the drafting trace; its columns are copied into lists.
    policy, metrics, loop : the drafting policy, the metrics sink, the event loop.
    accept : accept flag per position (:func:`draw_outcomes`).

    Members
    -------
    n : generation length (``settings.tokens``).
    prompt : KV-cache length before the first generated token.
    entropy, top1, beta, accept : per-position columns (lists; :meth:`extend` appends).
    committed : tokens committed so far.
    done, end_time : set when the run finishes.
    """

    def __init__(self, settings, hardware, trace, policy, metrics, loop, accept):
        self.settings = settings
        self.hardware = hardware
        self.policy = policy
        self.metrics = metrics
        self.loop = loop
        self.n = settings.tokens
        self.prompt = settings.prompt_tokens
        self.accept = accept
        self.entropy = trace.draft_entropy.tolist()
        self.top1 = trace.draft_top1.tolist()
        self.beta = trace.beta.tolist()
        self.committed = 0
        self.done = False
        self.end_time = 0.0

    def extend(self, trace: Trace, accept: list[bool]) -> None:
        """Append ``trace``'s positions after the current ones (back-to-back requests)."""
        self.entropy.extend(trace.draft_entropy.tolist())
        self.top1.extend(trace.draft_top1.tolist())
        self.beta.extend(trace.beta.tolist())
        self.accept.extend(accept)

    def token(self, pos: int) -> DraftToken:
        """What the draft model knows at position ``pos`` (the policy's input)."""
        return DraftToken(pos, self.entropy[pos], self.top1[pos], self.beta[pos])

    def leading_accepts(self, first: int, end: int) -> int:
        """Accepted positions from ``first`` up to the first rejection before ``end``."""
        accept = self.accept
        n = 0
        for pos in range(first, end):
            if not accept[pos]:
                break
            n += 1
        return n

    def task(self, device, name, start, cost, **args):
        """Account a task of ``cost`` on ``device`` from ``start`` in the metrics (a split
        cost is charged to each of its parts; nonlinear work sent to the host CPU to the
        ``cpu``; work sent to the NPU is the asynchronous engine's to account)."""
        parts = getattr(cost, "parts", ())
        if parts:
            for part_device, seconds in parts:
                self.metrics.task(part_device, name, start, seconds, 0.0, **args)
            self.metrics.energy[f"{device}:dynamic"] += cost.energy_j
        else:
            self.metrics.task(device, name, start, cost.seconds, cost.energy_j, **args)
        if cost.offload_device == "cpu" and cost.offload_compute_s:
            self.metrics.task("cpu", "nonlinear", start, cost.offload_compute_s, 0.0)
