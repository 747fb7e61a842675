"""Benchmark: cold and warm Verilator builds of the controller top (what ``ahasd cosim`` runs).

Cold: a fresh build directory and an empty ``ccache`` (a temporary ``CCACHE_DIR``), as on
a fresh clone or a CI machine: Amaranth's conversion, Verilator, and the C++ compilation
of the model and of Verilator's runtime library. Then the same design in a second fresh
directory with the cache the first build filled (what a second test building the same
design pays), and a no-op rebuild of the first directory. Each is reported as wall time and
CPU time (user + sys of this process and its children), with the load average at the
start, since the machine may be shared. Target: the cold build in 60 s or less on 2 cores.

Usage: ``.venv/bin/python bench/bench_build.py [--strict]`` (``--strict`` exits 1 when the
target is missed).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from figures import report

TARGET_S = 60.0
NAME = "bench_build"


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(build) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), _cpu_seconds()
    build()
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="ahasd-bench-build-") as tmp:
        # Before anything imports the build code: the cache this run fills and empties.
        os.environ["CCACHE_DIR"] = str(Path(tmp) / "ccache")
        from ahasd.params import EDCParams, GTSUParams, TopParams, TVCParams
        from ahasd.sim.cosim import build_top

        # The parameters `ahasd cosim` uses with its default settings.
        params = TopParams(edc=EDCParams(), tvc=TVCParams(), gtsu=GTSUParams())
        first, second = Path(tmp) / "first", Path(tmp) / "second"
        cold = _timed(lambda: build_top(params, first))
        shared = _timed(lambda: build_top(params, second))
        noop = _timed(lambda: build_top(params, first))
    report(NAME, "cold build of the top, wall", cold[0], "s")
    report(NAME, "cold build of the top, CPU", cold[1], "s")
    report(NAME, "same design, another directory (ccache filled), wall", shared[0], "s")
    report(NAME, "same design, another directory (ccache filled), CPU", shared[1], "s")
    report(NAME, "no-op rebuild, wall", noop[0], "s")
    ok = cold[0] <= TARGET_S
    print(f"cold build {'within' if ok else 'OVER'} the {TARGET_S:.0f} s target")
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
