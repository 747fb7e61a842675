"""The controller brought up by firmware on a RISC-V core in simulation (``make firmware``,
``firmware/build.py``): the firmware, cross-compiled for RV32I on the C driver, runs on
PicoRV32 in ``firmware/soc.v`` under Icarus, with the controller's delivered Verilog on the
core's bus and its irq wired to the core. It programs the controller through the driver
alone (bring-up, the TVC tables, two mask changes that move every rank, an EDC error served
by the interrupt handler on the driver's interrupt service) and reads each step back; its
result is 0 only when every check held. Skips, saying which tool
is missing, without the RISC-V GCC or Icarus (``make tools`` installs both).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("firmware_build", ROOT / "firmware" / "build.py")
build = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = build  # dataclasses look their module up by name
spec.loader.exec_module(build)


def test_firmware_brings_the_controller_up_on_a_risc_v_core(tmp_path):
    missing = build.missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (make tools installs them)")
    run = build.run_soc(tmp_path, build.build_firmware(tmp_path))
    assert run.result == 0, f"the firmware's check {run.result} failed:\n{run.log}"
    # Bring-up, and the EDC error from the raw write to the handler's return, in CPU cycles
    # as the firmware counted them; the testbench's count from the rise of irq to the
    # answering write (the clear of IRQ_STATUS): one interrupt, one answer.
    bring_up, error_round_trip = run.console
    assert len(run.irq_to_answer) == 1, run.log
    (answer,) = run.irq_to_answer
    assert 0 < answer < error_round_trip
    print(
        f"AHASD: firmware bring-up {bring_up} CPU cycles; irq to its answering write "
        f"{answer} cycles; whole run {run.cycles} cycles"
    )


def test_tie_offs_cover_every_input_but_the_bus_clocks_and_resets():
    verilog = (
        "module ahasd_top(a, b);\n  input pim_clk;\n  input [3:0] s_axi__wstrb;\n"
        "  input [39:0] draft_w__payload;\n  input want_draft;\n  output irq;\nendmodule\n"
    )
    assert build.tieoff(verilog, "ahasd_top") == (
        "        .draft_w__payload('0),\n        .want_draft('0)\n"
    )
