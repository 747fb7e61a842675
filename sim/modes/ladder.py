"""The asynchronous ladder engine: the PIM drafts ahead while the NPU verifies.

Runs the modes whose table row says ``engine="async"``, task level: the PIM (its DLM ranks)
drafts batches, one policy round each, into the unverified-draft queue, and keeps drafting
on top of unverified batches (look-ahead) while the NPU verifies; the NPU takes every queued
batch into one verification pass (an M = K GEMM, weights read once). The row's flags turn
on the ladder's features:

- none (``pim-async``): look-ahead bounded only by the queue (``draft_queue_tokens``, 64)
  and the number of outstanding batches (7 = the EDC's LLR maximum); the draft model's
  nonlinear operators and reductions go over the off-chip bus to the NPU's vector unit
  (``nonlinear_without_aau="npu"``, paper 4.1), where they contend with the verification
  (:mod:`~ahasd.sim.modes.contention`), or to the host CPU (``"host"``);
- ``aau`` (``pim-async-aau``): nonlinear operators stay in the PIM;
- ``edc`` (``pim-async-aau-edc``): after each drafted batch the EDC answers continue or
  suppress; suppress = the PIM waits for the next verification feedback;
- ``tvc`` (``ahasd``): when the EDC suppresses, TVC's ``ASK(P)`` (P = queued drafts not yet
  pre-verified) decides whether the PIM inserts a *pre-verification*: the target model runs
  on the PIM's TLM ranks (GTSU role switch, ``t_off + t_on`` cycles) over the oldest ``n``
  queued drafts. What it buys: if one of them is rejected, the PIM rolls back at once (every
  draft after it is squashed), drafts on from the target's correction token, and the EDC
  hears of the rollback then (spec 2.1, early rollback); when the NPU later confirms the
  verdict nothing drafted after the correction is lost. The NPU still verifies every token
  (its KV cache is not taken from the PIM), so accepted pre-verified tokens save nothing.
  Cost: the target's pass on the PIM covers the tokens of the NPU's running pass too (their
  target KV entries do not exist yet), plus the ``n`` pre-verified tokens and the last
  committed one; with shared memory (``memory_sharing="shared"``) it also stalls the NPU's
  memory stream from the target's ranks while it runs.

Every EDC, TVC and GTSU decision goes through a :class:`~ahasd.sim.controller.Controller`.
The pre-verification is :class:`~ahasd.sim.modes.preverify.PreVerification`; the queue's
batches and the NPU's pass are :mod:`~ahasd.sim.modes.batches`.
"""

from __future__ import annotations

from collections import deque

from ahasd.sim.controller import Controller, Task
from ahasd.sim.modes.batches import Batch, NpuPass
from ahasd.sim.modes.contention import CAUSES, Interference, finish_time, overlap
from ahasd.sim.modes.preverify import PreVerification
from ahasd.sim.modes.state import RunState
from ahasd.sim.policies.base import Step

__all__ = ["AsyncRun"]


class AsyncRun(PreVerification, RunState):
    """PIM drafts ahead, NPU verifies (pim-async, -aau, -aau-edc, ahasd).

    Parameters
    ----------
    *args : those of :class:`~ahasd.sim.modes.state.RunState`.
    controller : the EDC/TVC/GTSU decisions.
    flags : ``(aau, edc, tvc)`` of the mode's table row.
    efix : draft entropy per position in the EDC's UQ4.12 fixed point.
    max_batches : outstanding batches at most (the EDC's LLR maximum).
    max_batch : tokens per batch at most with the EDC (its length port's maximum).
    tvc_guard : checks every value sent to the TVC against its widths
        (:class:`~ahasd.sim.modes.tvc_widths.TVCWidthGuard`), or None.
    """

    def __init__(
        self, *args, controller: Controller, flags, efix, max_batches, max_batch, tvc_guard=None
    ):
        super().__init__(*args)
        self.aau, self.edc, self.tvc = flags
        self.ctl = controller
        self.efix = efix
        self.max_batches = max_batches
        self.max_batch = max_batch if self.edc else 1 << 30
        self.max_tokens = self.settings.draft_queue_tokens
        self.shared_memory = getattr(self.settings, "memory_sharing", "shared") == "shared"
        self.kv_reuse = bool(getattr(self.settings, "preverify_kv_reuse", False))
        self.guard = tvc_guard
        self.epoch = 0
        self.outstanding: deque[Batch] = deque()
        self.edc_inflight: deque[Batch] = deque()
        self.pim_state = "idle"  # idle | draft | preverify
        self.pim_waiting = False  # waiting for verification feedback
        self.idle_since: float | None = 0.0
        self.idle_reason = "start"
        self.cur: Batch | None = None
        self.cur_kmax = 0
        self.npu_pass: NpuPass | None = None
        self.pass_history: deque[tuple[float, float]] = deque(maxlen=8)
        self.interference: list[Interference] = []
        self.interference_added = 0  # ever, so a pass knows whether its end may have moved
        self.serving: tuple[float, float, float] | None = None  # the request-making token
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

    def squash(self, tokens: int) -> None:
        """``tokens`` drafts voided by a rollback (a rejected token before them)."""
        self.metrics.count("squashed", tokens)
        self.metrics.count("squashed_by_rollback", tokens)

    def squash_outstanding(self) -> None:
        for batch in self.outstanding:
            batch.alive = False
            self.squash(batch.length)
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
            batch.edc_report = None
        self.edc_inflight.clear()

    def tell_edc(self, batch: Batch, full: bool, s_acc: int, n_acc: int) -> None:
        """Send ``batch``'s VERIFY if it is the EDC's oldest outstanding batch (it always is
        when the verdicts arrive in order), then any early rollback that was waiting for the
        next batch to become the oldest."""
        if not (batch.tracked and self.edc_inflight and self.edc_inflight[0] is batch):
            return
        self.edc_inflight.popleft()
        batch.tracked = False
        batch.edc_report = None
        self.ctl.edc_verify(full, s_acc, n_acc)
        if not full:
            self.edc_forget()  # the EDC rolled back: its in-flight queue is empty
        else:
            self.edc_send_reports()

    def edc_send_reports(self) -> None:
        """Spec 2.1, early rollback: a pre-verified rejection is its batch's VERIFY, sent as
        soon as that batch is the EDC's oldest outstanding one."""
        while self.edc_inflight and self.edc_inflight[0].edc_report is not None:
            batch = self.edc_inflight[0]
            full, s_acc, n_acc = batch.edc_report
            self.tell_edc(batch, full, s_acc, n_acc)

    def rollback(self) -> None:
        self.epoch += 1
        self.squash_outstanding()
        self.edc_flush()

    # -- PIM -------------------------------------------------------------------------------

    def start(self) -> None:
        self.loop.at(0.0, self.pim_try_start)

    def pim_idle(self, reason: str) -> None:
        """The PIM stops working from now, for ``reason`` (reported per reason)."""
        self.pim_busy()
        self.idle_since, self.idle_reason = self.loop.now, reason

    def pim_busy(self) -> None:
        if self.idle_since is not None:
            self.metrics.add_time(f"pim_idle:{self.idle_reason}", self.loop.now - self.idle_since)
            self.idle_since = None

    def wait_feedback(self, reason: str) -> None:
        self.pim_waiting = True
        self.pim_idle(reason)
        self.npu_try_start()

    def pim_try_start(self) -> None:
        if self.done or self.pim_state != "idle" or self.pim_waiting:
            return
        start = self.cursor()
        if start >= self.n:
            self.wait_feedback("end")
            return
        if (
            len(self.outstanding) >= self.max_batches
            or self.unverified() >= self.max_tokens
            or (self.edc and self.ctl.edc_full())
        ):
            self.wait_feedback("lookahead")
            return
        kmax = self.policy.start_round()
        kmax = min(kmax, self.max_tokens - self.unverified(), self.n - start, self.max_batch)
        if kmax <= 0:  # the policy asks for an autoregressive step: the NPU produces it
            self.policy.end_round(0, 0, 0.0)
            self.wait_feedback("policy")
            return
        self.pim_busy()
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
        start = self.loop.now + delay
        seconds = cost.seconds
        if cost.offload_device == "npu":
            seconds += self.request_npu(cost, start)
        self.task("pim", "draft", start, cost, pos=pos)
        self.loop.after(delay + seconds, self.token_done, self.cur.epoch)

    def request_npu(self, cost, start: float) -> float:
        """A draft token without AAU: its nonlinear operators are requests to the NPU.

        The NPU serves them first (at the boundary of the operator its vector unit is
        running: the longest vector operator of the running verification, at most); each
        one's bus transfer and vector time delay the running verification by that much
        (docs/system-model.md, "Contention"). Returns the token's queueing delay.
        """
        running = self.npu_pass
        queueing = cost.offload_requests * running.longest_nonlinear_s if running else 0.0
        duration = cost.seconds + queueing
        link = cost.offload_link_s / duration
        vector = cost.offload_compute_s / duration
        self.interference_added += 1
        self.interference.append(
            Interference(
                start,
                start + duration,
                "pim-nonlinear",
                memory_share=link if self.shared_memory else 0.0,
                npu_share=vector,
                serve_share=link + vector,
            )
        )
        self.serving = (start, start + duration, link + vector)
        self.metrics.add_time("pim_waiting_for_npu", queueing)
        return queueing

    def serving_done(self, end: float) -> None:
        """Account the NPU's serving of the last token's requests outside verification
        passes (inside one, the pass's delay accounts it)."""
        if self.serving is None:
            return
        start, stop, share = self.serving
        self.serving = None
        stop = min(stop, end)
        inside = 0.0
        for begin, finish in reversed(self.pass_history):  # newest first
            if finish <= start:
                break
            inside += overlap(start, stop, begin, finish)
        if self.npu_pass is not None:
            inside += overlap(start, stop, self.npu_pass.start, end)
        outside = max(0.0, (stop - start) - inside) * share
        if outside > 0:
            self.metrics.task("npu", "serving-pim", start, outside, 0.0)

    def token_done(self, epoch: int) -> None:
        self.serving_done(self.loop.now)
        batch = self.cur
        m = self.metrics
        m.count("drafted")
        if epoch != self.epoch:  # drafted on a prefix a rollback voided
            self.squash(batch.length + 1)
            batch.length += 1
            self.end_policy_round(batch, 0)
            self.cur, self.pim_state = None, "idle"
            self.pim_idle("between-tasks")
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
        self.pim_idle("between-tasks")
        if batch.length == 0:  # the policy dropped the first token: no draft here
            self.policy.end_round(0, 0, max(self.loop.now - batch.start, 1e-12))
            self.wait_feedback("policy")
            return
        self.outstanding.append(batch)
        self.sample_queue()
        if self.tvc:
            self.tvc_learn("pdct", self.cycles(self.loop.now - batch.start), batch.length)
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
            self.wait_feedback("edc")

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        if self.guard is not None:
            self.guard.learn(table, cycles, length)
        self.ctl.tvc_learn(table, cycles, length)

    # -- NPU -------------------------------------------------------------------------------

    def npu_try_start(self) -> None:
        if self.done or self.npu_pass is not None:
            return
        batches = [b for b in self.outstanding if not b.in_pass]
        if not batches and not (
            self.pim_waiting and not self.outstanding and self.pim_state == "idle"
        ):
            return
        for batch in batches:
            batch.in_pass = True
            batch.correction_in_pass = batch.known_reject is not None
        kept = sum(b.length for b in batches)
        if self.kv_reuse:  # tokens a pre-verification accepted are not verified again
            reused = sum(
                min(b.length, b.preverified_end - b.first_pos)
                for b in batches
                if b.known_reject is None and b.preverified_end > b.first_pos
            )
            self.metrics.count("npu_reused_preverified", reused)
            kept -= reused
        l_kv = self.prompt + self.committed
        cost = self.hardware.verify_pass(kept + 1, l_kv)
        now = self.loop.now
        self.npu_pass = running = NpuPass(
            batches,
            l_kv,
            now,
            cost.seconds,
            cost.memory_bound_s / cost.seconds if cost.seconds else 0.0,
            cost.longest_nonlinear_s,
            "verify" if kept else "ar-step",
            kept,
            cost.energy_j,
        )
        self.interference = [i for i in self.interference if i.end > now]
        if self.tvc:
            if self.guard is not None:
                self.guard.npu_start(l_kv)
            self.ctl.tvc_npu_start(l_kv, self.cycles(now))
        self.sample_queue()
        end, _, _ = finish_time(now, cost.seconds, running.memory_bound, self.interference)
        running.scheduled_with = self.interference_added
        self.loop.at(end, self.npu_check, running)

    def npu_check(self, running: NpuPass) -> None:
        """The pass's completion event: pay the debt of work that delayed it since it was
        scheduled (reschedule), else complete."""
        end, lost, _ = finish_time(
            running.start, running.nominal, running.memory_bound, self.interference
        )
        if running.scheduled_with != self.interference_added and end > self.loop.now:
            running.scheduled_with = self.interference_added
            self.loop.at(end, self.npu_check, running)
            return
        self.npu_pass = None
        running.lost = lost
        m = self.metrics
        m.task("npu", running.name, running.start, running.nominal, running.energy_j,
               tokens=running.tokens)  # fmt: skip
        at = running.start + running.nominal
        for cause, name in zip(CAUSES, ("blocked-by-pim", "serving-pim"), strict=True):
            if lost[cause] > 0:
                m.task("npu", name, at, lost[cause], 0.0)
                at += lost[cause]
        self.pass_history.append((running.start, self.loop.now))
        self.npu_done(running)

    def npu_done(self, running: NpuPass) -> None:
        batches, l_kv = running.batches, running.l_kv
        m = self.metrics
        if self.tvc:
            elapsed = self.cycles(self.loop.now - running.start)
            if self.guard is not None:
                self.guard.npu_done(elapsed)
            self.ctl.tvc_npu_done(self.cycles(self.loop.now))
            self.tvc_learn("nvct", elapsed, l_kv)
        m.count("verify_passes" if batches else "ar_steps")
        before = self.committed
        no_bonus = False
        for batch in batches:
            if not batch.alive:
                continue
            self.outstanding.popleft()
            batch.alive = False
            if batch.known_reject is not None:
                self.confirm_preverified_rejection(batch)
                if batch.correction_in_pass:
                    continue  # the pass verified the drafts after the correction too
                # The pass read the rejected draft: nothing after it is valid (the cut
                # squashed what it held) and it yields no bonus token.
                no_bonus = True
                break
            n_acc = self.leading_accepts(batch.first_pos, batch.end)
            full = n_acc == batch.length
            m.count("accepted", n_acc)
            s_acc = sum(self.efix[p] for p in range(batch.first_pos, batch.first_pos + n_acc))
            self.tell_edc(batch, full, s_acc, n_acc)
            self.end_policy_round(batch, n_acc)
            if full:
                self.committed = batch.end
                continue
            m.count("rejected")
            self.squash(batch.length - n_acc - 1)
            m.count("target_tokens")
            self.committed = batch.first_pos + n_acc + 1
            self.rollback()
            no_bonus = True
            break
        if not no_bonus:
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
            batch = self.outstanding[0]
            if batch.known_reject == q:  # a pre-verification already found q rejected
                self.outstanding.popleft()
                batch.alive = False
                self.confirm_preverified_rejection(batch)
                return
            if self.accept[q]:
                return
            self.outstanding.popleft()
            batch.alive = False
            m.count("rejected")
            self.squash(batch.length - 1)
            m.count("early_rejections")
            self.tell_edc(batch, False, 0, 0)
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
        self.serving_done(self.loop.now)
        self.pim_busy()
        # Unverified drafts at the end of the generation are discarded.
        for batch in self.outstanding:
            self.metrics.count("squashed", batch.length)
        self.outstanding.clear()
        if self.cur is not None:
            self.metrics.count("squashed", self.cur.length)
        self.loop.stop()
