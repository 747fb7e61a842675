"""The main job's answer: where AHASD pays, on the same chip, and against another class.

The paper's claim is that task-level asynchronous scheduling beats operator-level
synchronous scheduling *on the same NPU + PIM* (its sections 2 and 5). This module turns a
sweep's rows into the three things ``ahasd report`` (and so ``make run``) prints:

- :func:`ladder_rows`: per platform (scenario), every same-chip mode (npu-only,
  specpim-npu and the asynchronous ladder) with tokens/s, energy, both acceptance figures
  (accepted / verified and accepted / drafted, never to be confused) and the
  geometric-mean speedup over matching runs against ``npu-only``, against ``specpim-npu``
  and against the ladder's first rung;
- :func:`other_class_rows`: the GPU-hosted modes (another power class: a 80-150 W laptop
  GPU), per pair, with the precision the GPU ran at and what AHASD achieves against them;
- :func:`reading`: a short text generated from the ladder rows (which rung pays where, and
  why, from the mechanism counters).
"""

from __future__ import annotations

import itertools
import math

from ahasd.sim.aggregate import (
    RUN_MEAN_COLUMNS,
    match_index,
    matched,
    mean,
    ratio_geomean,
    run_means,
)
from ahasd.sim.modes.table import (
    ABLATION_BASE,
    LADDER,
    MODE_TABLE,
    OTHER_CLASS_MODES,
    SAME_CHIP_BASES,
    SAME_CHIP_MODES,
)

__all__ = ["LADDER_COLUMNS", "OTHER_CLASS_COLUMNS", "ladder_rows", "other_class_rows", "reading"]


# The first rung with the EDC: where look-ahead's acceptance is recovered.
_EDC_RUNG = next(mode.name for mode in MODE_TABLE if mode.edc)


def _ratio_key(base: str) -> str:
    return "speedup_vs_" + base.replace("-", "_")


LADDER_COLUMNS = [
    ("mode", "mode", ""),
    *RUN_MEAN_COLUMNS,
    *((_ratio_key(base), f"x {base}", ".3f") for base in SAME_CHIP_BASES),
    (_ratio_key(ABLATION_BASE), f"x {ABLATION_BASE}", ".3f"),
]
OTHER_CLASS_COLUMNS = [
    ("pair", "pair", ""),
    ("mode", "mode (laptop GPU class)", ""),
    ("gpu_precision", "precision", ""),
    ("offloaded", "offload", ""),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("ahasd_speedup", f"{LADDER[-1]} x this", ".3f"),
    ("ahasd_energy_efficiency", "energy eff. x this", ".3f"),
]


def ladder_rows(results: list[dict]) -> list[dict]:
    """Per scenario and same-chip mode: means, both acceptance figures and geometric-mean
    speedups against each same-chip base and the ladder's first rung (columns
    :data:`LADDER_COLUMNS`; mechanism counters kept for :func:`reading`)."""
    index = match_index(results)
    scenarios = list(dict.fromkeys(r.get("scenario", "") for r in results))
    rows = []
    for scenario, mode in itertools.product(scenarios, SAME_CHIP_MODES):
        runs = [r for r in results if r["mode"] == mode and r.get("scenario", "") == scenario]
        if not runs:
            continue
        row = {"scenario": scenario, "mode": mode, **run_means(runs)}
        for base in (*SAME_CHIP_BASES, ABLATION_BASE):
            row[_ratio_key(base)] = ratio_geomean(matched(runs, index, base), "tokens_per_s")
        for counter in ("preverify_passes", "preverify_all_accepted", "edc_suppressions"):
            row[counter] = mean(r.get(counter, 0) for r in runs)
        row["npu_busy_share"] = mean(
            r.get("busy_s", {}).get("npu", 0.0) / r["seconds"] for r in runs if r.get("seconds")
        )
        rows.append(row)
    return rows


def other_class_rows(results: list[dict]) -> list[dict]:
    """Per pair and GPU-hosted mode (first scenario that has it: the GPU does not depend on
    the NPU + PIM platform): means, the GPU's precision, whether weights were offloaded,
    and AHASD's geometric-mean speedup and energy efficiency against it over matching
    runs of every platform (columns :data:`OTHER_CLASS_COLUMNS`)."""
    ahasd = [r for r in results if r["mode"] == LADDER[-1]]
    rows = []
    pairs = list(dict.fromkeys(r["pair"] for r in results))
    for pair, mode in itertools.product(pairs, OTHER_CLASS_MODES):
        runs = [r for r in results if r["mode"] == mode and r["pair"] == pair]
        if not runs:
            continue
        first = runs[0].get("scenario", "")
        runs = [r for r in runs if r.get("scenario", "") == first]
        base = {(r["policy"], r.get("seed", 0), r.get("trace")): r for r in runs}
        pairs = [
            (r, base.get((r["policy"], r.get("seed", 0), r.get("trace"))))
            for r in ahasd
            if r["pair"] == pair
        ]
        offloaded = any("gpu_resident_target" in r for r in runs)
        rows.append(
            {
                "pair": pair,
                "mode": mode,
                "gpu_precision": runs[0].get("gpu_precision", "?"),
                "offloaded": "over PCIe" if offloaded else "fits",
                "tokens_per_s": mean(r["tokens_per_s"] for r in runs),
                "energy_per_token_mj": mean(r["energy_per_token_mj"] for r in runs),
                "ahasd_speedup": ratio_geomean(pairs, "tokens_per_s"),
                "ahasd_energy_efficiency": ratio_geomean(
                    pairs, "energy_per_token_mj", inverted=True
                ),
            }
        )
    return rows


def _platform(scenario: str) -> str:
    for word in scenario.split():
        if word.startswith("platform="):
            return word.removeprefix("platform=")
    return scenario or "default"


def reading(rows: list[dict]) -> list[str]:
    """A few sentences per scenario, generated from :func:`ladder_rows`' rows."""
    lines = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        by_mode = {r["mode"]: r for r in rows if r["scenario"] == scenario}
        top = by_mode.get(LADDER[-1])
        if top is None:
            continue
        words = [f"{_platform(scenario)}: {LADDER[-1]} runs at"]
        words.append(
            " and ".join(
                f"{top[_ratio_key(base)]:.2f}x {base}"
                for base in SAME_CHIP_BASES
                if base in by_mode
            )
            + "."
        )
        gains = []
        for lower, upper in itertools.pairwise(LADDER):
            if lower in by_mode and upper in by_mode:
                gain = by_mode[upper]["tokens_per_s"] / by_mode[lower]["tokens_per_s"]
                gains.append((gain, upper))
        if gains:
            best_gain, best = max(gains)
            words.append(
                f"Above {LADDER[0]}, the rung that pays most is {best} ({best_gain:.3f}x the "
                "rung below);"
                if best_gain > 1.005
                else f"No rung above {LADDER[0]} pays more than 0.5%;"
            )
        first, edc = by_mode.get(LADDER[0]), by_mode.get(_EDC_RUNG)
        if first and edc:
            words.append(
                f"look-ahead drafts many tokens that are squashed (accepted / drafted "
                f"{first['accepted_per_drafted']:.3f} in {LADDER[0]}, "
                f"{by_mode.get('npu-only', first)['accepted_per_drafted']:.3f} in npu-only) "
                f"and the EDC recovers it to {edc['accepted_per_drafted']:.3f}, at "
                f"{edc['tokens_per_s'] / first['tokens_per_s']:.2f}x the throughput and "
                f"{edc['energy_per_token_mj'] / first['energy_per_token_mj']:.2f}x the energy "
                f"per token of {LADDER[0]}."
            )
        pre = top.get("preverify_passes", 0)
        if pre < 0.5:
            words.append(
                "TVC orders no pre-verification here: whenever the EDC suppressed, the NPU's "
                "remaining verification time (C_left) did not cover one pre-verified token on "
                "the PIM's target ranks."
            )
        else:
            words.append(
                f"TVC inserts {pre:.1f} pre-verifications per run, "
                f"{top.get('preverify_all_accepted', 0):.1f} of them finding every token "
                "accepted (drafting resumes after those)."
            )
        if "specpim-npu" in by_mode and top[_ratio_key("specpim-npu")] < 1:
            busy = top.get("npu_busy_share", math.nan)
            words.append(
                "Operator-level synchronous scheduling wins on this platform: it splits every "
                "operator of both models between the NPU and the PIM, so the PIM's ranks "
                "take part of each verification and the NPU part of each draft step, where "
                "the asynchronous design verifies on the NPU alone"
                + ("" if math.isnan(busy) else f" (busy {busy:.0%} of the run)")
                + " while the PIM drafts."
            )
        lines.append(" ".join(words))
    return lines
