"""Benchmark: wall and CPU time of ``make test`` (lint, every test tier, the extra seeds).

Usage: ``.venv/bin/python bench/bench_make_test.py [--strict]``. Target: under 15 minutes on
2 cores. Prints the load average at the start and the end (the machine may be shared), the
wall time and the CPU time of every process the suite ran, each beside the previous run's.
``--strict`` exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 15 * 60
NAME = "bench_make_test"


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    print(f"load average at the start: {_load()}")
    started = time.perf_counter()
    done = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"load average at the end: {_load()}")
    summary = [line for line in done.stdout.splitlines() if " passed" in line or " failed" in line]
    print(f"make test: {summary[-1] if summary else 'no summary line'}")
    report(NAME, "make test, wall", wall, "s", 0)
    report(NAME, "make test, CPU (every process)", used.ru_utime + used.ru_stime, "s", 0)
    if done.returncode != 0:
        print(done.stdout[-3000:])
        return 1
    within = wall <= TARGET_S
    print(f"make test {'within' if within else 'OVER'} the {TARGET_S // 60} min target")
    return 1 if args.strict and not within else 0


if __name__ == "__main__":
    sys.exit(main())
