"""cocotb module of ``test_pins.py``: Pin against ``handle.value``, immediate writes; the
order in which DomainLoop, EdgeLoop and LoopTask call their work."""

from __future__ import annotations

import os

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from ahasd.hw.tb.clocking import DomainLoop, EdgeLoop, LoopTask, wait_until
from ahasd.hw.tb.pins import Pin, write_immediately, writes_scheduled
from harness.tb import rng_from_env

WIDTHS = {
    name: int(width)
    for name, width in (item.split(":") for item in os.environ["AHASD_PIN_WIDTHS"].split(","))
}


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def pin_reads_and_writes_match_handle_value(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.rst.value = 0
    rng = rng_from_env("pins")
    inputs = {name: Pin(getattr(dut, f"d_{name}")) for name in WIDTHS}
    outputs = {name: Pin(getattr(dut, f"q_{name}")) for name in WIDTHS}
    seen: dict[str, dict] = {name: {} for name in WIDTHS}  # fingerprint -> value, per output
    for step in range(200):
        await FallingEdge(dut.clk)
        wrote = {}
        for name, width in WIDTHS.items():
            # The extremes first (all ones has the sign bit of a 32-bit long set), then random.
            value = [0, (1 << width) - 1][step] if step < 2 else rng.randrange(1 << width)
            inputs[name].write(value)
            wrote[name] = value
        await ReadOnly()
        for name in WIDTHS:
            assert inputs[name].read() == int(inputs[name].handle.value) == wrote[name]
        await FallingEdge(dut.clk)
        for name in WIDTHS:
            assert outputs[name].read() == int(outputs[name].handle.value) == wrote[name], name
            # Equal fingerprints, equal values (the co-simulation's warp compares them).
            fingerprint = outputs[name].fingerprint()
            if fingerprint in seen[name]:
                assert seen[name][fingerprint] == wrote[name], name
            seen[name][fingerprint] = wrote[name]
    for name, width in WIDTHS.items():
        # 200 draws: ~100 distinct values of 7 bits; fewer than 50 would be a broken draw.
        assert len(seen[name]) >= min(1 << width, 50), f"{name}: too few distinct values"
    for name, width in WIDTHS.items():
        for bad in (-1, 1 << width):
            with pytest.raises(ValueError, match=f"does not fit the {width}-bit"):
                inputs[name].write(bad)


class Recorder:
    """Writes the cycle number in drive, reads it back registered in sample."""

    def __init__(self, dut, loop: DomainLoop, log: list):
        self.loop, self.log = loop, log
        self.d, self.q = Pin(dut.d_narrow), Pin(dut.q_narrow)

    def drive(self) -> None:
        self.log.append(("drive", self.loop.cycle))
        self.d.write(self.loop.cycle % 128)

    def sample(self) -> None:
        # q shows the previous cycle's d: the drive of this cycle has not been registered yet.
        self.log.append(("sample", self.loop.cycle, self.q.read()))


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def domain_loop_drives_then_samples_every_cycle(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.rst.value = 0
    loop = DomainLoop(dut.clk)
    first, second = [], []
    loop.add(Recorder(dut, loop, first))
    loop.start()
    await Timer(45, unit="ns")  # falling edges at 5, 15, 25, 35 ns: four cycles
    loop.add(Recorder(dut, loop, second))  # runs from the next cycle on
    await Timer(20, unit="ns")  # two more cycles
    expected = []
    for cycle in range(1, 7):
        expected += [("drive", cycle), ("sample", cycle, (cycle - 1) % 128)]
    assert first[2:] == expected[2:], first  # cycle 1 samples q before any drive reached it
    assert second == expected[-4:], second


PERIOD_NS = 10  # the clock of the tests below


class Cycles:
    """Cycles counted from a falling edge (the tests of a module share the simulation time)."""

    def __init__(self) -> None:
        self.base = get_sim_time("ns")

    def now(self) -> int:
        """0 at the falling edge the count started from, 1 at the next one, ..."""
        return round((get_sim_time("ns") - self.base) / PERIOD_NS)


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def edge_loop_drives_samples_sleeps_and_stops(dut):
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    dut.rst.value = 0
    d, q = Pin(dut.d_narrow), Pin(dut.q_narrow)
    calls = []

    def drive() -> bool:
        cycle = cycles.now()
        calls.append(("drive", cycle))
        d.write(cycle % 128)
        if cycle == 8:
            loop.sleep(5)  # the next drive in cycle 13
        if cycle == 16:
            loop.stop()
        return cycle % 2 == 0

    def sample() -> None:
        # In ReadOnly of the drive's time step: q still shows the previous drive's d.
        calls.append(("sample", cycles.now(), q.read()))

    loop = EdgeLoop(dut.clk, PERIOD_NS * 1000, drive, sample)
    await FallingEdge(dut.clk)
    cycles = Cycles()
    loop.start()
    await wait_until(lambda: not loop.running, [loop], Timer(PERIOD_NS, unit="ns"))
    await Timer(5 * PERIOD_NS, unit="ns")  # stopped: no call after cycle 16
    expected = []
    for cycle in [*range(1, 9), *range(13, 17)]:
        expected.append(("drive", cycle))
        if cycle % 2 == 0 and cycle != 16:  # the drive of 16 stopped the loop: no sample
            expected.append(("sample", cycle, cycle - 1))
    assert calls == expected, f"{calls} != {expected}"
    loop.check()  # no error


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def edge_loop_error_is_raised_where_it_is_waited_for(dut):
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    calls = []

    def drive() -> bool:
        calls.append(get_sim_time("ns"))
        if len(calls) == 4:
            raise ValueError("planted in the fourth drive")
        return False

    loop = EdgeLoop(dut.clk, PERIOD_NS * 1000, drive).start()
    with pytest.raises(ValueError, match="planted in the fourth drive"):
        await wait_until(lambda: False, [loop], Timer(3 * PERIOD_NS, unit="ns"))
    assert not loop.running
    await Timer(5 * PERIOD_NS, unit="ns")
    assert len(calls) == 4, calls  # the loop stopped at its error


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def loop_task_resumes_in_the_phase_it_waits_for(dut):
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    task, seen = LoopTask(), []

    async def body():
        seen.append(("start", cycles.now()))
        await task.clock.next(3)
        seen.append(("drive", cycles.now()))
        await task.clock.sample()
        seen.append(("sample", cycles.now()))
        await task.clock.next()
        seen.append(("drive", cycles.now()))
        held = await task.clock.until(lambda: cycles.now() == 8, 10)
        seen.append(("until", cycles.now(), held, task.clock.cycle))
        held = await task.clock.until(lambda: False, 2)
        seen.append(("until", cycles.now(), held, task.clock.cycle))
        return "done"

    async def foreign():
        await RisingEdge(dut.clk)  # not the task's clock: refused

    def drive() -> bool:
        seen.append(("loop drives", cycles.now()))
        task.drive()
        return True

    loop = EdgeLoop(dut.clk, PERIOD_NS * 1000, drive, task.sample)
    await FallingEdge(dut.clk)
    cycles = Cycles()
    task.start(body())
    loop.start()
    await wait_until(lambda: task.done, [loop], Timer(PERIOD_NS, unit="ns"))
    loop.stop()
    assert task.result == "done"
    steps = [entry for entry in seen if entry[0] != "loop drives"]
    assert steps == [
        ("start", 1),
        ("drive", 4),
        ("sample", 4),
        ("drive", 5),
        ("until", 8, True, 7),  # the clock counts the cycles from the start: 3 + 1 + 3
        ("until", 10, False, 9),  # the limit: two cycles on, the condition never held
    ], seen
    task.start(foreign())
    loop = EdgeLoop(dut.clk, PERIOD_NS * 1000, drive, task.sample).start()
    with pytest.raises(TypeError, match="only its clock's next"):
        await wait_until(lambda: task.done, [loop], Timer(PERIOD_NS, unit="ns"))


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def immediate_writes_are_read_back_at_once_and_registered_at_the_next_edge(dut):
    Clock(dut.clk, PERIOD_NS, unit="ns").start(start_high=False)
    dut.rst.value = 0
    d, q = Pin(dut.d_narrow), Pin(dut.q_narrow)
    if writes_scheduled():
        # cocotb schedules the writes itself (Icarus): write_immediately cannot apply.
        await FallingEdge(dut.clk)
        d.write(9)
        await ReadOnly()
        assert d.read() == 9
        return
    write_immediately()
    try:
        for value in (5, 77, 5, 126):
            await FallingEdge(dut.clk)
            d.write(value)
            assert d.read() == value  # an inertial write would show after the evaluation
            await RisingEdge(dut.clk)
            await ReadOnly()
            assert q.read() == value
    finally:
        write_immediately(False)
    await FallingEdge(dut.clk)
    d.write(3)
    assert d.read() == 126  # inertial again: applied after this time step's evaluation
    await ReadOnly()
    assert d.read() == 3
