"""The phone engine: sustained generation on a phone SoC, :func:`simulate_phone` (which
prepares the run once, :func:`~ahasd.sim.phone.prepare.prepare_phone_run`, and hands it to
:func:`simulate_prepared_phone`).

:class:`PhoneRun` is the synchronous engine (:class:`ahasd.sim.modes.SyncRun`) extended
through its hook methods with back-to-back requests, per-level pass costs, package power,
the thermal state, the governor and the arbiter (mechanisms: :mod:`ahasd.sim.phone`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ahasd.sim.cost import Cost
from ahasd.sim.engine import EventLoop
from ahasd.sim.metrics import Metrics
from ahasd.sim.modes.state import draw_outcomes
from ahasd.sim.modes.sync import SyncRun
from ahasd.sim.phone.cost import PhoneHardware, build_phone_hardware
from ahasd.sim.phone.governor import Governor
from ahasd.sim.phone.prepare import PreparedPhoneRun, prepare_phone_run
from ahasd.sim.phone.settings import MIX_ORDER, TASK_DRAFT_LENGTH, TASK_PRESET_TASK, PhoneSettings
from ahasd.sim.policies import make_policy
from ahasd.sim.thermal import ThermalModel, ThermalParams
from ahasd.sim.traces import synthetic
from ahasd.sim.traces.format import Trace

__all__ = ["PhoneResult", "PhoneRun", "request_traces", "simulate_phone", "simulate_prepared_phone"]

_RATE_WINDOW_S = 60.0  # first/last-minute token rates


@dataclass
class PhoneResult:
    """One sustained run: the summary dict and the time series behind it."""

    summary: dict
    metrics: Metrics
    samples: list  # per governor period: dict(time_s, skin_c, die_c, gpu_clock_hz, ...)
    throttle_log: list
    power_intervals: list  # (start, seconds, watts) when record_power
    round_log: list  # (first_pos, kept, dropped, accepted) when record_rounds


class PhoneRun(SyncRun):
    """The synchronous draft/verify loop of :class:`~ahasd.sim.modes.SyncRun` plus requests,
    clocks, power, thermal state, governor and arbiter (:mod:`ahasd.sim.phone`).

    Overrides the engine's hooks :meth:`round_start` (requests, duration, draft-length
    caps), :meth:`draft` and :meth:`verify` (per-level costs, power and thermal accounting),
    :meth:`verified` (KV rollbacks, round log) and :meth:`finish` (a last sample).

    Parameters
    ----------
    settings, hardware : the :class:`PhoneSettings` and :class:`PhoneHardware`.
    platform : the platform.
    traces : ``index -> (Trace, task type)`` of request ``index``.
    policy, metrics, loop : as for the engine.
    rng : the outcome RNG (each request's accept flags are drawn from it in turn).
    options : ``max_requests``, ``record_power``, ``record_rounds`` and optionally
        ``progress`` (called with the simulated time at every governor period).
    """

    def __init__(self, settings, hw, platform, traces, policy, metrics, loop, rng, options):
        self.traces = traces
        self.rng = rng
        self.requests = 0
        self.max_requests = options["max_requests"]
        self.request_start = 0
        self.request_end = 0
        self.task_type = ""
        first_trace, self.task_type = traces(0)
        accept = draw_outcomes(first_trace, rng)
        super().__init__(settings, hw, first_trace, policy, metrics, loop, accept)
        self.platform = platform
        self.skin_limit = settings.skin_limit_c or platform.skin_limit_c
        ambient = platform.ambient_c if settings.ambient_c is None else settings.ambient_c
        self.thermal = ThermalModel(
            ThermalParams(
                ambient,
                platform.r_skin_k_per_w,
                platform.tau_skin_s,
                platform.r_die_k_per_w,
                platform.tau_die_s,
            ),
            start_c=settings.start_c,
        )
        self.governor = Governor(platform, self.skin_limit, self.thermal.skin_c)
        self.duration = settings.duration_s
        self.energy_j = 0.0  # power integrated over time (the conservation check's side)
        self.record_power = options["record_power"]
        self.record_rounds = options["record_rounds"]
        self.progress = options.get("progress")
        self.power_intervals = []
        self.round_log = []
        self.samples = []
        self.throttle_log = []
        self.peak_skin = self.peak_die = self.thermal.skin_c
        self.throttled_s = 0.0
        self.token_times: list[tuple[float, int]] = [(0.0, 0)]
        self.devices = ("gpu", "npu")
        self._sample(0.0)
        self.requests = 1
        self.request_end = min(settings.tokens, len(first_trace))

    # -- requests and traces --------------------------------------------------------------

    def _next_request(self) -> None:
        trace, self.task_type = self.traces(self.requests)
        self.requests += 1
        self.extend(trace, draw_outcomes(trace, self.rng))
        self.request_start = self.committed
        self.request_end = self.committed + min(self.settings.tokens, len(trace))

    # -- the loop -------------------------------------------------------------------------

    def round_start(self) -> None:
        now = self.loop.now
        self.token_times.append((now, self.committed))
        if self.committed >= self.request_end:
            if (self.max_requests and self.requests >= self.max_requests) or now >= self.duration:
                self.finish()
                return
            self._next_request()
        if now >= self.duration:
            self.finish()
            return
        self.round_t0 = now
        remaining = self.request_end - 1 - self.committed  # the bonus token stays inside
        if self.hardware.draft_device is None:  # no draft model: autoregression
            kmax = 0
        else:
            length = TASK_DRAFT_LENGTH[self.task_type]
            if self.settings.arbiter and self.thermal.skin_c > self.platform.arbiter_c:
                shortened = max(1, length // 2)
                if shortened < length:
                    self.metrics.count("arbiter_shortened")
                length = shortened
            kmax = max(0, min(self.policy.start_round(), length, remaining))
        self.round_drafted = 0
        self.begin_round(kmax)

    def finish(self) -> None:
        self._sample(self.loop.now)
        super().finish()

    def _run_task(self, device: str, name: str, cost: Cost, **args) -> None:
        """Account one task: metrics, clocked/gated/base power, thermal state."""
        hw, level = self.hardware, self.governor.level
        seconds = cost.seconds
        self.task(device, name, self.loop.now, cost, **args)
        clocked = hw.clocked_w(device, level)
        gated = sum(w for d, w in hw.gated_w.items() if d != device)
        base = self.platform.soc_base_w + self.platform.dram_idle_w
        energy = self.metrics.energy
        energy[f"{device}:clocked"] += clocked * seconds
        for other, watts in hw.gated_w.items():
            if other != device:
                energy[f"{other}:gated"] += watts * seconds
        energy["soc:base"] += self.platform.soc_base_w * seconds
        energy["dram:background"] += self.platform.dram_idle_w * seconds
        watts = cost.energy_j / seconds + clocked + gated + base
        self.energy_j += watts * seconds
        if self.record_power:
            self.power_intervals.append((self.loop.now, seconds, watts))
        if level > 0:
            self.throttled_s += seconds
        self.thermal.advance(watts, seconds)
        self.peak_skin = max(self.peak_skin, self.thermal.skin_c)
        self.peak_die = max(self.peak_die, self.thermal.die_c)

    def _govern(self) -> None:
        governor = self.governor
        while self.loop.now >= governor.next_check:
            decision = governor.decide(self.thermal.skin_c, self.thermal.die_c)
            if decision is not None:
                level, reason = decision
                clocks = self.platform.clock_levels
                self.throttle_log.append(
                    {
                        "time_s": self.loop.now,
                        "from_hz": clocks[governor.level] * self.hardware.gpu_clock_hz,
                        "to_hz": clocks[level] * self.hardware.gpu_clock_hz,
                        "skin_c": self.thermal.skin_c,
                        "die_c": self.thermal.die_c,
                        "reason": reason,
                    }
                )
                governor.level = level
            self._sample(self.loop.now)
            governor.next_check += governor.period
            if self.progress is not None:
                self.progress(self.loop.now)

    def _sample(self, now: float) -> None:
        self.samples.append(
            {
                "time_s": now,
                "skin_c": self.thermal.skin_c,
                "die_c": self.thermal.die_c,
                "gpu_clock_hz": self.platform.clock_levels[self.governor.level]
                * self.hardware.gpu_clock_hz,
                "level": self.governor.level,
                "tokens": self.committed,
                "energy_j": self.energy_j,
            }
        )

    def context(self, pos: int) -> int:
        return self.prompt + (pos - self.request_start)

    def draft(self, i: int) -> None:
        self._govern()
        pos = self.committed + i - 1
        cost = self.hardware.draft_passes[self.governor.level](1, self.context(pos))
        self._run_task(self.hardware.draft_device, "draft", cost, pos=pos)
        self.round_drafted = i
        self.loop.after(cost.seconds, self.token_done, i)

    def verify(self, kept: int) -> None:
        self._govern()
        verify_pass = self.hardware.verify_passes[self.governor.level]
        cost = verify_pass(kept + 1, self.context(self.committed))
        self._run_task("gpu", "verify" if kept else "ar-step", cost, tokens=kept)
        self.loop.after(cost.seconds, self.verified, kept)

    def verified(self, kept: int) -> None:
        n_acc = self.leading_accepts(self.committed, self.committed + kept)
        if n_acc < kept:  # O(1) rollback: the KV length moves back, nothing is copied
            self.metrics.count("kv_rollbacks")
            self.metrics.count("kv_rollback_tokens", kept - n_acc)
        if self.record_rounds:
            self.round_log.append((self.committed, kept, self.round_drafted - kept, n_acc))
        super().verified(kept)


def request_traces(settings: PhoneSettings, preset: str):
    """Request index -> (synthetic trace of ``preset``, task type), seeded by (seed, index).

    The default ``traces`` of :func:`simulate_phone`: task types cycle code, dialogue, text
    with ``task="mix"``.
    """

    def source(index: int) -> tuple[Trace, str]:
        task = MIX_ORDER[index % len(MIX_ORDER)] if settings.task == "mix" else settings.task
        seed = int(np.random.SeedSequence([settings.seed, index]).generate_state(1)[0])
        trace = synthetic.generate(preset, settings.tokens, seed, task=TASK_PRESET_TASK[task])
        return trace, task

    return source


def simulate_phone(settings: PhoneSettings, **options) -> PhoneResult:
    """Run one sustained phone configuration: :func:`simulate_prepared_phone` of
    :func:`~ahasd.sim.phone.prepare.prepare_phone_run` (``options`` are its keyword
    arguments)."""
    return simulate_prepared_phone(prepare_phone_run(settings), **options)


def simulate_prepared_phone(
    prepared: PreparedPhoneRun,
    *,
    traces=None,
    requests: int | None = None,
    record_power: bool = False,
    record_rounds: bool = False,
    hardware: PhoneHardware | None = None,
    progress=None,
) -> PhoneResult:
    """Run one prepared sustained phone configuration.

    Parameters
    ----------
    prepared : the prepared run (settings, mode row, platform, library, pair).
    traces : ``index -> (Trace, task type)`` for request ``index``, instead of the pair's
        synthetic preset (tests hand-build sequences with it).
    requests : stop after this many requests (each as long as its trace) even before
        ``duration_s``; None = run until ``duration_s``.
    record_power : keep every constant-power interval ``(start, seconds, watts)``.
    record_rounds : keep ``(first position, kept, dropped, accepted)`` per round.
    hardware : cost models instead of :func:`build_phone_hardware`.
    progress : called with the simulated time (s) at every governor period, for a progress
        display; None = silent.
    """
    settings, platform, pair = prepared.settings, prepared.platform, prepared.pair
    hardware = hardware or build_phone_hardware(prepared)
    policy_params = dict(settings.policy_params)
    if settings.policy == "threshold":
        policy_params.setdefault("max_len", max(TASK_DRAFT_LENGTH.values()))
    policy = make_policy(settings.policy, fallback=settings.fallback, **policy_params)
    outcome_seed, policy_seed = np.random.SeedSequence(settings.seed).spawn(2)
    rng = np.random.default_rng(outcome_seed)
    policy.reset(np.random.default_rng(policy_seed))
    metrics = Metrics()
    loop = EventLoop()
    source = traces or request_traces(settings, pair.preset)
    options = {
        "max_requests": requests,
        "record_power": record_power,
        "record_rounds": record_rounds,
        "progress": progress,
    }
    run = PhoneRun(settings, hardware, platform, source, policy, metrics, loop, rng, options)
    run.start()
    loop.run()
    if not run.done:
        raise RuntimeError(f"{settings.mode}: the phone run stalled at {run.committed} tokens")
    summary = metrics.result(
        makespan=run.end_time,
        tokens=run.committed,
        static_w={},
        devices=run.devices,
    )
    end = run.end_time
    summary = {
        "mode": settings.mode,
        "pair": pair.name,
        "policy": "none" if prepared.mode.draft_device is None else policy.name,
        "seed": settings.seed,
        "trace": f"synthetic:{pair.preset}" if traces is None else "given",
        **summary,
        "platform": platform.name,
        "task": settings.task,
        "duration_s": settings.duration_s,
        "requests": run.requests,
        "package_power_w": run.energy_j / end if end > 0 else 0.0,
        "power_integral_j": run.energy_j,
        "tokens_per_s_first_60s": _rate(run.token_times, 0.0, min(_RATE_WINDOW_S, end)),
        "tokens_per_s_last_60s": _rate(run.token_times, max(0.0, end - _RATE_WINDOW_S), end),
        "skin_limit_c": run.skin_limit,
        "arbiter_c": platform.arbiter_c,
        "peak_skin_c": run.peak_skin,
        "final_skin_c": run.thermal.skin_c,
        "peak_die_c": run.peak_die,
        "throttle_events": sum(1 for e in run.throttle_log if e["reason"] != "recovered"),
        "throttle_log": run.throttle_log,
        "time_throttled_s": run.throttled_s,
        "final_gpu_clock_hz": platform.clock_levels[run.governor.level] * hardware.gpu_clock_hz,
        "min_gpu_clock_hz": min(s["gpu_clock_hz"] for s in run.samples),
        "arbiter_shortened": metrics.counts["arbiter_shortened"],
        "kv_rollbacks": metrics.counts["kv_rollbacks"],
        "kv_rollback_tokens": metrics.counts["kv_rollback_tokens"],
        "events": loop.dispatched,
        "notes": list(hardware.notes),
        **hardware.details,
    }
    return PhoneResult(
        summary,
        metrics,
        run.samples,
        run.throttle_log,
        run.power_intervals,
        run.round_log,
    )


def _rate(token_times: list[tuple[float, int]], start: float, end: float) -> float:
    """Committed tokens per second between round boundaries nearest ``start`` and ``end``."""
    if end <= start:
        return 0.0
    before = [(t, n) for t, n in token_times if t <= start]
    after = [(t, n) for t, n in token_times if t <= end]
    t0, n0 = before[-1] if before else token_times[0]
    t1, n1 = after[-1]
    return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0
