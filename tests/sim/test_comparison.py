"""The main job's tables and reading (ahasd.sim.comparison) on rows whose figures are chosen,
so every ratio and sentence is checked by hand."""

from __future__ import annotations

import math

import pytest

from ahasd.sim.comparison import ladder_rows, other_class_rows, reading

SAME_CHIP = {
    # mode: (tokens/s for the two policies, mJ/token, accepted, drafted, pre-verifications)
    "npu-only": ((2.0, 8.0), 100.0, 40, 100, 0),
    "specpim-npu": ((4.0, 16.0), 50.0, 40, 100, 0),
    "pim-async": ((3.0, 12.0), 90.0, 20, 200, 0),
    "pim-async-aau": ((3.0, 12.0), 90.0, 20, 200, 0),
    "pim-async-aau-edc": ((3.3, 13.2), 60.0, 30, 100, 0),
    "ahasd": ((3.3, 13.2), 60.0, 30, 100, 0),
}


def _rows():
    rows = []
    for mode, (speeds, mj, accepted, drafted, pre) in SAME_CHIP.items():
        for policy, speed in zip(("a", "b"), speeds, strict=True):
            rows.append(
                {"mode": mode, "pair": "p", "policy": policy, "scenario": "platform=x",
                 "tokens": 100, "tokens_per_s": speed, "energy_per_token_mj": mj,
                 "acceptance_rate": 0.5, "accepted": accepted, "drafted": drafted,
                 "accepted_per_drafted": accepted / drafted, "preverify_passes": pre,
                 "seconds": 100 / speed, "busy_s": {"npu": 0.9 * 100 / speed}}
            )  # fmt: skip
    rows.append(
        {"mode": "gpu-only", "pair": "p", "policy": "a", "scenario": "platform=x", "tokens": 100,
         "tokens_per_s": 33.0, "energy_per_token_mj": 30.0, "gpu_precision": "INT8",
         "gpu_resident_target": 0.5}
    )  # fmt: skip
    return rows


def test_the_ladder_ratios_are_geometric_means_of_matched_runs():
    by_mode = {row["mode"]: row for row in ladder_rows(_rows())}
    # ahasd over npu-only: 3.3 / 2 and 13.2 / 8, both 1.65; over specpim-npu 0.825 each.
    assert by_mode["ahasd"]["speedup_vs_npu_only"] == pytest.approx(1.65)
    assert by_mode["ahasd"]["speedup_vs_specpim_npu"] == pytest.approx(0.825)
    assert by_mode["ahasd"]["speedup_vs_pim_async"] == pytest.approx(1.1)
    assert by_mode["pim-async"]["accepted_per_drafted"] == pytest.approx(0.1)
    assert by_mode["ahasd"]["tokens_per_s"] == pytest.approx((3.3 + 13.2) / 2)
    assert "gpu-only" not in by_mode  # another power class: not on the ladder


def test_the_other_class_table_pairs_ahasd_with_the_gpu_run_it_matches():
    (row,) = other_class_rows(_rows())
    # Only policy "a" has a GPU run: ahasd 3.3 / 33 = 0.1; energy 30 / 60 = 0.5.
    assert (row["mode"], row["gpu_precision"], row["offloaded"]) == ("gpu-only", "INT8",
                                                                     "over PCIe")  # fmt: skip
    assert row["ahasd_speedup"] == pytest.approx(0.1)
    assert row["ahasd_energy_efficiency"] == pytest.approx(0.5)


def test_the_reading_says_what_the_numbers_say():
    (text,) = reading(ladder_rows(_rows()))
    assert text.startswith("x: ahasd runs at 1.65x npu-only and 0.82x specpim-npu.")
    # The EDC rung: 1.1x pim-async's throughput; acceptance per draft 0.1 -> 0.3.
    assert "Above pim-async, the rung that pays most is pim-async-aau-edc (1.100x" in text
    assert "the EDC recovers it to 0.300, at 1.10x the throughput and 0.67x the energy" in text
    assert "TVC orders no pre-verification here" in text
    assert "Operator-level synchronous scheduling wins on this platform" in text
    assert "verifies on the NPU alone (busy 90% of the run)" in text
    assert not math.isnan(ladder_rows(_rows())[0]["speedup_vs_npu_only"])
