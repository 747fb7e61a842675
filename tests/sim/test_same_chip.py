"""The comparisons the paper's claim rests on, each checked against a hand computation:
the rank split by model size and the operator-level synchronous NPU + PIM pass (the
pre-verification rules are in test_mechanisms.py)."""

from __future__ import annotations

import pytest

from ahasd.errors import UserError
from ahasd.sim.cost import Executor, NonlinearPath
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.specs import ModelSpec
from ahasd.sim.modes import build_hardware, prepare_run, simulate
from ahasd.sim.modes.oplevel import OperatorSplitPassModel, balanced_fractions, round_shares
from ahasd.sim.modes.ranks import split_ranks
from ahasd.sim.settings import RunSettings

LIB = load_library()
GIB = 2**30


# -- the rank split by model size ---------------------------------------------------------


def test_the_rank_split_of_the_opt_pair_by_hand():
    # OPT-6.7B at INT8 (models/opt-6.7b.toml): 32 layers x (4 x 4096^2 + 2 x 4096 x 16384)
    # = 6,442,450,944, + 50272 x 4096 = 205,914,112: 6,648,365,056 B of weights; KV
    # 2 x 32 x 4096 = 262,144 B a token, at 128 + 1024 tokens 301,989,888 B: 6.95 GB > one
    # 4 GiB rank (4.29 GB) -> 2 ranks. OPT-1.3B: 24 x (4 x 2048^2 + 2 x 2048 x 8192)
    # = 1,207,959,552, + 50272 x 2048 = 102,957,056: 1,310,916,608 B; KV 2 x 24 x 2048
    # = 98,304 B a token, 113,246,208 B: 1.42 GB -> 1 rank.
    pim = LIB.device("lpddr5-pim")
    draft, target = LIB.model("opt-1.3b"), LIB.model("opt-6.7b")
    assert target.weight_bytes_total == 6_648_365_056
    assert draft.weight_bytes_total == 1_310_916_608
    tokens = 128 + 1024
    got = {r: split_ranks(pim, draft, target, tokens, r) for r in ("target-first", "footprint")}
    assert (got["target-first"].draft, got["target-first"].target) == (14, 2)
    assert (got["footprint"].draft, got["footprint"].target) == (1, 2)
    fixed = split_ranks(pim, draft, target, tokens, "fixed")
    assert (fixed.draft, fixed.target) == (8, 8)  # the device file's draft_ranks
    # What a run reports, and what it computes with (the default platform reads target-first).
    summary = simulate(
        RunSettings(mode="pim-async", pair="opt-1.3b-6.7b", policy="fixed", tokens=1024)
    ).summary
    assert (summary["pim_draft_ranks"], summary["pim_target_ranks"]) == (14, 2)
    assert summary["rank_split"] == "target-first"


def test_a_pair_that_does_not_fit_the_ranks_is_refused_with_its_figures():
    # With 1 GiB ranks PaLM-like 30B (about 30 GB at INT8) alone needs more than 16 ranks.
    settings = RunSettings(
        mode="pim-async",
        pair="palm-8b-30b",
        policy="fixed",
        spec_overrides=(("devices.@pim.rank_capacity_bytes", GIB),),
    )
    with pytest.raises(
        UserError, match=r"palm-like-30b \(\d+\.\d GB, \d+ ranks\).*16 ranks of 1 GiB"
    ):
        simulate(settings)


def test_every_reading_is_a_run_setting_and_changes_the_draft_throughput():
    rates = {}
    for reading in ("target-first", "footprint", "fixed"):
        hardware = build_hardware(prepare_run(
            RunSettings(mode="pim-async-aau", pair="opt-1.3b-6.7b", policy="fixed",
                        rank_split=reading), LIB))  # fmt: skip
        rates[reading] = hardware.draft_pass(1, 128).seconds
    # Draft steps are compute-bound on the PIM: time inversely proportional to the ranks.
    assert rates["fixed"] / rates["target-first"] == pytest.approx(14 / 8, rel=0.02)
    assert rates["footprint"] / rates["fixed"] == pytest.approx(8 / 1, rel=0.02)


# -- operator-level synchronous NPU + PIM -----------------------------------------------------

TINY = ModelSpec(
    name="tiny", layers=1, hidden=4, heads=1, kv_heads=1, head_dim=4, ffn=8, ffn_matrices=2,
    vocab=16, weight_bytes=1.0, kv_bytes=1.0,
)  # fmt: skip


def _executor(name, macs, bandwidth, elements=390.0):
    return Executor(name, macs, bandwidth, 0.0, 0.0, NonlinearPath("vector", elements, 0.0))


def test_one_synchronous_npu_pim_pass_on_a_tiny_model_by_hand():
    # One token over 2 cached ones (3 keys). Matrix operators (MACs = bytes, INT8):
    # QKV 4 x 12 = 48, scores 4 x 3 = 12, values 12, output 4 x 4 = 16, FFN 2 x 4 x 8 = 64,
    # LM head 4 x 16 = 64: 216 in all. The NPU (1e6 MAC/s, 1000 B/s) takes b / 1000 s for
    # b bytes; the PIM (500 MAC/s, 4000 B/s) 2 b / 1000. Balanced: p = 1 / (1 + 2) = 1/3 on
    # the PIM, so each side works (2/3) b / 1000: 0.144 s of matrix time in all.
    npu, pim = _executor("npu", 1e6, 1000.0), _executor("pim", 500.0, 4000.0)
    fractions = balanced_fractions(npu, pim, TINY, 1, 2)
    assert all(p == pytest.approx(1 / 3) for p in fractions.values())
    split = OperatorSplitPassModel(npu, pim, TINY, fractions, sync_latency_s=0.001)
    cost = split(1, 2)
    # Nonlinear elements on the NPU's vector unit (390 a second): softmax 3, two norms 2 x 4,
    # activation 8, final norm 4, logits 16 = 39 -> 0.1 s. Two hand-offs of 1 ms a layer.
    assert cost.seconds == pytest.approx(0.144 + 0.1 + 0.002)
    parts = dict(cost.parts)
    assert parts["npu"] == pytest.approx(0.144 + 0.1)
    assert parts["pim"] == pytest.approx(0.144)
    # A pass of another size than planned: the PIM's compute-bound share grows with the
    # tokens while the NPU's weight stream does not, so the NPU waits. Two tokens over 2
    # cached (4 keys): MACs QKV 96, scores 2 x 4 x 4 = 32, values 32, output 32, FFN 128,
    # LM head 128 = 448 -> PIM (1/3) x 2 x 448 / 1000; bytes 48 + 16 + 16 + 16 + 64 + 64
    # = 224 -> NPU (2/3) x 224 / 1000, plus 80 nonlinear elements (softmax 8, norms 16,
    # activation 16, final norm 8, logits 32) at 390 a second.
    parts2 = dict(split(2, 2).parts)
    assert parts2["pim"] == pytest.approx((1 / 3) * 2 * 448 / 1000)
    assert parts2["npu"] == pytest.approx((2 / 3) * 224 / 1000 + 80 / 390)
    assert parts2["pim"] > (2 / 3) * 224 / 1000  # the NPU's matrix side waits


def test_specpim_npu_runs_on_the_run_platform_with_the_same_rank_split():
    settings = RunSettings(mode="specpim-npu", pair="opt-1.3b-6.7b", policy="adaedl", tokens=256)
    summary = simulate(settings).summary
    assert (summary["pim_draft_ranks"], summary["pim_target_ranks"]) == (14, 2)
    assert 0 < summary["specpim_pim_fraction_target"] < summary["specpim_pim_fraction_draft"] < 1
    assert set(summary["busy_s"]) == {"npu", "pim"}
    assert summary["drafted"] == summary["accepted"] + summary["rejected"] + summary["squashed"]


def test_the_split_balances_at_the_planned_draft_length_and_not_elsewhere():
    # Figure 3's effect: with every operator balanced for K = 4, a round of 4 draft steps
    # and a 5-token verification keeps both devices busy (the draft steps' context grows by
    # one token a step, so the balance is not exact); shorter rounds leave the PIM idle,
    # longer ones the NPU.
    settings = RunSettings(mode="specpim-npu", pair="llama2-1.3b-7b", policy="adaedl",
                           specpim_planned_draft=4)  # fmt: skip
    hardware = build_hardware(prepare_run(settings, LIB))
    _, pim, npu = round_shares(hardware, 4, 128)
    assert pim == pytest.approx(npu, abs=0.01)
    _, pim, npu = round_shares(hardware, 1, 128)
    assert pim < npu - 0.3
    _, pim, npu = round_shares(hardware, 12, 128)
    assert npu < pim - 0.3
