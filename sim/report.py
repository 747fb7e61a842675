"""Tables, files and figures from run summaries.

- terminal and markdown tables (:func:`format_table`, :func:`markdown_table`, with
  :func:`gain_text` for a gain in prose); CSV and JSON text (:func:`csv_text`,
  :func:`json_text`) for the command line's output sets, and :func:`write_json` /
  :func:`write_csv` for a single file (both through :mod:`ahasd.output`: whole or absent, an
  unchanged file keeps its mtime);
- the paper-style aggregates: the **ablation** (each mode's tokens/s and mJ/token averaged
  over pairs and policies, and the speedup over the first rung of the asynchronous ladder,
  ``pim-async``) and the **comparison** (per pair, tokens/s and energy of every mode
  relative to ``gpu-only``), with their table columns; the ladder and both baselines come
  from the mode table (:mod:`ahasd.sim.modes.table`);
- figures (matplotlib, Agg backend): :func:`ablation_figure`, :func:`comparison_figure` and
  :func:`run_figure` return a ``Figure`` (tests read its labels, legend and colours),
  :func:`png_bytes` renders one. Every figure follows the same rules: each mode has one
  colour everywhere (:data:`MODE_COLOURS`, from the mode table's order), every panel labels
  its axes with units and says whether higher or lower is better, legends sit outside the
  panels so they cover no data, and a caption gives the tokens, seeds and traces behind it.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections import defaultdict
from pathlib import Path

from ahasd.output import write_file
from ahasd.sim.aggregate import (
    RUN_MEAN_COLUMNS,
    geomean,
    match_index,
    matched,
    mean,
    ratio_geomean,
    ratios,
    run_means,
)
from ahasd.sim.modes.table import ABLATION_BASE, COMPARISON_BASE, LADDER, MODE_TABLE, find_mode

__all__ = [
    "ABLATION_COLUMNS",
    "COMPARISON_COLUMNS",
    "MODE_COLOURS",
    "ablation_figure",
    "ablation_rows",
    "caption",
    "comparison_figure",
    "comparison_rows",
    "csv_text",
    "finish_figure",
    "format_table",
    "gain_text",
    "json_text",
    "markdown_table",
    "mode_label",
    "png_bytes",
    "pyplot",
    "run_figure",
    "table_columns",
    "write_csv",
    "write_json",
]

# matplotlib's default qualitative palette ("tab10"), written out so that colours are
# fixed without importing matplotlib; modes take them in mode-table order.
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
if len(MODE_TABLE) > len(_PALETTE):
    raise ValueError(f"{len(MODE_TABLE)} modes, {len(_PALETTE)} colours: extend the palette")
MODE_COLOURS = {mode.name: _PALETTE[i] for i, mode in enumerate(MODE_TABLE)}


def mode_label(name: str) -> str:
    """A mode's name in a figure's legend: a GPU-hosted mode says it is another power class
    (a laptop GPU), never to be read as the phone's NPU + PIM."""
    return f"{name} (laptop GPU: another power class)" if find_mode(name).other_class else name


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
    *RUN_MEAN_COLUMNS,
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


def json_text(obj) -> str:
    """``obj`` as indented JSON text with a final newline."""
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"


def csv_text(rows: list[dict], columns: list[str] | None = None) -> str:
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
    return buffer.getvalue()


def write_json(path: Path, obj) -> None:
    """Write :func:`json_text` of ``obj`` to ``path`` (:func:`ahasd.output.write_file`)."""
    write_file(path, json_text(obj))


def write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Write :func:`csv_text` of ``rows`` to ``path`` (:func:`ahasd.output.write_file`)."""
    write_file(path, csv_text(rows, columns))


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


def _scenarios(results: list[dict]) -> list[str]:
    return list(dict.fromkeys(r.get("scenario", "") for r in results))


def table_columns(rows: list[dict], columns: list[tuple[str, str, str]]) -> list:
    """``columns`` with a leading scenario column when ``rows`` hold more than one."""
    if len({r.get("scenario", "") for r in rows}) > 1:
        return [("scenario", "scenario", ""), *columns]
    return columns


def ablation_rows(results: list[dict], modes) -> list[dict]:
    """Per mode: mean tokens/s, mean mJ/token, acceptance, and the geometric-mean speedup
    and energy ratio against the ladder's first rung (``pim-async``) over matching (pair,
    policy, seed, trace) runs; columns :data:`ABLATION_COLUMNS`."""
    index = match_index(results)
    rows = []
    for scenario, mode in itertools.product(_scenarios(results), modes):
        runs = [r for r in results if r["mode"] == mode and r.get("scenario", "") == scenario]
        if not runs:
            continue
        pairs = matched(runs, index, ABLATION_BASE)
        means = run_means(runs)
        drafted = means.pop("drafted_per_token")  # last: the CSV's column order
        rows.append(
            {
                "scenario": scenario,
                "mode": mode,
                **means,
                _SPEEDUP: ratio_geomean(pairs, "tokens_per_s"),
                _ENERGY: ratio_geomean(pairs, "energy_per_token_mj"),
                "drafted_per_token": drafted,
            }
        )
    return rows


def comparison_rows(results: list[dict], modes) -> list[dict]:
    """Per pair and mode: mean tokens/s and mJ/token over policies and seeds, and the
    geometric-mean speedup and energy efficiency against ``gpu-only``; columns
    :data:`COMPARISON_COLUMNS`."""
    index = match_index(results)
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
            pairs = matched(runs, index, COMPARISON_BASE)
            rows.append(
                {
                    "scenario": scenario,
                    "pair": pair,
                    "mode": mode,
                    "tokens_per_s": mean(r["tokens_per_s"] for r in runs),
                    "energy_per_token_mj": mean(r["energy_per_token_mj"] for r in runs),
                    _BASE_SPEEDUP: ratio_geomean(pairs, "tokens_per_s"),
                    _BASE_EFFICIENCY: ratio_geomean(pairs, "energy_per_token_mj", inverted=True),
                }
            )
    return rows


def gain_text(value: float) -> str:
    """A gain as ``x1.23`` (``n/a`` if it is not finite)."""
    return "n/a" if not math.isfinite(value) else f"x{value:.3g}"


def markdown_table(rows: list[dict], columns: list[str], formats: dict | None = None) -> str:
    """A markdown table of ``rows``: ``columns`` in order, floats as ``formats[column]``
    (default ``.3g``), a missing cell empty."""
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


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: the model runs
    without matplotlib loaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig) -> bytes:
    """The PNG of ``fig`` (closed afterwards); the same figure gives the same bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    pyplot().close(fig)
    return buffer.getvalue()


def _listing(values: list, limit: int = 4) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def caption(rows: list[dict]) -> str:
    """What a figure of ``rows`` rests on: runs, generated tokens, seeds and traces."""
    tokens = sorted({r["tokens"] for r in rows if isinstance(r.get("tokens"), int)})
    seeds = sorted({r.get("seed", 0) for r in rows})
    traces = list(dict.fromkeys(str(r.get("trace") or "synthetic") for r in rows))
    if traces and all(t.startswith("synthetic:") for t in traces) and len(traces) > 1:
        traces = ["each pair's synthetic preset"]
    span = _listing(tokens) if tokens else "unknown"
    return (
        f"{len(rows)} simulated run{'s' if len(rows) != 1 else ''}; {span} generated tokens "
        f"per run; seed{'s' if len(seeds) != 1 else ''} {_listing(seeds)}; "
        f"trace{'s' if len(traces) != 1 else ''}: {_listing(traces)}. "
        "System model, not measurements."
    )


def finish_figure(fig, *, title: str, handles, labels, caption: str, columns: int) -> None:
    """Title on top, then the panels, then the legend and the caption, both below the panels
    so that they cover no data. The space they take is computed from their line counts."""
    import textwrap

    width, height = fig.get_size_inches()
    wrapped = "\n".join(textwrap.wrap(caption, width=int(width * 15)))
    legend_rows = math.ceil(len(labels) / columns) if labels else 0
    legend_in = 0.24 * legend_rows + (0.12 if legend_rows else 0.0)
    caption_in = 0.16 * (wrapped.count("\n") + 1) + 0.12
    bottom = (legend_in + caption_in) / height
    # At the top edge, so that tight_layout fits the panels (and their titles) below it.
    fig.suptitle(title, y=1 - 0.08 / height, va="top")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    if labels:
        fig.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, bottom),
            ncol=columns,
            fontsize=8,
            frameon=False,
        )
    fig.text(0.01, 0.012, wrapped, fontsize=7.5, ha="left", va="bottom", color="0.25")


def _bar_offsets(count: int) -> tuple[float, list[float]]:
    width = 0.8 / max(1, count)
    return width, [(j - (count - 1) / 2) * width for j in range(count)]


def ablation_figure(results: list[dict], modes):
    """Paper-style ablation: per pair, tokens/s and mJ/token of the asynchronous ladder
    relative to its first rung (bars: geometric means over policies and seeds; black ticks:
    single runs)."""
    plt = pyplot()
    ladder = [m for m in modes if m in LADDER]
    pairs = list(dict.fromkeys(r["pair"] for r in results))
    index = match_index(results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    width, offsets = _bar_offsets(len(ladder))
    ticks = []  # the single-run markers, for the legend
    panels = (
        ("tokens_per_s", f"Speedup over {ABLATION_BASE}", "higher is better"),
        ("energy_per_token_mj", f"Energy per token relative to {ABLATION_BASE}", "lower is better"),
    )
    for ax, (metric, title, better) in zip(axes, panels, strict=True):
        for mode, offset in zip(ladder, offsets, strict=True):
            heights, points = [], []
            for i, pair in enumerate(pairs):
                runs = [r for r in results if r["mode"] == mode and r["pair"] == pair]
                values = ratios(matched(runs, index, ABLATION_BASE), metric)
                heights.append(geomean(values))
                points += [(i + offset, v) for v in values]
            xs = [i + offset for i in range(len(pairs))]
            ax.bar(xs, heights, width, label=mode, color=MODE_COLOURS[mode])
            if points:
                ticks += ax.plot(*zip(*points, strict=True), "k_", markersize=6, alpha=0.6)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(pairs)), pairs)
        ax.set_xlabel("model pair (draft-target)")
        ax.set_title(f"{title} ({better})")
        ax.set_ylabel(f"ratio to {ABLATION_BASE} (x, {better})")
    handles, labels = axes[0].get_legend_handles_labels()
    if ticks:
        handles.append(ticks[0])
        labels.append("single runs (one tick per policy and seed)")
    finish_figure(
        fig,
        title="Ablation of the asynchronous NPU+PIM ladder (system model)",
        handles=handles,
        labels=labels,
        caption=caption(results),
        columns=min(len(labels), 5) or 1,
    )
    return fig


def comparison_figure(results: list[dict], modes):
    """Paper-style comparison: speedup and energy efficiency over ``gpu-only`` per pair
    (the mode table's comparison baseline), geometric means over policies and seeds."""
    plt = pyplot()
    import matplotlib.ticker as ticker

    rows = comparison_rows(results, modes)
    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    shown = [m for m in modes if any(r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    width, offsets = _bar_offsets(len(shown))
    panels = (
        (_BASE_SPEEDUP, f"Speedup over {COMPARISON_BASE}", "tokens/s ratio"),
        (_BASE_EFFICIENCY, f"Energy efficiency over {COMPARISON_BASE}", "tokens/J ratio"),
    )
    for ax, (metric, title, quantity) in zip(axes, panels, strict=True):
        for mode, offset in zip(shown, offsets, strict=True):
            values = [
                next((r[metric] for r in rows if r["pair"] == p and r["mode"] == mode), math.nan)
                for p in pairs
            ]
            xs = [i + offset for i in range(len(pairs))]
            ax.bar(xs, values, width, label=mode_label(mode), color=MODE_COLOURS[mode])
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xticks(range(len(pairs)), pairs)
        ax.set_xlabel("model pair (draft-target)")
        ax.set_title(f"{title} (higher is better)")
        ax.set_ylabel(f"{quantity} to {COMPARISON_BASE} (x, log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    finish_figure(
        fig,
        title="Against the GPU-only baseline (another power class: a laptop GPU; system model)",
        handles=handles,
        labels=labels,
        caption=caption(results),
        columns=min(len(labels), 7) or 1,
    )
    return fig


def run_figure(summary: dict, metrics):
    """One run: device busy/idle time and the draft-queue occupancy over the first NPU
    passes (the whole run is a solid block at this width)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [1, 2]})
    devices = list(summary["busy_s"])
    busy = [summary["busy_s"][d] for d in devices]
    idle = [summary["idle_s"][d] for d in devices]
    colour = MODE_COLOURS.get(summary["mode"], _PALETTE[0])
    axes[0].barh(devices, busy, label="device busy", color=colour)
    axes[0].barh(devices, idle, left=busy, label="device idle", color="lightgrey")
    axes[0].set_xlabel("simulated time (s)")
    axes[0].set_ylabel("device")
    axes[0].set_title("Device time")
    samples = metrics.queue_samples
    window = min(summary["seconds"], 20 * summary["seconds"] / max(1, summary["verify_passes"]))
    times = [s[0] for s in samples if s[0] <= window] + [window]
    unverified = [s[3] for s in samples if s[0] <= window]
    queued = [s[1] for s in samples if s[0] <= window]
    axes[1].stairs(
        unverified, times, fill=True, alpha=0.35, color=colour, label="unverified (incl. NPU pass)"
    )
    axes[1].stairs(queued, times, color="black", label="queued for the NPU")
    axes[1].set_xlim(0, window)
    axes[1].set_xlabel("simulated time (s)")
    axes[1].set_ylabel("draft tokens (tokens)")
    axes[1].set_title(f"Draft queue, first {window:.2f} s of {summary['seconds']:.2f} s")
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    text = (
        f"{summary['tokens_per_s']:.2f} tokens/s, {summary['energy_per_token_mj']:.0f} mJ/token. "
        + caption([summary])
    )
    finish_figure(
        fig,
        title=f"{summary['mode']} | {summary['pair']} | {summary['policy']}",
        handles=handles,
        labels=labels,
        caption=text,
        columns=4,
    )
    return fig
