"""The plan of ``ahasd reproduce``: what it runs, each run tagged with its phase and its
place, and how the analyses find a run again.

- :class:`ReproduceConfig`: the command's choices (platforms, GPU baselines, pairs,
  algorithms, seeds, the sensitivity and regime platforms and the regime grid);
- :data:`RUNGS`: the gains the report explains, and which modes run per GPU baseline
  (:data:`GPU_MODES`) or per NPU+PIM platform (:data:`PLATFORM_MODES`);
- :func:`uncertain_numbers` and :data:`SETTING_READINGS`: what the sensitivity analysis
  varies;
- :func:`plan`: every point of the three phases (evaluate, sensitivity, regime) as a
  :class:`Study`, which holds their rows once they have run;
- :func:`gain` and :func:`evaluation_lookup`: a rung's gain over matched runs, read through
  a lookup from a mode and a run to its row.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from ahasd.sim.aggregate import ratio_geomean
from ahasd.sim.grid import PAPER_PAIRS
from ahasd.sim.library.loading import SpecLibrary, load_library
from ahasd.sim.library.platforms import (
    DEFAULT_PLATFORM,
    DEVICE_SETTINGS,
    PLATFORM_KIND,
    RANK_SPLITS,
)
from ahasd.sim.modes.hardware import ASSEMBLY_ROLES
from ahasd.sim.modes.table import COMPARISON_BASE, LADDER, MODE_TABLE
from ahasd.sim.policies import PAPER_POLICIES
from ahasd.sim.scenarios import SCENARIOS
from ahasd.sim.settings import RunSettings, resolve

__all__ = [
    "GPU_MODES",
    "PLATFORM_MODES",
    "RUNGS",
    "SETTING_PREFIX",
    "SETTING_READINGS",
    "ReproduceConfig",
    "Study",
    "Uncertain",
    "evaluation_lookup",
    "gain",
    "plan",
    "uncertain_numbers",
]

# The rungs whose gains the report explains: (label, mode, the mode it is compared with).
# The ladder's first rung is compared with the same NPU without the PIM; every later rung
# with the rung before; the full design with the two GPU baselines of the paper.
RUNGS = (
    (f"{LADDER[0]} / npu-only", LADDER[0], "npu-only"),
    *((f"{mode} / {before}", mode, before) for before, mode in itertools.pairwise(LADDER)),
    (f"{LADDER[-1]} / specpim-npu", LADDER[-1], "specpim-npu"),
    (f"{LADDER[-1]} / {COMPARISON_BASE}", LADDER[-1], COMPARISON_BASE),
    (f"{LADDER[-1]} / specpim-gpu", LADDER[-1], "specpim-gpu"),
)
# Modes whose hardware includes a GPU (compared per GPU baseline) and the others (per
# NPU+PIM platform).
GPU_MODES = tuple(m.name for m in MODE_TABLE if "gpu" in ASSEMBLY_ROLES[m.assembly])
PLATFORM_MODES = tuple(m.name for m in MODE_TABLE if m.name not in GPU_MODES)


@dataclass(frozen=True)
class ReproduceConfig:
    """What ``ahasd reproduce`` runs (the command line's defaults)."""

    platforms: tuple[str, ...] = ()  # () = every NPU+PIM platform of the library
    gpus: tuple[str, ...] = ()  # () = the platforms' gpu_baselines, in order
    pairs: tuple[str, ...] = PAPER_PAIRS
    policies: tuple[str, ...] = PAPER_POLICIES
    seeds: tuple[int, ...] = (0,)
    tokens: int = 1024
    sensitivity_platform: str = DEFAULT_PLATFORM
    regime_platform: str = DEFAULT_PLATFORM
    regime_policies: tuple[str, ...] = ("adaedl",)
    regime_npu_bandwidth: tuple[float, ...] = (25.6e9, 51.2e9, 102.4e9, 204.8e9, 409.6e9, 819.2e9)
    regime_pim_scale: tuple[float, ...] = (0.5, 1.0, 4.0, 16.0, 64.0)
    spec_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Uncertain:
    """One spec-file number marked medium or low confidence."""

    path: str  # devices.NAME.FIELD or power.NAME.FIELD
    device: str
    value: float
    span: tuple[float, float] | None
    confidence: str
    span_source: str


def uncertain_numbers(library: SpecLibrary, platform: str) -> list[Uncertain]:
    """Every medium- or low-confidence number of the devices (and their power files) that
    ``platform``'s roles name, in role order."""
    spec = library.platform(platform)
    found, seen = [], set()
    for _, name in spec.devices:
        if name in seen:
            continue
        seen.add(name)
        for section, item in (("devices", library.device(name)), ("power", library.power_of(name))):
            for field_name, sourced in item.sources:
                if sourced.level in ("medium", "low"):
                    found.append(
                        Uncertain(
                            f"{section}.{name}.{field_name}",
                            name,
                            sourced.value,
                            sourced.span,
                            sourced.confidence,
                            sourced.span_source,
                        )
                    )
    return found


SETTING_PREFIX = "settings."
# Run settings varied like uncertain numbers (their readings, not a range): the rank split,
# whether the NPU reuses the KV entries of pre-verified tokens, and the draft length the
# operator-level split is balanced for (how specpim-npu degrades when the plan is off).
SETTING_READINGS = {
    "rank_split": RANK_SPLITS,
    "preverify_kv_reuse": (False, True),
    "specpim_planned_draft": (1, 4, 8),
}


def _setting_readings(resolved: RunSettings) -> list[Uncertain]:
    """The platform options of :data:`SETTING_READINGS` as sensitivity rows: the resolved
    value, and the other readings as the two ends (the value itself where only one other
    exists)."""
    found = []
    for name, readings in SETTING_READINGS.items():
        value = getattr(resolved, name)
        others = [r for r in readings if r != value]
        ends = (others[0], others[1] if len(others) > 1 else value)
        found.append(
            Uncertain(
                SETTING_PREFIX + name,
                "",
                value,
                ends,
                "reading",
                "the platform option's other readings",
            )
        )
    return found


@dataclass
class Study:
    """The points of every phase, each with a tag, and (after running) their rows."""

    config: ReproduceConfig
    library: SpecLibrary
    platforms: tuple[str, ...]
    gpus: tuple[str, ...]
    points: dict[str, list[tuple[tuple, RunSettings]]] = field(default_factory=dict)
    rows: dict[tuple, dict] = field(default_factory=dict)
    numbers: list[Uncertain] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    simulated: dict[str, int] = field(default_factory=dict)

    def row(self, tag: tuple) -> dict | None:
        """The finished run of ``tag`` (None if it was refused or not planned)."""
        row = self.rows.get(tag)
        return None if row is None or "error" in row else row

    def refused(self) -> list[dict]:
        """The rows of the runs the model refused."""
        return [row for row in self.rows.values() if "error" in row]

    def runs(self, policies: tuple[str, ...] | None = None) -> list[tuple]:
        """The (pair, policy, seed) of every run a gain is averaged over."""
        config = self.config
        return list(itertools.product(config.pairs, policies or config.policies, config.seeds))


def plan(config: ReproduceConfig) -> Study:
    """Every point of the three phases of ``config``, tagged, in a :class:`Study` without rows."""
    library = load_library(config.spec_dirs)
    platforms = config.platforms or SCENARIOS[PLATFORM_KIND].platforms(config.spec_dirs)
    for name in (*platforms, config.sensitivity_platform, config.regime_platform):
        library.platform(name)
    gpus = config.gpus or tuple(
        dict.fromkeys(g for p in platforms for g in library.platform(p).gpu_baselines)
    )
    for gpu in gpus:
        library.device(gpu, "gpu")
    study = Study(config, library, platforms, gpus)
    runs = list(itertools.product(config.pairs, config.policies, config.seeds))

    def settings(mode, pair, policy, seed, **extra) -> RunSettings:
        return RunSettings(
            mode=mode,
            pair=pair,
            policy=policy,
            seed=seed,
            tokens=config.tokens,
            spec_dirs=config.spec_dirs,
            **extra,
        )

    evaluate = []
    for platform in platforms:
        other = "separate" if library.platform(platform).memory_sharing == "shared" else "shared"
        for mode, (pair, policy, seed) in itertools.product(PLATFORM_MODES, runs):
            point = settings(mode, pair, policy, seed, platform=platform)
            evaluate.append((("eval", platform, None, mode, pair, policy, seed), point))
            point = dataclasses.replace(point, memory_sharing=other)
            evaluate.append((("sharing", platform, other, mode, pair, policy, seed), point))
        for gpu, mode, (pair, policy, seed) in itertools.product(gpus, GPU_MODES, runs):
            point = settings(mode, pair, policy, seed, platform=platform, gpu=gpu)
            evaluate.append((("eval", platform, gpu, mode, pair, policy, seed), point))
    study.points["evaluate"] = evaluate

    base = config.sensitivity_platform
    resolved, _ = resolve(
        RunSettings(mode="npu-only", pair="x", policy="x", platform=base), library
    )
    roles_of = {getattr(resolved, role): role for role in DEVICE_SETTINGS}
    study.numbers = uncertain_numbers(library, base) + _setting_readings(resolved)
    sensitivity = []
    for number in study.numbers:
        if number.span is None:
            continue
        setting = number.path.removeprefix(SETTING_PREFIX) if number.device == "" else None
        if setting:
            modes = list(PLATFORM_MODES)
        else:
            role = roles_of[number.device]
            modes = [m.name for m in MODE_TABLE if role in ASSEMBLY_ROLES[m.assembly]]
        for end, value in zip(("low", "high"), number.span, strict=True):
            if value == number.value:
                continue  # that end is the file's value: the evaluation's rows
            change = {setting: value} if setting else {"spec_overrides": ((number.path, value),)}
            for mode, (pair, policy, seed) in itertools.product(modes, runs):
                point = settings(mode, pair, policy, seed, platform=base, **change)
                sensitivity.append((("sens", number.path, end, mode, pair, policy, seed), point))
    study.points["sensitivity"] = sensitivity

    regime = []
    pim = library.device(library.platform(config.regime_platform).device("pim"))
    regime_runs = list(itertools.product(config.pairs, config.regime_policies, config.seeds))
    for bandwidth, scale in itertools.product(config.regime_npu_bandwidth, config.regime_pim_scale):
        overrides = (
            ("devices.@npu.memory_bandwidth", bandwidth),
            ("devices.@pim.matrix_macs_per_s", pim.matrix_macs_per_s * scale),
            ("devices.@pim.memory_bandwidth", pim.memory_bandwidth * scale),
        )
        for mode, (pair, policy, seed) in itertools.product(PLATFORM_MODES, regime_runs):
            point = settings(
                mode,
                pair,
                policy,
                seed,
                platform=config.regime_platform,
                spec_overrides=overrides,
            )
            regime.append((("regime", bandwidth, scale, mode, pair, policy, seed), point))
    for mode, (pair, policy, seed) in itertools.product(GPU_MODES, regime_runs):
        point = settings(mode, pair, policy, seed, platform=config.regime_platform)
        regime.append((("regime-gpu", None, None, mode, pair, policy, seed), point))
    study.points["regime"] = regime
    return study


def gain(
    lookup: Callable[[str, tuple], dict | None], mode: str, base: str, runs, metric: str
) -> float:
    """Geometric mean over ``runs`` of ``metric`` of ``mode`` over ``base`` (tokens/s: a
    speedup; energy per token: an energy ratio)."""
    return ratio_geomean(((lookup(mode, run), lookup(base, run)) for run in runs), metric)


def evaluation_lookup(study: Study, platform: str, gpu: str):
    """The evaluation's row of a mode and a run on ``platform`` (against ``gpu`` for the
    GPU modes), None if it was refused."""

    def lookup(mode: str, run: tuple) -> dict | None:
        if mode in GPU_MODES:
            return study.row(("eval", platform, gpu, mode, *run))
        return study.row(("eval", platform, None, mode, *run))

    return lookup
