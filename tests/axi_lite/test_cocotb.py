"""AXI4-Lite subordinate, cocotb tier: the testbench's AXI4-Lite manager, random pauses on
every channel, four concurrent workers (``tb_axi_lite.py``), on the generated Verilog of the
bridge in front of a 16-word register file (``target.py``). Two seeds: ``AHASD_SEED`` (or a
fresh one, printed) and that plus one (``make test`` runs the first, ``make regress``
both)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from axi_lite.target import AxiTarget
from harness.cocotb_run import run_cocotb
from harness.seeds import choose_seed, seed_offsets

HERE = Path(__file__).parent


@pytest.mark.cocotb
@pytest.mark.parametrize("offset", seed_offsets(2))
def test_random_interleaved_traffic(offset):
    run_cocotb(
        top="axi_target",
        component=AxiTarget,
        tag="default",
        test_module="tb_axi_lite",
        test_dir=HERE,
        seed=choose_seed() + offset,
        extra_env={"AHASD_TRANSACTIONS": os.environ.get("AHASD_TRANSACTIONS", "4000")},
    )
