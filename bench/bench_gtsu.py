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

from figures import report
from testbench import load, run_item

NAME = "bench_gtsu"
TARGET = 50_000  # clock edges per second
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
        ran = run_item(
            NAME,
            ["tests/gtsu/test_cocotb.py", "-k", selection],
            r"AHASD: (.* in (\d+) cycles, .* = (\d+) clock edges/s, (\d+) per CPU-second)",
            env,
        )
        if ran is None:
            return 1
        found, wall = ran
        print(f"GTSU cocotb random tier, {name} (Verilator): {found.group(1)}")
        edges_wall, edges_cpu = int(found.group(3)), int(found.group(4))
        report(NAME, f"GTSU cocotb {name}, clock edges/s (wall)", edges_wall, "", 0)
        report(NAME, f"GTSU cocotb {name}, clock edges per CPU-second", edges_cpu, "", 0)
        report(NAME, f"GTSU cocotb {name}, pytest wall", wall, "s")
        for label, value in (("wall", edges_wall), ("CPU", edges_cpu)):
            verdict = "meets" if value >= TARGET else "MISSES"
            print(f"{name}: clock edges per {label} second {verdict} the {TARGET:,} target")
        if edges_cpu < TARGET:
            missed.append(name)
    print(f"load average at the end: {load()}")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
