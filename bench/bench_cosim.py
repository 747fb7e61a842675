"""Benchmark: wall time of a 1,024-token co-simulation and controller cycles per second.

First brings the Verilator build of the controller top up to date (timed and reported on its
own: a cold build is ~2.5 min on 2 cores, a no-op when up to date), then runs ``ahasd cosim
--mode ahasd --pair opt-1.3b-6.7b --policy adaedl --tokens 1024 --check --json`` and prints
the wall time of the whole command, the model's own wall time inside the simulator, the PIM
cycles simulated and warped, and the controller cycles per second (simulated + warped, and
simulated only). Fails (exit 1) when the command fails, when the run is not identical to the
golden-controller run, or when the co-simulation command takes more than 120 s.

Usage: ``.venv/bin/python bench/bench_cosim.py``
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 120.0


def main() -> int:
    from ahasd.params import EDCParams, GTSUParams, TopParams, TVCParams
    from ahasd.sim.cosim import build_top

    started = time.perf_counter()
    # The parameters `ahasd cosim` uses for the default settings (TVC 32/32 bits).
    params = TopParams(edc=EDCParams(), tvc=TVCParams(), gtsu=GTSUParams())
    build_top(params, ROOT / "build" / "cosim")
    print(f"Verilator build of the top: {time.perf_counter() - started:.1f} s", flush=True)
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
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout.strip():
        print(done.stdout[-2000:], done.stderr[-3000:], sep="\n")
        print("bench_cosim: ahasd cosim failed", file=sys.stderr)
        return 1
    stats = json.loads(done.stdout.strip().splitlines()[-1])["cosim"]
    print(f"cosim 1024 tokens (ahasd, opt-1.3b-6.7b, adaedl): command wall {wall:.1f} s")
    print(
        f"  model + RTL in the simulator: {stats['wall_s']:.1f} s, {stats['calls']} controller "
        f"calls, {stats['simulated_cycles']} PIM cycles simulated, {stats['warped_cycles']} "
        f"warped in {stats['warps']} warps, {stats['rewinds']} rewinds"
    )
    print(
        f"  controller cycles/s: {stats['controller_cycles_per_s']:.3g} (with warps), "
        f"{stats['simulated_cycles_per_s']:.0f} (clocked only)"
    )
    print(f"  identical to the golden run: {stats['identical']}", flush=True)
    ok = stats["identical"] and wall <= TARGET_S
    if not ok:
        print(f"bench_cosim: target missed (identical, <= {TARGET_S:.0f} s)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
