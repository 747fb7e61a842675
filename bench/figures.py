"""The benchmarks' figures, each printed beside the previous run's ("was X").

Every benchmark script reports its figures through :func:`report`, which prints the line
and keeps the value in ``build/bench/figures.json`` (one entry per benchmark and figure),
so the next run of any benchmark prints what this one measured beside its own figure and
a regression shows at a glance. The file is rewritten after each figure (atomically), so
an interrupted ``make bench`` keeps what it measured.

A script run by hand records too; ``AHASD_BENCH_FIGURES`` names another file (a scratch
measurement that must not replace the kept figures).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT / "build" / "bench" / "figures.json"


def figures_file() -> Path:
    return Path(os.environ.get("AHASD_BENCH_FIGURES", DEFAULT_FILE))


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _store(path: Path, figures: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        json.dump(figures, out, indent=1, sort_keys=True)
    os.replace(out.name, path)


def report(benchmark: str, name: str, value: float, unit: str, digits: int = 1) -> str:
    """Print ``name: value unit (was X)`` and keep ``value`` for the next run; returns the line.

    ``digits`` is the number of decimals printed; the first run of a figure prints "was
    not measured before".
    """
    path = figures_file()
    figures = _load(path)
    key = f"{benchmark}: {name}"
    previous = figures.get(key)
    was = "not measured before" if previous is None else f"was {previous:,.{digits}f}"
    line = f"{name}: {value:,.{digits}f}{' ' + unit if unit else ''} ({was})"
    print(line, flush=True)
    figures[key] = round(float(value), 6)
    _store(path, figures)
    return line
