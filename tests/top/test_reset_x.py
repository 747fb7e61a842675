"""No X or Z after reset in the controller top's delivered Verilog, under Icarus (4-state)
and Verilator (uninitialised state randomised): ``tb_reset_x.py``.

Icarus is Debian's ``iverilog``, which ``make tools`` (a prerequisite of ``make test``)
installs when apt is there; without it the Icarus case skips, saying so. The Verilator case
shares the build of the top's other cocotb tests (same Verilog, same parameters).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.cocotb_run import run_block_cocotb

from ahasd.params import TopParams

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.cocotb

#: Verilator: every variable without an initial value starts random (seeded).
RANDOM_INIT = ("+verilator+rand+reset+2", "+verilator+seed+7")


@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_no_x_after_reset(sim):
    plusargs = RANDOM_INIT if sim == "verilator" else ()
    run_block_cocotb(
        "top",
        TopParams(),
        test_module="tb_reset_x",
        test_dir=HERE,
        sim=sim,
        plusargs=plusargs,
    )
