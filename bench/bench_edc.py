"""Benchmark: cocotb simulation speed of the EDC testbench's random tier (Verilator).

Runs one item of the EDC's cocotb tier for each parameter set the test runs (``default``,
``formal_small``, ``small_current``; seed 1 and the default counts, 100,000 events with
``o`` always ready and then 10,000 with ``o`` stalled 40% of the cycles, so every run
simulates the same cycles) and prints the clock edges (cycles of the one clock) per
wall-clock second and per CPU-second of the simulator process that the testbench reports
for the 100,000-event run, each beside the previous run's; the stalled run's CPU figure
too (a tenth of the cycles, so it weighs start-up costs more). Target: 50,000 edges/s for
each set. The wall figure depends on the machine's load, the CPU figure much less: it is the
one ``--strict`` holds to the target. Fails (exit 1) when a test fails.

Usage: ``.venv/bin/python bench/bench_edc.py [--strict]``
"""

from __future__ import annotations

import argparse
import os
import sys

from figures import report
from testbench import load, run_item

NAME = "bench_edc"
TARGET = 50_000  # clock edges per second
PARAMETER_SETS = ("default", "formal_small", "small_current")  # tests/edc/test_cocotb.py
# The report lines of the two runs (``tests/edc/tb_edc.py``), in the order they run.
FIGURES = (
    r"(?s)AHASD: (?P<ready>o-ready [^\n]* in \d+ cycles, [^\n]* = (?P<ready_wall>\d+) clock "
    r"edges/s, (?P<ready_cpu>\d+) per CPU-second).*?AHASD: (?P<stalls>o-stalls [^\n]* in "
    r"\d+ cycles, [^\n]* = \d+ clock edges/s, (?P<stalls_cpu>\d+) per CPU-second)"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "AHASD_SEED": "1", "AHASD_EVENTS": "100000"}
    env["AHASD_STALL_EVENTS"] = "10000"
    missed = False
    for params in PARAMETER_SETS:
        print(f"load average at the start: {load()}")
        ran = run_item(
            NAME, ["tests/edc/test_cocotb.py", "-k", f"{params} and seed0"], FIGURES, env
        )
        if ran is None:
            return 1
        found, wall = ran
        print(f"EDC cocotb random tier, {params} (Verilator): {found.group('ready')}")
        print(f"EDC cocotb random tier, {params} (Verilator): {found.group('stalls')}")
        edges_wall, edges_cpu = int(found.group("ready_wall")), int(found.group("ready_cpu"))
        report(NAME, f"EDC cocotb {params}, clock edges/s (wall)", edges_wall, "", 0)
        report(NAME, f"EDC cocotb {params}, clock edges per CPU-second", edges_cpu, "", 0)
        stalls_cpu = int(found.group("stalls_cpu"))
        report(
            NAME, f"EDC cocotb {params}, o stalled, clock edges per CPU-second", stalls_cpu, "", 0
        )
        report(NAME, f"EDC cocotb {params}, pytest wall", wall, "s")
        for label, value in (("wall", edges_wall), ("CPU", edges_cpu)):
            verdict = "meets" if value >= TARGET else "MISSES"
            print(f"{params}: clock edges per {label} second {verdict} the {TARGET:,} target")
        missed |= edges_cpu < TARGET
    print(f"load average at the end: {load()}")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
