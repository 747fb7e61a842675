"""Every drafting rule pinned on hand-built token sequences (expected values by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ahasd.errors import UserError
from ahasd.sim.policies import (
    POLICY_NAMES,
    SVIP,
    AdaEDL,
    BanditSpec,
    Fallback,
    Fixed,
    Policy,
    SpecDecPP,
    Threshold,
    make_policy,
)
from ahasd.sim.policies.base import DraftToken, Step


def tok(pos=0, entropy=0.5, top1=0.8, beta=0.9) -> DraftToken:
    return DraftToken(pos=pos, entropy=entropy, top1=top1, beta=beta)


def play_round(policy, tokens) -> list[Step]:
    """Drive one round as the system model does; returns the steps taken."""
    limit = policy.start_round()
    steps = []
    for i, token in enumerate(tokens[:limit], start=1):
        step = policy.step(i, token)
        steps.append(step)
        if step is not Step.CONTINUE:
            break
    return steps


C, L, D = Step.CONTINUE, Step.LAST, Step.DROP


def fresh(policy):
    policy.reset(np.random.default_rng(0))
    return policy


# --- fixed --------------------------------------------------------------------------------
def test_fixed():
    policy = fresh(Fixed(k=3))
    assert play_round(policy, [tok()] * 10) == [C, C, L]


# --- confidence threshold ------------------------------------------------------------------
def test_threshold_drops_first_low_confidence_token():
    policy = fresh(Threshold())
    tokens = [tok(top1=0.9), tok(top1=0.5), tok(top1=0.34), tok(top1=0.9)]
    assert play_round(policy, tokens) == [C, C, D]


def test_threshold_keeps_at_least_one_and_boundary():
    policy = fresh(Threshold())
    assert play_round(policy, [tok(top1=0.1), tok(top1=0.9)]) == [L]
    # Exactly 0.35 is not below 0.35.
    assert play_round(fresh(Threshold(max_len=2)), [tok(top1=0.35)] * 3) == [C, L]


# --- SVIP ---------------------------------------------------------------------------------
def test_svip_stops_when_sqrt_entropy_exceeds_h():
    policy = fresh(SVIP(h=1.0))
    tokens = [tok(entropy=0.5), tok(entropy=0.99), tok(entropy=1.01), tok(entropy=0.1)]
    assert play_round(policy, tokens) == [C, C, D]


def test_svip_default_h_is_2_5():
    policy = fresh(SVIP())
    # sqrt(6.25) = 2.5 is not above h; sqrt(6.26) is.
    assert play_round(policy, [tok(entropy=6.25), tok(entropy=6.26)]) == [C, D]
    assert play_round(policy, [tok(entropy=7.0), tok(entropy=0.1)]) == [L]  # min_len 1


# --- AdaEDL -------------------------------------------------------------------------------
def test_adaedl_static_rule():
    # 1 - sqrt(0.2 H) < 0.4  <=>  H > 1.8.
    policy = fresh(AdaEDL(adapt=False))
    tokens = [tok(entropy=1.0), tok(entropy=1.79), tok(entropy=1.81)]
    assert play_round(policy, tokens) == [C, C, D]
    assert play_round(policy, [tok(entropy=3.0)]) == [L]


def test_adaedl_lambda_adaptation_by_hand():
    policy = fresh(AdaEDL())
    policy.end_round(4, 0, 1.0)
    # rate = 0.9 * 0.7 + 0.1 * 0 = 0.63; lam = 0.4 + 0.1 * (0.7 - 0.63) = 0.407.
    assert policy.rate_ema == pytest.approx(0.63)
    assert policy.lam == pytest.approx(0.407)
    policy.end_round(4, 4, 1.0)
    # rate = 0.9 * 0.63 + 0.1 = 0.667; lam = 0.407 + 0.1 * 0.033 = 0.4103.
    assert policy.lam == pytest.approx(0.4103)
    for _ in range(200):
        policy.end_round(4, 4, 1.0)
    assert policy.lam < 0.4  # high acceptance lowers the threshold
    policy.reset(np.random.default_rng(0))
    assert policy.lam == 0.4
    for _ in range(500):
        policy.end_round(4, 0, 1.0)
    assert policy.lam == 0.9  # low acceptance raises it, clamped at lam_max


# --- SpecDec++ ----------------------------------------------------------------------------
def test_specdecpp_cumulative_product_rule():
    policy = fresh(SpecDecPP())
    # a_1 := 1; then 0.9 -> cum 0.9 (0.1); 0.8 -> 0.72 (0.28); 0.9 -> 0.648 (0.352 > 0.3).
    tokens = [tok(beta=0.2), tok(beta=0.9), tok(beta=0.8), tok(beta=0.9), tok(beta=1.0)]
    assert play_round(policy, tokens) == [C, C, C, L]


def test_specdecpp_min_and_max_length():
    policy = fresh(SpecDecPP(first_is_one=False))
    # cum 0.5 after step 1 (0.5 > 0.3) but min_len is 2; step 2: 0.45 -> stop.
    assert play_round(policy, [tok(beta=0.5), tok(beta=0.9), tok(beta=0.9)]) == [C, L]
    assert play_round(policy, [tok(beta=1.0)] * 30) == [C] * 19 + [L]


def test_specdecpp_unknown_beta_uses_entropy_bound():
    policy = fresh(SpecDecPP(first_is_one=False, min_len=1))
    # beta unknown, H = 0.2: a = 1 - sqrt(0.04) = 0.8; cum 0.8 (0.2, go on), 0.64 (0.36, stop).
    unknown = tok(entropy=0.2, beta=math.nan)
    assert policy.predicted_acceptance(unknown) == pytest.approx(0.8)
    assert play_round(policy, [unknown, unknown, unknown]) == [C, L]


def test_specdecpp_noise_is_seeded_and_bounded():
    a = SpecDecPP(noise=1.0)
    b = SpecDecPP(noise=1.0)
    a.reset(np.random.default_rng(5))
    b.reset(np.random.default_rng(5))
    xs = [a.predicted_acceptance(tok(beta=0.6)) for _ in range(50)]
    ys = [b.predicted_acceptance(tok(beta=0.6)) for _ in range(50)]
    assert xs == ys
    assert all(0 < x < 1 for x in xs)
    assert len(set(xs)) > 40


# --- BanditSpec ---------------------------------------------------------------------------
def test_banditspec_warmup_is_round_robin_for_7_rounds():
    policy = fresh(BanditSpec())
    lengths = []
    for _ in range(7):
        g = policy.start_round()
        lengths.append(g)
        assert play_round_len(policy, g) == g
        policy.end_round(g, 0, 1.0)
    assert lengths == [1, 2, 3, 4, 1, 2, 3]


def play_round_len(policy, g):
    steps = [policy.step(i, tok()) for i in range(1, g + 1)]
    assert steps[-1] is Step.LAST
    assert all(s is Step.CONTINUE for s in steps[:-1])
    return len(steps)


def bandit_after_warmup(bonus: str) -> BanditSpec:
    """Warm-up rewards (tokens/s = (accepted + 1) / seconds): arm means 2, 3, 4, 3.75."""
    policy = fresh(BanditSpec(bonus=bonus))
    plan = [
        (1, 1, 1.0),
        (2, 2, 1.0),
        (3, 3, 1.0),
        (4, 2, 0.8),
        (1, 1, 1.0),
        (2, 2, 1.0),
        (3, 3, 1.0),
    ]
    for g, accepted, seconds in plan:
        assert policy.start_round() == g
        policy.end_round(g, accepted, seconds)
    return policy


def test_banditspec_authors_total_count_bonus_is_greedy():
    # Bonus sqrt(6 ln 7 / 7) is the same for every arm: the best mean (arm 3, 4.0) wins.
    assert bandit_after_warmup("total").start_round() == 3


def test_banditspec_per_arm_bonus_is_ucb1():
    # sqrt(6 ln 7 / n): n=2 -> 2.416, n=1 -> 3.417. Scores 4.42, 5.42, 6.42, 7.17: arm 4.
    assert bandit_after_warmup("arm").start_round() == 4


def test_banditspec_reward_without_bonus_token():
    policy = fresh(BanditSpec(count_bonus=False))
    policy.start_round()
    policy.end_round(1, 1, 0.5)
    assert policy.reward_sums[0] == pytest.approx(2.0)  # 1 accepted / 0.5 s


# --- fallback -----------------------------------------------------------------------------
def test_fallback_enters_waits_probes_and_recovers():
    policy = fresh(Fallback(Fixed(k=4)))
    for _ in range(31):  # 31 judged tokens (first token rejected): window not full yet
        assert policy.start_round() == 4
        policy.end_round(4, 0, 1.0)
    assert policy.start_round() == 4
    policy.end_round(4, 0, 1.0)  # 32 outcomes, rate 0/32 < 0.5: fall back
    assert [policy.start_round() for _ in range(8)] == [0] * 8
    # Probe rounds back to back until 4 judged tokens: 1,0 then 0 then 0 -> 1/4 < 0.5.
    for accepted in (1, 0, 0):
        assert policy.start_round() == 4
        policy.end_round(4, accepted, 1.0)
    assert [policy.start_round() for _ in range(8)] == [0] * 8  # wait again
    assert policy.start_round() == 4
    policy.end_round(4, 4, 1.0)  # probe 1,1,1,1 -> 4/4 >= 0.5: resume
    assert policy.start_round() == 4
    assert list(policy.outcomes) == [1, 1, 1, 1]
    for _ in range(27):  # 31 outcomes: not full, keep speculating despite the zeros
        policy.end_round(4, 0, 1.0)
        assert policy.start_round() == 4
    policy.end_round(4, 0, 1.0)  # 4/32 < 0.5 over a full window: fall back again
    assert policy.start_round() == 0


def test_fallback_counts_only_judged_tokens():
    policy = fresh(Fallback(Fixed(k=4)))
    policy.start_round()
    policy.end_round(4, 1, 1.0)  # token 1 accepted, token 2 rejected, 3 and 4 never judged
    assert list(policy.outcomes) == [1, 0]
    policy.start_round()
    policy.end_round(3, 3, 1.0)  # all accepted: three outcomes, no rejection
    assert list(policy.outcomes) == [1, 0, 1, 1, 1]


def test_fallback_threshold_boundary():
    policy = fresh(Fallback(Fixed(k=4)))
    for _ in range(16):
        policy.start_round()
        policy.end_round(4, 1, 1.0)  # outcomes 1, 0: exactly 0.5 over 32, not below
    assert policy.window_rate() == 0.5
    assert policy.start_round() == 4


def test_fallback_passes_steps_through():
    policy = make_policy("threshold", fallback=True)
    assert policy.name == "threshold+fallback"
    policy.reset(np.random.default_rng(0))
    assert play_round(policy, [tok(top1=0.9), tok(top1=0.1)]) == [C, D]


# --- factory ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", POLICY_NAMES)
def test_make_policy_builds_each(name):
    policy = make_policy(name)
    assert policy.name == name
    assert isinstance(policy, Policy)
    policy.reset(np.random.default_rng(0))
    assert policy.start_round() >= 1


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        (
            "nope",
            {},
            r"unknown policy 'nope' \(known: specdecpp, svip, adaedl, banditspec, fixed, "
            r"threshold\)",
        ),
        (
            "svip",
            {"gamma": 1},
            r"policy 'svip' has no parameter 'gamma' \(known: h, min_len, max_len\)",
        ),
        ("fixed", {"k": 0}, r"policy 'fixed': k must be an integer >= 1, not 0"),
        ("threshold", {"threshold": 1.5}, r"threshold must be a number in \[0.0, 1.0\], not 1.5"),
        ("banditspec", {"bonus": "x"}, "bonus must be 'total' or 'arm'"),
        ("fixed", {"fallback_window": 8}, "fallback_\\* parameters given without fallback=True"),
    ],
)
def test_make_policy_rejections(name, params, message):
    with pytest.raises(UserError, match=message):
        make_policy(name, **params)


def test_make_policy_fallback_resume_after():
    policy = make_policy("fixed", fallback=True, fallback_window=1, fallback_resume_after=2)
    policy.reset(np.random.default_rng(0))
    policy.start_round()
    policy.end_round(4, 0, 1.0)  # window [0]: fall back
    assert [policy.start_round() for _ in range(9)] == [0] * 8 + [4]
    policy.end_round(4, 4, 1.0)  # probe gives 4 judged tokens >= 2: resume at once
    assert policy.start_round() == 4


def test_make_policy_fallback_params():
    policy = make_policy("fixed", fallback=True, k=2, fallback_window=4, fallback_cooldown=2)
    policy.reset(np.random.default_rng(0))
    for _ in range(4):  # four rejected first tokens fill the 4-outcome window with zeros
        assert policy.start_round() == 2
        policy.end_round(2, 0, 1.0)
    assert [policy.start_round() for _ in range(3)] == [0, 0, 2]


def test_outcome_validation():
    policy = fresh(Fixed())
    with pytest.raises(ValueError, match="need 0 <= accepted <= drafted"):
        policy.end_round(2, 3, 1.0)
