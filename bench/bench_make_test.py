"""Benchmark: wall time of the whole test suite (what ``make test`` runs after lint).

Usage: ``.venv/bin/python bench/bench_make_test.py``. Target: under 20 minutes on 2 cores.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 20 * 60


def main() -> int:
    started = time.perf_counter()
    done = subprocess.run(["make", "test"], cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    summary = [line for line in done.stdout.splitlines() if " passed" in line or " failed" in line]
    print(f"make test: {wall:.0f} s wall (target {TARGET_S} s); {summary[-1] if summary else ''}")
    if done.returncode != 0:
        print(done.stdout[-3000:])
        return 1
    return 0 if wall <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
