"""``make bench``: every benchmark, one after the other, with a one-line verdict each.

Every figure is printed beside the previous run's ("was X", kept in
``build/bench/figures.json`` by :mod:`figures`), the wall time of each script too.

Usage: ``.venv/bin/python bench/run_all.py [--skip NAME ...]`` where NAME is a script stem
(``bench_make_test`` is the slowest: it runs the whole test suite).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from figures import report

HERE = Path(__file__).resolve().parent
#: Modules of this directory that are not benchmarks.
NOT_BENCHMARKS = {"run_all", "figures", "testbench", "tb_floor"}
# Cheapest first; the whole test suite last.
ORDER = [
    "aau_accuracy",
    "bench_sweep",
    "bench_main_job",
    "bench_backends",
    "bench_floor",
    "bench_queues",
    "bench_gtsu",
    "bench_axi_lite",
    "bench_edc",
    "bench_tvc",
    "bench_aau",
    "bench_build",
    "bench_top",
    "bench_cosim",
    "bench_timing",
    "bench_make_test",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", nargs="*", default=[], metavar="NAME")
    args = parser.parse_args()
    scripts = [HERE / f"{name}.py" for name in ORDER if name not in args.skip]
    scripts += sorted(
        p
        for p in HERE.glob("*.py")
        if p.stem not in ORDER and p.stem not in NOT_BENCHMARKS and p.stem not in args.skip
    )
    failed = []
    for script in scripts:
        if not script.exists():
            continue
        print(f"== {script.stem}", flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(script)], check=False).returncode
        wall = time.perf_counter() - started
        print(f"== {script.stem}: {'ok' if code == 0 else 'FAILED'}", flush=True)
        report("run_all", f"{script.stem} wall", wall, "s")
        print(flush=True)
        if code:
            failed.append(script.stem)
    if failed:
        print(f"benchmarks that failed or missed their target: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
