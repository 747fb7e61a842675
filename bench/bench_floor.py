"""Benchmark: the cocotb scheduler's floor on this machine (a counter and nothing else).

A 32-bit counter under cocotb and Verilator (the build path the tests use), clocked for
200,000 cycles twice with nothing else to do: with one wake-up per edge (the bare counter
the issue's floor of 130,000 to 160,000 edges per second was measured with), and with the
two per edge (``FallingEdge``, ``ReadOnly``) that a testbench which drives and samples every
cycle waits for. What a testbench spends above these is its own Python: signal reads and
writes, stimulus, golden model and checks (docs/performance.md). The floor does not scale
with a machine's Python speed as a testbench does (on the 2026-12-02 machine it fell 1.4x
where the testbenches fell 3.4x), so it bounds a testbench's figure but does not normalise
it across machines.

Usage: ``.venv/bin/python bench/bench_floor.py``
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from figures import report
from testbench import ROOT, load

NAME = "bench_floor"
CYCLES = 200_000
FIGURE = re.compile(
    r"AHASD: (?P<what>[^:]+): (?P<cycles>\d+) cycles, .* = (?P<wall>\d+) clock edges/s, "
    r"(?P<cpu>\d+) per CPU-second"
)
LABELS = {
    "one wake-up per edge": "one wake-up per edge",
    "FallingEdge and ReadOnly": "two wake-ups per edge",
}


def counter():
    from amaranth import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Counter(wiring.Component):
        def __init__(self):
            super().__init__({"enable": In(1), "count": Out(32)})

        def elaborate(self, platform):
            m = Module()
            with m.If(self.enable):
                m.d.sync += self.count.eq(self.count + 1)
            return m

    return Counter()


def measure(cycles: int = CYCLES) -> dict[str, int] | None:
    """Edges per CPU-second of both loops (keys of ``LABELS``' values), ``None`` on failure."""
    from ahasd.hw.tb.build import build_simulation, run_simulation

    build_dir = ROOT / "build" / "bench" / "floor"
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.append(here)  # the runner hands sys.path to the simulator as PYTHONPATH
    runner = build_simulation(counter, "floor", build_dir, design_key="counter32")
    run = run_simulation(
        runner,
        top="floor",
        build_dir=build_dir,
        run_dir=build_dir / "run",
        test_module="tb_floor",
        extra_env={"AHASD_FLOOR_CYCLES": str(cycles)},
    )
    log = run.log()
    found = {m["what"]: m for m in FIGURE.finditer(log)}
    if not run.ok or set(found) != set(LABELS):
        print("\n".join(log.splitlines()[-40:]))
        print(f"{NAME}: the floor run failed or reported no figures ({run.log_file})")
        return None
    figures = {}
    for what, label in LABELS.items():
        match = found[what]
        print(f"cocotb floor, {label}: {match['cycles']} cycles, {match['wall']} edges/s wall")
        figures[label] = int(match["cpu"])
    return figures


def main() -> int:
    print(f"load average at the start: {load()}")
    os.chdir(ROOT)
    figures = measure()
    if figures is None:
        return 1
    for label, value in figures.items():
        report(NAME, f"cocotb floor, {label}, clock edges per CPU-second", value, "", 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
