"""The harness itself: a hung Amaranth testbench fails, a finished one ends the run; a
formal run that outlives its time limit is stopped with every process it started."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal
from harness.amaranth_sim import simulate
from harness.processes import run_in_own_group


def _counter():
    m = Module()
    count = Signal(8)
    m.d.sync += count.eq(count + 1)
    return m, count


def test_a_testbench_that_never_returns_fails_at_the_deadline():
    dut, count = _counter()

    async def hung(ctx):
        while ctx.get(count) != 300:  # an 8-bit counter never reaches 300
            await ctx.tick()

    with pytest.raises(AssertionError, match="still running after"):
        simulate(dut, hung, deadline=1e-6)


def test_the_run_ends_when_the_testbenches_return():
    dut, count = _counter()
    seen = []

    async def short(ctx):
        await ctx.tick().repeat(5)
        seen.append(ctx.get(count))

    simulate(dut, short, deadline=1.0)  # one simulated second would take minutes to run
    assert seen == [5]


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def test_a_timed_out_run_is_stopped_with_its_children():
    # Like sby: a parent that starts a long-running child (a solver) and waits for it.
    parent = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    started = time.monotonic()
    returncode, output = run_in_own_group(
        [sys.executable, "-c", parent], cwd=Path.cwd(), env={}, timeout_s=3
    )
    assert returncode is None
    assert time.monotonic() - started < 60
    child = int(output.split()[0])
    deadline = time.monotonic() + 5
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child), f"the child {child} outlived the timeout"


def test_a_finished_run_returns_its_status_and_output():
    returncode, output = run_in_own_group(
        [sys.executable, "-c", "import sys; print('said'); sys.exit(3)"],
        cwd=Path.cwd(),
        env={},
        timeout_s=60,
    )
    assert (returncode, output.strip()) == (3, "said")
