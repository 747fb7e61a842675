"""One recorded position of rejection sampling, the step both recorders take.

The n-gram recorder (:mod:`ahasd.sim.traces.ngram`) and the Hugging Face recorder
(:mod:`ahasd.sim.traces.hf`) differ only in where the two distributions come from. Given the
draft's distribution ``q`` and the target's ``p`` for the correct prefix, a position records
the draft's entropy and top-1 probability, the acceptance probability
``beta = sum(min(p, q))``, the target's entropy, and one real draw of speculative sampling
(:func:`ahasd.sim.exactness.rejection_step`): the draft token ``x ~ q`` is kept with
``min(1, p(x)/q(x))``, else the output token comes from the residual ``norm(max(p - q, 0))``.
The output token continues the prefix, so the recorded output is a sample of the target.
"""

from __future__ import annotations

import numpy as np

from ahasd.sim.exactness import rejection_step
from ahasd.sim.traces.format import Trace, TraceHeader

__all__ = ["Recording"]


def _entropy_nats(probs: np.ndarray) -> float:
    """Shannon entropy of the distribution ``probs``, in nats (zero-probability terms add 0)."""
    nonzero = probs[probs > 0]
    return float(-(nonzero * np.log(nonzero)).sum())


class Recording:
    """The columns of a recorded trace, filled one position at a time by :meth:`sample`.

    Parameters
    ----------
    length : positions the recording will hold.

    Attributes
    ----------
    output : the output tokens sampled so far, one per recorded position.
    """

    def __init__(self, length: int) -> None:
        self._draft_entropy = np.empty(length)
        self._draft_top1 = np.empty(length)
        self._beta = np.empty(length)
        self._accept = np.empty(length, dtype=np.int8)
        self._target_entropy = np.empty(length)
        self.output: list[int] = []

    def sample(self, p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> int:
        """Record the next position from the target's ``p`` and the draft's ``q`` (module
        docstring) and return its output token.

        ``rng`` is used only by the rejection-sampling draw, in its order (draft token,
        acceptance test, replacement), so a seed gives the same trace as before.
        """
        position = len(self.output)
        self._draft_entropy[position] = _entropy_nats(q)
        self._draft_top1[position] = q.max()
        # Rounding can take the sum a hair past 1; beta is a probability.
        self._beta[position] = min(1.0, float(np.minimum(p, q).sum()))
        self._target_entropy[position] = _entropy_nats(p)
        token, kept = rejection_step(p, q, rng)
        self._accept[position] = kept
        self.output.append(token)
        return token

    def trace(self, header: TraceHeader) -> Trace:
        """The recorded positions as a :class:`Trace` under ``header`` (every position must
        have been sampled)."""
        if len(self.output) != len(self._beta):
            raise ValueError(
                f"{len(self.output)} of {len(self._beta)} positions recorded; "
                "a trace holds every position"
            )
        return Trace(
            header=header,
            draft_entropy=self._draft_entropy,
            draft_top1=self._draft_top1,
            beta=self._beta,
            accept=self._accept,
            target_entropy=self._target_entropy,
        )
