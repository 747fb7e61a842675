"""Regression over seeds: the random test tiers run once per seed, failures listed with the
command that replays each one.

Run from the repository root (``make regress SEEDS=N [SEED0=S] [BLOCKS="edc tvc"]``)::

    .venv/bin/python tests/harness/regress.py --seeds 20 [--seed0 1234] [--tier cocotb]

Each seed ``s`` runs ``pytest`` on the chosen blocks' folders with ``AHASD_SEED=s`` (every
random test honours it, see ``harness/seeds.py``; a cocotb item with an offset runs
``s + offset``). Without ``--seed0`` the seeds are fresh (drawn from the system's entropy) and
printed before they run, so any run can be replayed. ``--quick`` lowers the testbenches'
event counts (the environment knobs of each block's ``test_cocotb.py``); a failure is then
replayed with the same knobs, and the replay command says so.

Exit status: 0 when every run passed, 1 otherwise (after the summary).
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = ("edc", "tvc", "queues", "gtsu", "aau", "top", "axi_lite")
TIERS = {
    # The tests whose stimulus depends on the seed: every cocotb test, and the tests of the
    # fast tiers marked ``seeded`` (tests/test_seeded_marks.py keeps the marks complete); a
    # directed test would do the same on every seed.
    "cocotb": "cocotb",
    "fast": "seeded and not cocotb and not formal",
    "all": "(seeded or cocotb) and not formal",
}
# Shorter runs for a sweep over many seeds (each block's knobs, read by its testbench).
QUICK = {
    "AHASD_EVENTS": "20000",
    "AHASD_STALL_EVENTS": "4000",
    "AHASD_COMMANDS": "20000",
    "AHASD_CYCLES": "20000",
    "AHASD_ENTRIES": "6000",
    "AHASD_VECTORS": "60",
}


def _failures(report: Path) -> list[tuple[str, str]]:
    """``(node id, first line of the message)`` of every failed or erroring test case."""
    if not report.exists():
        return []
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            element = case.find(outcome)
            if element is None:
                continue
            path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
            node = f"{path}::{case.get('name')}"
            message = (element.get("message") or element.text or "").strip().splitlines()
            found.append((node, message[0][:200] if message else outcome))
    return found


def run(seeds: list[int], blocks: list[str], tier: str, quick: bool, workers: int) -> int:
    python = Path(sys.executable)
    pytest = python.parent / "pytest"
    out = ROOT / "build" / "regress"
    out.mkdir(parents=True, exist_ok=True)
    knobs = QUICK if quick else {}
    folders = [f"tests/{block}" for block in blocks]
    print(f"seeds: {' '.join(map(str, seeds))}", flush=True)
    failed: list[tuple[int, str, str]] = []
    started = time.monotonic()
    for seed in seeds:
        report = out / f"seed-{seed}.xml"
        report.unlink(missing_ok=True)
        env = {**os.environ, **knobs, "AHASD_SEED": str(seed)}
        command = [str(pytest), "-q", "-m", TIERS[tier], f"--junitxml={report}", *folders]
        if workers > 1:
            command += ["-n", str(workers)]
        begun = time.monotonic()
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        (out / f"seed-{seed}.log").write_text(done.stdout + done.stderr)
        cases = _failures(report)
        if done.returncode == 5:
            # A seed that ran nothing checked nothing: a marker or a folder is wrong.
            cases = [(" ".join(folders), f"no test of the {tier} tier ran (pytest exit 5)")]
        elif done.returncode != 0 and not cases:
            cases = [(" ".join(folders), f"pytest exit {done.returncode}, see the log")]
        failed += [(seed, node, message) for node, message in cases]
        verdict = "ok" if not cases else f"{len(cases)} FAILED"
        print(f"seed {seed}: {verdict} ({time.monotonic() - begun:.0f} s)", flush=True)
    print(
        f"{len(seeds)} seeds x {', '.join(blocks)} ({tier} tier"
        f"{', quick counts' if quick else ''}) in {time.monotonic() - started:.0f} s: "
        f"{len(failed)} failure(s)"
    )
    knob_text = "".join(f"{name}={value} " for name, value in knobs.items())
    for seed, node, message in failed:
        print(f"FAILED seed {seed}: {node}\n    {message}")
        print(f"    replay: {knob_text}AHASD_SEED={seed} .venv/bin/pytest {shlex.quote(node)}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds (default 5)")
    parser.add_argument("--seed0", type=int, help="first seed (then +1 each); fresh if omitted")
    parser.add_argument("--blocks", nargs="+", default=list(BLOCKS), choices=BLOCKS)
    parser.add_argument("--tier", choices=sorted(TIERS), default="cocotb")
    parser.add_argument("--quick", action="store_true", help="shorter testbench runs")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, not {args.seeds}")
    if args.seed0 is None:
        draw = random.SystemRandom()
        seeds = [draw.randrange(1 << 31) for _ in range(args.seeds)]
    else:
        # Offsets of 3 apart: a cocotb item uses seed + 0..2, so runs never share a seed.
        seeds = [args.seed0 + 3 * k for k in range(args.seeds)]
    return run(seeds, args.blocks, args.tier, args.quick, args.workers)


if __name__ == "__main__":
    sys.exit(main())
