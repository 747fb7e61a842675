"""The asynchronous ladder engine: the PIM drafts ahead while the NPU verifies.

Runs the modes whose table row says ``engine="async"``, task level: the PIM (its DLM ranks)
drafts batches, one policy round each, into the unverified-draft queue, and keeps drafting
on top of unverified batches (look-ahead) while the NPU verifies; the NPU takes every queued
batch into one verification pass (an M = K GEMM, weights read once). The row's flags turn
on the ladder's features:

- none (``pim-async``): look-ahead bounded only by the queue (``draft_queue_tokens``, 64)
  and the number of outstanding batches (7 = the EDC's LLR maximum); the draft model's
  nonlinear operators and reductions go over the off-chip bus to the host CPU;
- ``aau`` (``pim-async-aau``): nonlinear operators stay in the PIM (a cost-model matter:
  :mod:`ahasd.sim.modes.hardware`);
- ``edc`` (``pim-async-aau-edc``): after each drafted batch the EDC answers continue or
  suppress; suppress = the PIM waits for the next verification feedback;
- ``tvc`` (``ahasd``): when the EDC suppresses, TVC's ``ASK(P)`` (P = queued drafts not yet
  pre-verified) decides whether the PIM inserts a *pre-verification*: the target model runs
  on the PIM's TLM ranks (GTSU role switch, ``t_off + t_on`` cycles) over the oldest ``n``
  queued drafts. What it buys: if one of them is rejected, every draft after it is squashed
  at once and drafting restarts right after it (on the target's correction token) instead
  of after the NPU gets there. The NPU still verifies every token (its KV cache is not taken
  from the PIM), so accepted pre-verified tokens save nothing. Cost: the target's pass on
  the PIM covers the tokens of the NPU's running pass too (their target KV entries do not
  exist yet), plus the ``n`` pre-verified tokens and the last committed one.

Every EDC, TVC and GTSU decision goes through a :class:`~ahasd.sim.controller.Controller`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ahasd.sim.controller import Controller, Task
from ahasd.sim.modes.state import RunState
from ahasd.sim.policies import Step

__all__ = ["AsyncRun", "Batch"]


@dataclass(eq=False)
class Batch:
    """A drafted batch (one policy round) in the unverified-draft queue."""

    first_pos: int
    start: float  # when its drafting started (the policy's round time starts here)
    epoch: int
    length: int = 0  # kept tokens (a known-rejected last token included)
    entropy_sum: int = 0  # UQ4.12 sum over the kept tokens
    tracked: bool = False  # has an EDC in-flight entry
    in_pass: bool = False
    alive: bool = True
    known_reject: int | None = None  # position found rejected by a pre-verification
    preverified_end: int = 0  # positions < this were pre-verified (and accepted)

    @property
    def end(self) -> int:
        return self.first_pos + self.length


class AsyncRun(RunState):
    """PIM drafts ahead, NPU verifies (pim-async, -aau, -aau-edc, ahasd).

    Parameters
    ----------
    *args : those of :class:`~ahasd.sim.modes.state.RunState`.
    controller : the EDC/TVC/GTSU decisions.
    flags : ``(aau, edc, tvc)`` of the mode's table row.
    efix : draft entropy per position in the EDC's UQ4.12 fixed point.
    max_batches : outstanding batches at most (the EDC's LLR maximum).
    max_batch : tokens per batch at most with the EDC (its length port's maximum).
    """

    def __init__(self, *args, controller: Controller, flags, efix, max_batches, max_batch):
        super().__init__(*args)
        self.aau, self.edc, self.tvc = flags
        self.ctl = controller
        self.efix = efix
        self.max_batches = max_batches
        self.max_batch = max_batch if self.edc else 1 << 30
        self.max_tokens = self.settings.draft_queue_tokens
        self.epoch = 0
        self.outstanding: deque[Batch] = deque()
        self.edc_inflight: deque[Batch] = deque()
        self.pim_state = "idle"  # idle | draft | preverify
        self.pim_waiting = False  # waiting for verification feedback
        self.cur: Batch | None = None
        self.cur_kmax = 0
        self.npu_busy = False
        self.npu_start = 0.0
        self.feedbacks = 0
        self.clock = self.hardware.pim_clock_hz

    def cycles(self, seconds: float) -> int:
        return round(seconds * self.clock)

    # -- bookkeeping -----------------------------------------------------------------------

    def cursor(self) -> int:
        return self.outstanding[-1].end if self.outstanding else self.committed

    def unverified(self) -> int:
        return sum(b.length for b in self.outstanding)

    def sample_queue(self) -> None:
        queued = [b for b in self.outstanding if not b.in_pass]
        self.metrics.queue(
            self.loop.now, sum(b.length for b in queued), len(queued), self.unverified()
        )

    def end_policy_round(self, batch: Batch, accepted: int) -> None:
        self.policy.end_round(batch.length, accepted, max(self.loop.now - batch.start, 1e-12))

    def squash_outstanding(self) -> None:
        for batch in self.outstanding:
            batch.alive = False
            self.metrics.count("squashed", batch.length)
            self.end_policy_round(batch, 0)
        self.outstanding.clear()

    def edc_flush(self) -> None:
        """Tell the EDC that every outstanding batch is void (a VERIFY that is not full)."""
        if self.edc_inflight:
            self.ctl.edc_verify(False, 0, 0)
            self.edc_forget()

    def edc_forget(self) -> None:
        for batch in self.edc_inflight:
            batch.tracked = False
        self.edc_inflight.clear()

    def rollback(self) -> None:
        self.epoch += 1
        self.squash_outstanding()
        self.edc_flush()

    # -- PIM -------------------------------------------------------------------------------

    def start(self) -> None:
        self.loop.at(0.0, self.pim_try_start)

    def wait_feedback(self) -> None:
        self.pim_waiting = True
        self.npu_try_start()

    def pim_try_start(self) -> None:
        if self.done or self.pim_state != "idle" or self.pim_waiting:
            return
        start = self.cursor()
        if (
            start >= self.n
            or len(self.outstanding) >= self.max_batches
            or self.unverified() >= self.max_tokens
            or (self.edc and self.ctl.edc_full())
        ):
            self.wait_feedback()
            return
        kmax = self.policy.start_round()
        kmax = min(kmax, self.max_tokens - self.unverified(), self.n - start, self.max_batch)
        if kmax <= 0:  # the policy asks for an autoregressive step: the NPU produces it
            self.policy.end_round(0, 0, 0.0)
            self.wait_feedback()
            return
        self.cur = Batch(first_pos=start, start=self.loop.now, epoch=self.epoch)
        self.cur.preverified_end = start
        self.cur_kmax = kmax
        self.pim_state = "draft"
        delay = self.switch(Task.DRAFT)
        self.draft_token(delay)

    def switch(self, task: str) -> float:
        # Asked in every asynchronous mode: without TVC the ranks never change role, so the
        # golden answer is 0, but a controller may report latency through it (co-simulation's
        # --rtl-latency feeds the RTL's decision latencies back here).
        cycles = self.ctl.gtsu_switch(task)
        if not cycles:
            return 0.0
        seconds = cycles / self.clock
        self.metrics.task("pim", "gtsu-switch", self.loop.now, seconds, 0.0, to=task)
        return seconds

    def draft_token(self, delay: float = 0.0) -> None:
        pos = self.cur.end
        cost = self.hardware.draft_pass(1, self.prompt + pos)
        self.task("pim", "draft", self.loop.now + delay, cost, pos=pos)
        self.loop.after(delay + cost.seconds, self.token_done, self.cur.epoch)

    def token_done(self, epoch: int) -> None:
        batch = self.cur
        m = self.metrics
        m.count("drafted")
        if epoch != self.epoch:  # drafted on a prefix a rollback voided
            m.count("squashed", batch.length + 1)
            batch.length += 1
            self.end_policy_round(batch, 0)
            self.cur, self.pim_state = None, "idle"
            self.pim_try_start()
            return
        pos = batch.end
        i = batch.length + 1
        step = self.policy.step(i, self.token(pos))
        if step is Step.DROP:
            m.count("dropped")
            m.count("squashed")
            self.close_batch()
            return
        batch.length = i
        batch.entropy_sum += self.efix[pos]
        if step is Step.LAST or i >= self.cur_kmax:
            self.close_batch()
        else:
            self.draft_token()

    def close_batch(self) -> None:
        batch, self.cur, self.pim_state = self.cur, None, "idle"
        if batch.length == 0:  # the policy dropped the first token: no draft here
            self.policy.end_round(0, 0, max(self.loop.now - batch.start, 1e-12))
            self.wait_feedback()
            return
        self.outstanding.append(batch)
        self.sample_queue()
        if self.tvc:
            self.ctl.tvc_learn("pdct", self.cycles(self.loop.now - batch.start), batch.length)
        keep_going = True
        if self.edc:
            decision = self.ctl.edc_draft(batch.entropy_sum, batch.length)
            if decision is not None:
                batch.tracked = True
                self.edc_inflight.append(batch)
            keep_going = bool(decision)
            if not keep_going:
                self.metrics.count("edc_suppressions")
        self.npu_try_start()
        if keep_going:
            self.pim_try_start()
        elif self.tvc:
            self.try_preverify(self.feedbacks)
        else:
            self.wait_feedback()

    # -- pre-verification (ahasd) ----------------------------------------------------------

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
            self.wait_feedback()
            return
        chosen = candidates[:n]
        # The target on the PIM needs KV entries for every token after the committed prefix
        # up to the last pre-verified one (the NPU's in-flight tokens included), plus the
        # last committed token as input.
        tokens = chosen[-1][1] - self.committed + 2
        cost = self.hardware.preverify_pass(tokens, self.prompt + self.committed)
        delay = self.switch(Task.PREVERIFY)
        self.pim_state = "preverify"
        self.task("pim", "preverify", self.loop.now + delay, cost, tokens=n)
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
        self.ctl.tvc_learn("pvct", self.cycles(seconds), len(chosen))
        if self.done:
            return
        if epoch != self.epoch:
            self.pim_try_start()
            return
        for batch, pos in chosen:
            if not batch.alive or pos < self.committed:
                continue
            batch.preverified_end = max(batch.preverified_end, pos + 1)
            if not self.accept[pos]:
                self.metrics.count("preverify_rejections")
                self.cut(batch, pos)
                self.pim_try_start()  # drafting restarts right after the rejected token
                return
        self.try_preverify(feedbacks_at_suppress)

    def cut(self, batch: Batch, pos: int) -> None:
        """A pre-verification found ``pos`` rejected: drop everything drafted after it."""
        tail = batch.end - (pos + 1)
        if tail:
            self.metrics.count("squashed", tail)
            batch.entropy_sum -= sum(self.efix[p] for p in range(pos + 1, batch.end))
            batch.length -= tail
        batch.known_reject = pos
        while self.outstanding[-1] is not batch:
            later = self.outstanding.pop()
            later.alive = False
            self.metrics.count("squashed", later.length)
            self.end_policy_round(later, 0)
        self.sample_queue()

    # -- NPU -------------------------------------------------------------------------------

    def npu_try_start(self) -> None:
        if self.done or self.npu_busy:
            return
        batches = [b for b in self.outstanding if not b.in_pass]
        if not batches and not (
            self.pim_waiting and not self.outstanding and self.pim_state == "idle"
        ):
            return
        for batch in batches:
            batch.in_pass = True
        kept = sum(b.length for b in batches)
        l_kv = self.prompt + self.committed
        cost = self.hardware.verify_pass(kept + 1, l_kv)
        self.npu_busy, self.npu_start = True, self.loop.now
        self.task("npu", "verify" if kept else "ar-step", self.loop.now, cost, tokens=kept)
        if self.tvc:
            self.ctl.tvc_npu_start(l_kv, self.cycles(self.loop.now))
        self.sample_queue()
        self.loop.after(cost.seconds, self.npu_done, batches, l_kv)

    def npu_done(self, batches: list[Batch], l_kv: int) -> None:
        m = self.metrics
        self.npu_busy = False
        if self.tvc:
            self.ctl.tvc_npu_done(self.cycles(self.loop.now))
            self.ctl.tvc_learn("nvct", self.cycles(self.loop.now - self.npu_start), l_kv)
        m.count("verify_passes" if batches else "ar_steps")
        before = self.committed
        rejected = False
        for batch in batches:
            if not batch.alive:
                continue
            self.outstanding.popleft()
            batch.alive = False
            limit = batch.end if batch.known_reject is None else batch.known_reject
            n_acc = self.leading_accepts(batch.first_pos, limit)
            full = n_acc == batch.length
            m.count("accepted", n_acc)
            if batch.tracked and self.edc_inflight and self.edc_inflight[0] is batch:
                self.edc_inflight.popleft()
                s_acc = sum(self.efix[p] for p in range(batch.first_pos, batch.first_pos + n_acc))
                self.ctl.edc_verify(full, s_acc, n_acc)
                if not full:
                    self.edc_forget()  # the EDC rolled back: its in-flight queue is empty
            self.end_policy_round(batch, n_acc)
            if full:
                self.committed = batch.end
                continue
            m.count("rejected")
            m.count("squashed", batch.length - n_acc - 1)
            m.count("target_tokens")
            self.committed = batch.first_pos + n_acc + 1
            self.rollback()
            rejected = True
            break
        if not rejected:
            self.bonus_or_check()
        m.round_tokens.append(self.committed - before)
        self.feedbacks += 1
        self.sample_queue()
        if self.committed >= self.n:
            self.finish()
            return
        self.pim_waiting = False
        self.pim_try_start()
        self.npu_try_start()

    def bonus_or_check(self) -> None:
        """The target's extra token after a fully accepted pass (rules: :mod:`ahasd.sim.modes`)."""
        q = self.committed
        if q >= self.n:
            return
        m = self.metrics
        if self.outstanding:  # a queued look-ahead draft covers q: check it
            if self.accept[q]:
                return
            batch = self.outstanding.popleft()
            batch.alive = False
            m.count("rejected")
            m.count("squashed", batch.length - 1)
            m.count("early_rejections")
            if batch.tracked and self.edc_inflight and self.edc_inflight[0] is batch:
                self.edc_inflight.popleft()
                self.ctl.edc_verify(False, 0, 0)
                self.edc_forget()
            self.end_policy_round(batch, 0)
            m.count("target_tokens")
            self.committed = q + 1
            self.rollback()
        elif self.pim_state == "draft":  # the PIM is drafting q right now
            if self.accept[q]:
                return
            m.count("target_tokens")
            m.count("early_rejections")
            self.committed = q + 1
            self.rollback()
        else:
            m.count("target_tokens")
            self.committed = q + 1

    def finish(self) -> None:
        self.done, self.end_time = True, self.loop.now
        # Unverified drafts at the end of the generation are discarded.
        for batch in self.outstanding:
            self.metrics.count("squashed", batch.length)
        self.outstanding.clear()
        if self.cur is not None:
            self.metrics.count("squashed", self.cur.length)
        self.loop.stop()
