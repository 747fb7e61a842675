"""The testbench library on a simulator (``tb_pins.py`` on a small registered design):
:class:`ahasd.hw.tb.pins.Pin` reads and writes what cocotb's ``handle.value`` does, and its
immediate writes are read back at once and registered at the next edge; a
:class:`ahasd.hw.tb.clocking.DomainLoop` runs each agent once per cycle, drive before sample;
an :class:`~ahasd.hw.tb.clocking.EdgeLoop` drives at every falling edge, samples where asked,
sleeps and stops, and hands its error to :func:`~ahasd.hw.tb.clocking.wait_until`; a
:class:`~ahasd.hw.tb.clocking.LoopTask` resumes its coroutine in the phase it waits for."""

from __future__ import annotations

from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from harness.cocotb_run import run_cocotb

HERE = Path(__file__).parent
#: Port widths that take each of Pin's paths: a bit, a narrow vector, 32 bits (a C long would
#: come back signed) and wider than 32 (bit strings).
WIDTHS = {"bit": 1, "narrow": 7, "word": 32, "wide": 40}


class Registers(wiring.Component):
    """``q_<name>`` is ``d_<name>`` one cycle later, for each width in :data:`WIDTHS`."""

    def __init__(self):
        members = {}
        for name, width in WIDTHS.items():
            members[f"d_{name}"] = In(width)
            members[f"q_{name}"] = Out(width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for name in WIDTHS:
            m.d.sync += getattr(self, f"q_{name}").eq(getattr(self, f"d_{name}"))
        return m


@pytest.mark.cocotb
def test_pins_and_domain_loop_on_a_simulator():
    run_cocotb(
        top="registers",
        component=Registers,
        tag="pins",
        test_module="tb_pins",
        test_dir=HERE,
        extra_env={"AHASD_PIN_WIDTHS": ",".join(f"{k}:{v}" for k, v in WIDTHS.items())},
    )
