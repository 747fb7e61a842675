"""``ahasd reproduce``: the paper's evaluation on every platform against every GPU baseline,
a one-at-a-time sensitivity analysis of each rung's gain, a regime map, and a report.

Three sets of sweeps into one results directory (resumable like any sweep, on the local
process pool or on Ray, :func:`ahasd.sim.sweep.run_sweep`):

1. **evaluate**: the paper's grid (3 pairs x 4 algorithms) in every NPU+PIM mode on every
   shipped NPU+PIM platform, and in the GPU modes against every GPU baseline the platforms
   list (``gpu_baselines``); plus each platform under the other memory-sharing model.
2. **sensitivity**: on one platform, every number of its devices marked medium or low
   confidence is set to each end of its documented ``range`` in turn (one at a time); the
   gain of each rung (:data:`RUNGS`) is recomputed.
3. **regime**: a grid of NPU memory bandwidth and PIM throughput (MAC rate and internal
   bandwidth scaled together); which rung gains, and by how much, in each cell.

:func:`write_report` turns the rows into ``report.md`` with tables, figures (ladder per
platform and baseline, a tornado plot per rung, the regime heat maps) and one generated
paragraph per section: templated sentences that name the largest and smallest effects and
the counters behind them. Nothing in the text is written by hand.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ahasd.output import OutputSet
from ahasd.sim import report
from ahasd.sim.grid import PAPER_PAIRS
from ahasd.sim.library.loading import SpecLibrary, load_library
from ahasd.sim.library.platforms import (
    DEFAULT_PLATFORM,
    DEVICE_SETTINGS,
    PLATFORM_KIND,
    RANK_SPLITS,
)
from ahasd.sim.modes.hardware import ASSEMBLY_ROLES
from ahasd.sim.modes.table import COMPARISON_BASE, LADDER, MODE_TABLE, find_mode
from ahasd.sim.policies import PAPER_POLICIES
from ahasd.sim.scenarios import SCENARIOS
from ahasd.sim.settings import RunSettings, resolve
from ahasd.sim.sweep import run_sweep

__all__ = [
    "RUNGS",
    "ReproduceConfig",
    "Study",
    "run_reproduce",
    "uncertain_numbers",
    "write_report",
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
        return [row for row in self.rows.values() if "error" in row]


def _plan(config: ReproduceConfig) -> Study:
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


def run_reproduce(
    config: ReproduceConfig,
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "local",
    address: str | None = None,
    progress: Callable[[str, int], object] | None = None,
) -> Study:
    """Plan and run every phase into ``out`` (resumable), then write the report there;
    ``progress`` as for :func:`ahasd.sim.sweep.run_sweep`."""
    study = _plan(config)
    for phase, points in study.points.items():
        started = time.perf_counter()
        rows, simulated = run_sweep(
            [point for _, point in points],
            out,
            jobs=jobs,
            backend=backend,
            address=address,
            label=phase,
            **({"progress": progress} if progress else {}),
        )
        study.seconds[phase] = time.perf_counter() - started
        study.simulated[phase] = simulated
        for (tag, _), row in zip(points, rows, strict=True):
            study.rows[tag] = row
    write_report(study, out)
    return study


# -- analysis --------------------------------------------------------------------------------


def _geomean(values) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def _runs(study: Study, policies=None) -> list[tuple]:
    config = study.config
    return list(itertools.product(config.pairs, policies or config.policies, config.seeds))


def _gain(
    lookup: Callable[[str, tuple], dict | None], mode: str, base: str, runs, metric: str
) -> float:
    """Geometric mean over ``runs`` of ``metric`` of ``mode`` over ``base`` (tokens/s: a
    speedup; energy per token: an energy ratio)."""
    ratios = []
    for run in runs:
        a, b = lookup(mode, run), lookup(base, run)
        if a and b:
            ratios.append(a[metric] / b[metric])
    return _geomean(ratios)


def _eval_lookup(study: Study, platform: str, gpu: str):
    def lookup(mode: str, run: tuple) -> dict | None:
        if mode in GPU_MODES:
            return study.row(("eval", platform, gpu, mode, *run))
        return study.row(("eval", platform, None, mode, *run))

    return lookup


def _sens_lookup(study: Study, path: str | None, end: str | None):
    platform = study.config.sensitivity_platform
    gpu = study.library.platform(platform).device("gpu")
    base = _eval_lookup(study, platform, gpu)

    def lookup(mode: str, run: tuple) -> dict | None:
        return study.row(("sens", path, end, mode, *run)) or base(mode, run)

    return lookup


def _regime_lookup(study: Study, bandwidth: float, scale: float):
    def lookup(mode: str, run: tuple) -> dict | None:
        if mode in GPU_MODES:
            return study.row(("regime-gpu", None, None, mode, *run))
        return study.row(("regime", bandwidth, scale, mode, *run))

    return lookup


def _mean(values) -> float:
    values = [v for v in values if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


def _per_token(lookup, mode: str, runs) -> dict:
    """Counters per committed token (mean over runs) that explain a mode's speed."""
    rows = [r for r in (lookup(mode, run) for run in runs) if r]
    if not rows:
        return {}

    def task(row: dict, suffix: str) -> float:
        return sum(v for k, v in row["busy_by_task_s"].items() if k.endswith(suffix))

    return {
        "tokens_per_s": _geomean(r["tokens_per_s"] for r in rows),
        "energy_mj": _geomean(r["energy_per_token_mj"] for r in rows),
        "draft_ms": _mean(1e3 * task(r, ":draft") / max(r["drafted"], 1) for r in rows),
        "verify_ms": _mean(1e3 * task(r, ":verify") / max(r["verify_passes"], 1) for r in rows),
        "drafted": _mean(r["drafted"] / r["tokens"] for r in rows),
        "squashed": _mean(r["squashed"] / r["tokens"] for r in rows),
        "preverify": _mean(r["preverify_passes"] / r["tokens"] for r in rows),
        "preverify_rejections": _mean(r["preverify_rejections"] for r in rows),
        "preverify_ms": _mean(
            1e3 * task(r, ":preverify") / max(r["preverify_passes"], 1) for r in rows
        ),
        "nonlinear_ms": _mean(1e3 * task(r, ":nonlinear") / max(r["drafted"], 1) for r in rows),
        "suppressions": _mean(r["edc_suppressions"] / r["tokens"] for r in rows),
        "verifier_busy": _mean(
            r["busy_s"].get(find_mode(mode).verify_device, 0.0) / r["seconds"] for r in rows
        ),
    }


def _cause(label: str, mode: str, base: str, a: dict, b: dict) -> str:
    """The counters behind one rung's gain, as a clause (templated, from the counters)."""
    if not a or not b:
        return "no runs"
    if base == "npu-only":
        return (
            f"a draft token costs {a['draft_ms']:.1f} ms on the PIM against "
            f"{b['draft_ms']:.1f} ms on the NPU, a verification pass {a['verify_ms']:.1f} ms, "
            f"and look-ahead squashes {a['squashed']:.2f} drafted tokens per committed token "
            f"(npu-only: {b['squashed']:.2f})"
        )
    if find_mode(mode).aau and not find_mode(base).aau:
        return (
            f"a draft token costs {a['draft_ms']:.2f} ms with the AAU against "
            f"{b['draft_ms']:.2f} ms without (of which {b['nonlinear_ms']:.2f} ms on the "
            "nonlinear path)"
        )
    if find_mode(mode).edc and not find_mode(base).edc:
        return (
            f"drafted tokens per committed token go from {b['drafted']:.2f} to "
            f"{a['drafted']:.2f} ({a['suppressions']:.2f} suppressions per token), energy per "
            f"token from {b['energy_mj']:.0f} to {a['energy_mj']:.0f} mJ"
        )
    if find_mode(mode).tvc and not find_mode(base).tvc:
        return (
            f"{a['preverify']:.3f} pre-verifications per committed token at "
            f"{a['preverify_ms']:.1f} ms each against {a['verify_ms']:.1f} ms per NPU pass; "
            f"{a['preverify_rejections']:.1f} rejections found early per run"
        )
    return (
        f"{a['tokens_per_s']:.2f} against {b['tokens_per_s']:.2f} tokens/s: a verification "
        f"pass costs {a['verify_ms']:.1f} ms on the {find_mode(mode).verify_device} against "
        f"{b['verify_ms']:.1f} ms on the {find_mode(base).verify_device}"
    )


def ladder_table(study: Study) -> list[dict]:
    """Per platform: tokens/s of each NPU+PIM mode and the gain of each ladder rung."""
    rows = []
    runs = _runs(study)
    for platform in study.platforms:
        gpu = study.library.platform(platform).device("gpu")
        lookup = _eval_lookup(study, platform, gpu)
        row = {"platform": platform}
        for mode in PLATFORM_MODES:
            row[mode] = _per_token(lookup, mode, runs).get("tokens_per_s", math.nan)
        for label, mode, base in RUNGS:
            if base not in GPU_MODES:
                row[label] = _gain(lookup, mode, base, runs, "tokens_per_s")
        rows.append(row)
    return rows


def baseline_table(study: Study) -> list[dict]:
    """Per platform and GPU baseline: the baselines' tokens/s and ahasd's gain over them."""
    rows = []
    runs = _runs(study)
    full = LADDER[-1]
    for platform, gpu in itertools.product(study.platforms, study.gpus):
        lookup = _eval_lookup(study, platform, gpu)
        rows.append(
            {
                "platform": platform,
                "gpu": gpu,
                f"{full} tok/s": _per_token(lookup, full, runs).get("tokens_per_s", math.nan),
                **{
                    f"{mode} tok/s": _per_token(lookup, mode, runs).get("tokens_per_s", math.nan)
                    for mode in GPU_MODES
                },
                **{
                    f"{full} / {mode}": _gain(lookup, full, mode, runs, "tokens_per_s")
                    for mode in GPU_MODES
                },
                **{
                    f"energy {full} / {mode}": _gain(
                        lookup, full, mode, runs, "energy_per_token_mj"
                    )
                    for mode in GPU_MODES
                },
            }
        )
    return rows


def sharing_table(study: Study) -> list[dict]:
    """Per platform: each NPU+PIM mode's speed under the other memory-sharing model."""
    rows = []
    runs = _runs(study)
    for platform in study.platforms:
        own = study.library.platform(platform).memory_sharing
        other = "separate" if own == "shared" else "shared"
        for mode in PLATFORM_MODES:
            ratios = []
            for run in runs:
                a = study.row(("sharing", platform, other, mode, *run))
                b = study.row(("eval", platform, None, mode, *run))
                if a and b:
                    ratios.append(a["tokens_per_s"] / b["tokens_per_s"])
            rows.append(
                {
                    "platform": platform,
                    "mode": mode,
                    "own": own,
                    "other": other,
                    "speed other / own": _geomean(ratios),
                }
            )
    return rows


def sensitivity_table(study: Study, metric: str = "tokens_per_s") -> dict[str, list[dict]]:
    """Per rung: every varied number with the rung's gain at each end of its range, sorted
    by the larger change of the gain (``swing``, in log terms)."""
    runs = _runs(study)
    base_lookup = _sens_lookup(study, None, None)
    out = {}
    for label, mode, base in RUNGS:
        reference = _gain(base_lookup, mode, base, runs, metric)
        entries = []
        for number in study.numbers:
            if number.span is None:
                continue
            gains = {}
            for end, value in zip(("low", "high"), number.span, strict=True):
                lookup = (
                    base_lookup if value == number.value else _sens_lookup(study, number.path, end)
                )
                gains[end] = _gain(lookup, mode, base, runs, metric)
            swing = max(abs(math.log(g / reference)) for g in gains.values())
            entries.append(
                {
                    "number": number.path,
                    "range": number.span,
                    "value": number.value,
                    "gain_low": gains["low"],
                    "gain_high": gains["high"],
                    "reference": reference,
                    "swing": swing,
                }
            )
        entries.sort(key=lambda e: -e["swing"])
        out[label] = entries
    return out


def regime_table(study: Study) -> dict[str, list[list[float]]]:
    """Per rung: its gain in every (NPU bandwidth, PIM scale) cell (rows: bandwidths)."""
    config = study.config
    runs = _runs(study, config.regime_policies)
    return {
        label: [
            [
                _gain(_regime_lookup(study, bw, scale), mode, base, runs, "tokens_per_s")
                for scale in config.regime_pim_scale
            ]
            for bw in config.regime_npu_bandwidth
        ]
        for label, mode, base in RUNGS
    }


# -- the report ------------------------------------------------------------------------------


def _reading(value) -> str:
    """A number as ``:g``, a setting's reading as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format(value, "g")


def _x(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"x{value:.3g}"


def _markdown_table(rows: list[dict], columns: list[str], formats: dict | None = None) -> str:
    formats = formats or {}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column, "")
            spec = formats.get(column, ".3g")
            cells.append(format(value, spec) if isinstance(value, float) else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ladder_reading(study: Study, ladder: list[dict], baselines: list[dict]) -> str:
    runs = _runs(study)
    sentences = []
    for row in ladder:
        platform = row["platform"]
        gpu = study.library.platform(platform).device("gpu")
        lookup = _eval_lookup(study, platform, gpu)
        rungs = [(label, row[label], mode, base) for label, mode, base in RUNGS if label in row]
        best = max(rungs, key=lambda r: r[1])
        worst = min(rungs, key=lambda r: r[1])
        counters = {m: _per_token(lookup, m, runs) for m in (*PLATFORM_MODES, *GPU_MODES)}
        sentences.append(
            f"- On **{platform}** the largest rung is {best[0]} ({_x(best[1])}): "
            f"{_cause(best[0], best[2], best[3], counters[best[2]], counters[best[3]])}. "
            f"The smallest is {worst[0]} ({_x(worst[1])}): "
            f"{_cause(worst[0], worst[2], worst[3], counters[worst[2]], counters[worst[3]])}."
        )
        mine = [b for b in baselines if b["platform"] == platform]
        key = f"{LADDER[-1]} / {COMPARISON_BASE}"
        high = max(mine, key=lambda b: b[key])
        low = min(mine, key=lambda b: b[key])
        sentences.append(
            f"  Against the GPU-only baselines {LADDER[-1]} runs at {_x(low[key])} "
            f"({low['gpu']}) to {_x(high[key])} ({high['gpu']}) of their speed."
        )
    return "\n".join(sentences)


def _sensitivity_reading(table: dict[str, list[dict]]) -> str:
    sentences = []
    for label, entries in table.items():
        if not entries:
            continue
        top = entries[:3]
        reference = top[0]["reference"]
        parts = [
            f"{e['number']} ({_x(e['gain_low'])} at {_reading(e['range'][0])}, "
            f"{_x(e['gain_high'])} at {_reading(e['range'][1])})"
            for e in top
        ]
        flat = sum(1 for e in entries if e["swing"] < math.log(1.01))
        sentences.append(
            f"- The gain of {label} ({_x(reference)} at the files' values) moves most with "
            f"{parts[0]}, then {', then '.join(parts[1:]) or 'nothing else'}; "
            f"{flat} of {len(entries)} numbers move it by less than 1%."
        )
    return "\n".join(sentences)


def _regime_reading(study: Study, table: dict[str, list[list[float]]]) -> str:
    config = study.config
    cells = list(
        itertools.product(
            enumerate(config.regime_npu_bandwidth), enumerate(config.regime_pim_scale)
        )
    )
    sentences = []
    for label, grid in table.items():
        values = [(grid[i][j], bw, scale) for (i, bw), (j, scale) in cells]
        finite = [v for v in values if math.isfinite(v[0])]
        if not finite:
            continue
        best = max(finite)
        worst = min(finite)
        wins = sum(1 for v in finite if v[0] > 1.01)
        losses = sum(1 for v in finite if v[0] < 0.99)
        sentences.append(
            f"- {label} gains most ({_x(best[0])}) at an NPU bandwidth of {best[1] / 1e9:g} GB/s "
            f"and PIM x{best[2]:g}, least ({_x(worst[0])}) at {worst[1] / 1e9:g} GB/s and PIM "
            f"x{worst[2]:g}; it gains more than 1% in {wins} and loses more than 1% in "
            f"{losses} of {len(finite)} cells."
        )
    return "\n".join(sentences)


def _sharing_reading(rows: list[dict]) -> str:
    values = [
        (row["speed other / own"], row["platform"], row["mode"], f"{row['other']} / {row['own']}")
        for row in rows
    ]
    finite = [v for v in values if math.isfinite(v[0])]
    if not finite:
        return "No runs."
    big = max(finite, key=lambda v: abs(math.log(v[0])))
    if abs(math.log(big[0])) < math.log(1.001):
        return (
            "Changing the memory-sharing model changes no mode's speed by 0.1% or more: "
            "the model charges no contention between the NPU's stream and the PIM's compute "
            "in this version."
        )
    return f"The memory-sharing model matters most for {big[2]} on {big[1]}: {big[3]} {_x(big[0])}."


def write_report(study: Study, out: Path) -> Path:
    """``out/report.md`` with its tables (also as CSV) and figures; returns its path."""
    out = Path(out)
    ladder = ladder_table(study)
    baselines = baseline_table(study)
    sharing = sharing_table(study)
    speed = sensitivity_table(study, "tokens_per_s")
    energy = sensitivity_table(study, "energy_per_token_mj")
    regime = regime_table(study)
    outputs = OutputSet(option="--out")
    outputs.add(out / "ladder.csv", report.csv_text(ladder))
    outputs.add(out / "baselines.csv", report.csv_text(baselines))
    outputs.add(out / "sharing.csv", report.csv_text(sharing))
    outputs.add(
        out / "sensitivity.csv",
        report.csv_text(
            [{"rung": label, "metric": "speed", **e} for label, es in speed.items() for e in es]
            + [{"rung": label, "metric": "energy", **e} for label, es in energy.items() for e in es]
        ),
    )
    outputs.add(out / "ladder.png", report.png_bytes(ladder_figure(study, ladder, baselines)))
    outputs.add(out / "tornado.png", report.png_bytes(tornado_figure(speed)))
    outputs.add(out / "regime.png", report.png_bytes(regime_figure(study, regime)))
    config = study.config
    rung_labels = [label for label, _, base in RUNGS if base not in GPU_MODES]
    full = LADDER[-1]
    text = [
        "# AHASD system model: where the design wins, and why",
        "",
        f"Generated by `ahasd reproduce` from {sum(len(p) for p in study.points.values())} "
        f"requested runs ({sum(study.simulated.values())} simulated now, the rest from "
        f"`results.jsonl`): {len(config.pairs)} pairs x {len(config.policies)} algorithms x "
        f"{len(config.seeds)} seed(s), {config.tokens} tokens each. Gains are geometric means "
        "over pairs, algorithms and seeds of matched runs. Every number the model uses is in "
        "a spec file with its source; nothing here is tuned to the paper's results.",
        "",
        "## 1. The ladder per platform",
        "",
        "Tokens/s (geometric mean) of each NPU+PIM mode and the gain of each rung over the "
        "one before.",
        "",
        _markdown_table(ladder, ["platform", *PLATFORM_MODES, *rung_labels]),
        "",
        "## 2. Against each GPU baseline",
        "",
        _markdown_table(
            baselines,
            [
                "platform",
                "gpu",
                f"{full} tok/s",
                *(f"{m} tok/s" for m in GPU_MODES),
                *(f"{full} / {m}" for m in GPU_MODES),
                *(f"energy {full} / {m}" for m in GPU_MODES),
            ],
        ),
        "",
        "![ladder](ladder.png)",
        "",
        _ladder_reading(study, ladder, baselines),
        "",
        "## 3. Memory sharing",
        "",
        "Each platform's NPU+PIM modes under the other memory-sharing model, relative to its own.",
        "",
        _markdown_table(sharing, ["platform", "mode", "own", "other", "speed other / own"]),
        "",
        _sharing_reading(sharing),
        "",
        f"## 4. Sensitivity of each rung's gain ({config.sensitivity_platform})",
        "",
        "Every medium- or low-confidence number of the platform's devices is set to each end "
        "of its documented range, one at a time. The three numbers each rung's speed gain is "
        "most sensitive to:",
        "",
        _markdown_table(
            [
                {
                    "rung": label,
                    "gain": entries[0]["reference"] if entries else math.nan,
                    **{
                        f"#{n + 1}": (f"{e['number']}: {_x(e['gain_low'])}..{_x(e['gain_high'])}")
                        for n, e in enumerate(entries[:3])
                    },
                }
                for label, entries in speed.items()
            ],
            ["rung", "gain", "#1", "#2", "#3"],
        ),
        "",
        "And of each rung's energy ratio (energy per token of the rung over the one before):",
        "",
        _markdown_table(
            [
                {
                    "rung": label,
                    "ratio": entries[0]["reference"] if entries else math.nan,
                    **{
                        f"#{n + 1}": (f"{e['number']}: {_x(e['gain_low'])}..{_x(e['gain_high'])}")
                        for n, e in enumerate(entries[:3])
                    },
                }
                for label, entries in energy.items()
            ],
            ["rung", "ratio", "#1", "#2", "#3"],
        ),
        "",
        "![tornado](tornado.png)",
        "",
        _sensitivity_reading(speed),
        "",
        _not_varied(study),
        "",
        f"## 5. Regime map ({config.regime_platform})",
        "",
        "Each cell sets the NPU's memory bandwidth and scales the PIM's MAC rate and internal "
        f"bandwidth together (x1 = the platform's; policies: {', '.join(config.regime_policies)}"
        "). Colour: log2 of the rung's speed gain.",
        "",
        "![regime](regime.png)",
        "",
        _regime_reading(study, regime),
        "",
        "## Refused runs",
        "",
        _refused(study),
        "",
        "## Files",
        "",
        "`ladder.csv`, `baselines.csv`, `sharing.csv`, `sensitivity.csv`, the figures, and "
        "`results.jsonl` (every run, with its configuration hash). How to read this report "
        "and what each platform assumes: docs/reproduce.md.",
        "",
    ]
    path = out / "report.md"
    outputs.add(path, "\n".join(text))
    outputs.commit()
    return path


def _refused(study: Study) -> str:
    refused = study.refused()
    if not refused:
        return "The model refused none of the runs."
    reasons = sorted({row["error"] for row in refused})
    return (
        f"The model refused {len(refused)} runs (left out of every gain above); "
        f"{len(reasons)} distinct reason(s), e.g.: {reasons[0]}"
    )


def _not_varied(study: Study) -> str:
    missing = [n.path for n in study.numbers if n.span is None]
    if not missing:
        return "Every medium- or low-confidence number of the platform's devices has a range."
    return f"Not varied (medium or low confidence but no range in the file): {', '.join(missing)}."


# -- figures ---------------------------------------------------------------------------------


def ladder_figure(study: Study, ladder: list[dict], baselines: list[dict]):
    """Tokens/s of every NPU+PIM mode per platform (bars) and of each GPU baseline's
    gpu-only and specpim (lines)."""
    plt = report.pyplot()
    fig, axes = plt.subplots(
        1, len(ladder), figsize=(4.2 * len(ladder), 4.2), squeeze=False, sharey=True
    )
    for ax, row in zip(axes[0], ladder, strict=True):
        values = [row[m] for m in PLATFORM_MODES]
        ax.bar(range(len(values)), values, color="C0")
        ax.set_xticks(range(len(values)), PLATFORM_MODES, rotation=40, ha="right", fontsize=8)
        for n, base in enumerate(b for b in baselines if b["platform"] == row["platform"]):
            for mode, style in zip(GPU_MODES, ("-", ":"), strict=False):
                ax.axhline(
                    base[f"{mode} tok/s"],
                    color=f"C{n + 1}",
                    ls=style,
                    lw=1,
                    label=f"{report.mode_label(mode)}, {base['gpu']}",
                )
        ax.set_yscale("log")
        ax.set_title(row["platform"])
    axes[0][0].set_ylabel("tokens/s (geometric mean)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    return fig


def tornado_figure(table: dict[str, list[dict]], top: int = 8):
    """Per rung: the ``top`` numbers its speed gain is most sensitive to, a bar from the
    gain at one end of the number's range to the gain at the other."""
    plt = report.pyplot()
    labels = list(table)
    columns = 2
    rows = math.ceil(len(labels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(13, 2.9 * rows), squeeze=False)
    for ax, label in zip(axes.flat, labels, strict=False):
        entries = table[label][:top][::-1]
        reference = entries[0]["reference"] if entries else 1.0
        for y, e in enumerate(entries):
            low, high = e["gain_low"], e["gain_high"]
            ax.barh(y, low - reference, left=reference, color="C0", alpha=0.8)
            ax.barh(y, high - reference, left=reference, color="C3", alpha=0.8)
        ax.set_yticks(range(len(entries)), [e["number"] for e in entries], fontsize=7)
        ax.axvline(reference, color="k", lw=0.8)
        ax.set_title(f"{label} (x{reference:.3g})", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(labels) :]:
        ax.axis("off")
    fig.suptitle(
        f"Speed gain of each rung at the low (blue) and high (red) end of each range "
        f"(the {top} numbers it moves most with)"
    )
    fig.tight_layout()
    return fig


def regime_figure(study: Study, table: dict[str, list[list[float]]]):
    """One heat map per rung: log2 of its speed gain over NPU bandwidth x PIM scale."""
    plt = report.pyplot()
    config = study.config
    labels = list(table)
    columns = 3
    rows = math.ceil(len(labels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(14, 4 * rows), squeeze=False)
    for ax, label in zip(axes.flat, labels, strict=False):
        grid = [[math.log2(v) if v > 0 else math.nan for v in row] for row in table[label]]
        limit = max((abs(v) for row in grid for v in row if math.isfinite(v)), default=1) or 1
        image = ax.imshow(grid, cmap="RdBu", vmin=-limit, vmax=limit, origin="lower")
        for i, row in enumerate(table[label]):
            for j, value in enumerate(row):
                text = f"{value:.3g}" if math.isfinite(value) else "refused"
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
        ax.set_xticks(
            range(len(config.regime_pim_scale)), [f"x{s:g}" for s in config.regime_pim_scale]
        )
        ax.set_yticks(
            range(len(config.regime_npu_bandwidth)),
            [f"{b / 1e9:g}" for b in config.regime_npu_bandwidth],
        )
        ax.set_xlabel("PIM MAC rate and bandwidth scale", fontsize=8)
        ax.set_ylabel("NPU bandwidth (GB/s)", fontsize=8)
        ax.set_title(label, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8, label="log2 gain")
    for ax in list(axes.flat)[len(labels) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig
