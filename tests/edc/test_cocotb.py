"""EDC, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus).

Every decision and every counter is compared with the golden model on random traffic:
``tb_edc.random_events`` (100,000 events, ``o`` always ready; decision latency asserted) and
``tb_edc.random_events_with_stalls`` (10,000 events, ``o`` stalled 40% of the cycles), three
seeds on the default parameters and on a small non-default set with the other update mode
(``make test`` runs the first seed of each, ``make regress`` all three).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import small_params
from harness.cocotb_run import run_block_cocotb
from harness.seeds import choose_seed, seed_offsets

from ahasd.params import EDCParams

HERE = Path(__file__).parent

PARAMS = {
    "default": EDCParams(),
    # 6-bit event counters: they saturate within the run (their coverage bins say so).
    "small_current": EDCParams(
        counter_bits=3, llr_bits=2, history_len=4, stats_bits=6, update="current"
    ),
    # The formal tier's parameter set (the netlist the mutation campaign mutates).
    "formal_small": small_params.EDC,
}


@pytest.mark.cocotb
@pytest.mark.parametrize("run", seed_offsets(3))
@pytest.mark.parametrize("params", sorted(PARAMS))
def test_edc_random_against_golden(params, run):
    # Three independent seeds per parameter set (each printed; AHASD_SEED fixes them all).
    seed = choose_seed() + run
    run_block_cocotb("edc", PARAMS[params], test_module="tb_edc", test_dir=HERE, seed=seed)
