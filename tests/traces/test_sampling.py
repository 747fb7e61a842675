"""One recorded position of rejection sampling (the step the n-gram and HF recorders share).

Expected values are worked out by hand from the rule (draft ``x ~ q``, keep it with
``min(1, p(x)/q(x))``, else draw from ``norm(max(p - q, 0))``), with a scripted random source
so that every draw, and the order of the draws, is known.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ahasd.sim.traces.format import TraceHeader
from ahasd.sim.traces.sampling import Recording

HEADER = TraceHeader(
    pair="hand",
    draft_model="q",
    target_model="p",
    prompt_id="hand-0",
    temperature=1.0,
    source="recorded",
)


class ScriptedRandom:
    """Stands in for ``numpy.random.Generator``: returns scripted draws in order and logs
    what each draw was asked for, so a test sees the distributions and the draw order."""

    def __init__(self, *draws) -> None:
        self.draws = list(draws)
        self.calls: list[tuple] = []

    def choice(self, size, p):
        kind, value = self.draws.pop(0)
        assert kind == "choice", f"a choice was drawn where the script has {kind}"
        self.calls.append(("choice", size, list(p)))
        return value

    def random(self):
        kind, value = self.draws.pop(0)
        assert kind == "random", f"a uniform was drawn where the script has {kind}"
        self.calls.append(("random",))
        return value


def test_rejected_draft_takes_the_residual_token():
    # q = (1/4, 1/4, 1/2), p = (1/2, 1/2, 0). Draft token 2: p/q = 0, so it is rejected
    # whatever the uniform; residual max(p - q, 0) = (1/4, 1/4, 0) -> (1/2, 1/2, 0).
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.25, 0.25, 0.5])
    rng = ScriptedRandom(("choice", 2), ("random", 0.0), ("choice", 1))
    recording = Recording(1)
    assert recording.sample(p, q, rng) == 1
    assert rng.calls == [
        ("choice", 3, [0.25, 0.25, 0.5]),
        ("random",),
        ("choice", 3, [0.5, 0.5, 0.0]),
    ]
    trace = recording.trace(HEADER)
    assert list(trace.accept) == [0]
    assert recording.output == [1]
    # H(q) = 2 * (1/4) ln 4 + (1/2) ln 2 = 1.5 ln 2; H(p) = ln 2; beta = 1/4 + 1/4 + 0.
    assert trace.draft_entropy[0] == pytest.approx(1.5 * math.log(2))
    assert trace.draft_top1[0] == 0.5
    assert trace.beta[0] == pytest.approx(0.5)
    assert trace.target_entropy[0] == pytest.approx(math.log(2))


@pytest.mark.parametrize(
    ("uniform", "token", "kept", "draws"),
    [
        # q = (0.6, 0.4), p = (0.2, 0.8); draft token 0 is kept with 0.2 / 0.6 = 1/3.
        (0.33, 0, 1, 2),
        # Rejected: residual max(p - q, 0) = (0, 0.4) -> (0, 1), so the output is token 1.
        (0.34, 1, 0, 3),
    ],
)
def test_draft_token_is_kept_with_probability_p_over_q(uniform, token, kept, draws):
    p = np.array([0.2, 0.8])
    q = np.array([0.6, 0.4])
    rng = ScriptedRandom(("choice", 0), ("random", uniform), ("choice", 1))
    recording = Recording(1)
    assert recording.sample(p, q, rng) == token
    assert len(rng.calls) == draws
    if draws == 3:
        assert rng.calls[2] == ("choice", 2, [0.0, 1.0])
    assert list(recording.trace(HEADER).accept) == [kept]
    # beta = min(0.2, 0.6) + min(0.8, 0.4) = 0.6.
    assert recording.trace(HEADER).beta[0] == pytest.approx(0.6)


def test_seeded_positions_with_certain_outcomes():
    """With a real seeded generator: a draft that always proposes what the target never
    produces is always rejected and replaced; one that agrees with the target is kept."""
    rng = np.random.default_rng(2024)
    never = (np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]))  # (p, q)
    agree = (np.array([0.0, 1.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    recording = Recording(4)
    tokens = [recording.sample(*pair, rng) for pair in (never, agree, never, agree)]
    trace = recording.trace(HEADER)
    assert tokens == [2, 1, 2, 1]
    assert list(trace.accept) == [0, 1, 0, 1]
    assert list(trace.beta) == [0.0, 1.0, 0.0, 1.0]
    assert list(trace.draft_entropy) == [0.0] * 4
    assert list(trace.draft_top1) == [1.0] * 4


def test_a_trace_needs_every_position():
    recording = Recording(3)
    recording.sample(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="1 of 3 positions recorded"):
        recording.trace(HEADER)
