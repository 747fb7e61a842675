"""One run of the system model: :func:`simulate` and its outcome, :class:`RunResult`.

:func:`simulate` looks the mode up in the mode table, builds (or takes) the policy, the
hardware, the trace and, for the asynchronous engine, the controller; draws the accept flags;
runs the engine the table names on a fresh event loop; and returns the summary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ahasd.errors import UserError
from ahasd.params import entropy_to_fixed
from ahasd.sim.controller import Controller, GoldenController
from ahasd.sim.engine import EventLoop
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.metrics import Metrics
from ahasd.sim.modes.hardware import Hardware, build_hardware, tvc_presets
from ahasd.sim.modes.ladder import AsyncRun
from ahasd.sim.modes.state import draw_outcomes
from ahasd.sim.modes.sync import SyncRun
from ahasd.sim.modes.table import find_mode
from ahasd.sim.modes.tvc_widths import (
    TVCWidthGuard,
    check_tvc_widths,
    run_description,
    width_option,
)
from ahasd.sim.policies import make_policy
from ahasd.sim.settings import RunSettings, controller_params, resolve
from ahasd.sim.traces.format import Trace
from ahasd.sim.traces.sources import resolve_trace

__all__ = ["RunResult", "simulate"]


@dataclass
class RunResult:
    """What one run produced: the summary dict and the metrics behind it."""

    summary: dict
    metrics: Metrics


def simulate(
    settings: RunSettings,
    *,
    trace: Trace | None = None,
    library: SpecLibrary | None = None,
    controller: Controller | None = None,
    policy=None,
    hardware: Hardware | None = None,
) -> RunResult:
    """Run one configuration.

    Parameters
    ----------
    settings : the configuration (resolved against its platform first:
        :func:`ahasd.sim.settings.resolve`).
    trace : use this trace instead of resolving ``settings.trace``.
    library : spec library (default: built-in plus ``settings.spec_dirs``).
    controller : EDC/TVC/GTSU controller for the async modes (default
        :class:`GoldenController` with presets from the cost model).
    policy : a policy object instead of ``make_policy(settings.policy, ...)``.
    hardware : cost models instead of :func:`build_hardware` (tests inject fixed costs).
    """
    mode = find_mode(settings.mode)
    settings, library = resolve(settings, library)
    edc_params, tvc_params, gtsu_params = controller_params(settings)
    pair = library.pair(settings.pair)
    if policy is None:
        policy = make_policy(
            settings.policy, fallback=settings.fallback, **dict(settings.policy_params)
        )
    hardware = hardware or build_hardware(settings, library)
    if trace is None:
        trace = resolve_trace(settings.trace, pair.preset, settings.tokens, settings.seed)
    elif len(trace) < settings.tokens:
        raise UserError(
            f"trace has {len(trace)} positions, fewer than the generation length {settings.tokens}"
        )
    outcome_seed, policy_seed = np.random.SeedSequence(settings.seed).spawn(2)
    accept = draw_outcomes(trace, np.random.default_rng(outcome_seed))
    policy.reset(np.random.default_rng(policy_seed))
    metrics = Metrics(record_timeline=settings.record_timeline)
    loop = EventLoop()
    args = (settings, hardware, trace, policy, metrics, loop, accept)
    if mode.engine == "sync":
        run = SyncRun(*args)
    else:
        presets = tvc_presets(hardware, settings.prompt_tokens)
        guard = None
        if mode.tvc:  # refuse widths the run would saturate, before it starts and while it runs
            check_tvc_widths(settings, hardware, presets)
            options = {f: width_option(settings, f) for f in ("ratio_bits", "cycle_bits")}
            where = run_description(settings, hardware)
            guard = TVCWidthGuard(tvc_params, presets, where, options)
        if controller is None:
            controller = GoldenController(edc_params, tvc_params, gtsu_params, tvc_presets=presets)
        efix = [entropy_to_fixed(min(h, 15.0)) for h in trace.draft_entropy.tolist()]
        run = AsyncRun(
            *args,
            controller=controller,
            flags=(mode.aau, mode.edc, mode.tvc),
            efix=efix,
            max_batches=edc_params.llr_max,
            max_batch=(1 << edc_params.length_bits) - 1,
            tvc_guard=guard,
        )
    run.start()
    loop.run()
    if not run.done:
        raise RuntimeError(f"{settings.mode}: the run stalled at {run.committed} tokens")
    summary = metrics.result(
        makespan=run.end_time,
        tokens=run.committed,
        static_w=hardware.static_w,
        devices=hardware.devices,
    )
    summary = {
        "mode": settings.mode,
        "pair": settings.pair,
        "policy": settings.policy,
        "seed": settings.seed,
        "trace": settings.trace or f"synthetic:{pair.preset}",
        "platform": settings.platform,
        **summary,
        "events": loop.dispatched,
        "notes": list(hardware.notes),
        **hardware.details,
    }
    if mode.engine == "async":
        summary["controller"] = controller.counters() if hasattr(controller, "counters") else {}
    return RunResult(summary, metrics)
