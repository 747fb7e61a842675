"""Controller top, cocotb tier: the integration test (tb_top.py) and the register walk
(tb_registers.py) on the generated Verilog; once more the integration test with its
port-only monitor cross-checked against the register file's access port inside the top.

Two seeds: ``AHASD_SEED`` (or a fresh random seed, printed) and that seed plus one (``make
test`` runs the first, ``make regress`` both). Each run
drives at least 20,000 events (``AHASD_EVENTS`` overrides) through the top and checks them
against the golden controller.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.cocotb_run import run_block_cocotb, run_fails_on_planted_bug
from harness.planted import cases
from harness.seeds import choose_seed, seed_offsets

from ahasd.hw.top import ControllerTop
from ahasd.params import TopParams

HERE = Path(__file__).parent


@pytest.mark.cocotb
@pytest.mark.parametrize("offset", seed_offsets(2))
def test_top_integration_against_golden(offset):
    run_block_cocotb(
        "top",
        TopParams(),
        test_module="tb_top",
        test_dir=HERE,
        seed=choose_seed() + offset,
    )


@pytest.mark.cocotb
def test_accesses_rebuilt_from_the_axi_port_match_the_register_files_port():
    """The integration test with the monitor's register accesses (rebuilt from the AXI
    handshakes) compared, access by access and edge by edge, with the register file's access
    port inside the top."""
    run_block_cocotb(
        "top",
        TopParams(),
        test_module="tb_top",
        test_dir=HERE,
        seed=choose_seed() + 2,
        extra_env={"AHASD_CROSS_CHECK_ACCESSES": "1"},
    )


@pytest.mark.cocotb
def test_register_walk_through_the_axi_port():
    run_block_cocotb("top", TopParams(), test_module="tb_registers", test_dir=HERE)


@pytest.mark.cocotb
@pytest.mark.long
@pytest.mark.parametrize("bug", cases("top.register_walk"))
def test_register_walk_fails_on_planted_bugs(bug):
    """Each planted bug of the register file and the AXI4-Lite port the walk must catch
    (harness/planted.py), e.g. a write that sets the 1 bits of the bytes its WSTRB does not
    enable. Long: each bug is a Verilator build of the top of its own (25 to 30 s)."""
    run_fails_on_planted_bug(
        bug, ControllerTop, TopParams(), test_module="tb_registers", test_dir=HERE
    )


@pytest.mark.cocotb
@pytest.mark.long
@pytest.mark.parametrize("bug", cases("top.integration"))
def test_integration_fails_on_planted_bugs(bug):
    """Each planted bug the integration test must catch against the golden controller, e.g.
    ``irq`` raised by an enable without its cause."""
    run_fails_on_planted_bug(bug, ControllerTop, TopParams(), test_module="tb_top", test_dir=HERE)
