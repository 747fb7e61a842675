"""The part the testbench benchmarks share: run one cocotb item through pytest and find the
figure line its testbench reports (``AHASD: ...``, shown by ``-rA``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_item(name: str, selection: list[str], pattern: str, env: dict[str, str] | None = None):
    """``(match, wall seconds)`` of ``pytest -q -rA <selection>`` run from the repository
    root, ``match`` being ``pattern`` searched in its output; ``None`` (after printing the
    output's tail and a line naming ``name``) when the test failed or reported no figures."""
    command = [sys.executable, "-m", "pytest", "-q", "-rA", *selection]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=ROOT, env=env or dict(os.environ), capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    found = re.search(pattern, done.stdout)
    if done.returncode != 0 or not found:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
        print(f"{name}: the cocotb test failed or reported no figures", file=sys.stderr)
        return None
    return found, wall


def load() -> str:
    """The load averages, for the figures' context (the machine may be shared)."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def python_speed() -> float:
    """CPU seconds of a plain Python loop of ten million integer additions: how fast this
    machine runs Python right now (a testbench's figure is mostly Python, and a shared
    machine's speed drifts: 0.70 to 1.22 s on the 2026-12-02 machine in one session)."""
    started = time.process_time()
    total = 0
    for value in range(10_000_000):
        total += value
    return time.process_time() - started
