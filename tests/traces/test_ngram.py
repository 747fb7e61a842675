"""The stdlib character n-gram pair and the recorded (shipped) traces."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ahasd.errors import UserError
from ahasd.sim.traces import ngram
from ahasd.sim.traces.format import builtin_trace_paths, load_trace


def test_witten_bell_by_hand():
    model = ngram.CharNGram(2, ngram.encode("abab"))
    a, b, z = (int(ngram.encode(c)[0]) for c in "abz")
    v = ngram.VOCAB
    # Unigram: C(a) = C(b) = 2, N = 4, T = 2 distinct: P0(c) = (C(c) + 2/V) / 6.
    p0_a = (2 + 2 / v) / 6
    p0_z = (2 / v) / 6
    # After 'b' (seen once, followed by 'a'; T = 1): P(c|b) = (C(bc) + P0(c)) / 2.
    after_b = model.distribution(np.array([b]))
    assert after_b[a] == pytest.approx((1 + p0_a) / 2)
    assert after_b[z] == pytest.approx(p0_z / 2)
    # After 'a' (seen twice, always 'b'; T = 1): P(a|a) = P0(a) / 3.
    assert model.distribution(np.array([a]))[a] == pytest.approx(p0_a / 3)
    assert after_b.sum() == pytest.approx(1.0)
    # Empty context: the unigram estimate.
    assert model.distribution(np.array([], dtype=np.int64))[a] == pytest.approx(p0_a)


def test_encode_decode():
    ids = ngram.encode("def f(x):\n\treturn 'é'")
    assert ids.max() < ngram.VOCAB
    assert ngram.decode(ids) == "def f(x):\n return '\u00bf'"


def test_shipped_traces_are_real_rejection_sampling():
    """Realised accept flags are Bernoulli(beta) draws: their total matches sum(beta)."""
    paths = builtin_trace_paths()
    assert len(paths) >= 3
    beta = np.concatenate([load_trace(p).beta for p in paths])
    accept = np.concatenate([load_trace(p).accept for p in paths])
    sigma = np.sqrt(np.sum(beta * (1 - beta)))
    assert abs(accept.sum() - beta.sum()) < 4 * sigma
    for path in paths:
        trace = load_trace(path)
        assert len(trace) >= 1100
        assert len(trace.header.meta["output"]) == len(trace)
        assert trace.header.meta["task"] == "code completion"


@pytest.fixture(scope="module")
def pair():
    return ngram.default_pair()


def test_rerecording_reproduces_shipped_trace(pair):
    corpus, draft, target = pair
    stem, prompt_index, temperature, seed = ngram.BUILTIN_RECORDINGS[0]
    shipped = load_trace(next(p for p in builtin_trace_paths() if p.name == f"{stem}.jsonl"))
    meta = shipped.header.meta
    if meta["python"] != sys.version.split()[0] or meta["corpus"]["sha256"] != corpus.sha256:
        pytest.skip(
            f"shipped traces were recorded on Python {meta['python']}'s stdlib; "
            f"this is {sys.version.split()[0]} (corpus differs)"
        )
    fresh = ngram.record(
        draft,
        target,
        corpus,
        prompt_index=prompt_index,
        length=len(shipped),
        temperature=temperature,
        seed=seed,
    )
    np.testing.assert_allclose(fresh.beta, shipped.beta, atol=5e-7)
    np.testing.assert_allclose(fresh.draft_entropy, shipped.draft_entropy, atol=5e-7)
    np.testing.assert_array_equal(fresh.accept, shipped.accept)


def test_draft_is_weaker_than_target(pair):
    corpus, draft, target = pair
    # Cross-entropy on held-out code: the order-7 target must beat the order-3 draft.
    text = ngram.encode(corpus.held_out[1][1][:3000])

    def cross_entropy(model):
        return -np.mean(
            [
                np.log(model.distribution(text[max(0, t - 6) : t])[text[t]])
                for t in range(1, len(text))
            ]
        )

    assert cross_entropy(target) < cross_entropy(draft) - 0.3


def test_bad_prompt_index(pair):
    corpus, draft, target = pair
    with pytest.raises(UserError, match="prompt index 9999 out of range"):
        ngram.record(draft, target, corpus, prompt_index=9999, length=5, temperature=1.0, seed=0)
