"""The controller run by firmware on a RISC-V core, against drafting traffic (cocotb).

The SoC of ``firmware/soc.v`` (PicoRV32, RAM, the controller top on its bus, its irq wired to
the core) runs the firmware (``firmware/main.c`` on the C driver, cross-compiled for RV32I by
``firmware/build.py``) under cocotb (``tb_firmware.py``): the firmware brings the controller
up and plays the CPU's side of the protocol, the testbench drives the NPU and PIM sides from a
seeded drafting trace and checks every decision against the golden controller. Verilator by
default; Icarus too when it is installed. A planted fault in the firmware (its first
pre-verification order never written) must make the run fail.

``make test`` runs a short trace (``SHORT_POSITIONS``); the ``long`` one is marked ``long``.
Skips, saying which tool is missing, without the RISC-V GCC (``make tools`` installs it).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from harness.cocotb_run import BUILD, run_cocotb, simulator
from harness.seeds import choose_seed

from ahasd.hw.blocks import lookup
from ahasd.hw.verilog import module_name
from ahasd.params import TopParams

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
spec = importlib.util.spec_from_file_location("firmware_build", ROOT / "firmware" / "build.py")
build = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = build
spec.loader.exec_module(build)

#: Trace positions of the run in ``make test`` and of the long run.
SHORT_POSITIONS = 120
LONG_POSITIONS = 1000


def run_soc(*, positions: int, planted: bool = False, sim: str | None = None) -> Path:
    """Build the firmware and run the SoC's cocotb test on a trace of ``positions``."""
    missing = build.missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (make tools installs them)")
    params = TopParams()
    sim = simulator() if sim is None else sim
    out = BUILD / "firmware" / ("planted" if planted else "firmware")
    hex_file = build.build_firmware(out, batch_id_bits=params.queues.batch_id_bits, planted=planted)
    entry, top = lookup("top"), module_name("top")

    def soc(verilog: str) -> dict[str, str]:
        picorv32 = build.picorv32_verilog()
        return {"ahasd_soc.v": build.soc_verilog(verilog, top), "picorv32.v": picorv32}

    return run_cocotb(
        top=top,
        component=lambda: entry.build(params),
        tag=params.tag(),
        params=params,
        test_module="tb_firmware",
        test_dir=HERE,
        seed=choose_seed(),
        extra_env={"AHASD_TRACE_POSITIONS": str(positions)},
        domains=entry.domains,
        sim=sim,
        plusargs=(f"+firmware={hex_file}",),
        wrapper=soc,
        toplevel=build.SOC_TOP,
    )


SIMULATORS = [
    "verilator",
    pytest.param(
        "icarus",
        marks=pytest.mark.skipif(shutil.which("iverilog") is None, reason="no iverilog"),
    ),
]


@pytest.mark.cocotb
@pytest.mark.parametrize("sim", SIMULATORS)
def test_firmware_serves_the_protocol_against_a_drafting_trace(sim):
    run_soc(positions=SHORT_POSITIONS, sim=sim)


@pytest.mark.cocotb
@pytest.mark.long
def test_firmware_serves_a_long_drafting_trace():
    run_soc(positions=LONG_POSITIONS)


@pytest.mark.cocotb
def test_a_firmware_that_skips_an_order_fails():
    with pytest.raises(pytest.fail.Exception, match="no pre-verification order"):
        run_soc(positions=SHORT_POSITIONS, planted=True)


def test_soc_ports_are_the_controllers_but_the_cpus():
    verilog = (
        "module ahasd_top(a, b);\n  input pim_clk;\n  input s_axi__awvalid;\n  output irq;\n"
        "  input [12:0] preverify_w__payload;\n  input preverify_w__valid;\n"
        "  input [39:0] draft_w__payload;\n  output want_preverify;\nendmodule\n"
    )
    text = build.soc_verilog(verilog, "ahasd_top")
    assert "    input [39:0] draft_w__payload;\n    output want_preverify;\n" in text
    assert ", draft_w__payload, want_preverify);" in text
    assert ".preverify_w__payload(order_payload[12:0])" in text
    assert ".draft_w__payload(draft_w__payload)" in text
    assert "s_axi__awvalid;" not in text
    assert "input irq" not in text
