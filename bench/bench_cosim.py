"""Benchmark: wall and CPU time of a warm 1,024-token co-simulation.

First brings the Verilator build of the controller top up to date (timed on its own; a cold
build is ``bench_build``'s figure), then runs ``ahasd cosim --mode ahasd --pair
opt-1.3b-6.7b --policy adaedl --tokens 1024 --check --json`` and reports the wall and CPU
time of the whole command (every process it starts), the model's and the RTL's own time
inside the simulator, and the PIM cycles clocked and warped, each beside the previous run's.
Target: the command in 5 s or less. Fails (exit 1) when the command fails or the run is not
identical to the golden-controller run; with ``--strict`` also when the target is missed.

Usage: ``.venv/bin/python bench/bench_cosim.py [--strict]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0
NAME = "bench_cosim"


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    from ahasd.params import EDCParams, GTSUParams, TopParams, TVCParams
    from ahasd.sim.cosim import build_top

    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    # The parameters `ahasd cosim` uses for the default settings.
    params = TopParams(edc=EDCParams(), tvc=TVCParams(), gtsu=GTSUParams())
    build_top(params, ROOT / "build" / "cosim")
    build_wall = time.perf_counter() - started
    print(f"Verilator build of the top (brought up to date first): {build_wall:.1f} s")
    command = [
        str(Path(sys.executable).parent / "ahasd"),
        "cosim",
        "--mode",
        "ahasd",
        "--pair",
        "opt-1.3b-6.7b",
        "--policy",
        "adaedl",
        "--tokens",
        "1024",
        "--check",
        "--json",
    ]
    started, cpu_started = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_started
    if done.returncode not in (0, 1) or not done.stdout.strip():
        print(done.stdout[-2000:], done.stderr[-3000:], sep="\n")
        print("bench_cosim: ahasd cosim failed", file=sys.stderr)
        return 1
    stats = json.loads(done.stdout.strip().splitlines()[-1])["cosim"]
    print("cosim 1024 tokens (ahasd, opt-1.3b-6.7b, adaedl, --check), build up to date:")
    report(NAME, "cosim command, wall", wall, "s")
    report(NAME, "cosim command, CPU (all its processes)", cpu, "s")
    report(NAME, "model + RTL in the simulator, wall", stats["wall_s"], "s")
    report(NAME, "model + RTL in the simulator, CPU", stats["cpu_s"], "s")
    print(
        f"  {stats['calls']} controller calls, {stats['simulated_cycles']} PIM cycles clocked, "
        f"{stats['warped_cycles']} warped in {stats['warps']} warps, {stats['rewinds']} rewinds"
    )
    print(f"  identical to the golden run: {stats['identical']}", flush=True)
    within = wall <= TARGET_S
    print(f"cosim command {'within' if within else 'OVER'} the {TARGET_S:.0f} s target")
    if not stats["identical"]:
        print("bench_cosim: the co-simulation is not identical to the golden run")
        return 1
    return 1 if args.strict and not within else 0


if __name__ == "__main__":
    sys.exit(main())
