"""TVC's pre-verification on the PIM (the ``ahasd`` rung of the asynchronous ladder).

When the EDC suppresses drafting, TVC's ``ASK(P)`` (P = queued drafts not yet
pre-verified) decides whether the PIM runs the target model on its TLM ranks over the
oldest ``n`` queued drafts (:meth:`PreVerification.try_preverify`). A rejection found there
rolls the PIM back at once and drafting resumes from the target's correction
(:meth:`PreVerification.cut`, spec 2.1's early rollback); the NPU's later verdict on that
batch confirms it (:meth:`PreVerification.confirm_preverified_rejection`). Every pre-verified
token accepted lifts the suppression. The cost model and the reasons are in
:mod:`ahasd.sim.modes.ladder`'s docstring.
"""

from __future__ import annotations

from ahasd.sim.controller import Task
from ahasd.sim.modes.batches import Batch
from ahasd.sim.modes.contention import Interference

__all__ = ["PreVerification"]


class PreVerification:
    """The pre-verification steps of :class:`~ahasd.sim.modes.ladder.AsyncRun`, which mixes
    them in: they read and change its queue (``outstanding``), its EDC bookkeeping, its
    controller (``ctl``) and its PIM state, and call back into its drafting
    (``pim_try_start``, ``wait_feedback``)."""

    def try_preverify(self, feedbacks_at_suppress: int) -> None:
        if self.feedbacks != feedbacks_at_suppress:  # feedback arrived: suppression is over
            self.pim_try_start()
            return
        candidates = [
            (batch, pos)
            for batch in self.outstanding
            if not batch.in_pass and batch.known_reject is None
            for pos in range(max(batch.first_pos, batch.preverified_end), batch.end)
        ]
        n = self.ctl.tvc_ask(len(candidates), self.cycles(self.loop.now)) if candidates else 0
        if n < 1:
            self.wait_feedback("edc")
            return
        chosen = candidates[:n]
        # The target on the PIM needs KV entries for every token after the committed prefix
        # up to the last pre-verified one (the NPU's in-flight tokens included), plus the
        # last committed token as input.
        tokens = chosen[-1][1] - self.committed + 2
        cost = self.hardware.preverify_pass(tokens, self.prompt + self.committed)
        self.pim_busy()
        # The order reaches the PIM through the CPU: its interrupt service, then the switch.
        delay = self.hardware.cpu_event_s + self.switch(Task.PREVERIFY)
        self.pim_state = "preverify"
        start = self.loop.now + delay
        self.task("pim", "preverify", start, cost, tokens=n)
        if self.shared_memory:  # the TLM ranks serve no host reads while they compute
            self.interference_added += 1
            self.interference.append(
                Interference(start, start + cost.seconds, "pim-compute", memory_share=1.0)
            )
        self.metrics.count("preverify_passes")
        self.metrics.count("preverify_tokens", n)
        self.loop.after(
            delay + cost.seconds,
            self.preverify_done,
            self.epoch,
            chosen,
            cost.seconds,
            feedbacks_at_suppress,
        )

    def preverify_done(self, epoch, chosen, seconds, feedbacks_at_suppress) -> None:
        self.pim_state = "idle"
        self.pim_idle("between-tasks")
        self.tvc_learn("pvct", self.cycles(seconds), len(chosen))
        if self.done:
            return
        m = self.metrics
        if epoch != self.epoch:  # a rejection the NPU found voided every chosen draft
            m.count("preverify_wasted_late")
            self.pim_try_start()
            return
        unsettled = False
        for batch, pos in chosen:
            if not batch.alive or pos < self.committed:
                continue  # the NPU verified it meanwhile
            unsettled = True
            batch.preverified_end = max(batch.preverified_end, pos + 1)
            if not self.accept[pos]:
                m.count("preverify_rejections")
                m.count("preverify_useful")
                self.cut(batch, pos)
                self.pim_try_start()  # drafting restarts right after the rejected token
                return
        if not unsettled:
            m.count("preverify_wasted_late")
            self.try_preverify(feedbacks_at_suppress)
            return
        # Every pre-verified token accepted: the EDC's suppression of the look-ahead is
        # lifted and drafting resumes after them (spec 4; docs/spec-decisions.md).
        m.count("preverify_all_accepted")
        self.pim_try_start()

    def cut(self, batch: Batch, pos: int) -> None:
        """A pre-verification found ``pos`` rejected: the PIM rolls back now.

        Everything drafted after ``pos`` is squashed (it was built on the rejected token);
        ``pos`` now holds the target's correction, on which the PIM drafts on. For the EDC
        this is the batch's VERIFY(full=0) with the prefix the pre-verification accepted,
        sent once the batch is its oldest outstanding one (spec 2.1; the NPU's later verdict
        on the batch is not given to the EDC again).
        """
        tail = batch.end - (pos + 1)
        if tail:
            self.squash(tail)
            batch.entropy_sum -= sum(self.efix[p] for p in range(pos + 1, batch.end))
            batch.length -= tail
        batch.known_reject = pos
        while self.outstanding[-1] is not batch:
            later = self.outstanding.pop()
            later.alive = False
            self.squash(later.length)
            self.end_policy_round(later, 0)
        n_acc = pos - batch.first_pos
        s_acc = sum(self.efix[p] for p in range(batch.first_pos, pos))
        if batch.tracked:
            batch.edc_report = (False, s_acc, n_acc)
        else:  # no EDC entry of its own: void the first voided one that has an entry
            later = [b for b in self.edc_inflight if not b.alive and b.first_pos > pos]
            if later:
                later[0].edc_report = (False, 0, 0)
        self.edc_send_reports()
        self.sample_queue()

    def confirm_preverified_rejection(self, batch: Batch) -> None:
        """The target's verdict on a batch whose rejection a pre-verification found: the
        same rejection (acceptance is a property of the position); commit the prefix and the
        correction. Nothing drafted after the correction is touched."""
        m = self.metrics
        pos = batch.known_reject
        n_acc = self.leading_accepts(batch.first_pos, pos)
        m.count("accepted", n_acc)
        m.count("rejected")
        m.count("target_tokens")
        self.committed = pos + 1
        self.edc_send_reports()
        self.end_policy_round(batch, n_acc)
