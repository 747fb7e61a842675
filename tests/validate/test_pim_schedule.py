"""The LPDDR5-PIM GEMV command schedule (sim/pim_schedule.py) against hand-computed cycles.

Every expected value is worked out here from Table 2's timing (tRP 32, tRCD 32, tRAS 64,
tRRD 8, tWR 24, tCCD_S 4, tCCD_L 6, tREFI 6240, tFAW 64, tRFC 560) and the organisation the
module states (8 units per rank, one per two banks, 32-byte column accesses, INT8), not read
back from the code under test.
"""

from __future__ import annotations

import itertools

import pytest

from ahasd.sim.pim_schedule import TABLE2_TIMING, gemv_schedule, schedule_gemv

T = TABLE2_TIMING


def test_one_row_per_unit_by_hand():
    # 8 rows (one per unit) x 64 INT8 columns: 2 column reads per unit.
    # Input: 2 broadcast writes at 0 and 6, reads may start tWR after the last: 6 + 24 = 30.
    # 8 ACTs from 30: 30, 38, 46, 54 (tRRD), the 5th at 30 + tFAW = 94, then 102, 110, 118.
    # Reads: 118 + tRCD = 150, then 150 + tCCD_L = 156 (same bank).
    # Results: 8 units x ceil(1 x 4 B / 32 B) = 8 reads from 156 + tCCD_S = 160, 4 cycles
    # each: the schedule ends at 160 + 32 = 192.
    s = schedule_gemv(8, 64, order="sequential")
    assert s.acts == [30, 38, 46, 54, 94, 102, 110, 118]
    assert s.weight_reads == [150, 156]
    assert (s.cycles, s.result_reads, s.input_writes, s.refreshes) == (192, 8, 2, 0)


@pytest.mark.parametrize("order", ["sequential", "interleaved"])
def test_schedule_obeys_every_timing_rule(order):
    # A GEMV long enough to cross several refreshes (tREFI 6240).
    s = schedule_gemv(512, 2048, order=order)
    acts = s.acts
    assert all(b - a >= T.tRRD for a, b in itertools.pairwise(acts))
    assert all(acts[i + 4] - acts[i] >= T.tFAW for i in range(len(acts) - 4))
    reads = s.weight_reads
    assert all(b - a >= T.tCCD_S for a, b in itertools.pairwise(reads))
    # 512 rows / 8 units = 64 rows of 2 KB (64 reads each) per unit
    assert s.reads == 64 * 64
    assert s.refreshes >= s.cycles // T.tREFI - 1


def test_long_gemv_sustains_the_tccd_l_rate_less_refresh():
    # Sequential order, steady state: a unit reads one 32-byte column per tCCD_L = 6 cycles
    # (the next row is activated in the other bank meanwhile: 8 ACTs take 3 x 8 + 64 + 3 x 8
    # = 112 cycles + tRCD, well inside the 64 x 6 = 384 cycles of a row), so a rank of 8
    # units does 8 x 32 / 6 = 42.7 MAC per cycle before refresh. A refresh every 6240 cycles
    # costs at least tRP + tRFC = 592 cycles: at most 42.7 x (1 - 592 / 6240) = 38.6; the
    # re-activation after it (112 + 32) and the input writes cost a little more.
    s = schedule_gemv(4096, 2048, order="sequential")
    rate = s.macs() / s.cycles
    assert 8 * 32 / 6 * (1 - 592 / 6240) * 0.95 < rate < 8 * 32 / 6 * (1 - 592 / 6240)


def test_best_order_never_beats_the_column_rate():
    # Upper bound: 8 units x 32 MAC per tCCD_S = 64 MAC per cycle (102.4e9 MAC/s at 1.6 GHz).
    s = gemv_schedule(1024, 4096)
    assert s.macs() / s.cycles < 64
    assert s.order in ("sequential", "interleaved")


def test_bad_arguments_are_refused_with_their_name():
    with pytest.raises(ValueError, match="order must be one of sequential, interleaved"):
        schedule_gemv(8, 64, order="random")
    with pytest.raises(ValueError, match="positive dimensions, not 0 x 64"):
        schedule_gemv(0, 64)
