"""Section 5 of ``ahasd reproduce``'s report: the regime map, each rung's gain over a grid
of NPU memory bandwidth and PIM throughput (its MAC rate and internal bandwidth scaled
together): :func:`regime_table`, :func:`regime_reading` and :func:`regime_figure`.
"""

from __future__ import annotations

import itertools
import math

from ahasd.sim import report
from ahasd.sim.report import gain_text
from ahasd.sim.reproduce.study import GPU_MODES, RUNGS, Study, gain

__all__ = ["regime_figure", "regime_lookup", "regime_reading", "regime_table"]


def regime_lookup(study: Study, bandwidth: float, scale: float):
    """The regime map's row of a mode and a run in the cell (``bandwidth``, ``scale``);
    the GPU modes do not depend on the cell."""

    def lookup(mode: str, run: tuple) -> dict | None:
        if mode in GPU_MODES:
            return study.row(("regime-gpu", None, None, mode, *run))
        return study.row(("regime", bandwidth, scale, mode, *run))

    return lookup


def regime_table(study: Study) -> dict[str, list[list[float]]]:
    """Per rung: its gain in every (NPU bandwidth, PIM scale) cell (rows: bandwidths)."""
    config = study.config
    runs = study.runs(config.regime_policies)
    return {
        label: [
            [
                gain(regime_lookup(study, bw, scale), mode, base, runs, "tokens_per_s")
                for scale in config.regime_pim_scale
            ]
            for bw in config.regime_npu_bandwidth
        ]
        for label, mode, base in RUNGS
    }


def regime_reading(study: Study, table: dict[str, list[list[float]]]) -> str:
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
            f"- {label} gains most ({gain_text(best[0])}) at an NPU bandwidth of "
            f"{best[1] / 1e9:g} GB/s and PIM x{best[2]:g}, least ({gain_text(worst[0])}) at "
            f"{worst[1] / 1e9:g} GB/s and PIM x{worst[2]:g}; it gains more than 1% in {wins} "
            f"and loses more than 1% in {losses} of {len(finite)} cells."
        )
    return "\n".join(sentences)


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
