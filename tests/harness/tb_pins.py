"""cocotb module of ``test_pins.py``: Pin against ``handle.value``; DomainLoop's order."""

from __future__ import annotations

import os

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, Timer

from ahasd.hw.tb.clocking import DomainLoop
from ahasd.hw.tb.pins import Pin
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
