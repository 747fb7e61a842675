"""Section 1 to 3 of ``ahasd reproduce``'s report: the evaluation on every platform.

- :func:`ladder_table`: per platform, tokens/s of every NPU+PIM mode and each rung's gain;
- :func:`baseline_table`: per platform and GPU baseline, the full design against it;
- :func:`sharing_table`: each mode under the other memory-sharing model;
- :func:`ladder_reading`, :func:`sharing_reading`: the generated paragraphs, naming the
  largest and smallest rung and the counters behind them (:func:`per_token`);
- :func:`ladder_figure`: the ladder per platform with each GPU baseline as lines.
"""

from __future__ import annotations

import itertools
import math

from ahasd.sim import report
from ahasd.sim.aggregate import geomean, mean, ratio_geomean
from ahasd.sim.modes.table import COMPARISON_BASE, LADDER, find_mode
from ahasd.sim.report import gain_text
from ahasd.sim.reproduce.study import (
    GPU_MODES,
    PLATFORM_MODES,
    RUNGS,
    Study,
    evaluation_lookup,
    gain,
)

__all__ = [
    "baseline_table",
    "ladder_figure",
    "ladder_reading",
    "ladder_table",
    "per_token",
    "sharing_reading",
    "sharing_table",
]


def per_token(lookup, mode: str, runs) -> dict:
    """Counters per committed token (mean over runs) that explain a mode's speed."""
    rows = [r for r in (lookup(mode, run) for run in runs) if r]
    if not rows:
        return {}

    def task(row: dict, suffix: str) -> float:
        return sum(v for k, v in row["busy_by_task_s"].items() if k.endswith(suffix))

    return {
        "tokens_per_s": geomean(r["tokens_per_s"] for r in rows),
        "energy_mj": geomean(r["energy_per_token_mj"] for r in rows),
        "draft_ms": mean(1e3 * task(r, ":draft") / max(r["drafted"], 1) for r in rows),
        "verify_ms": mean(1e3 * task(r, ":verify") / max(r["verify_passes"], 1) for r in rows),
        "drafted": mean(r["drafted"] / r["tokens"] for r in rows),
        "squashed": mean(r["squashed"] / r["tokens"] for r in rows),
        "preverify": mean(r["preverify_passes"] / r["tokens"] for r in rows),
        "preverify_rejections": mean(r["preverify_rejections"] for r in rows),
        "preverify_ms": mean(
            1e3 * task(r, ":preverify") / max(r["preverify_passes"], 1) for r in rows
        ),
        "nonlinear_ms": mean(1e3 * task(r, ":nonlinear") / max(r["drafted"], 1) for r in rows),
        "suppressions": mean(r["edc_suppressions"] / r["tokens"] for r in rows),
        "verifier_busy": mean(
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
    runs = study.runs()
    for platform in study.platforms:
        gpu = study.library.platform(platform).device("gpu")
        lookup = evaluation_lookup(study, platform, gpu)
        row = {"platform": platform}
        for mode in PLATFORM_MODES:
            row[mode] = per_token(lookup, mode, runs).get("tokens_per_s", math.nan)
        for label, mode, base in RUNGS:
            if base not in GPU_MODES:
                row[label] = gain(lookup, mode, base, runs, "tokens_per_s")
        rows.append(row)
    return rows


def baseline_table(study: Study) -> list[dict]:
    """Per platform and GPU baseline: the baselines' tokens/s and ahasd's gain over them."""
    rows = []
    runs = study.runs()
    full = LADDER[-1]
    for platform, gpu in itertools.product(study.platforms, study.gpus):
        lookup = evaluation_lookup(study, platform, gpu)
        rows.append(
            {
                "platform": platform,
                "gpu": gpu,
                f"{full} tok/s": per_token(lookup, full, runs).get("tokens_per_s", math.nan),
                **{
                    f"{mode} tok/s": per_token(lookup, mode, runs).get("tokens_per_s", math.nan)
                    for mode in GPU_MODES
                },
                **{
                    f"{full} / {mode}": gain(lookup, full, mode, runs, "tokens_per_s")
                    for mode in GPU_MODES
                },
                **{
                    f"energy {full} / {mode}": gain(lookup, full, mode, runs, "energy_per_token_mj")
                    for mode in GPU_MODES
                },
            }
        )
    return rows


def sharing_table(study: Study) -> list[dict]:
    """Per platform: each NPU+PIM mode's speed under the other memory-sharing model."""
    rows = []
    runs = study.runs()
    for platform in study.platforms:
        own = study.library.platform(platform).memory_sharing
        other = "separate" if own == "shared" else "shared"
        for mode in PLATFORM_MODES:
            pairs = [
                (
                    study.row(("sharing", platform, other, mode, *run)),
                    study.row(("eval", platform, None, mode, *run)),
                )
                for run in runs
            ]
            rows.append(
                {
                    "platform": platform,
                    "mode": mode,
                    "own": own,
                    "other": other,
                    "speed other / own": ratio_geomean(pairs, "tokens_per_s"),
                }
            )
    return rows


def ladder_reading(study: Study, ladder: list[dict], baselines: list[dict]) -> str:
    runs = study.runs()
    sentences = []
    for row in ladder:
        platform = row["platform"]
        gpu = study.library.platform(platform).device("gpu")
        lookup = evaluation_lookup(study, platform, gpu)
        rungs = [(label, row[label], mode, base) for label, mode, base in RUNGS if label in row]
        best = max(rungs, key=lambda r: r[1])
        worst = min(rungs, key=lambda r: r[1])
        counters = {m: per_token(lookup, m, runs) for m in (*PLATFORM_MODES, *GPU_MODES)}
        sentences.append(
            f"- On **{platform}** the largest rung is {best[0]} ({gain_text(best[1])}): "
            f"{_cause(best[0], best[2], best[3], counters[best[2]], counters[best[3]])}. "
            f"The smallest is {worst[0]} ({gain_text(worst[1])}): "
            f"{_cause(worst[0], worst[2], worst[3], counters[worst[2]], counters[worst[3]])}."
        )
        mine = [b for b in baselines if b["platform"] == platform]
        key = f"{LADDER[-1]} / {COMPARISON_BASE}"
        high = max(mine, key=lambda b: b[key])
        low = min(mine, key=lambda b: b[key])
        sentences.append(
            f"  Against the GPU-only baselines {LADDER[-1]} runs at {gain_text(low[key])} "
            f"({low['gpu']}) to {gain_text(high[key])} ({high['gpu']}) of their speed."
        )
    return "\n".join(sentences)


def sharing_reading(rows: list[dict]) -> str:
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
    return (
        f"The memory-sharing model matters most for {big[2]} on {big[1]}: "
        f"{big[3]} {gain_text(big[0])}."
    )


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
