"""``ahasd reproduce``: the paper's evaluation on every platform against every GPU baseline,
a one-at-a-time sensitivity analysis of each rung's gain, a regime map, and a report.

Three sets of sweeps into one results directory (resumable like any sweep, on the local
process pool or on Ray, :func:`ahasd.sim.sweep.run_sweep`), planned by :mod:`.study`:

1. **evaluate**: the paper's grid (3 pairs x 4 algorithms) in every NPU+PIM mode on every
   shipped NPU+PIM platform, and in the GPU modes against every GPU baseline the platforms
   list (``gpu_baselines``); plus each platform under the other memory-sharing model
   (analysed by :mod:`.evaluation`).
2. **sensitivity**: on one platform, every number of its devices marked medium or low
   confidence is set to each end of its documented ``range`` in turn (one at a time); the
   gain of each rung (:data:`.study.RUNGS`) is recomputed (:mod:`.sensitivity`).
3. **regime**: a grid of NPU memory bandwidth and PIM throughput (MAC rate and internal
   bandwidth scaled together); which rung gains, and by how much, in each cell
   (:mod:`.regime`).

:func:`~.writing.write_report` turns the rows into ``report.md`` with tables, figures (ladder
per platform and baseline, a tornado plot per rung, the regime heat maps) and one generated
paragraph per section: templated sentences that name the largest and smallest effects and
the counters behind them. Nothing in the text is written by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ahasd.sim.reproduce.study import ReproduceConfig, Study, plan
from ahasd.sim.reproduce.writing import write_report
from ahasd.sim.sweep import run_sweep

__all__ = ["ReproduceConfig", "run_reproduce"]


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
    study = plan(config)
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
