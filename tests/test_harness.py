"""The Amaranth-tier harness itself: a hung testbench fails, a finished one ends the run."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from harness.amaranth_sim import simulate


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
