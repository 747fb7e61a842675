"""The synchronous engine: draft a round token by token, verify it, repeat.

Runs the modes whose table row says ``engine="sync"`` (``gpu-only``, ``npu-only``,
``specpim``: Leviathan et al.'s setting). It is also the public base of other synchronous
simulators (the phone-SoC run of :mod:`ahasd.sim.phone` subclasses it): the hook methods of
:class:`SyncRun` below are its documented seam.
"""

from __future__ import annotations

from ahasd.sim.modes.state import RunState
from ahasd.sim.policies.base import Step

__all__ = ["SyncRun"]


class SyncRun(RunState):
    """Draft a round, verify it, repeat (gpu-only, npu-only, specpim).

    One round: :meth:`round_start` asks the policy for the round's maximum length ``kmax``
    and calls :meth:`begin_round`; :meth:`draft` drafts token ``i`` and schedules
    :meth:`token_done`, which asks the policy whether to go on (then :meth:`draft` again) or
    to verify (:meth:`verify`); :meth:`verify` schedules :meth:`verified`, which commits the
    accepted prefix plus the target's token and starts the next round.

    Hooks a subclass may override (each keeps the contract stated in its docstring):
    :meth:`round_start`, :meth:`draft`, :meth:`verify`, :meth:`verified` (call the base to
    keep the token accounting) and :meth:`finish`.

    Members
    -------
    Those of :class:`~ahasd.sim.modes.state.RunState`, and
    kmax : the current round's maximum draft length.
    round_t0 : simulated time the current round started (the policy's round time).
    """

    def start(self) -> None:
        """Schedule the first round at time 0."""
        self.loop.at(0.0, self.round_start)

    def round_start(self) -> None:
        """Hook: start a round at ``loop.now``, or :meth:`finish` the run.

        Must either call :meth:`finish` or set ``round_t0`` and call :meth:`begin_round`.
        """
        if self.committed >= self.n:
            self.finish()
            return
        self.round_t0 = self.loop.now
        # The bonus token of the last draft position must still be inside the generation.
        self.begin_round(max(0, min(self.policy.start_round(), self.n - 1 - self.committed)))

    def begin_round(self, kmax: int) -> None:
        """Draft up to ``kmax`` tokens; 0 verifies at once (an autoregressive step)."""
        self.kmax = kmax
        if self.kmax == 0:
            self.verify(0)
        else:
            self.draft(1)

    def finish(self) -> None:
        """Hook: the run is over at ``loop.now``; stops the loop."""
        self.done, self.end_time = True, self.loop.now
        self.loop.stop()

    def draft(self, i: int) -> None:
        """Hook: draft token ``i`` (1-based) of the round; must schedule ``token_done(i)``."""
        pos = self.committed + i - 1
        cost = self.hardware.draft_pass(1, self.prompt + pos)
        self.task(self.hardware.draft_device, "draft", self.loop.now, cost, pos=pos)
        self.loop.after(cost.seconds, self.token_done, i)

    def token_done(self, i: int) -> None:
        """Token ``i`` is drafted: the policy keeps it and goes on, ends the round, or drops it."""
        pos = self.committed + i - 1
        self.metrics.count("drafted")
        step = self.policy.step(i, self.token(pos))
        if step is Step.DROP:
            self.metrics.count("dropped")
            self.metrics.count("squashed")
            self.verify(i - 1)
        elif step is Step.LAST or i >= self.kmax:
            self.verify(i)
        else:
            self.draft(i + 1)

    def verify(self, kept: int) -> None:
        """Hook: verify the ``kept`` drafts (0: one autoregressive step); must schedule
        ``verified(kept)``."""
        cost = self.hardware.verify_pass(kept + 1, self.prompt + self.committed)
        name = "verify" if kept else "ar-step"
        self.task(self.hardware.verify_device, name, self.loop.now, cost, tokens=kept)
        self.loop.after(cost.seconds, self.verified, kept)

    def verified(self, kept: int) -> None:
        """Hook: the verification of ``kept`` drafts is done: count, commit the accepted
        prefix and the target's token, report the round to the policy, start the next."""
        m = self.metrics
        first = self.committed
        n_acc = self.leading_accepts(first, first + kept)
        m.count("accepted", n_acc)
        if n_acc < kept:
            m.count("rejected")
            m.count("squashed", kept - n_acc - 1)
        m.count("target_tokens")
        m.count("verify_passes" if kept else "ar_steps")
        self.committed = first + n_acc + 1
        m.round_tokens.append(n_acc + 1)
        self.policy.end_round(kept, n_acc, self.loop.now - self.round_t0)
        self.round_start()
