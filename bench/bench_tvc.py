"""Benchmark: cocotb simulation speed of the TVC testbench's random tier (Verilator).

Runs one item of the TVC's cocotb tier (default parameters, 50,000 commands, seed 1, so
every run simulates the same cycles) through pytest and prints the clock edges (cycles of
the one clock) per wall-clock second and per CPU-second of the simulator process that the
testbench reports, each beside the previous run's. Target: 50,000 edges/s. The wall figure
depends on the machine's load, the CPU figure much less: it is the one ``--strict`` holds to
the target. Fails (exit 1) when the test fails.

Usage: ``.venv/bin/python bench/bench_tvc.py [--strict]``
"""

from __future__ import annotations

import argparse
import os
import sys

from testbench import load, measure_edges

NAME = "bench_tvc"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    print(f"load average at the start: {load()}")
    env = {**os.environ, "AHASD_SEED": "1", "AHASD_COMMANDS": "50000"}
    met = measure_edges(
        NAME, "TVC cocotb", ["tests/tvc/test_cocotb.py", "-k", "default and seed0"], env
    )
    if met is None:
        return 1
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
