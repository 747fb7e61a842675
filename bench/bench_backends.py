"""Benchmark: runs per second of ``ahasd sweep`` on the two backends, local pool and Ray.

Runs the same grid (the paper's 3 pairs x 4 algorithms x 7 modes on platforms table2 and
artifact, 512 tokens: 144 distinct runs) into a fresh results directory with
``--backend local`` and with ``--backend ray`` (a local Ray instance of ``--jobs`` CPUs),
each as a child process, and reports wall time and runs per second. The Ray figure
includes starting and stopping its local instance (about 10 s on 2 cores), which a
cluster pays once. Ray is skipped, saying so, when the ``ray`` extra is not installed.

Usage: ``.venv/bin/python bench/bench_backends.py [--jobs N] [--json]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import report

GRID = ["--grid", "paper", "--platforms", "table2", "artifact", "--tokens", "512"]


def _run(command: list[str], backend: str, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        argv = [*command, "sweep", *GRID, "--jobs", str(jobs), "--backend", backend]
        argv += ["--out", str(out)]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(done.returncode)
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    simulated = len({row["run_id"] for row in rows})
    return {
        "backend": backend,
        "jobs": jobs,
        "cpus": os.cpu_count(),
        "requested": len(rows),
        "simulated": simulated,
        "wall_s": round(wall, 2),
        "runs_per_s": round(simulated / wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ahasd = Path(sys.executable).with_name("ahasd")
    command = [str(ahasd)] if ahasd.exists() else [sys.executable, "-m", "ahasd.cli"]
    results = [_run(command, "local", args.jobs)]
    if importlib.util.find_spec("ray") is None:
        print("ray: not installed (pip install 'ahasd[ray]'), its figure is skipped")
    else:
        results.append(_run(command, "ray", args.jobs))
    for figures in results:
        if args.json:
            print(json.dumps(figures))
        else:
            report("bench_backends", f"{figures['backend']} runs/s", figures["runs_per_s"], "")
            print(
                f"sweep --backend {figures['backend']}: {figures['simulated']} runs in "
                f"{figures['wall_s']:.1f} s on {figures['jobs']} jobs = "
                f"{figures['runs_per_s']:.1f} runs/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
