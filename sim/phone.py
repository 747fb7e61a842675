"""The phone-SoC scenario (spec section 5): sustained speculative decoding under a thermal limit.

A Snapdragon 8 Gen 3 / Apple M4 class SoC runs an INT4 8B target on its GPU and an INT4
draft model (SmolLM-135M or Qwen2.5-0.5B) either on the GPU too or on its NPU with the draft
weights in on-chip SRAM; both share LPDDR5X. Three modes (``PHONE_MODES``):

- ``gpu-ar``: plain autoregressive decoding on the GPU (one M = 1 pass per token);
- ``gpu-spec``: homogeneous speculative decoding, draft and target alternate on the GPU
  (the draft's weights come from DRAM);
- ``npu-gpu-hetero``: the NPU drafts from SRAM while the GPU is clock-gated, then the GPU
  verifies while the NPU is clock-gated (synchronous, as the issue describes).

Mechanisms, all in :class:`_PhoneRun` on top of the synchronous engine of
:mod:`ahasd.sim.modes` (same token accounting, same metrics):

- confidence pruning: the ``threshold`` policy of :mod:`ahasd.sim.policies` (top-1 < 0.35
  ends the draft; the low-confidence token is dropped, the first token of a round is kept);
- draft length by task type, ``TASK_DRAFT_LENGTH`` (5 code/JSON, 3 dialogue, 1 high-entropy
  text), as a cap on the round length;
- fallback to autoregression (:class:`ahasd.sim.policies.Fallback`: acceptance below 0.50
  over the last 32 judged tokens);
- O(1) KV-cache rollback: a rejection moves the KV length back to the committed prefix (a
  pointer move, no copy, no task); the next pass simply runs at the shorter context. Counted
  in ``kv_rollbacks``/``kv_rollback_tokens``, costed at zero time and energy;
- a two-node RC thermal model (:mod:`ahasd.sim.thermal`) driven by the package power, a
  governor that steps the GPU/NPU clock (and the DDR frequency cap paired with it) down one
  level when the skin reaches its limit (or the die its limit) and back up below the limit
  minus a hysteresis, polled every ``governor_period_s``;
- a thermal arbiter: above ``arbiter_c`` (41 C) skin, the task's draft length is halved
  (``max(1, L // 2)``).

Power: every task has a constant power over its duration, the sum of its dynamic energy
divided by its time (roofline cost model of :mod:`ahasd.sim.cost`, clock-scaled), the
clocked device's clock-tree/leakage power ``active_w * s * v(s)^2`` (``s`` = clock fraction,
``v(s) = v0 + (1 - v0) s``), the clock-gated power of the other device, the rest of the SoC
and the DRAM background. Dynamic energy per op scales with ``v(s)^2``; DRAM energy per byte
does not. Energy reported = power integrated over the run (a test checks it).

A run generates back-to-back requests of ``tokens`` tokens (each starting again from a
``prompt_tokens`` KV cache, task types cycling code, dialogue, text with ``task="mix"``) until
``duration_s`` of simulated time has passed, and stops at the first round boundary after it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ahasd.errors import UserError
from ahasd.sim import synth
from ahasd.sim.config import BUILTIN_SPEC_DIR, Sourced, _number, _read_toml, _string, load_library
from ahasd.sim.cost import Cost, Executor, PassModel, executor_for, operators
from ahasd.sim.engine import EventLoop
from ahasd.sim.metrics import Metrics
from ahasd.sim.modes import _outcomes, _SyncRun
from ahasd.sim.policies import make_policy
from ahasd.sim.thermal import ThermalModel, ThermalParams
from ahasd.sim.traces import Trace

__all__ = [
    "PHONE_MODES",
    "TASKS",
    "TASK_DRAFT_LENGTH",
    "PhoneResult",
    "PhoneSettings",
    "PlatformSpec",
    "TieredPassModel",
    "known_platforms",
    "load_platform",
    "plot_phone",
    "simulate_phone",
]

PHONE_MODES = ("gpu-ar", "gpu-spec", "npu-gpu-hetero")
# Issue 10: draft length by task type.
TASK_DRAFT_LENGTH = {"code": 5, "dialogue": 3, "text": 1}
# Task type -> task of the synthetic preset (sim/synth.py): code = code; dialogue = the
# preset's mixed figure; high-entropy text = its lowest-acceptance task (translation).
TASK_PRESET_TASK = {"code": "code", "dialogue": "mixed", "text": "translation"}
TASKS = (*TASK_DRAFT_LENGTH, "mix")
MIX_ORDER = ("code", "dialogue", "text")
SKIN_LIMIT_RANGE = (42.0, 45.0)
DRAFT_WEIGHTS = ("sram", "spill")
_RATE_WINDOW_S = 60.0  # first/last-minute token rates

_PLATFORM_NUMBERS = (
    "npu_sram_bandwidth",
    "gpu_active_w",
    "npu_active_w",
    "soc_base_w",
    "dram_idle_w",
    "ambient_c",
    "skin_limit_c",
    "arbiter_c",
    "die_limit_c",
    "r_skin_k_per_w",
    "tau_skin_s",
    "r_die_k_per_w",
    "tau_die_s",
    "governor_period_s",
    "hysteresis_c",
    "voltage_floor",
)
_PLATFORM_LEVELS = ("clock_levels", "memory_levels")


@dataclass(frozen=True)
class PlatformSpec:
    """One SoC class: its NPU and GPU device names and the platform-level figures."""

    name: str
    description: str
    npu: str
    gpu: str
    pair: str
    npu_sram_bandwidth: float
    gpu_active_w: float
    npu_active_w: float
    soc_base_w: float
    dram_idle_w: float
    ambient_c: float
    skin_limit_c: float
    arbiter_c: float
    die_limit_c: float
    r_skin_k_per_w: float
    tau_skin_s: float
    r_die_k_per_w: float
    tau_die_s: float
    governor_period_s: float
    hysteresis_c: float
    voltage_floor: float
    clock_levels: tuple[float, ...]
    memory_levels: tuple[float, ...]
    path: str = ""
    sources: tuple[tuple[str, Sourced], ...] = ()


def _levels(path: Path, data: dict, key: str) -> tuple[tuple[float, ...], Sourced]:
    entry = data.get(key)
    if not isinstance(entry, dict):
        raise UserError(f"{path}: field '{key}': required, a table with value, source, confidence")
    values = entry.get("value")
    ok = isinstance(values, list) and values
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1 for v in values
    )
    if not ok:
        raise UserError(
            f"{path}: field '{key}': value must be a non-empty list of numbers in (0, 1]"
        )
    if any(b > a for a, b in itertools.pairwise(values)) or values[0] != 1:
        raise UserError(f"{path}: field '{key}': levels must start at 1 and never increase")
    scalar = _number(
        path, {**data, key: {**entry, "value": 1.0}}, key, integer=False, zero_ok=False
    )
    return tuple(float(v) for v in values), scalar


def load_platform(path: Path) -> PlatformSpec:
    """Read and validate ``platforms/<name>.toml`` (UserError naming the file and field)."""
    data = _read_toml(path)
    strings = {key: _string(path, data, key) for key in ("name", "npu", "gpu", "pair")}
    numbers = {}
    for key in _PLATFORM_NUMBERS:
        if key not in data:
            raise UserError(f"{path}: field '{key}': required for a platform")
        zero_ok = key in ("ambient_c", "hysteresis_c")
        numbers[key] = _number(path, data, key, integer=False, zero_ok=zero_ok)
    if not numbers["voltage_floor"].value <= 1:
        raise UserError(f"{path}: field 'voltage_floor': value must be at most 1")
    clock, clock_src = _levels(path, data, "clock_levels")
    memory, memory_src = _levels(path, data, "memory_levels")
    if len(clock) != len(memory):
        raise UserError(
            f"{path}: field 'memory_levels': needs one entry per clock level ({len(clock)})"
        )
    sources = (*numbers.items(), ("clock_levels", clock_src), ("memory_levels", memory_src))
    return PlatformSpec(
        description=str(data.get("description", "")),
        clock_levels=clock,
        memory_levels=memory,
        path=str(path),
        sources=sources,
        **strings,
        **{key: float(item.value) for key, item in numbers.items()},
    )


def known_platforms(spec_dirs=()) -> dict[str, Path]:
    """Platform name -> file, built-in first, later ``spec_dirs`` override by file stem."""
    found = {}
    for directory in (BUILTIN_SPEC_DIR, *(Path(d) for d in spec_dirs)):
        for path in sorted((directory / "platforms").glob("*.toml")):
            found[path.stem] = path
    return found


def _platform(name: str, spec_dirs) -> PlatformSpec:
    found = known_platforms(spec_dirs)
    if name not in found:
        raise UserError(f"unknown platform {name!r} (known: {', '.join(sorted(found))})")
    spec = load_platform(found[name])
    if spec.name != name:
        raise UserError(f"{found[name]}: field 'name': {spec.name!r} differs from the file name")
    return spec


@dataclass(frozen=True)
class PhoneSettings:
    """One sustained phone run (what ``ahasd simulate --platform`` takes)."""

    platform: str = field(metadata={"help": "Platform name (sim/specs/platforms)."})
    mode: str = field(default="npu-gpu-hetero", metadata={"help": "One of PHONE_MODES."})
    pair: str | None = field(default=None, metadata={"help": "Pair; None = the platform's."})
    policy: str = field(default="threshold", metadata={"help": "Drafting policy."})
    fallback: bool = field(default=True, metadata={"help": "Autoregression fallback."})
    task: str = field(default="mix", metadata={"help": "code, dialogue, text or mix."})
    duration_s: float = field(default=600.0, metadata={"help": "Simulated seconds."})
    tokens: int = field(default=1024, metadata={"help": "Tokens per request."})
    prompt_tokens: int = field(default=128, metadata={"help": "KV length at request start."})
    seed: int = field(default=0, metadata={"help": "Seed of traces, outcomes, policy."})
    dram_pj_per_bit: float | None = field(default=None, metadata={"help": "DRAM override."})
    skin_limit_c: float | None = field(default=None, metadata={"help": "Skin limit override."})
    ambient_c: float | None = field(default=None, metadata={"help": "Ambient override."})
    start_c: float | None = field(default=None, metadata={"help": "Start temp (ambient)."})
    draft_weights: str = field(default="sram", metadata={"help": "sram (spec) or spill."})
    arbiter: bool = field(default=True, metadata={"help": "Shorten drafts above arbiter_c."})
    policy_params: tuple = field(default=(), metadata={"help": "Policy keyword arguments."})
    spec_dirs: tuple = field(default=(), metadata={"help": "Extra spec directories."})

    def __post_init__(self) -> None:
        if self.mode not in PHONE_MODES:
            raise UserError(f"unknown phone mode {self.mode!r} (known: {', '.join(PHONE_MODES)})")
        if self.task not in TASKS:
            raise UserError(f"unknown task {self.task!r} (known: {', '.join(TASKS)})")
        if self.draft_weights not in DRAFT_WEIGHTS:
            raise UserError(
                f"draft-weights must be one of {', '.join(DRAFT_WEIGHTS)}, not "
                f"{self.draft_weights!r}"
            )
        for name, low in (("tokens", 2), ("prompt_tokens", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(
                    f"{name.replace('_', '-')} must be an integer >= {low}, not {value!r}"
                )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"seed must be a non-negative integer, not {self.seed!r}")
        if not _positive(self.duration_s):
            raise UserError(
                f"duration must be a positive number of seconds, not {self.duration_s!r}"
            )
        if self.dram_pj_per_bit is not None and not _positive(self.dram_pj_per_bit):
            raise UserError(
                f"dram-pj-per-bit must be a positive number, not {self.dram_pj_per_bit!r}"
            )
        low, high = SKIN_LIMIT_RANGE
        if self.skin_limit_c is not None and not (
            _real(self.skin_limit_c) and low <= self.skin_limit_c <= high
        ):
            raise UserError(
                f"skin-limit must be a temperature in {low:g}..{high:g} C, "
                f"not {self.skin_limit_c!r}"
            )
        for name in ("ambient_c", "start_c"):
            value = getattr(self, name)
            if value is not None and not (_real(value) and -20.0 <= value <= 60.0):
                raise UserError(
                    f"{name.removesuffix('_c')} must be a temperature in -20..60 C, not {value!r}"
                )


def _real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value) -> bool:
    return _real(value) and value > 0


# -- cost model -------------------------------------------------------------------------------


class TieredPassModel(PassModel):
    """A pass whose weights and KV cache live in different memories (the NPU draft).

    The executor's ``bytes_per_s``/``pj_per_byte`` are the weight tier's (on-chip SRAM, or a
    blend of SRAM and DRAM when the weights spill); attention's KV-cache bytes use
    ``kv_bytes_per_s``/``kv_pj_per_byte`` (LPDDR5X). Otherwise the roofline of
    :class:`ahasd.sim.cost.PassModel`.
    """

    def __init__(self, executor: Executor, model, kv_bytes_per_s: float, kv_pj_per_byte: float):
        super().__init__(executor, model)
        self.kv_bytes_per_s = kv_bytes_per_s
        self.kv_pj_per_byte = kv_pj_per_byte

    def _compute(self, tokens: int, context: int) -> Cost:
        ex = self.executor
        matrix, elements, _ = operators(self.model, tokens, context)
        seconds = macs = memory_bytes = energy = 0.0
        for name, count, op_macs, op_bytes in matrix:
            kv = name.startswith("attention")
            bandwidth = self.kv_bytes_per_s if kv else ex.bytes_per_s
            pj_per_byte = self.kv_pj_per_byte if kv else ex.pj_per_byte
            seconds += count * max(op_macs / ex.macs_per_s, op_bytes / bandwidth)
            energy += count * (op_macs * ex.pj_per_mac + op_bytes * pj_per_byte)
            macs += count * op_macs
            memory_bytes += count * op_bytes
        path = ex.nonlinear
        seconds += elements / path.elements_per_s
        energy += elements * path.pj_per_element
        return Cost(seconds, energy * 1e-12, macs, memory_bytes, 0.0, elements)


def _voltage(platform: PlatformSpec, s: float) -> float:
    """Relative supply voltage at clock fraction ``s`` (linear V-f model)."""
    v0 = platform.voltage_floor
    return v0 + (1.0 - v0) * s


def _scaled(ex: Executor, s: float, m: float, v2: float) -> Executor:
    """``ex`` at clock fraction ``s``, memory fraction ``m``, relative V^2 ``v2``."""
    path = replace(
        ex.nonlinear,
        elements_per_s=ex.nonlinear.elements_per_s * s,
        pj_per_element=ex.nonlinear.pj_per_element * v2,
    )
    return replace(
        ex,
        macs_per_s=ex.macs_per_s * s,
        bytes_per_s=ex.bytes_per_s * m,
        pj_per_mac=ex.pj_per_mac * v2,
        nonlinear=path,
    )


@dataclass
class PhoneHardware:
    """Pass-cost models per throttle level, and the power figures of the platform."""

    platform: PlatformSpec
    mode: str
    draft_device: str | None
    verify_device: str
    draft_passes: list  # per level: (tokens, context) -> Cost, or None (gpu-ar)
    verify_passes: list
    active_w: dict  # device -> clocked power at fmax (W)
    gated_w: dict  # device -> clock-gated power (W)
    gpu_clock_hz: float
    notes: list = field(default_factory=list)
    details: dict = field(default_factory=dict)

    def clocked_w(self, device: str, level: int) -> float:
        s = self.platform.clock_levels[level]
        return self.active_w[device] * s * _voltage(self.platform, s) ** 2


def build_phone_hardware(settings: PhoneSettings, platform: PlatformSpec, library) -> PhoneHardware:
    """Executors of the platform's GPU and NPU at every throttle level, for ``settings.mode``."""
    pair = library.pair(settings.pair or platform.pair)
    draft, target = library.model(pair.draft), library.model(pair.target)
    gpu = library.device(platform.gpu, "gpu")
    npu = library.device(platform.npu, "npu")
    gpu_power, npu_power = library.power_of(gpu.name), library.power_of(npu.name)
    if settings.dram_pj_per_bit is not None:
        gpu_power = replace(gpu_power, pj_per_byte_memory=8.0 * settings.dram_pj_per_bit)
        npu_power = replace(npu_power, pj_per_byte_memory=8.0 * settings.dram_pj_per_bit)
    gpu_ex = executor_for(gpu, gpu_power)
    npu_ex = executor_for(npu, npu_power)
    notes = []
    details = {
        "draft_model": draft.name,
        "target_model": target.name,
        "dram_pj_per_bit": gpu_power.pj_per_byte_memory / 8.0,
        "draft_weights": settings.draft_weights,
    }
    weights = draft.weight_bytes_total + target.weight_bytes_total
    if gpu.capacity_bytes and weights > gpu.capacity_bytes:
        notes.append(
            f"weights ({weights / 1e9:.1f} GB) exceed {gpu.name}'s memory; modelled as if they fit"
        )
    sram = npu.sram_bytes or 0.0
    fit = min(1.0, sram / draft.weight_bytes_total) if draft.weight_bytes_total else 1.0
    if settings.mode == "npu-gpu-hetero" and fit < 1.0:
        notes.append(
            f"{draft.name} INT4 weights ({draft.weight_bytes_total / 1e6:.0f} MB) do not fit "
            f"{npu.name}'s {sram / 2**20:.0f} MiB SRAM; "
            + (
                "modelled as if they did (spec section 5; --draft-weights spill to stream the rest)"
                if settings.draft_weights == "sram"
                else f"{fit:.1%} read from SRAM, the rest streamed from LPDDR5X"
            )
        )
    sram_fraction = fit if settings.draft_weights == "spill" else 1.0
    details["draft_sram_fraction"] = sram_fraction
    draft_passes, verify_passes = [], []
    for s, m in zip(platform.clock_levels, platform.memory_levels, strict=True):
        v2 = _voltage(platform, s) ** 2
        gpu_level = _scaled(gpu_ex, s, m, v2)
        verify_passes.append(PassModel(gpu_level, target))
        if settings.mode == "gpu-ar":
            draft_passes.append(None)
        elif settings.mode == "gpu-spec":
            draft_passes.append(PassModel(gpu_level, draft))
        else:
            dram_bw = npu.memory_bandwidth * npu.eta_memory * m
            sram_bw = platform.npu_sram_bandwidth * npu.eta_memory * s  # SRAM runs at the NPU clock
            seconds_per_byte = sram_fraction / sram_bw + (1.0 - sram_fraction) / dram_bw
            weight_pj = (
                sram_fraction * npu_power.pj_per_byte_sram
                + (1.0 - sram_fraction) * npu_power.pj_per_byte_memory
            )
            npu_level = replace(
                _scaled(npu_ex, s, 1.0, v2),
                bytes_per_s=1.0 / seconds_per_byte,
                pj_per_byte=weight_pj,
            )
            draft_passes.append(
                TieredPassModel(npu_level, draft, dram_bw, npu_power.pj_per_byte_memory)
            )
    draft_device = {"gpu-ar": None, "gpu-spec": "gpu", "npu-gpu-hetero": "npu"}[settings.mode]
    return PhoneHardware(
        platform=platform,
        mode=settings.mode,
        draft_device=draft_device,
        verify_device="gpu",
        draft_passes=draft_passes,
        verify_passes=verify_passes,
        active_w={"gpu": platform.gpu_active_w, "npu": platform.npu_active_w},
        gated_w={"gpu": gpu_power.static_w, "npu": npu_power.static_w},
        gpu_clock_hz=gpu.clock_hz,
        notes=notes,
        details=details,
    )


# -- governor ---------------------------------------------------------------------------------


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


# -- the run ----------------------------------------------------------------------------------


@dataclass
class PhoneResult:
    """One sustained run: the summary dict and the time series behind it."""

    summary: dict
    metrics: Metrics
    samples: list  # per governor period: dict(time_s, skin_c, die_c, gpu_clock_hz, ...)
    throttle_log: list
    power_intervals: list  # (start, seconds, watts) when record_power
    round_log: list  # (first_pos, kept, dropped, accepted) when record_rounds


class _PhoneRun(_SyncRun):
    """The synchronous draft/verify loop of :mod:`ahasd.sim.modes` plus requests, clocks,
    power, thermal state, governor and arbiter (module docstring)."""

    def __init__(self, settings, hw, platform, traces, policy, metrics, loop, rng, options):
        self.traces = traces
        self.rng = rng
        self.requests = 0
        self.max_requests = options["max_requests"]
        self.request_start = 0
        self.request_end = 0
        self.task_type = ""
        first_trace, self.task_type = traces(0)
        accept = _outcomes(first_trace, rng)
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
        self.entropy.extend(trace.draft_entropy.tolist())
        self.top1.extend(trace.draft_top1.tolist())
        self.beta.extend(trace.beta.tolist())
        self.accept.extend(_outcomes(trace, self.rng))
        self.request_start = self.committed
        self.request_end = self.committed + min(self.s.tokens, len(trace))

    # -- the loop -------------------------------------------------------------------------

    def round_start(self) -> None:
        now = self.loop.now
        self.token_times.append((now, self.committed))
        if self.committed >= self.request_end:
            if (self.max_requests and self.requests >= self.max_requests) or now >= self.duration:
                self._finish()
                return
            self._next_request()
        if now >= self.duration:
            self._finish()
            return
        self.round_t0 = now
        remaining = self.request_end - 1 - self.committed  # the bonus token stays inside
        if self.hw.mode == "gpu-ar":
            self.kmax = 0
        else:
            length = TASK_DRAFT_LENGTH[self.task_type]
            if self.s.arbiter and self.thermal.skin_c > self.platform.arbiter_c:
                shortened = max(1, length // 2)
                if shortened < length:
                    self.metrics.count("arbiter_shortened")
                length = shortened
            self.kmax = max(0, min(self.policy.start_round(), length, remaining))
        self.round_drafted = 0
        if self.kmax == 0:
            self.verify(0)
        else:
            self.draft(1)

    def _finish(self) -> None:
        self.done, self.end_time = True, self.loop.now
        self._sample(self.loop.now)
        self.loop.stop()

    def _run_task(self, device: str, name: str, cost: Cost, **args) -> None:
        """Account one task: metrics, clocked/gated/base power, thermal state."""
        hw, level = self.hw, self.governor.level
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
                        "from_hz": clocks[governor.level] * self.hw.gpu_clock_hz,
                        "to_hz": clocks[level] * self.hw.gpu_clock_hz,
                        "skin_c": self.thermal.skin_c,
                        "die_c": self.thermal.die_c,
                        "reason": reason,
                    }
                )
                governor.level = level
            self._sample(self.loop.now)
            governor.next_check += governor.period

    def _sample(self, now: float) -> None:
        self.samples.append(
            {
                "time_s": now,
                "skin_c": self.thermal.skin_c,
                "die_c": self.thermal.die_c,
                "gpu_clock_hz": self.platform.clock_levels[self.governor.level]
                * self.hw.gpu_clock_hz,
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
        cost = self.hw.draft_passes[self.governor.level](1, self.context(pos))
        self._run_task(self.hw.draft_device, "draft", cost, pos=pos)
        self.round_drafted = i
        self.loop.after(cost.seconds, self.token_done, i)

    def verify(self, kept: int) -> None:
        self._govern()
        cost = self.hw.verify_passes[self.governor.level](kept + 1, self.context(self.committed))
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


def _trace_source(settings: PhoneSettings, preset: str):
    """Request index -> (synthetic trace, task type), seeded by (seed, request)."""

    def source(index: int) -> tuple[Trace, str]:
        task = MIX_ORDER[index % len(MIX_ORDER)] if settings.task == "mix" else settings.task
        seed = int(np.random.SeedSequence([settings.seed, index]).generate_state(1)[0])
        trace = synth.generate(preset, settings.tokens, seed, task=TASK_PRESET_TASK[task])
        return trace, task

    return source


def simulate_phone(
    settings: PhoneSettings,
    *,
    traces=None,
    requests: int | None = None,
    record_power: bool = False,
    record_rounds: bool = False,
    hardware: PhoneHardware | None = None,
) -> PhoneResult:
    """Run one sustained phone configuration.

    Parameters
    ----------
    settings : the configuration.
    traces : ``index -> (Trace, task type)`` for request ``index``, instead of the pair's
        synthetic preset (tests hand-build sequences with it).
    requests : stop after this many requests (each as long as its trace) even before
        ``duration_s``; None = run until ``duration_s``.
    record_power : keep every constant-power interval ``(start, seconds, watts)``.
    record_rounds : keep ``(first position, kept, dropped, accepted)`` per round.
    hardware : cost models instead of :func:`build_phone_hardware`.
    """
    platform = _platform(settings.platform, settings.spec_dirs)
    library = load_library(settings.spec_dirs)
    pair = library.pair(settings.pair or platform.pair)
    library.device(platform.gpu, "gpu")
    library.device(platform.npu, "npu")
    hardware = hardware or build_phone_hardware(settings, platform, library)
    policy_params = dict(settings.policy_params)
    if settings.policy == "threshold":
        policy_params.setdefault("max_len", max(TASK_DRAFT_LENGTH.values()))
    policy = make_policy(settings.policy, fallback=settings.fallback, **policy_params)
    outcome_seed, policy_seed = np.random.SeedSequence(settings.seed).spawn(2)
    rng = np.random.default_rng(outcome_seed)
    policy.reset(np.random.default_rng(policy_seed))
    metrics = Metrics()
    loop = EventLoop()
    source = traces or _trace_source(settings, pair.preset)
    options = {
        "max_requests": requests,
        "record_power": record_power,
        "record_rounds": record_rounds,
    }
    run = _PhoneRun(settings, hardware, platform, source, policy, metrics, loop, rng, options)
    run.start()
    loop.run()
    if not run.done:
        raise RuntimeError(f"{settings.mode}: the phone run stalled at {run.committed} tokens")
    summary = metrics.result(
        makespan=run.end_time, tokens=run.committed, static_w={}, devices=run.devices
    )
    end = run.end_time
    summary = {
        "mode": settings.mode,
        "pair": pair.name,
        "policy": "none" if settings.mode == "gpu-ar" else policy.name,
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
        summary, metrics, run.samples, run.throttle_log, run.power_intervals, run.round_log
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


# -- figures ----------------------------------------------------------------------------------


def plot_phone(results: list[PhoneResult], path: Path, *, title: str = "") -> None:
    """Skin/die temperature, GPU clock, token rate and package power over time, one line per
    run (modes overlaid)."""
    from ahasd.sim.report import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    colours = {"gpu-ar": "tab:red", "gpu-spec": "tab:blue", "npu-gpu-hetero": "tab:green"}
    for result in results:
        s = result.summary
        colour = colours.get(s["mode"])
        times = [x["time_s"] for x in result.samples]
        label = (
            f"{s['mode']} ({s['tokens_per_s']:.1f} tok/s, {s['energy_per_token_mj']:.0f} mJ/tok)"
        )
        axes[0].plot(times, [x["skin_c"] for x in result.samples], color=colour, label=label)
        axes[0].plot(times, [x["die_c"] for x in result.samples], color=colour, ls=":", lw=0.8)
        axes[1].step(
            times, [x["gpu_clock_hz"] / 1e6 for x in result.samples], where="post", color=colour
        )
        rate_t, rates, power = [], [], []
        for a, b in zip(result.samples, result.samples[1:], strict=False):
            dt = b["time_s"] - a["time_s"]
            if dt <= 0:
                continue
            rate_t.append(b["time_s"])
            rates.append((b["tokens"] - a["tokens"]) / dt)
            power.append((b["energy_j"] - a["energy_j"]) / dt)
        window = 10
        axes[2].plot(rate_t, _moving_mean(rates, window), color=colour)
        axes[3].plot(rate_t, _moving_mean(power, window), color=colour)
    if results:
        s = results[0].summary
        axes[0].axhline(s["skin_limit_c"], color="k", ls="--", lw=0.8, label="skin limit")
        arbiter = s["arbiter_c"]
        axes[0].axhline(arbiter, color="grey", ls=":", lw=0.8, label=f"arbiter ({arbiter:g} C)")
    axes[0].set_ylabel("skin (solid) / die (dotted), C")
    axes[0].legend(fontsize=7, loc="lower right")
    axes[1].set_ylabel("GPU clock, MHz")
    axes[2].set_ylabel("tokens/s (10 s mean)")
    axes[3].set_ylabel("package power, W (10 s mean)")
    axes[3].set_xlabel("simulated time, s")
    if title:
        fig.suptitle(title)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _moving_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


# -- command line (``ahasd simulate --platform``) -----------------------------------------------

_PHONE_OPTIONS = ("duration", "task", "dram_pj_per_bit", "skin_limit", "ambient", "start_temp")
_PHONE_TABLE = [
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".2f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("package_power_w", "package W", ".2f"),
    ("acceptance_rate", "accept", ".3f"),
    ("tokens_per_s_first_60s", "tok/s 1st min", ".2f"),
    ("tokens_per_s_last_60s", "tok/s last min", ".2f"),
    ("peak_skin_c", "peak skin C", ".1f"),
    ("throttle_events", "throttles", "d"),
    ("final_gpu_clock_mhz", "final MHz", ".0f"),
]
# System-model options that name devices or traces; a platform file fixes those.
_NOT_WITH_PLATFORM = {
    "npu": "npu-mobile",
    "pim": "lpddr5-pim",
    "cpu": "host-cpu",
    "gpu": "rtx4090-laptop",
    "specpim_pim": "gddr6-aim",
    "trace": None,
    "draft_model": None,
    "target_model": None,
}


def add_options(parser) -> None:
    """Add the phone-SoC options to ``ahasd simulate``."""
    group = parser.add_argument_group(
        "phone SoC (spec section 5)",
        "With --platform, simulate sustained generation on a phone SoC: modes "
        f"{', '.join(PHONE_MODES)} (or 'all'); --mode defaults to npu-gpu-hetero, --policy to "
        "threshold (with the autoregression fallback), --pair to the platform's; --tokens is "
        "the length of each back-to-back request.",
    )
    group.add_argument("--platform", help="phone SoC class: sd8gen3, m4 (sim/specs/platforms)")
    group.add_argument("--duration", type=float, help="simulated seconds of generation (600)")
    group.add_argument("--task", help=f"task type: {', '.join(TASKS)} (mix: requests cycle)")
    group.add_argument("--dram-pj-per-bit", type=float, help="DRAM energy (spec files: 10)")
    group.add_argument("--skin-limit", type=float, help="skin throttle limit, 42..45 C (45)")
    group.add_argument("--ambient", type=float, help="ambient temperature, C (25)")
    group.add_argument("--start-temp", type=float, help="initial die/skin temperature (ambient)")
    group.add_argument(
        "--no-arbiter", action="store_true", help="do not shorten drafts above 41 C skin"
    )
    group.add_argument(
        "--draft-weights",
        help="sram: draft weights in NPU SRAM (spec); spill: what does not fit "
        "streams from LPDDR5X",
    )


def wants_phone(args) -> bool:
    """True with --platform; a phone-only option without it is a UserError."""
    if getattr(args, "platform", None) is not None:
        return True
    if getattr(args, "no_arbiter", False):
        raise UserError("--no-arbiter needs --platform")
    for name in (*_PHONE_OPTIONS, "draft_weights"):
        if getattr(args, name, None) is not None:
            raise UserError(f"--{name.replace('_', '-')} needs --platform")
    return False


def run_cli(args) -> int:
    """``ahasd simulate --platform P``: run, print a table or JSON, write figures with --out."""
    import json

    from ahasd.sim import report

    for name, default in _NOT_WITH_PLATFORM.items():
        if getattr(args, name, default) != default:
            raise UserError(
                f"--{name.replace('_', '-')} does not apply with --platform (the platform file "
                "names its devices; traces are the pair's synthetic preset per task)"
            )
    modes = list(PHONE_MODES) if args.mode == "all" else [args.mode or "npu-gpu-hetero"]
    policy_params = ()
    if args.policy_param:
        from ahasd.sim.sim_cli import _policy_params

        policy_params = _policy_params(args.policy_param)
    common = {
        "platform": args.platform,
        "pair": args.pair,
        "policy": args.policy or "threshold",
        "task": args.task or "mix",
        "duration_s": 600.0 if args.duration is None else args.duration,
        "tokens": args.tokens,
        "prompt_tokens": args.prompt_tokens,
        "seed": args.seed,
        "dram_pj_per_bit": args.dram_pj_per_bit,
        "skin_limit_c": args.skin_limit,
        "ambient_c": args.ambient,
        "start_c": args.start_temp,
        "draft_weights": args.draft_weights or "sram",
        "arbiter": not args.no_arbiter,
        "policy_params": policy_params,
        "spec_dirs": tuple(str(Path(d).resolve()) for d in args.spec_dir),
    }
    settings = [PhoneSettings(mode=mode, **common) for mode in modes]  # validate all first
    _platform(args.platform, common["spec_dirs"])
    results = [simulate_phone(s) for s in settings]
    for result in results:
        result.summary["final_gpu_clock_mhz"] = result.summary["final_gpu_clock_hz"] / 1e6
    if args.out is not None:
        out = args.out
        rows = [r.summary for r in results]
        report.write_json(out / "summary.json", rows if len(rows) > 1 else rows[0])
        flat = [{k: v for k, v in r.items() if not isinstance(v, list | dict)} for r in rows]
        report.write_csv(out / "summary.csv", flat)
        report.write_csv(
            out / "thermal.csv",
            [{"mode": r.summary["mode"], **sample} for r in results for sample in r.samples],
        )
        plot_phone(results, out / "phone.png", title=f"{args.platform}: sustained generation")
    if args.json:
        rows = [r.summary for r in results]
        print(json.dumps(rows if args.mode == "all" else rows[0]))
        return 0
    first = results[-1].summary  # the last mode drafts, so it names the policy
    print(
        f"{args.platform}: {first['pair']}, policy {first['policy']}, task {first['task']}, "
        f"{first['duration_s']:g} s, DRAM {first['dram_pj_per_bit']:g} pJ/bit, skin limit "
        f"{first['skin_limit_c']:g} C"
    )
    print(report.format_table([r.summary for r in results], _PHONE_TABLE))
    for result in results:
        for event in result.throttle_log[:3]:
            print(
                f"{result.summary['mode']}: t={event['time_s']:.1f} s {event['reason']}: "
                f"{event['from_hz'] / 1e6:.0f} -> {event['to_hz'] / 1e6:.0f} MHz at skin "
                f"{event['skin_c']:.1f} C"
            )
        if len(result.throttle_log) > 3:
            print(
                f"{result.summary['mode']}: ... {len(result.throttle_log) - 3} more clock changes"
            )
    for note in dict.fromkeys(n for r in results for n in r.summary["notes"]):
        print(f"note: {note}")
    if args.out is not None:
        print(f"wrote {args.out}/summary.json, summary.csv, thermal.csv, phone.png")
    return 0
