"""One run of the NPU+PIM scenario: :func:`simulate` and its outcome, :class:`RunResult`.

:func:`simulate` prepares the run once (:func:`~ahasd.sim.modes.prepare.prepare_run`: the
mode's row, the settings resolved against their platform) and hands it to
:func:`simulate_prepared`, which builds (or takes) the policy, the hardware, the trace and
what the mode row's engine (:data:`ENGINES`) needs; draws the accept flags; runs the engine
on a fresh event loop; and returns the summary.
"""

from __future__ import annotations

from collections.abc import Callable
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
from ahasd.sim.modes.prepare import PreparedRun, prepare_run
from ahasd.sim.modes.state import draw_outcomes
from ahasd.sim.modes.sync import SyncRun
from ahasd.sim.modes.tvc_widths import (
    TVCWidthGuard,
    check_tvc_widths,
    run_description,
    width_option,
)
from ahasd.sim.policies import make_policy
from ahasd.sim.settings import RunSettings
from ahasd.sim.traces.format import Trace
from ahasd.sim.traces.sources import resolve_trace

__all__ = ["ENGINES", "Engine", "RunResult", "simulate", "simulate_prepared"]


@dataclass
class RunResult:
    """What one run produced: the summary dict and the metrics behind it."""

    summary: dict
    metrics: Metrics


@dataclass(frozen=True)
class Engine:
    """An engine a mode row names (``Mode.engine``, a key of :data:`ENGINES`).

    Parameters
    ----------
    run_class : the engine, a :class:`~ahasd.sim.modes.state.RunState` subclass.
    arguments : ``(prepared run, controller parameters, hardware, trace, controller) ->
        dict``: the keyword arguments ``run_class`` takes beyond those of ``RunState``.
    summary : ``(run) -> dict``: what the finished ``run_class`` instance adds to the
        run's summary.
    """

    run_class: type
    arguments: Callable[..., dict]
    summary: Callable[[object], dict]


def _sync_arguments(prepared, params, hardware, trace, controller) -> dict:
    return {}


def _sync_summary(run: SyncRun) -> dict:
    return {}


def _async_arguments(
    prepared: PreparedRun,
    params,
    hardware: Hardware,
    trace: Trace,
    controller: Controller | None,
) -> dict:
    """The controller (default :class:`GoldenController` with presets from the cost model),
    the mode row's flags, the draft entropies in the EDC's fixed point and the TVC guard."""
    settings, mode = prepared.settings, prepared.mode
    edc_params, tvc_params, gtsu_params = params
    presets = tvc_presets(hardware, settings.prompt_tokens)
    guard = None
    if mode.tvc:  # refuse widths the run would saturate, before it starts and while it runs
        check_tvc_widths(settings, hardware, presets, tvc_params)
        options = {f: width_option(settings, f) for f in ("ratio_bits", "cycle_bits")}
        where = run_description(settings, hardware)
        guard = TVCWidthGuard(tvc_params, presets, where, options)
    if controller is None:
        controller = GoldenController(edc_params, tvc_params, gtsu_params, tvc_presets=presets)
    return {
        "controller": controller,
        "flags": (mode.aau, mode.edc, mode.tvc),
        "efix": [entropy_to_fixed(min(h, 15.0)) for h in trace.draft_entropy.tolist()],
        "max_batches": edc_params.llr_max,
        "max_batch": (1 << edc_params.length_bits) - 1,
        "tvc_guard": guard,
    }


def _async_summary(run: AsyncRun) -> dict:
    controller = run.ctl
    return {"controller": controller.counters() if hasattr(controller, "counters") else {}}


# Mode.engine -> the engine (one per entry of table.ENGINE_NAMES).
ENGINES = {
    "sync": Engine(SyncRun, _sync_arguments, _sync_summary),
    "async": Engine(AsyncRun, _async_arguments, _async_summary),
}


def simulate(settings: RunSettings, *, library: SpecLibrary | None = None, **options) -> RunResult:
    """Run one configuration: :func:`simulate_prepared` of :func:`prepare_run`.

    Parameters
    ----------
    settings : the configuration (resolved against its platform here, once).
    library : spec library (default: built-in plus ``settings.spec_dirs``).
    **options : ``trace``, ``controller``, ``policy``, ``hardware``: as for
        :func:`simulate_prepared`.
    """
    return simulate_prepared(prepare_run(settings, library), **options)


def simulate_prepared(
    prepared: PreparedRun,
    *,
    trace: Trace | None = None,
    controller: Controller | None = None,
    policy=None,
    hardware: Hardware | None = None,
) -> RunResult:
    """Run one prepared configuration.

    Parameters
    ----------
    prepared : the prepared run (:func:`~ahasd.sim.modes.prepare.prepare_run`).
    trace : use this trace instead of resolving ``settings.trace``.
    controller : EDC/TVC/GTSU controller for the async modes (default
        :class:`GoldenController` with presets from the cost model).
    policy : a policy object instead of ``make_policy(settings.policy, ...)``.
    hardware : cost models instead of :func:`build_hardware` (tests inject fixed costs).
    """
    settings, library = prepared.settings, prepared.library
    params = prepared.controller
    pair = library.pair(settings.pair)
    if policy is None:
        policy = make_policy(
            settings.policy, fallback=settings.fallback, **dict(settings.policy_params)
        )
    hardware = hardware or build_hardware(prepared)
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
    engine = ENGINES[prepared.mode.engine]
    run = engine.run_class(
        settings,
        hardware,
        trace,
        policy,
        metrics,
        loop,
        accept,
        **engine.arguments(prepared, params, hardware, trace, controller),
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
        **engine.summary(run),
    }
    return RunResult(summary, metrics)
