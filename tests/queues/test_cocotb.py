"""Queues, cocotb tier: the generated Verilog under Verilator (or Icarus with SIM=icarus)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import small_params
from harness.cocotb_run import run_block_cocotb, run_fails_on_planted_bug
from harness.planted import cases

from ahasd.hw.queues import AsyncQueues
from ahasd.params import QueueParams

HERE = Path(__file__).parent

# Clock periods in picoseconds, pim:npu:cpu.
RATIOS = {
    "1to1": "1000:1000:1000",
    "npu1000_pim800": "1250:1000:1500",
    "7to3": "3000:7000:2000",
    "3to7": "7000:3000:2000",
}


@pytest.mark.cocotb
@pytest.mark.parametrize("ratio", sorted(RATIOS))
def test_queues_random_traffic(ratio):
    run_block_cocotb(
        "queues",
        QueueParams(),
        test_module="tb_queues",
        test_dir=HERE,
        extra_env={"AHASD_CLOCKS": RATIOS[ratio]},
    )


@pytest.mark.cocotb
@pytest.mark.parametrize("ratio", ["npu1000_pim800", "7to3"])
def test_queues_small_depths(ratio):
    """The formal tier's parameter set (queues of 4, 2 and 4 entries, narrow fields, 2-bit
    epochs; the netlist the mutation campaign mutates): tiny queues fill, drain and wrap
    their pointers constantly."""
    run_block_cocotb(
        "queues",
        small_params.QUEUES,
        test_module="tb_queues",
        test_dir=HERE,
        extra_env={"AHASD_CLOCKS": RATIOS[ratio], "AHASD_ENTRIES": "5000"},
    )


@pytest.mark.cocotb
@pytest.mark.parametrize("bug", cases("queues.cocotb"))
def test_queues_testbench_fails_on_planted_bugs(bug):
    """Each planted bug the random tier must catch (harness/planted.py), e.g. the draft
    queue's stale test on bit 0 of the epoch only (an entry two epochs old passes as
    current): the tier's bursts of back-to-back bumps deliver such an entry and the
    scoreboard fails the run."""
    run_fails_on_planted_bug(
        bug,
        AsyncQueues,
        QueueParams(),
        test_module="tb_queues",
        test_dir=HERE,
        extra_env={"AHASD_CLOCKS": RATIOS["1to1"], "AHASD_ENTRIES": "3000"},
    )
