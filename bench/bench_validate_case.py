"""Benchmark: the small cases of ``make validate`` (one GEMM through SCALE-Sim and the cost
model, one GEMV command schedule of Table 2's DRAM timing), with SCALE-Sim's venv.

``make test`` runs the GEMV schedule (tests/validate/test_pim_schedule.py) but skips the
SCALE-Sim case: SCALE-Sim needs a venv of its own (scalesim 3.0.0 fails on numpy 2) whose
install takes about 40 s, over the 30 s a case may add to the suite. This benchmark makes
that venv when it is missing (``make build/scalesim-venv/.installed``), then runs both cases
and fails when either fails or is skipped. Reports the install and the cases' wall times.

Usage: ``.venv/bin/python bench/bench_validate_case.py``
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]
CASES = ["tests/validate/test_scalesim_case.py", "tests/validate/test_pim_schedule.py"]


def main() -> int:
    started = time.perf_counter()
    made = subprocess.run(
        ["make", "--no-print-directory", "build/scalesim-venv/.installed"], cwd=ROOT, check=False
    )
    if made.returncode:
        print("could not make build/scalesim-venv (see make's output above)")
        return made.returncode
    report("bench_validate_case", "SCALE-Sim venv (make, when missing)",
           time.perf_counter() - started, "s", 1)  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:xdist", *CASES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    report("bench_validate_case", "validation cases, wall", time.perf_counter() - started, "s", 1)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr)
    if done.returncode or "skipped" in done.stdout:
        print(done.stdout)
        print("a validation case failed or was skipped")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
