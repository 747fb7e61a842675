"""Tables, files and figures from run summaries.

- terminal tables (:func:`format_table`), CSV and JSON (written atomically: a temporary file
  in the same directory, then ``os.replace``, so a reader never sees half a file);
- the paper-style aggregates: the **ablation** (each mode's tokens/s and mJ/token averaged
  over pairs and policies, and the speedup over the first rung of the asynchronous ladder,
  ``pim-async``) and the **comparison** (per pair, tokens/s and energy of every mode
  relative to ``gpu-only``), with their table columns; the ladder and both baselines come
  from the mode table (:mod:`ahasd.sim.modes.table`);
- PNG figures (matplotlib, Agg backend) and the Chrome trace of one run.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from ahasd.sim.modes.table import ABLATION_BASE, COMPARISON_BASE, LADDER

__all__ = [
    "ABLATION_COLUMNS",
    "COMPARISON_COLUMNS",
    "ablation_rows",
    "atomic_write",
    "comparison_rows",
    "format_table",
    "plot_ablation",
    "plot_comparison",
    "plot_run",
    "pyplot",
    "save_figure",
    "table_columns",
    "write_csv",
    "write_json",
]


def _against(base: str) -> str:
    """Suffix of a ratio column against mode ``base``: ``vs_pim_async``."""
    return "vs_" + base.replace("-", "_")


_SPEEDUP = f"speedup_{_against(ABLATION_BASE)}"
_ENERGY = f"energy_{_against(ABLATION_BASE)}"
_BASE_SPEEDUP = f"speedup_{_against(COMPARISON_BASE)}"
_BASE_EFFICIENCY = f"energy_efficiency_{_against(COMPARISON_BASE)}"

# (key, header, format spec) of the rows of ablation_rows and comparison_rows.
ABLATION_COLUMNS = [
    ("mode", "mode", ""),
    ("runs", "runs", "d"),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("acceptance_rate", "accept", ".3f"),
    ("drafted_per_token", "drafted/token", ".2f"),
    (_SPEEDUP, f"x {ABLATION_BASE}", ".3f"),
    (_ENERGY, f"energy x {ABLATION_BASE}", ".3f"),
]
COMPARISON_COLUMNS = [
    ("pair", "pair", ""),
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    (_BASE_SPEEDUP, f"x {COMPARISON_BASE}", ".3f"),
    (_BASE_EFFICIENCY, f"energy eff. x {COMPARISON_BASE}", ".3f"),
]


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Flat CSV of ``rows`` (nested dicts are flattened to ``key.sub`` columns)."""
    flat = [_flatten(row) for row in rows]
    if columns is None:
        columns = []
        for row in flat:
            columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(flat)
    atomic_write(path, buffer.getvalue())


def _flatten(row: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = "; ".join(map(str, value))
        else:
            out[name] = value
    return out


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain aligned table; ``columns`` = ``(key, header, format spec)``."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        line = []
        for key, _, spec in columns:
            value = row.get(key, "")
            line.append(format(value, spec) if isinstance(value, int | float) else str(value))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for n, line in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _key(mode: str, row: dict) -> tuple:
    """Runs that differ only in mode are compared with each other (within one scenario:
    platform, devices, overrides, ...)."""
    return (
        mode,
        row["pair"],
        row["policy"],
        row.get("seed", 0),
        row.get("trace"),
        row.get("scenario", ""),
    )


def _scenarios(results: list[dict]) -> list[str]:
    return list(dict.fromkeys(r.get("scenario", "") for r in results))


def table_columns(rows: list[dict], columns: list[tuple[str, str, str]]) -> list:
    """``columns`` with a leading scenario column when ``rows`` hold more than one."""
    if len({r.get("scenario", "") for r in rows}) > 1:
        return [("scenario", "scenario", ""), *columns]
    return columns


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def _geomean(values) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def ablation_rows(results: list[dict], modes) -> list[dict]:
    """Per mode: mean tokens/s, mean mJ/token, acceptance, and the geometric-mean speedup
    and energy ratio against the ladder's first rung (``pim-async``) over matching (pair,
    policy, seed, trace) runs; columns :data:`ABLATION_COLUMNS`."""
    by_key = {_key(r["mode"], r): r for r in results}
    rows = []
    for scenario, mode in itertools.product(_scenarios(results), modes):
        runs = [r for r in results if r["mode"] == mode and r.get("scenario", "") == scenario]
        if not runs:
            continue
        speedups, energy = [], []
        for r in runs:
            base = by_key.get(_key(ABLATION_BASE, r))
            if base:
                speedups.append(r["tokens_per_s"] / base["tokens_per_s"])
                energy.append(r["energy_per_token_mj"] / base["energy_per_token_mj"])
        rows.append(
            {
                "scenario": scenario,
                "mode": mode,
                "runs": len(runs),
                "tokens_per_s": _mean(r["tokens_per_s"] for r in runs),
                "energy_per_token_mj": _mean(r["energy_per_token_mj"] for r in runs),
                "acceptance_rate": _mean(r["acceptance_rate"] for r in runs),
                _SPEEDUP: _geomean(speedups),
                _ENERGY: _geomean(energy),
                "drafted_per_token": _mean(r["drafted"] / r["tokens"] for r in runs),
            }
        )
    return rows


def comparison_rows(results: list[dict], modes) -> list[dict]:
    """Per pair and mode: mean tokens/s and mJ/token over policies and seeds, and the
    geometric-mean speedup and energy efficiency against ``gpu-only``; columns
    :data:`COMPARISON_COLUMNS`."""
    by_key = {_key(r["mode"], r): r for r in results}
    groups = defaultdict(list)
    for r in results:
        groups[(r.get("scenario", ""), r["pair"], r["mode"])].append(r)
    pairs = list(dict.fromkeys(r["pair"] for r in results))
    rows = []
    for scenario, pair in itertools.product(_scenarios(results), pairs):
        for mode in modes:
            runs = groups.get((scenario, pair, mode))
            if not runs:
                continue
            speedups, efficiency = [], []
            for r in runs:
                base = by_key.get(_key(COMPARISON_BASE, r))
                if base:
                    speedups.append(r["tokens_per_s"] / base["tokens_per_s"])
                    efficiency.append(base["energy_per_token_mj"] / r["energy_per_token_mj"])
            rows.append(
                {
                    "scenario": scenario,
                    "pair": pair,
                    "mode": mode,
                    "tokens_per_s": _mean(r["tokens_per_s"] for r in runs),
                    "energy_per_token_mj": _mean(r["energy_per_token_mj"] for r in runs),
                    _BASE_SPEEDUP: _geomean(speedups),
                    _BASE_EFFICIENCY: _geomean(efficiency),
                }
            )
    return rows


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: the model runs
    without matplotlib loaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def matplotlib_ticker():
    import matplotlib.ticker

    return matplotlib.ticker


def plot_ablation(results: list[dict], modes, path: Path) -> None:
    """Paper-style ablation: per pair, tokens/s and mJ/token of the async ladder, normalised
    to its first rung (bars are geometric means over policies; ticks show each policy)."""
    plt = pyplot()
    ladder = [m for m in modes if m in LADDER]
    pairs = list(dict.fromkeys(r["pair"] for r in results))
    by_key = {_key(r["mode"], r): r for r in results}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(ladder))
    for panel, (metric, title) in enumerate(
        (
            ("tokens_per_s", f"Speedup over {ABLATION_BASE}"),
            ("energy_per_token_mj", f"Energy/token vs {ABLATION_BASE}"),
        )
    ):
        ax = axes[panel]
        for j, mode in enumerate(ladder):
            heights, points = [], []
            for i, pair in enumerate(pairs):
                ratios = []
                for r in results:
                    if r["mode"] != mode or r["pair"] != pair:
                        continue
                    base = by_key.get(_key(ABLATION_BASE, r))
                    if base:
                        ratios.append(r[metric] / base[metric])
                heights.append(_geomean(ratios))
                points += [(i + (j - (len(ladder) - 1) / 2) * width, v) for v in ratios]
            xs = [i + (j - (len(ladder) - 1) / 2) * width for i in range(len(pairs))]
            ax.bar(xs, heights, width, label=mode)
            if points:
                ax.plot(*zip(*points, strict=True), "k_", markersize=6, alpha=0.6)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(pairs)), pairs)
        ax.set_title(title)
        ax.set_ylabel("ratio (bars: geometric mean; ticks: single runs)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Ablation of the asynchronous NPU+PIM ladder (system model)")
    fig.tight_layout()
    save_figure(fig, path)


def plot_comparison(results: list[dict], modes, path: Path) -> None:
    """Paper-style comparison: speedup and energy efficiency over ``gpu-only`` per pair
    (the mode table's comparison baseline)."""
    plt = pyplot()
    rows = comparison_rows(results, modes)
    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    shown = [m for m in modes if any(r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.8 / max(1, len(shown))
    for panel, (metric, title) in enumerate(
        (
            (_BASE_SPEEDUP, f"Speedup over {COMPARISON_BASE}"),
            (_BASE_EFFICIENCY, f"Energy efficiency over {COMPARISON_BASE}"),
        )
    ):
        ax = axes[panel]
        for j, mode in enumerate(shown):
            values = [
                next((r[metric] for r in rows if r["pair"] == p and r["mode"] == mode), math.nan)
                for p in pairs
            ]
            xs = [i + (j - (len(shown) - 1) / 2) * width for i in range(len(pairs))]
            ax.bar(xs, values, width, label=mode)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ticker = matplotlib_ticker()
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xticks(range(len(pairs)), pairs)
        ax.set_title(title + " (geo. mean over policies)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(shown), fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    save_figure(fig, path)


def plot_run(summary: dict, metrics, path: Path) -> None:
    """One run: device busy/idle bars and the draft-queue occupancy over time."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 2]})
    devices = list(summary["busy_s"])
    busy = [summary["busy_s"][d] for d in devices]
    idle = [summary["idle_s"][d] for d in devices]
    axes[0].barh(devices, busy, label="busy")
    axes[0].barh(devices, idle, left=busy, label="idle", color="lightgrey")
    axes[0].set_xlabel("seconds")
    axes[0].legend(fontsize=8)
    axes[0].set_title("Device time")
    samples = metrics.queue_samples
    # The first few NPU passes are readable; the whole run is a solid block at this width.
    window = min(summary["seconds"], 20 * summary["seconds"] / max(1, summary["verify_passes"]))
    times = [s[0] for s in samples if s[0] <= window] + [window]
    unverified = [s[3] for s in samples if s[0] <= window]
    queued = [s[1] for s in samples if s[0] <= window]
    axes[1].stairs(unverified, times, fill=True, alpha=0.35, label="unverified (incl. NPU pass)")
    axes[1].stairs(queued, times, color="C3", label="queued for the NPU")
    axes[1].set_xlim(0, window)
    axes[1].set_xlabel(f"simulated time (s), first {window:.2f} s of {summary['seconds']:.1f} s")
    axes[1].set_ylabel("draft tokens")
    axes[1].legend(fontsize=8, loc="upper right")
    axes[1].set_title("Draft queue occupancy")
    fig.suptitle(
        f"{summary['mode']} | {summary['pair']} | {summary['policy']}: "
        f"{summary['tokens_per_s']:.2f} tok/s, {summary['energy_per_token_mj']:.0f} mJ/token"
    )
    fig.tight_layout()
    save_figure(fig, path)


def save_figure(fig, path: Path) -> None:
    """Write ``fig`` as a PNG (atomically) and close it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    atomic_write(path, buffer.getvalue())
