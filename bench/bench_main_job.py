"""Benchmark: wall time of the main job, ``make run``'s three commands, against 60 s.

``ahasd verilog`` (every block, linted), ``ahasd sweep --grid paper --platforms all`` (the
paper grid on every NPU+PIM platform shipped) and ``ahasd report``, each as a child process
into a fresh temporary directory (so nothing is resumed), on the default ``--jobs`` (2 on
the 2-core target machine). Reports each step's wall time and the total.

Usage: ``.venv/bin/python bench/bench_main_job.py [--json] [--strict]`` (``--strict`` exits
1 when the 60 s target is missed).
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

TARGET_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    ahasd = Path(sys.executable).with_name("ahasd")
    command = [str(ahasd)] if ahasd.exists() else [sys.executable, "-m", "ahasd.cli"]
    steps = {}
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "sweep"
        for name, argv in (
            ("verilog", ["verilog", "--out", str(Path(tmp) / "verilog")]),
            ("sweep", ["sweep", "--grid", "paper", "--platforms", "all", "--out", str(sweep)]),
            ("report", ["report", "--results", str(sweep)]),
        ):
            started = time.perf_counter()
            done = subprocess.run([*command, *argv], capture_output=True, text=True, check=False)
            steps[name] = time.perf_counter() - started
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                return done.returncode
        runs = len((sweep / "results.jsonl").read_text().splitlines())
    total = sum(steps.values())
    figures = {
        "benchmark": "make run (verilog, sweep --grid paper --platforms all, report)",
        "runs": runs,
        "cpus": os.cpu_count(),
        **{f"{name}_s": round(seconds, 2) for name, seconds in steps.items()},
        "wall_s": round(total, 2),
        "target_s": TARGET_S,
        "within_target": total <= TARGET_S,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        for name, seconds in steps.items():
            report("bench_main_job", f"make run: {name}, wall", seconds, "s", 2)
        report("bench_main_job", "make run, wall", total, "s", 2)
        verdict = "within" if figures["within_target"] else "OVER"
        print(
            f"make run: {runs} runs; verilog {steps['verilog']:.1f} s, sweep "
            f"{steps['sweep']:.1f} s, report {steps['report']:.1f} s: {total:.1f} s "
            f"({verdict} the {TARGET_S:.0f} s target)"
        )
    return 1 if args.strict and not figures["within_target"] else 0


if __name__ == "__main__":
    sys.exit(main())
