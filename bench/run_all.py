"""``make bench``: every benchmark, one after the other, with a one-line verdict each.

Usage: ``.venv/bin/python bench/run_all.py [--skip NAME ...]`` where NAME is a script stem
(``bench_make_test`` is the slowest: it runs the whole test suite).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Cheapest first; the whole test suite last.
ORDER = [
    "aau_accuracy",
    "bench_sweep",
    "bench_backends",
    "bench_queues",
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
        if p.stem not in ORDER and p.stem != "run_all" and p.stem not in args.skip
    )
    failed = []
    for script in scripts:
        if not script.exists():
            continue
        print(f"== {script.stem}", flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(script)], check=False).returncode
        verdict = "ok" if code == 0 else "FAILED"
        print(f"== {script.stem}: {verdict} ({time.perf_counter() - started:.1f} s)\n", flush=True)
        if code:
            failed.append(script.stem)
    if failed:
        print(f"benchmarks that failed or missed their target: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
