"""The cocotb floor's testbench (``bench_floor.py``): a counter, clocked as fast as cocotb
and Verilator can go, first with one wake-up per edge (``RisingEdge``), then with the two a
driving and sampling testbench waits for (``FallingEdge`` to drive, ``ReadOnly`` to sample),
neither loop touching a signal inside it: the scheduler's cost alone.

Both loops check the counter against their own count afterwards, so a broken run cannot
report a figure. Reads ``AHASD_FLOOR_CYCLES``; logs one ``AHASD:`` line per loop.
"""

from __future__ import annotations

import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge


def _figure(dut, what: str, cycles: int, wall: float, cpu: float) -> None:
    dut._log.info(
        f"AHASD: {what}: {cycles} cycles, {wall:.2f} s wall, {cpu:.2f} s CPU = "
        f"{cycles / wall:.0f} clock edges/s, {cycles / cpu:.0f} per CPU-second"
    )


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def floor(dut):
    cycles = int(os.environ.get("AHASD_FLOOR_CYCLES", "200000"))
    Clock(dut.clk, 1000, unit="ps").start()
    dut.enable.value = 0
    dut.rst.value = 1
    rising, falling, read_only = RisingEdge(dut.clk), FallingEdge(dut.clk), ReadOnly()
    for _ in range(3):
        await rising
    dut.rst.value = 0
    dut.enable.value = 1
    await falling
    start = int(dut.count.value)

    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(cycles):
        await rising
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await read_only
    counted = (int(dut.count.value) - start) % (1 << len(dut.count))
    assert counted == cycles, f"the counter moved {counted} times in {cycles} rising edges"
    _figure(dut, "one wake-up per edge", cycles, wall, cpu)

    await falling
    start = int(dut.count.value)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(cycles):
        await falling
        await read_only
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    counted = (int(dut.count.value) - start) % (1 << len(dut.count))
    assert counted == cycles, f"the counter moved {counted} times in {cycles} falling edges"
    _figure(dut, "FallingEdge and ReadOnly", cycles, wall, cpu)
