"""Benchmark: cocotb simulation speed of the AXI4-Lite testbench (Verilator).

Runs one item of the AXI4-Lite bridge's cocotb tier (4,000 random interleaved transactions,
seed 1, so every run simulates the same cycles) through pytest and prints the clock edges
(cycles of the one clock) per wall-clock second and per CPU-second of the simulator process
that the testbench reports, each beside the previous run's. Target: 50,000 edges/s. The wall
figure depends on the machine's load, the CPU figure much less: it is the one ``--strict``
holds to the target. The run takes about a tenth of a CPU-second, so the figure moves by some
percent from one run to the next. Fails (exit 1) when the test fails.

Usage: ``.venv/bin/python bench/bench_axi_lite.py [--strict]``
"""

from __future__ import annotations

import argparse
import os
import sys

from testbench import load, measure_edges

NAME = "bench_axi_lite"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    print(f"load average at the start: {load()}")
    env = {**os.environ, "AHASD_SEED": "1", "AHASD_TRANSACTIONS": "4000"}
    met = measure_edges(
        NAME, "AXI4-Lite cocotb", ["tests/axi_lite/test_cocotb.py", "-k", "seed0"], env
    )
    if met is None:
        return 1
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
