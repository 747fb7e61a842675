"""GTSU, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus),
compared cycle by cycle with the golden model (``tb_gtsu.py``).

Three seeds per parameter set: ``AHASD_SEED`` (or a fresh random seed, printed) plus 1 and
plus 2. 20,000 cycles per seed (``AHASD_CYCLES`` overrides).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness.cocotb_run import run_block_cocotb
from harness.seeds import choose_seed

from ahasd.params import GTSUParams

HERE = Path(__file__).parent
CYCLES = os.environ.get("AHASD_CYCLES", "20000")

PARAMS = {
    "default": GTSUParams(),
    "ranks8_off3_on5": GTSUParams(ranks=8, t_off=3, t_on=5),
}


@pytest.mark.cocotb
@pytest.mark.parametrize("offset", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_gtsu_random_requests_against_golden(name, offset):
    seed = choose_seed() + offset
    run_block_cocotb(
        "gtsu",
        PARAMS[name],
        test_module="tb_gtsu",
        test_dir=HERE,
        seed=seed,
        extra_env={"AHASD_CYCLES": CYCLES},
    )
