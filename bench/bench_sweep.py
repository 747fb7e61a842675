"""Benchmark: wall time and peak memory of ``ahasd sweep --grid paper`` (one platform, 1024 tokens).

Runs the sweep in a fresh results directory as a child process (``--jobs 2``, the 2-core
target machine), then reports the wall time and the peak resident memory of the largest
child (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``). Target: 10 s or less.

Usage: ``.venv/bin/python bench/bench_sweep.py [--jobs N] [--json] [--strict]``
(``--strict`` exits 1 when the target is missed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import report

TARGET_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    ahasd = Path(sys.executable).with_name("ahasd")
    command = [str(ahasd)] if ahasd.exists() else [sys.executable, "-m", "ahasd.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        argv = [*command, "sweep", "--grid", "paper", "--jobs", str(args.jobs), "--out", str(out)]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return done.returncode
        runs = len((out / "results.jsonl").read_text().splitlines())
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    figures = {
        "benchmark": "ahasd sweep --grid paper",
        "runs": runs,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1),
        "peak_rss_mib": round(peak_mib, 1),
        "target_s": TARGET_S,
        "within_target": wall <= TARGET_S,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        report("bench_sweep", "sweep --grid paper, wall", wall, "s", 2)
        report("bench_sweep", "sweep --grid paper, peak RSS", peak_mib, "MiB", 0)
        verdict = "within" if figures["within_target"] else "OVER"
        print(
            f"ahasd sweep --grid paper: {runs} runs in {wall:.2f} s on {args.jobs} jobs "
            f"({figures['runs_per_s']} runs/s), peak RSS {peak_mib:.0f} MiB "
            f"({verdict} the {TARGET_S:.0f} s target)"
        )
    return 1 if args.strict and not figures["within_target"] else 0


if __name__ == "__main__":
    sys.exit(main())
