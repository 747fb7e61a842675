"""TVC, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus),
compared answer by answer with the golden model (``tb_tvc.py``).

Three seeds per parameter set: ``AHASD_SEED`` (or a fresh random seed, printed) plus 1 and
plus 2 (``make test`` runs the first, ``make regress`` all three). 50,000 commands per seed
(``AHASD_COMMANDS`` overrides, e.g. for a quick run).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import small_params
from harness.cocotb_run import run_block_cocotb
from harness.seeds import choose_seed, seed_offsets

from ahasd.params import TVCParams

HERE = Path(__file__).parent
COMMANDS = os.environ.get("AHASD_COMMANDS", "50000")

PARAMS = {
    "default": TVCParams(),
    "f4_c24_nmax5": TVCParams(frac_bits=4, cycle_bits=24, n_max=5),
    # The formal tier's parameter set (the netlist the mutation campaign mutates): NCR and
    # C_npu saturate at 255, lengths at 15.
    "formal_small": small_params.TVC,
}


@pytest.mark.cocotb
@pytest.mark.parametrize("offset", seed_offsets(3))
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_tvc_random_commands_against_golden(name, offset):
    seed = choose_seed() + offset
    run_block_cocotb(
        "tvc",
        PARAMS[name],
        test_module="tb_tvc",
        test_dir=HERE,
        seed=seed,
        extra_env={"AHASD_COMMANDS": COMMANDS},
    )
