"""Benchmark: cocotb simulation speed of the GTSU testbench's random tier (Verilator).

Runs the GTSU's cocotb tier for every parameter set it has (``default`` and
``ranks8_off3_on5`` with the first seed, and the formal tier's set with its 3-bit switch
counter), each with seed 1 and the default 20,000 cycles, so every run simulates the same
cycles, and prints for each the clock edges (cycles of the one clock) per wall-clock second
and per CPU-second of the simulator process that the testbench reports, beside the previous
run's. Target: 50,000 edges/s for every set. The wall figure depends on the machine's load,
the CPU figure much less: it is the one ``--strict`` holds to the target. A run of 20,000
cycles takes a few tenths of a CPU-second, so a figure moves by some percent from one run
to the next. Fails (exit 1) when a test fails.

Usage: ``.venv/bin/python bench/bench_gtsu.py [--strict]``
"""

from __future__ import annotations

import argparse
import os
import sys

from testbench import load, measure_edges

NAME = "bench_gtsu"
#: Parameter set: the pytest selection of its item.
ITEMS = {
    "default": "default and seed0",
    "ranks8_off3_on5": "ranks8_off3_on5 and seed0",
    "formal": "formal_parameter_set",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    print(f"load average at the start: {load()}")
    env = {**os.environ, "AHASD_SEED": "1", "AHASD_CYCLES": "20000"}
    env.pop("AHASD_COUNTER_BITS", None)  # each item sets its own
    missed = []
    for name, selection in ITEMS.items():
        label = f"GTSU cocotb {name}"
        met = measure_edges(NAME, label, ["tests/gtsu/test_cocotb.py", "-k", selection], env)
        if met is None:
            return 1
        if not met:
            missed.append(name)
    print(f"load average at the end: {load()}")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
