"""How the tables compare runs: which runs match, and how their figures are averaged.

Every table of ``ahasd report`` (:mod:`ahasd.sim.report`, :mod:`ahasd.sim.comparison`) and
of ``ahasd reproduce`` (:mod:`ahasd.sim.reproduce`) compares a mode with a base mode over
*matched* runs, runs that differ only in their mode (:func:`match_key`), and summarises
them the same way:

- figures of one mode: arithmetic means (:func:`mean`, :func:`run_means`);
- a mode against its base: the geometric mean of the matched runs' ratios
  (:func:`ratio_geomean`), so that a gain and its inverse average to inverses.

A figure that is not finite (a run that has none) is left out of a mean rather than making
it NaN; a mean of nothing is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = [
    "RUN_MEAN_COLUMNS",
    "accepted_per_drafted",
    "geomean",
    "match_index",
    "match_key",
    "matched",
    "mean",
    "ratio_geomean",
    "ratios",
    "run_means",
]

# (key, header, format spec) of the figures of :func:`run_means`, as tables print them.
RUN_MEAN_COLUMNS = [
    ("runs", "runs", "d"),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("acceptance_rate", "acc/verified", ".3f"),
    ("accepted_per_drafted", "acc/drafted", ".3f"),
    ("drafted_per_token", "drafted/token", ".2f"),
]


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean of the finite ``values`` (NaN if there are none)."""
    values = [v for v in values if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of the positive finite ``values`` (NaN if there are none)."""
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def match_key(mode: str, row: dict) -> tuple:
    """The run of ``mode`` that ``row`` is compared with: the same pair, policy, seed and
    trace within one scenario (platform, devices, overrides, ...)."""
    return (
        mode,
        row["pair"],
        row["policy"],
        row.get("seed", 0),
        row.get("trace"),
        row.get("scenario", ""),
    )


def match_index(results: Iterable[dict]) -> dict[tuple, dict]:
    """``results`` by their own :func:`match_key` (a later row replaces an earlier one)."""
    return {match_key(row["mode"], row): row for row in results}


def matched(runs: Iterable[dict], index: dict[tuple, dict], base: str) -> list[tuple]:
    """Each of ``runs`` with its matching run of mode ``base`` in ``index`` (None if the
    base did not run it)."""
    return [(row, index.get(match_key(base, row))) for row in runs]


def ratios(pairs: Iterable[tuple], metric: str, *, inverted: bool = False) -> list[float]:
    """``row[metric] / base[metric]`` of every ``(row, base)`` of ``pairs`` where both ran
    (``base[metric] / row[metric]`` if ``inverted``: an efficiency from an energy)."""
    return [
        base[metric] / row[metric] if inverted else row[metric] / base[metric]
        for row, base in pairs
        if row and base
    ]


def ratio_geomean(pairs: Iterable[tuple], metric: str, *, inverted: bool = False) -> float:
    """The geometric mean of :func:`ratios` (NaN where no pair ran both)."""
    return geomean(ratios(pairs, metric, inverted=inverted))


def accepted_per_drafted(row: dict) -> float:
    """Accepted over drafted tokens of a run (its own figure where the row has one)."""
    if "accepted_per_drafted" in row:
        return row["accepted_per_drafted"]
    return row["accepted"] / row["drafted"] if row.get("drafted") else 0.0


def run_means(runs: list[dict]) -> dict:
    """The number of ``runs`` and their mean speed, energy, both acceptance figures and
    drafted tokens per committed token (keys of :data:`RUN_MEAN_COLUMNS`)."""
    return {
        "runs": len(runs),
        "tokens_per_s": mean(r["tokens_per_s"] for r in runs),
        "energy_per_token_mj": mean(r["energy_per_token_mj"] for r in runs),
        "acceptance_rate": mean(r["acceptance_rate"] for r in runs),
        "accepted_per_drafted": mean(accepted_per_drafted(r) for r in runs),
        "drafted_per_token": mean(r["drafted"] / r["tokens"] for r in runs),
    }
