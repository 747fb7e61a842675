"""GTSU, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus),
compared cycle by cycle with the golden model (``tb_gtsu.py``).

Three seeds per parameter set: ``AHASD_SEED`` (or a fresh random seed, printed) plus 1 and
plus 2 (``make test`` runs the first, ``make regress`` all three). 20,000 cycles per seed
(``AHASD_CYCLES`` overrides).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import small_params
from harness.cocotb_run import run_block_cocotb, run_cocotb
from harness.seeds import choose_seed, seed_offsets

from ahasd.hw.gtsu import GTSU
from ahasd.hw.verilog import module_name
from ahasd.params import GTSUParams

HERE = Path(__file__).parent
CYCLES = os.environ.get("AHASD_CYCLES", "20000")

PARAMS = {
    "default": GTSUParams(),
    "ranks8_off3_on5": GTSUParams(ranks=8, t_off=3, t_on=5),
}


@pytest.mark.cocotb
@pytest.mark.parametrize("offset", seed_offsets(3))
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


@pytest.mark.cocotb
def test_gtsu_formal_parameter_set_against_golden():
    """The formal tier's parameter set (4 ranks, 2-bit waits) with a 3-bit switch counter:
    the counter saturates and stays saturated (a coverage bin says so), every switch report
    saturates above 3 cycles. The mutation campaign mutates exactly this netlist."""
    run_cocotb(
        top=module_name("gtsu"),
        component=lambda: GTSU(small_params.GTSU, counter_bits=small_params.GTSU_COUNTER_BITS),
        tag=f"{small_params.GTSU.tag()}-counter{small_params.GTSU_COUNTER_BITS}",
        params=small_params.GTSU,
        test_module="tb_gtsu",
        test_dir=HERE,
        extra_env={
            "AHASD_CYCLES": CYCLES,
            "AHASD_COUNTER_BITS": str(small_params.GTSU_COUNTER_BITS),
        },
    )
