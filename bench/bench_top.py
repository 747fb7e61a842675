"""Benchmark: cocotb simulation speed on the controller top's integration testbench.

Runs ``tests/top/tb_top.py`` (three clocks, pim 1250 ps, npu 1000 ps, cpu 1500 ps, 20,000
events checked against the golden controller) through pytest with a fixed seed, so that
two runs simulate the same traffic, and prints the clock edges (rising, of the three
clocks) per wall-clock and per CPU second that the testbench reports, with the load
average. The machine's speed drifts by a fifth from run to run and by a third within a
session (``testbench.python_speed``, printed first), so the item runs ``--runs`` times (3)
and the median of each figure is reported, the runs' figures beside.
Target: 50,000 edges/s.

Usage: ``.venv/bin/python bench/bench_top.py [--seed N] [--runs N]`` (default seed 12345)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from figures import report
from testbench import load, python_speed, run_item

NAME = "bench_top"
TARGET = 50_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported")
    args = parser.parse_args()
    env = {**os.environ, "AHASD_SEED": str(args.seed)}
    env.pop("AHASD_EVENTS", None)  # the default count: figures of one run compare with the next
    print(f"load average at the start: {load()}")
    print(f"this machine now: a Python loop of ten million additions in {python_speed():.2f} s")
    runs = []
    for _ in range(max(1, args.runs)):
        ran = run_item(
            NAME,
            ["-m", "cocotb", "tests/top/test_cocotb.py", "-k", "integration and seed0"],
            r"AHASD: (\d+) events .* in (\d+) pim cycles, .*, (\d+) clock edges/s "
            r"\(rising, three clocks\), (\d+) per CPU-second",
            env,
        )
        if ran is None:
            return 1
        found, wall = ran
        runs.append((*(int(found.group(i)) for i in range(1, 5)), wall))
    events, cycles = runs[0][:2]
    print(
        f"top integration cocotb (Verilator), seed {args.seed}: {events} events, "
        f"{cycles} pim cycles; per CPU-second in the {len(runs)} runs: "
        + ", ".join(f"{run[3]:,}" for run in runs)
    )
    per_wall, per_cpu, wall = (statistics.median(run[i] for run in runs) for i in (2, 3, 4))
    report(NAME, "top cocotb, clock edges/s (wall)", per_wall, "", 0)
    report(NAME, "top cocotb, clock edges per CPU-second", per_cpu, "", 0)
    report(NAME, "top cocotb, pytest wall", wall, "s")
    print(f"load average at the end: {load()}")
    within = per_cpu >= TARGET
    print(f"edges per CPU-second {'within' if within else 'UNDER'} the {TARGET:,} target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
