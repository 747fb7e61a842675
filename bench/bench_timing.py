"""Benchmark: wall time of ``ahasd timing`` (yosys + nextpnr-ecp5, and the 28 nm estimate).

Runs ``ahasd timing BLOCK`` for every block the command knows, one child process each, in a
fresh work folder, and reports each block's wall time and the total. Target: the whole
table in 20 minutes or less on the 2-core machine (``make area`` pays it once).

Usage: ``.venv/bin/python bench/bench_timing.py [BLOCK ...] [--seed N] [--json] [--strict]``
(``--strict`` exits 1 when the target is missed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import report

TARGET_S = 1200.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", metavar="BLOCK")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    from ahasd.hw.timing import subjects

    blocks = args.blocks or list(subjects())
    ahasd = Path(sys.executable).with_name("ahasd")
    command = [str(ahasd)] if ahasd.exists() else [sys.executable, "-m", "ahasd.cli"]
    walls = {}
    with tempfile.TemporaryDirectory() as tmp:
        for block in blocks:
            argv = [*command, "timing", block, "--seed", str(args.seed), "--out", tmp]
            started = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            walls[block] = round(time.perf_counter() - started, 1)
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                return done.returncode
            if not args.json:
                print(f"  {block:10s} {walls[block]:7.1f} s", flush=True)
    total = sum(walls.values())
    figures = {
        "benchmark": "ahasd timing",
        "blocks": walls,
        "cpus": os.cpu_count(),
        "wall_s": round(total, 1),
        "target_s": TARGET_S,
        "within_target": total <= TARGET_S,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        report("bench_timing", "ahasd timing, all blocks, wall", total, "s", 0)
        verdict = "within" if figures["within_target"] else "OVER"
        print(
            f"ahasd timing: {len(walls)} block(s) in {total:.0f} s "
            f"({verdict} the {TARGET_S:.0f} s target)"
        )
    return 1 if args.strict and not figures["within_target"] else 0


if __name__ == "__main__":
    sys.exit(main())
