"""Benchmark: cocotb simulation speed on the controller top's integration testbench.

Runs ``tests/top/tb_top.py`` (three clocks, pim 1250 ps, npu 1000 ps, cpu 1500 ps, 20,000
events checked against the golden controller) through pytest with a fixed seed, so that
two runs simulate the same traffic, and prints the clock edges (rising, of the three
clocks) per wall-clock and per CPU second that the testbench reports, with the load
average. Target: 50,000 edges/s.

Usage: ``.venv/bin/python bench/bench_top.py [--seed N]`` (default seed 12345)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]
NAME = "bench_top"
TARGET = 50_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rA",
        "-m",
        "cocotb",
        "tests/top/test_cocotb.py",
        "-k",
        "integration and seed0",
    ]
    env = {**os.environ, "AHASD_SEED": str(args.seed)}
    env.pop("AHASD_EVENTS", None)  # the default count: figures of one run compare with the next
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    found = re.search(
        r"AHASD: (\d+) events .* in (\d+) pim cycles, .*, (\d+) clock edges/s "
        r"\(rising, three clocks\), (\d+) per CPU-second",
        done.stdout,
    )
    if done.returncode != 0 or not found:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
        print("bench_top: the top's integration test failed", file=sys.stderr)
        return 1
    events, cycles, per_wall, per_cpu = (int(found.group(i)) for i in range(1, 5))
    print(
        f"top integration cocotb (Verilator), seed {args.seed}: {events} events, "
        f"{cycles} pim cycles"
    )
    report(NAME, "top cocotb, clock edges/s (wall)", per_wall, "", 0)
    report(NAME, "top cocotb, clock edges per CPU-second", per_cpu, "", 0)
    report(NAME, "top cocotb, pytest wall", wall, "s")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    within = per_cpu >= TARGET
    print(f"edges per CPU-second {'within' if within else 'UNDER'} the {TARGET:,} target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
