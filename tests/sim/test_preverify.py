"""Pre-verification (ahasd mode) and the GTSU stand-in, on hardware with chosen costs."""

from __future__ import annotations

from harness.seeds import choose_seed as seed_for

from ahasd.params import GTSUParams
from ahasd.sim.controller import PriorityGTSUStandIn, Task
from ahasd.sim.cost import Cost
from ahasd.sim.modes import Hardware, simulate
from ahasd.sim.settings import RunSettings


def _hardware(draft_s: float, verify_s: float, preverify_s: float) -> Hardware:
    costs = {name: Cost(seconds=s, energy_j=0.0) for name, s in
             (("d", draft_s), ("v", verify_s), ("p", preverify_s))}  # fmt: skip
    return Hardware(
        draft_pass=lambda tokens, context: costs["d"],
        verify_pass=lambda tokens, context: costs["v"],
        preverify_pass=lambda tokens, context: costs["p"],
        draft_device="pim",
        verify_device="npu",
        devices=("pim", "npu", "cpu"),
        static_w={},
        pim_clock_hz=800e6,
        switch_cycles=48,
    )


def test_a_cheap_preverification_finds_rejections_early_and_conserves_tokens():
    # Drafting 10 ms/token, NPU pass 200 ms, pre-verification 5 ms: TVC has room to insert
    # pre-verifications, and at 50% acceptance they find rejections before the NPU does.
    seed = seed_for(21)
    settings = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="fixed", tokens=400, seed=seed,
        trace="iid:0.5", policy_params=(("k", 3),),
    )  # fmt: skip
    summary = simulate(settings, hardware=_hardware(0.010, 0.200, 0.005)).summary
    assert summary["preverify_passes"] > 0
    assert summary["preverify_rejections"] > 0
    assert summary["drafted"] == summary["accepted"] + summary["rejected"] + summary["squashed"]
    assert summary["tokens"] == 400 == summary["accepted"] + summary["target_tokens"]
    assert summary["controller"]["gtsu_switches"] >= 2 * summary["preverify_passes"] - 1
    assert not summary["controller"]["edc_error"]


def test_an_expensive_preverification_is_never_ordered_by_tvc_with_wide_tables():
    # Pre-verification longer than the NPU pass: TVC's C_left can never cover it.
    settings = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="fixed", tokens=200, seed=seed_for(22),
        trace="iid:0.5", tvc_ratio_bits=40, tvc_cycle_bits=40,
    )  # fmt: skip
    summary = simulate(settings, hardware=_hardware(0.010, 0.200, 0.400)).summary
    assert summary["preverify_passes"] == 0


def test_gtsu_stand_in_prefers_preverification_and_charges_each_role_change():
    gtsu = PriorityGTSUStandIn(GTSUParams(t_off=5, t_on=7))
    assert gtsu.next_task(preverify_pending=True, draft_wanted=True) == Task.PREVERIFY
    assert gtsu.next_task(preverify_pending=False, draft_wanted=True) == Task.DRAFT
    assert gtsu.next_task(preverify_pending=False, draft_wanted=False) == Task.IDLE
    assert gtsu.switch(Task.DRAFT) == 0  # DLM ranks are enabled at reset
    assert gtsu.switch(Task.PREVERIFY) == 12
    assert gtsu.switch(Task.IDLE) == 0
    assert gtsu.switch(Task.PREVERIFY) == 0
    assert gtsu.switch(Task.DRAFT) == 12
    assert gtsu.switches == 2
