"""The ladder's mechanisms as the paper describes them (docs/system-model.md): a pre-verified
rejection keeps what is valid and is the EDC's early rollback; PIM compute on shared ranks
stalls the NPU's stream; without the AAU the NPU serves the PIM's nonlinear operators.

The scripted runs inject a hardware with fixed costs and a controller whose EDC and TVC
answers are given; every expected figure is derived by hand in the comments from those costs
and the trace's accept flags.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from harness.seeds import choose_seed as seed_for

from ahasd.errors import UserError
from ahasd.params import TVCParams
from ahasd.sim.controller import GoldenController
from ahasd.sim.cosim import RecordingController
from ahasd.sim.cost import Cost
from ahasd.sim.library.loading import load_library
from ahasd.sim.modes import (
    Hardware,
    build_hardware,
    check_tvc_widths,
    prepare_run,
    simulate,
    tvc_presets,
)
from ahasd.sim.modes.contention import Interference, finish_time
from ahasd.sim.modes.tvc_widths import TVCWidthGuard
from ahasd.sim.settings import RunSettings
from ahasd.sim.traces.format import Trace, TraceHeader

TEST_SPECS = Path(__file__).parent / "specs"

DRAFT_S, VERIFY_S, PREVERIFY_S = 0.010, 0.100, 0.020
ENTROPY = 4096  # 1.0 nat per position in the EDC's UQ4.12


def _hardware(memory_bound: float = 1.0, cpu_event_s: float = 0.0) -> Hardware:
    """Draft 10 ms per token, NPU pass 100 ms (``memory_bound`` of it memory-bound),
    pre-verification 20 ms, whatever their sizes; the CPU's interrupt service
    ``cpu_event_s``."""
    return Hardware(
        draft_pass=lambda tokens, context: Cost(DRAFT_S, 0.0),
        verify_pass=lambda tokens, context: Cost(
            VERIFY_S, 0.0, memory_bound_s=VERIFY_S * memory_bound
        ),
        preverify_pass=lambda tokens, context: Cost(PREVERIFY_S, 0.0),
        draft_device="pim",
        verify_device="npu",
        devices=("pim", "npu", "cpu"),
        static_w={},
        pim_clock_hz=800e6,
        switch_cycles=48,
        cpu_event_s=cpu_event_s,
    )


def _trace(flags) -> Trace:
    n = len(flags)
    header = TraceHeader("scripted", "d", "t", "p", 1.0, "synthetic")
    return Trace(
        header,
        np.full(n, 1.0),
        np.full(n, 0.5),
        np.full(n, 0.5),
        np.array(flags, dtype=np.int8),
        np.full(n, math.nan),
    )


class Scripted(GoldenController):
    """The golden controller with the EDC's decisions and the TVC's answers given in turn
    (after the list: continue, and no pre-verification)."""

    def __init__(self, decisions, answers) -> None:
        super().__init__()
        self.decisions, self.answers = list(decisions), list(answers)

    def edc_draft(self, entropy_sum, length):
        super().edc_draft(entropy_sum, length)
        return self.decisions.pop(0) if self.decisions else True

    def tvc_ask(self, available, cycle):
        super().tvc_ask(available, cycle)
        return min(available, self.answers.pop(0)) if self.answers else 0


def _scripted(flags, decisions, answers, *, hardware=None, **settings):
    """An ``ahasd`` run of 16 tokens, 3-token batches, on the scripted hardware."""
    base = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="fixed", tokens=16,
        policy_params=(("k", 3),), record_timeline=True,
    )  # fmt: skip
    recorder = RecordingController(Scripted(decisions, answers))
    result = simulate(
        replace(base, **settings),
        hardware=hardware or _hardware(),
        trace=_trace(flags),
        controller=recorder,
    )
    return result, recorder.log


def _drafted_positions(result) -> list[int]:
    return sorted(args["pos"] for dev, name, _, _, args in result.metrics.timeline
                  if (dev, name) == ("pim", "draft"))  # fmt: skip


def _check_conservation(summary: dict) -> None:
    assert summary["drafted"] == summary["accepted"] + summary["rejected"] + summary["squashed"]
    assert summary["tokens"] == summary["accepted"] + summary["target_tokens"]


def _edc_verifies(log) -> list[list]:
    return [entry[2] for entry in log if entry[1] == "edc_verify"]


# -- item 1: a pre-verified rejection keeps what is valid ---------------------------------


def test_a_preverified_rejection_keeps_the_drafts_after_the_correction():
    # Batches of 3 at 10 ms a token. 0-30 ms batch 1 (0-2), NPU pass 1 from 30 ms. 30-60 ms
    # batch 2 (3-5), EDC suppresses, TVC orders a pre-verification of 3-5 (60-80 ms): 4 is
    # rejected, 5 (drafted on it) is squashed, the PIM drafts on from the correction at 4:
    # batch 3 (5-7), batch 4 (8-10). Pass 1 (stalled 20 ms by the pre-verification, ends at
    # 150 ms) accepts batch 1; pass 2 takes batch 2 with its correction, 3 and 4: the NPU
    # confirms the rejection at 4 and accepts 5-10, nothing is squashed. Then 11-15.
    flags = [1, 1, 1, 1, 0, *[1] * 11]
    result, _ = _scripted(flags, [True, False, True, False], [3, 0])
    summary = result.summary
    _check_conservation(summary)
    assert summary["preverify_useful"] == 1
    # Only 5 was drafted twice (before and after the correction); none was squashed valid.
    positions = _drafted_positions(result)
    assert positions == sorted([*range(16), 5])
    assert summary["squashed"] == summary["squashed_by_rollback"] == 1
    assert (summary["accepted"], summary["rejected"], summary["target_tokens"]) == (15, 1, 1)
    assert summary["early_rejections"] == 0


def test_a_rejection_in_an_older_batch_voids_the_drafts_after_the_correction():
    # Pass 1 (batch 1, 0-2) finds 1 rejected, while the pre-verification of batch 2 (3-5,
    # 60-80 ms) found 5 rejected and the PIM drafted 6-8 and 9-11 on that correction. All of
    # it was built on the rejected 1: pass 1 (ends at 150 ms) voids it, and batch 2's early
    # rollback (3-4 accepted) is never reported to the EDC: it rolled back on batch 1.
    flags = [1, 0, 1, 1, 1, 0, *[1] * 10]
    result, log = _scripted(flags, [True, False, True, False], [3, 0])
    summary = result.summary
    _check_conservation(summary)
    assert summary["preverify_useful"] == 1
    verifies = _edc_verifies(log)
    assert verifies[0] == [False, ENTROPY, 1]  # batch 1: 0 accepted, 1 rejected
    assert [False, 2 * ENTROPY, 2] not in verifies  # batch 2's prefix 3-4 never reported
    # 6-11, drafted after the correction at 5, were voided and drafted again.
    positions = _drafted_positions(result)
    assert all(positions.count(pos) >= 2 for pos in range(6, 12))


def test_the_bonus_check_takes_a_known_rejection_as_a_confirmation():
    # Pre-verification of batch 2 (3-5) finds 3 rejected (4 and 5 squashed); the PIM drafts
    # 4-6 and 7-9 on the correction. Pass 1 accepts 0-2 in full: the target's token at 3 is
    # the correction already found, not a fresh rejection, so the drafts from 4 stay.
    flags = [1, 1, 1, 0, *[1] * 12]
    result, _ = _scripted(flags, [True, False, True, False], [3, 0])
    summary = result.summary
    _check_conservation(summary)
    assert summary["early_rejections"] == 0
    assert summary["squashed"] == summary["squashed_by_rollback"] == 2
    assert _drafted_positions(result) == sorted([*range(16), 4, 5])


# -- item 4: the EDC hears of early rollbacks ---------------------------------------------


def test_the_edc_hears_a_preverified_rejection_once_and_as_soon_as_it_is_the_oldest():
    # Batch 2's rejection (found at 80 ms) waits for batch 1's VERIFY (pass 1 ends at 150
    # ms) and follows it at once. Then batch 5 (11-13, drafted 150-180 ms) is the EDC's
    # oldest outstanding batch (3 and 4 were dropped by the EDC's rollback): its rejection,
    # found at 200 ms, is reported then, before pass 2 ends (270 ms). The NPU's later
    # verdicts on batches 2 and 5 are not given to the EDC.
    flags = [1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1]
    result, log = _scripted(flags, [True, False, True, False, False], [3, 0, 3])
    summary = result.summary
    _check_conservation(summary)
    assert summary["preverify_useful"] == 2
    assert _edc_verifies(log) == [
        [True, 3 * ENTROPY, 3],  # batch 1 (pass 1)
        [False, ENTROPY, 1],  # batch 2: 3 accepted, 4 rejected (the pre-verification)
        [False, ENTROPY, 1],  # batch 5: 11 accepted, 12 rejected (the pre-verification)
        [True, 3 * ENTROPY, 3],  # batch 6 (13-15, pass 3)
    ]
    events = [entry[1] for entry in log]
    second_report = [i for i, e in enumerate(events) if e == "edc_verify"][2]
    done = [i for i, e in enumerate(events) if e == "tvc_npu_done"]
    assert done[0] < second_report < done[1]  # reported during pass 2, not at its end
    assert not result.summary["controller"]["edc_error"]
    assert (summary["accepted"], summary["rejected"], summary["squashed"]) == (14, 2, 2)


# -- item 3: shared LPDDR5 ranks ----------------------------------------------------------


def test_a_preverification_stalls_a_memory_bound_pass_by_its_overlap():
    # 100 ms memory-bound pass from 0, a 20 ms pre-verification from 30 ms: ends at 120 ms.
    pim = Interference(0.030, 0.050, "pim-compute", memory_share=1.0)
    end, lost, _ = finish_time(0.0, 0.100, 1.0, [pim])
    assert end == pytest.approx(0.120)
    assert lost == pytest.approx({"pim-compute": 0.020, "pim-nonlinear": 0.0})
    # Half memory-bound: the compute-bound half goes on from the scratchpad: 110 ms.
    assert finish_time(0.0, 0.100, 0.5, [pim])[0] == pytest.approx(0.110)
    # A pre-verification over the pass's end: 90 ms done at 90, stalled to 130, 10 more.
    late = Interference(0.090, 0.130, "pim-compute", memory_share=1.0)
    assert finish_time(0.0, 0.100, 1.0, [late])[0] == pytest.approx(0.140)
    # Work that ended before the pass started does not touch it.
    assert finish_time(0.2, 0.100, 1.0, [pim])[0] == pytest.approx(0.300)


def test_nonlinear_requests_delay_the_pass_by_their_bus_and_vector_time():
    # A 10 ms draft token whose requests take the bus 10% and the vector unit 5% of it:
    # a memory-bound pass loses 1.5 ms; with separate memories only the vector time, 0.5 ms.
    shared = Interference(0.0, 0.010, "pim-nonlinear", 0.10, 0.05, 0.15)
    end, lost, served = finish_time(0.0, 0.100, 1.0, [shared])
    assert end == pytest.approx(0.1015)
    assert lost["pim-nonlinear"] == pytest.approx(0.0015)
    assert served == pytest.approx(0.0015)
    separate = replace(shared, memory_share=0.0)
    assert finish_time(0.0, 0.100, 1.0, [separate])[0] == pytest.approx(0.1005)


def test_shared_memory_stalls_the_npu_in_the_engine_and_separate_memory_does_not():
    # The first scenario: pass 1 from 30 ms, the pre-verification 60-80 ms (plus the GTSU's
    # 60 ns), so pass 1 ends at 150 ms shared and 130 ms separate.
    flags = [1, 1, 1, 1, 0, *[1] * 11]
    for sharing, end in (("shared", 0.150), ("separate", 0.130)):
        result, log = _scripted(flags, [True, False, True, False], [3, 0], memory_sharing=sharing)
        first_done = next(entry[0] for entry in log if entry[1] == "tvc_npu_done")
        assert first_done / 800e6 == pytest.approx(end, abs=1e-6), sharing
        blocked = result.summary["npu_blocked_by_pim_s"]
        assert blocked == pytest.approx(0.020 if sharing == "shared" else 0.0, abs=1e-9)


# -- item 2: without the AAU the NPU serves the PIM's nonlinear operators ------------------


def _ladder(mode: str, **extra) -> dict:
    settings = RunSettings(
        mode=mode, pair="opt-1.3b-6.7b", policy="adaedl", tokens=256, seed=3,
        tvc_ratio_bits=40, tvc_cycle_bits=40, **extra,
    )  # fmt: skip
    return simulate(settings).summary


def test_without_the_aau_the_npu_serves_the_pims_nonlinear_operators():
    without, with_aau = _ladder("pim-async"), _ladder("pim-async-aau")
    assert without["npu_serving_pim_s"] > 0
    assert with_aau["npu_serving_pim_s"] == 0
    assert with_aau["busy_s"]["cpu"] == 0
    # The host-CPU option: the CPU computes, the NPU serves nothing.
    host = _ladder("pim-async", nonlinear_without_aau="host")
    assert host["npu_serving_pim_s"] == 0
    assert host["busy_s"]["cpu"] > 0


@pytest.mark.parametrize("mode", ["pim-async", "pim-async-aau-edc", "ahasd"])
def test_the_npus_time_splits_into_verifying_blocked_serving_and_waiting(mode):
    summary = _ladder(mode)
    parts = ("npu_verify_s", "npu_blocked_by_pim_s", "npu_serving_pim_s")
    parts += ("npu_waiting_for_drafts_s",)
    assert sum(summary[k] for k in parts) == pytest.approx(summary["seconds"], rel=1e-9)
    assert all(summary[k] >= 0 for k in parts)


# -- item 5: TVC widths that fit the platform ----------------------------------------------


PAPER_PAIRS = ("opt-1.3b-6.7b", "llama2-7b-13b", "palm-8b-30b")


@pytest.mark.parametrize("pair", PAPER_PAIRS)
def test_32_bit_tvc_tables_are_refused_on_the_papers_platform_and_40_bits_accepted(pair):
    # Table 2 read for the whole memory, 8 TLM ranks: a target token there costs 168-811 ms
    # = 1.3e8-6.5e8 PIM cycles, so the PVCT preset (a 6-token pass for one pre-verified
    # token, times 2**8) needs 38-40 bits.
    narrow = RunSettings(mode="ahasd", pair=pair, policy="svip", tokens=64,
                         tvc_ratio_bits=32, tvc_cycle_bits=32,
                         platform="table2-whole-memory", rank_split="fixed")  # fmt: skip
    with pytest.raises(UserError, match=r"^--tvc-ratio-bits 32: .*PVCT needs (38|39|40) bits"):
        simulate(narrow)
    wide = replace(narrow, tvc_ratio_bits=40, tvc_cycle_bits=40)
    assert simulate(wide).summary["tokens"] == 64


def test_the_tvc_modes_alone_check_the_widths():
    narrow = {"tvc_ratio_bits": 32, "tvc_cycle_bits": 32}
    for mode in ("pim-async", "pim-async-aau", "pim-async-aau-edc"):
        settings = RunSettings(mode=mode, pair="opt-1.3b-6.7b", policy="svip", tokens=32, **narrow)
        assert simulate(settings).summary["tokens"] == 32


def test_the_bounds_follow_the_cost_model():
    # OPT pair on Table 2 with the PIM's figures read for the whole memory (the slow PIM):
    # the PVCT preset is the PIM's 6-token target pass at the prompt for one pre-verified
    # token; it is above any C_npu the run can form, so TVC never orders a pre-verification
    # and PVCT keeps its preset.
    settings = RunSettings(mode="ahasd", pair="opt-1.3b-6.7b", policy="svip", tokens=1024,
                           tvc_ratio_bits=40, tvc_cycle_bits=40,
                           platform="table2-whole-memory")  # fmt: skip
    prepared = prepare_run(settings, load_library())
    hardware = build_hardware(prepared)
    presets = tvc_presets(hardware, 128)
    bounds = check_tvc_widths(settings, hardware, presets, prepared.controller[1])
    clock = 800e6
    preverify = hardware.preverify_pass(6, 128).seconds * clock * 256
    assert bounds.ratios["PVCT"] == presets["pvct"] == pytest.approx(preverify, rel=1e-9)
    assert not bounds.preverify_possible
    assert bounds.cycles["PVCT cycles"] == 0
    # NCR: the largest pass (64 drafts + 1) at the largest context, about 182 ms.
    assert bounds.cycles["NCR"] == round(hardware.verify_pass(65, 128 + 1023).seconds * clock)
    # PDCT: a one-token batch after a GTSU switch, at the largest context.
    draft = round(hardware.draft_pass(1, 128 + 1023).seconds * clock)
    assert bounds.ratios["PDCT"] == (48 + draft) * 256


def test_a_value_beyond_the_widths_during_a_run_is_refused_not_clipped():
    guard = TVCWidthGuard(TVCParams(ratio_bits=32, cycle_bits=32), {"nvct": 1000}, "here")
    guard.learn("pdct", 2**24 - 1, 1)  # UQ24.8 holds it
    with pytest.raises(UserError, match=r"^--tvc-ratio-bits 32: PDCT needs 33 bits on here"):
        guard.learn("pdct", 2**24, 1)
    with pytest.raises(UserError, match=r"^--tvc-cycle-bits 32: NCR needs 33 bits"):
        guard.npu_done(2**32)
    guard.npu_start(4)
    with pytest.raises(UserError, match=r"^--tvc-cycle-bits 32: C_npu needs"):
        guard.npu_start(2**40)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("memory_sharing", "1", "memory-sharing must be one of shared, separate, not '1'"),
        ("nonlinear_without_aau", "x", "nonlinear-without-aau must be one of npu, host, not 'x'"),
    ],
)  # fmt: skip
def test_bad_choices_are_user_errors(field, value, message):
    with pytest.raises(UserError, match=f"^{message}$"):
        RunSettings(mode="ahasd", pair="opt-1.3b-6.7b", policy="svip", **{field: value})


# -- item 6: each mechanism's counters move the way the mechanism exists for ---------------


def _stretch_trace(length: int, seed: int) -> Trace:
    """Confident, well-accepted drafting, then a high-entropy stretch that is rarely accepted,
    then confident again (the situation the EDC exists for)."""
    rng = np.random.default_rng(seed)
    third = length // 3
    hard = np.zeros(length, dtype=bool)
    hard[third : 2 * third] = True
    entropy = np.where(hard, rng.gamma(8.0, 0.6, length), rng.gamma(2.0, 0.15, length))
    accept = np.where(hard, rng.random(length) < 0.15, rng.random(length) < 0.9)
    header = TraceHeader("stretch", "d", "t", "p", 1.0, "synthetic")
    return Trace(header, entropy, np.exp(-0.7 * entropy), np.where(hard, 0.15, 0.9),
                 accept.astype(np.int8), np.full(length, math.nan))  # fmt: skip


def test_edc_suppresses_on_a_low_acceptance_stretch_and_saves_squashed_drafts():
    seed = seed_for(31)
    trace = _stretch_trace(900, seed)
    common = {"pair": "opt-1.3b-6.7b", "policy": "fixed", "tokens": 900, "seed": seed,
              "policy_params": (("k", 4),)}  # fmt: skip
    plain = simulate(RunSettings(mode="pim-async-aau", **common), trace=trace).summary
    edc = simulate(RunSettings(mode="pim-async-aau-edc", **common), trace=trace).summary
    assert plain["edc_suppressions"] == 0
    assert plain["edc_suppressed_idle_s"] == 0
    assert edc["edc_suppressions"] > 0
    assert edc["edc_suppressed_idle_s"] > 0
    assert edc["squashed_by_rollback"] < plain["squashed_by_rollback"]
    assert edc["drafted"] < plain["drafted"]


def test_tvc_preverification_catches_rejections_before_the_npu():
    # The per-unit PIM reading (tests/sim/specs): a target token on the TLM ranks is ~10 ms
    # against a 174 ms NPU pass, so TVC orders pre-verifications; at 50% acceptance they find
    # rejections before the NPU gets there.
    seed = seed_for(32)
    common = {"pair": "opt-1.3b-6.7b", "policy": "adaedl", "tokens": 400, "seed": seed,
              "trace": "iid:0.5", "pim": "lpddr5-pim-x16", "spec_dirs": (str(TEST_SPECS),),
              "tvc_ratio_bits": 40, "tvc_cycle_bits": 40,
              "rank_split": "fixed"}  # fmt: skip
    # (8 TLM ranks: with the target on just the 2 ranks it needs, TVC orders none.)
    edc = simulate(RunSettings(mode="pim-async-aau-edc", **common)).summary
    full = simulate(RunSettings(mode="ahasd", **common)).summary
    assert edc["preverify_passes"] == edc["preverify_useful"] == 0
    assert full["preverify_useful"] > 0
    wasted = full["preverify_wasted_late"] + full["preverify_all_accepted"]
    assert full["preverify_useful"] + wasted == full["preverify_passes"]
    _check_conservation(full)
    # Shared ranks: the pre-verifications stalled the NPU; separate memories: they did not.
    assert full["npu_blocked_by_pim_s"] > 0
    separate = simulate(RunSettings(mode="ahasd", memory_sharing="separate", **common)).summary
    assert separate["npu_blocked_by_pim_s"] == 0
    assert separate["preverify_useful"] > 0


def _preverify_start(result):
    (start,) = [start for dev, name, start, _, _ in result.metrics.timeline
                if (dev, name) == ("pim", "preverify")]  # fmt: skip
    return start


def test_the_cpus_interrupt_service_delays_the_preverification_it_passes_on():
    # The scripted run of test_an_all_accepted_preverification_resumes_drafting: TVC orders
    # the pre-verification at 60 ms; the order reaches the PIM through the CPU's interrupt
    # service (here 5 us), then the GTSU switch (48 cycles at 800 MHz): it starts at
    # 60 ms + 5 us + 60 ns, and everything after it moves by the 5 us.
    switch, service = 48 / 800e6, 5e-6
    plain, _ = _scripted([1] * 16, [True, False], [3])
    served, _ = _scripted([1] * 16, [True, False], [3], hardware=_hardware(cpu_event_s=service))
    assert _preverify_start(plain) == pytest.approx(0.060 + switch, abs=1e-9)
    assert _preverify_start(served) == pytest.approx(0.060 + service + switch, abs=1e-9)
    assert _draft_start(served, 6) - _draft_start(plain, 6) == pytest.approx(service, abs=1e-9)


def test_the_host_cpus_service_time_is_its_firmware_cycles_at_its_clock():
    from ahasd.sim.library.loading import load_library

    library = load_library()
    cpu = library.device("host-cpu", "cpu")
    hardware = build_hardware(prepare_run(RunSettings(mode="ahasd", pair="opt-1.3b-6.7b"), library))
    # make firmware's measurement: a TVC pre-verification order from the doorbell to the
    # order's write, 210 cycles on PicoRV32 (tests/firmware/tb_firmware.py's "AHASD: irq to
    # answer" line for an idle core; docs/integration.md).
    assert cpu.event_service_cycles == 210
    assert hardware.cpu_event_s == pytest.approx(210 / cpu.clock_hz)


# -- a pre-verification that finds every token accepted --------------------------------------


def _draft_start(result, pos):
    starts = [start for dev, name, start, _, args in result.metrics.timeline
              if (dev, name) == ("pim", "draft") and args["pos"] == pos]  # fmt: skip
    return starts[0]


def test_an_all_accepted_preverification_resumes_drafting():
    # Batches of 3 at 10 ms a token, every position accepted. 0-30 ms batch 1 (0-2), NPU
    # pass 1 from 30 ms. 30-60 ms batch 2 (3-5); the EDC suppresses; TVC orders a
    # pre-verification of 3-5 (60-80 ms, after a 48-cycle GTSU switch: 60 ns). All three are
    # accepted: the suppression lifts and batch 3 (6-8) starts at 80 ms (after the switch
    # back), not when pass 1's feedback arrives (100 ms + the 20 ms it was stalled = 150 ms).
    switch = 48 / 800e6
    result, _ = _scripted([1] * 16, [True, False], [3])
    summary = result.summary
    _check_conservation(summary)
    assert summary["preverify_passes"] == summary["preverify_all_accepted"] == 1
    assert _draft_start(result, 6) == pytest.approx(0.080 + 2 * switch, abs=1e-9)
    assert _draft_start(result, 3) == pytest.approx(0.030, abs=1e-9)


def test_tokens_a_preverification_accepted_are_not_verified_again_with_kv_reuse():
    # The same run: pass 2 takes batches 2 to 4 (3-11); 3-5 were pre-verified and accepted,
    # so with KV reuse the NPU verifies 6 drafts, not 9 (its cost here is fixed: the count
    # is what the option changes).
    reuse, _ = _scripted([1] * 16, [True, False], [3], preverify_kv_reuse=True)
    again, _ = _scripted([1] * 16, [True, False], [3], preverify_kv_reuse=False)
    assert reuse.summary["npu_reused_preverified"] == 3
    assert again.summary["npu_reused_preverified"] == 0
    for result in (reuse, again):
        _check_conservation(result.summary)


def test_kv_reuse_needs_one_memory():
    settings = RunSettings(mode="ahasd", pair="opt-1.3b-6.7b", policy="fixed",
                           memory_sharing="separate", preverify_kv_reuse=True)  # fmt: skip
    with pytest.raises(UserError, match="needs memory-sharing 'shared'"):
        simulate(settings)
    # Unset, it follows the memory: off with separate memories.
    summary = simulate(
        RunSettings(mode="ahasd", pair="opt-1.3b-6.7b", policy="fixed", tokens=64,
                    memory_sharing="separate")).summary  # fmt: skip
    assert summary["npu_reused_preverified"] == 0
