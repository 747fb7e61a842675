"""AAU, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus),
bit for bit against the golden model (``tb_aau.py``).

Default parameters: 300 reduction vectors (plus their SOFTMAX passes) of lengths 1 to 4,096
with random valid/ready gaps; a dozen long vectors, up to ``max_length`` = 65,536 elements
(565,248 elements); and the throughput test. A second parameter set (smaller tables,
shorter vectors) checks that the RTL follows the parameters the way the golden model does.
``AHASD_VECTORS`` overrides the vector count.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import small_params
from harness.cocotb_run import run_block_cocotb, run_fails_on_planted_bug
from harness.planted import cases

from ahasd.hw.aau import AAU
from ahasd.params import AAUParams

HERE = Path(__file__).parent
VECTORS = os.environ.get("AHASD_VECTORS", "300")


@pytest.mark.cocotb
def test_aau_random_vectors_against_golden():
    run_block_cocotb(
        "aau",
        AAUParams(),
        test_module="tb_aau",
        test_dir=HERE,
        testcase="random_vectors_bit_exact",
        extra_env={"AHASD_VECTORS": VECTORS},
    )


@pytest.mark.cocotb
@pytest.mark.slow
@pytest.mark.long
def test_aau_long_vectors_against_golden():
    """65,536 and 32,768 elements and lengths one off the powers of two, back to back."""
    run_block_cocotb(
        "aau", AAUParams(), test_module="tb_aau", test_dir=HERE, testcase="long_vectors_bit_exact"
    )


@pytest.mark.cocotb
def test_aau_throughput():
    run_block_cocotb("aau", AAUParams(), test_module="tb_aau", test_dir=HERE, testcase="throughput")


@pytest.mark.cocotb
def test_aau_other_params_against_golden():
    """Short vectors (max_length 1000, so narrower accumulators), a 3-bit exp table and an
    8-bit log2 table."""
    run_block_cocotb(
        "aau",
        AAUParams(max_length=1000, exp_table_bits=3, ln_table_bits=8),
        test_module="tb_aau",
        test_dir=HERE,
        testcase="random_vectors_bit_exact",
        extra_env={"AHASD_VECTORS": "60"},
    )


@pytest.mark.cocotb
@pytest.mark.long
@pytest.mark.parametrize("bug", cases("aau.cocotb"))
def test_aau_testbench_fails_on_planted_bugs(bug):
    """Each planted bug the random tier must catch (harness/planted.py), at the mutation
    campaign's length (150 vectors of the small set, ``max_length = 8``), e.g. the pipeline
    advancing while ``o`` holds an element not taken. Long: each bug is a Verilator build of
    its own."""
    run_fails_on_planted_bug(
        bug,
        AAU,
        small_params.AAU,
        test_module="tb_aau",
        test_dir=HERE,
        testcase="random_vectors_bit_exact",
        extra_env={"AHASD_VECTORS": "150"},
    )
