"""The part the testbench benchmarks share: run one cocotb item through pytest and find the
figure line its testbench reports (``AHASD: ...``, shown by ``-rA``); report a testbench's
clock edges per wall- and CPU-second against the target (:func:`measure_edges`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from figures import report

ROOT = Path(__file__).resolve().parents[1]
#: Clock edges per second, the target of every high-volume random testbench tier.
TARGET = 50_000
#: The end of a testbench's figure line (the TVC testbench's wording, which all follow):
#: groups 1 (the whole), 2 (cycles), 3 (edges per wall second), 4 (per CPU-second).
EDGES = r"(.* in (\d+) cycles, .* = (\d+) clock edges/s, (\d+) per CPU-second)"


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
    """CPU seconds of a Python loop of ten million integer additions in a function: how fast
    this machine runs Python right now (a testbench's figure is mostly Python, and a shared
    machine's speed drifts: the same loop at module level, twice as slow, took 0.67 to 1.22 s
    on the 2026-12-02 machine within one session; 0.32 to 0.34 s here when it took 0.67 to
    0.70 s there)."""
    started = time.process_time()
    total = 0
    for value in range(10_000_000):
        total += value
    return time.process_time() - started


def measure_edges(
    name: str, label: str, selection: list[str], env: dict[str, str], pattern: str = EDGES
) -> bool | None:
    """Run one testbench item, print its figure line and keep its clock edges per wall- and
    CPU-second and the pytest wall time (``report``, as ``<label>, ...``), each beside the
    previous run's, with the verdict against :data:`TARGET`.

    ``pattern`` follows ``AHASD: `` and has :data:`EDGES`' four groups. Returns ``None``
    when the test failed or reported nothing, else whether the CPU figure meets the target
    (the wall figure depends on the machine's load much more).
    """
    ran = run_item(name, selection, r"AHASD: " + pattern, env)
    if ran is None:
        return None
    found, wall = ran
    print(f"{label} (Verilator): {found.group(1)}")
    edges_wall, edges_cpu = int(found.group(3)), int(found.group(4))
    report(name, f"{label}, clock edges/s (wall)", edges_wall, "", 0)
    report(name, f"{label}, clock edges per CPU-second", edges_cpu, "", 0)
    report(name, f"{label}, pytest wall", wall, "s")
    for kind, value in (("wall", edges_wall), ("CPU", edges_cpu)):
        verdict = "meets" if value >= TARGET else "MISSES"
        print(f"{label}: clock edges per {kind} second {verdict} the {TARGET:,} target")
    return edges_cpu >= TARGET
