"""Execution modes of the system model and :func:`simulate`, the entry point of one run.

Synchronous modes (draft a round, then verify it; Leviathan et al.'s setting):

- ``gpu-only``: draft and target alternate on the GPU.
- ``npu-only``: draft and target alternate on the NPU, weights over the plain LPDDR5 bus.
- ``specpim``: SpecPIM-style operator-level synchronous GPU + PIM. Every matrix operator is
  split between the GPU and the PIM in its memory with a fixed fraction, balanced offline
  for a planned draft length (``specpim_planned_draft``); the draft length at run time
  follows the policy, so a longer or shorter verification leaves one side waiting.

Asynchronous NPU + PIM modes (the AHASD ladder), task level: the PIM (its DLM ranks) drafts
batches, one policy round each, into the unverified-draft queue, and keeps drafting on top
of unverified batches (look-ahead) while the NPU verifies; the NPU takes every queued batch
into one verification pass (an M = K GEMM, weights read once).

- ``pim-async``: look-ahead bounded only by the queue (``draft_queue_tokens``, 64) and the
  number of outstanding batches (7 = the EDC's LLR maximum); the draft model's nonlinear
  operators and reductions go over the off-chip bus to the host CPU.
- ``pim-async-aau``: the same with the AAU: nonlinear operators stay in the PIM.
- ``pim-async-aau-edc``: after each drafted batch the EDC answers continue or suppress;
  suppress = the PIM waits for the next verification feedback.
- ``ahasd``: when the EDC suppresses, TVC's ``ASK(P)`` (P = queued drafts not yet
  pre-verified) decides whether the PIM inserts a *pre-verification*: the target model runs
  on the PIM's TLM ranks (GTSU role switch, ``t_off + t_on`` cycles) over the oldest ``n``
  queued drafts. What it buys: if one of them is rejected, every draft after it is squashed
  at once and drafting restarts right after it (on the target's correction token) instead of
  after the NPU gets there. The NPU still verifies every token (its KV cache is not taken
  from the PIM), so accepted pre-verified tokens save nothing. Cost: the target's pass on
  the PIM covers the tokens of the NPU's running pass too (their target KV entries do not
  exist yet), plus the ``n`` pre-verified tokens and the last committed one.

Rules shared by all modes (documented in ``docs/system-model.md``):

- Acceptance is a property of the position: ``accept[pos]`` from the trace when recorded,
  else one Bernoulli(``beta[pos]``) draw per position per run, made up front from the run's
  seeded RNG, so a re-draft of the same position after a rollback sees the same outcome.
- A verification pass of K drafts feeds K + 1 tokens to the target. The first rejected
  position commits the target's correction token there; everything drafted after it is
  squashed. A fully accepted pass commits the target's bonus token, unless a look-ahead
  draft already covers that position: then the target's token only checks it (a mismatch is
  a rejection found one pass early; a match leaves the draft to its own pass).
- A rollback bumps the epoch; a PIM task started on a stale epoch finishes (a token step is
  not interruptible) and its output is squashed.
- Drafts still unverified when the last token is committed are counted squashed.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ahasd.errors import UserError
from ahasd.params import EDCParams, GTSUParams, TVCParams, entropy_to_fixed
from ahasd.sim import synth
from ahasd.sim.config import RunSettings, SpecLibrary, load_library
from ahasd.sim.controller import Controller, GoldenController, Task
from ahasd.sim.cost import PassModel, SplitPassModel, executor_for
from ahasd.sim.engine import EventLoop
from ahasd.sim.metrics import Metrics
from ahasd.sim.policies import DraftToken, Step, make_policy
from ahasd.sim.traces import Trace, builtin_trace_paths, load_builtin, load_trace

__all__ = [
    "ASYNC_MODES",
    "MODES",
    "PAPER_POLICIES",
    "SYNC_MODES",
    "Hardware",
    "RunResult",
    "build_hardware",
    "resolve_trace",
    "simulate",
]

MODES = (
    "gpu-only",
    "npu-only",
    "specpim",
    "pim-async",
    "pim-async-aau",
    "pim-async-aau-edc",
    "ahasd",
)
SYNC_MODES = MODES[:3]
ASYNC_MODES = MODES[3:]
PAPER_POLICIES = ("specdecpp", "svip", "adaedl", "banditspec")
_ASYNC_FLAGS = {  # mode -> (aau, edc, tvc)
    "pim-async": (False, False, False),
    "pim-async-aau": (True, False, False),
    "pim-async-aau-edc": (True, True, False),
    "ahasd": (True, True, True),
}
_TYPICAL_PASS_DRAFTS = 4  # for the TVC presets ("offline profiling") only


@dataclass
class Hardware:
    """Cost models and bookkeeping of the devices one mode uses."""

    draft_pass: object  # (tokens, context) -> Cost
    verify_pass: object
    preverify_pass: object | None
    draft_device: str
    verify_device: str
    devices: tuple[str, ...]
    static_w: dict[str, float]
    pim_clock_hz: float = 800e6
    switch_cycles: int = 0
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


_HARDWARE_FIELDS = (
    "mode",
    "pair",
    "prompt_tokens",
    "npu",
    "pim",
    "cpu",
    "gpu",
    "specpim_pim",
    "draft_model",
    "target_model",
    "specpim_planned_draft",
)


def build_hardware(settings: RunSettings, library: SpecLibrary) -> Hardware:
    """Executors and pass-cost models for ``settings.mode`` from the spec library.

    Memoised per library and hardware-relevant settings: the pass-cost caches are pure, so
    runs that differ only in policy, seed or trace share them (a sweep's main saving).
    """
    key = tuple(getattr(settings, name) for name in _HARDWARE_FIELDS)
    cache = _HARDWARE_CACHE.setdefault(id(library), (library, {}))[1]
    if key not in cache:
        cache[key] = _build_hardware(settings, library)
    return cache[key]


# id(library) -> (library kept alive so the id stays unique, {settings key: Hardware})
_HARDWARE_CACHE: dict[int, tuple[SpecLibrary, dict]] = {}


def _build_hardware(settings: RunSettings, library: SpecLibrary) -> Hardware:
    pair = library.pair(settings.pair)
    draft = library.model(settings.draft_model or pair.draft)
    target = library.model(settings.target_model or pair.target)
    mode = settings.mode
    cpu = library.device(settings.cpu, "cpu")
    cpu_power = library.power_of(cpu.name)
    weights = draft.weight_bytes_total + target.weight_bytes_total
    details = {"draft_model": draft.name, "target_model": target.name}
    notes = []
    if mode in ("gpu-only", "specpim"):
        gpu = library.device(settings.gpu, "gpu")
        gpu_ex = executor_for(gpu, library.power_of(gpu.name))
        if gpu.capacity_bytes and weights > gpu.capacity_bytes:
            notes.append(
                f"{draft.name} + {target.name} weights ({weights / 1e9:.1f} GB) exceed "
                f"{gpu.name}'s {gpu.capacity_bytes / 2**30:.0f} GiB; modelled as if they fit"
            )
        static = {"gpu": library.power_of(gpu.name).static_w}
        if mode == "gpu-only":
            return Hardware(
                PassModel(gpu_ex, draft),
                PassModel(gpu_ex, target),
                None,
                "gpu",
                "gpu",
                ("gpu",),
                static,
                notes=notes,
                details=details,
            )
        aim = library.device(settings.specpim_pim, "pim")
        aim_power = library.power_of(aim.name)
        aim_ex = executor_for(aim, aim_power, host=cpu, host_power=cpu_power)
        context = settings.prompt_tokens
        planned = settings.specpim_planned_draft
        p_draft = SplitPassModel.balanced(gpu_ex, aim_ex, draft, 1, context)
        p_target = SplitPassModel.balanced(gpu_ex, aim_ex, target, planned + 1, context)
        sync = aim.sync_latency_s or 0.0
        static["pim"] = aim_power.static_w
        details.update(specpim_pim_fraction_draft=p_draft, specpim_pim_fraction_target=p_target)
        return Hardware(
            SplitPassModel(gpu_ex, aim_ex, draft, p_draft, sync),
            SplitPassModel(gpu_ex, aim_ex, target, p_target, sync),
            None,
            "gpu",
            "gpu",
            ("gpu", "pim"),
            static,
            notes=notes,
            details=details,
        )
    npu = library.device(settings.npu, "npu")
    npu_ex = executor_for(npu, library.power_of(npu.name))
    pim = library.device(settings.pim, "pim")
    pim_power = library.power_of(pim.name)
    static = {"npu": library.power_of(npu.name).static_w}
    if mode == "npu-only":
        static["memory"] = pim_power.static_w  # the same LPDDR5 package as plain memory
        return Hardware(
            PassModel(npu_ex, draft),
            PassModel(npu_ex, target),
            None,
            "npu",
            "npu",
            ("npu",),
            static,
            notes=notes,
            details=details,
        )
    aau = _ASYNC_FLAGS[mode][0]
    draft_share = pim.draft_ranks / pim.units
    rank_bytes = pim.rank_capacity_bytes or 0
    if rank_bytes:
        for model, ranks, role in (
            (draft, pim.draft_ranks, "DLM"),
            (target, pim.units - pim.draft_ranks, "TLM"),
        ):
            if model.weight_bytes_total > ranks * rank_bytes:
                notes.append(
                    f"{model.name} ({model.weight_bytes_total / 1e9:.1f} GB) exceeds the "
                    f"{ranks} {role} ranks of {pim.name}; modelled as if it fits"
                )
    pim_draft = executor_for(
        pim, pim_power, share=draft_share, aau=aau, host=cpu, host_power=cpu_power
    )
    pim_target = executor_for(
        pim, pim_power, share=1 - draft_share, aau=aau, host=cpu, host_power=cpu_power
    )
    static["pim"] = pim_power.static_w
    static["cpu"] = cpu_power.static_w
    details.update(pim_draft_ranks=pim.draft_ranks, pim_units=pim.units)
    return Hardware(
        PassModel(pim_draft, draft),
        PassModel(npu_ex, target),
        PassModel(pim_target, target),
        "pim",
        "npu",
        ("pim", "npu", "cpu"),
        static,
        pim_clock_hz=pim.clock_hz,
        switch_cycles=pim.switch_cycles or 0,
        notes=notes,
        details=details,
    )


@functools.lru_cache(maxsize=16)
def _synthetic(preset: str, tokens: int, seed: int) -> Trace:
    # Generated traces are pure functions of their arguments and never mutated: a sweep
    # that runs 28 configurations on one (pair, seed) generates its trace once.
    return synth.generate(preset, tokens, seed)


def resolve_trace(spec: str | None, preset: str, tokens: int, seed: int) -> Trace:
    """The trace of a run (see :class:`RunSettings.trace`); at least ``tokens`` long."""
    if spec is None:
        trace = _synthetic(preset, tokens, seed)
    elif spec.startswith("iid:"):
        try:
            acceptance = float(spec[4:])
        except ValueError:
            raise UserError(f"--trace {spec!r}: iid:<acceptance> needs a number") from None
        trace = synth.iid_trace(tokens, acceptance, seed)
    elif spec in synth.PRESETS:
        trace = _synthetic(spec, tokens, seed)
    elif spec in {p.name.removesuffix(".jsonl") for p in builtin_trace_paths()}:
        trace = load_builtin(spec)
    elif Path(spec).exists():
        trace = load_trace(spec)
    else:
        builtin = ", ".join(p.name.removesuffix(".jsonl") for p in builtin_trace_paths())
        raise UserError(
            f"--trace {spec!r} is neither a file, a built-in trace ({builtin or 'none'}), a "
            f"synthetic preset ({', '.join(synth.PRESETS)}) nor iid:<acceptance>"
        )
    if len(trace) < tokens:
        raise UserError(
            f"trace {spec!r} has {len(trace)} positions, fewer than the generation length "
            f"{tokens} (use --tokens {len(trace)} or a longer trace)"
        )
    return trace


@dataclass
class RunResult:
    """What one run produced: the summary dict and the metrics behind it."""

    summary: dict
    metrics: Metrics


@dataclass(eq=False)
class _Batch:
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


class _Run:
    """State shared by both engines: trace columns, outcomes, policy, metrics."""

    def __init__(self, settings, hardware, trace, policy, metrics, loop, accept):
        self.s = settings
        self.hw = hardware
        self.policy = policy
        self.metrics = metrics
        self.loop = loop
        self.n = settings.tokens
        self.prompt = settings.prompt_tokens
        self.accept = accept
        self.entropy = trace.draft_entropy.tolist()
        self.top1 = trace.draft_top1.tolist()
        self.beta = trace.beta.tolist()
        self.committed = 0
        self.done = False
        self.end_time = 0.0

    def token(self, pos: int) -> DraftToken:
        return DraftToken(pos, self.entropy[pos], self.top1[pos], self.beta[pos])

    def leading_accepts(self, first: int, end: int) -> int:
        accept = self.accept
        n = 0
        for pos in range(first, end):
            if not accept[pos]:
                break
            n += 1
        return n

    def task(self, device, name, start, cost, **args):
        parts = getattr(cost, "parts", ())
        if parts:
            for part_device, seconds in parts:
                self.metrics.task(part_device, name, start, seconds, 0.0, **args)
            self.metrics.energy[f"{device}:dynamic"] += cost.energy_j
        else:
            self.metrics.task(device, name, start, cost.seconds, cost.energy_j, **args)
        if cost.cpu_seconds:
            self.metrics.task("cpu", "nonlinear", start, cost.cpu_seconds, 0.0)


class _SyncRun(_Run):
    """Draft a round, verify it, repeat (gpu-only, npu-only, specpim)."""

    def start(self) -> None:
        self.loop.at(0.0, self.round_start)

    def round_start(self) -> None:
        if self.committed >= self.n:
            self.done, self.end_time = True, self.loop.now
            self.loop.stop()
            return
        self.round_t0 = self.loop.now
        # The bonus token of the last draft position must still be inside the generation.
        self.kmax = max(0, min(self.policy.start_round(), self.n - 1 - self.committed))
        if self.kmax == 0:
            self.verify(0)
        else:
            self.draft(1)

    def draft(self, i: int) -> None:
        pos = self.committed + i - 1
        cost = self.hw.draft_pass(1, self.prompt + pos)
        self.task(self.hw.draft_device, "draft", self.loop.now, cost, pos=pos)
        self.loop.after(cost.seconds, self.token_done, i)

    def token_done(self, i: int) -> None:
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
        cost = self.hw.verify_pass(kept + 1, self.prompt + self.committed)
        name = "verify" if kept else "ar-step"
        self.task(self.hw.verify_device, name, self.loop.now, cost, tokens=kept)
        self.loop.after(cost.seconds, self.verified, kept)

    def verified(self, kept: int) -> None:
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


class _AsyncRun(_Run):
    """PIM drafts ahead, NPU verifies (pim-async, -aau, -aau-edc, ahasd)."""

    def __init__(self, *args, controller: Controller, flags, efix, max_batches, max_batch):
        super().__init__(*args)
        self.aau, self.edc, self.tvc = flags
        self.ctl = controller
        self.efix = efix
        self.max_batches = max_batches
        self.max_batch = max_batch if self.edc else 1 << 30
        self.max_tokens = self.s.draft_queue_tokens
        self.epoch = 0
        self.outstanding: deque[_Batch] = deque()
        self.edc_inflight: deque[_Batch] = deque()
        self.pim_state = "idle"  # idle | draft | preverify
        self.pim_waiting = False  # waiting for verification feedback
        self.cur: _Batch | None = None
        self.cur_kmax = 0
        self.npu_busy = False
        self.npu_start = 0.0
        self.feedbacks = 0
        self.clock = self.hw.pim_clock_hz

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

    def end_policy_round(self, batch: _Batch, accepted: int) -> None:
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
        self.cur = _Batch(first_pos=start, start=self.loop.now, epoch=self.epoch)
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
        cost = self.hw.draft_pass(1, self.prompt + pos)
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
        cost = self.hw.preverify_pass(tokens, self.prompt + self.committed)
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

    def cut(self, batch: _Batch, pos: int) -> None:
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
        cost = self.hw.verify_pass(kept + 1, l_kv)
        self.npu_busy, self.npu_start = True, self.loop.now
        self.task("npu", "verify" if kept else "ar-step", self.loop.now, cost, tokens=kept)
        if self.tvc:
            self.ctl.tvc_npu_start(l_kv, self.cycles(self.loop.now))
        self.sample_queue()
        self.loop.after(cost.seconds, self.npu_done, batches, l_kv)

    def npu_done(self, batches: list[_Batch], l_kv: int) -> None:
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
        """The target's extra token after a fully accepted pass (module docstring)."""
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


def _outcomes(trace: Trace, rng: np.random.Generator) -> list[bool]:
    """Accept flag per position: recorded, else one Bernoulli(beta) draw per position."""
    draws = rng.random(len(trace))
    if trace.accept is not None:
        return [bool(a) for a in trace.accept]
    return (draws < trace.beta).tolist()


def _tvc_presets(hardware: Hardware, prompt: int) -> dict[str, int]:
    """Offline-profiling presets of the TVC tables from the cost model (UQ24.8)."""
    clock, scale = hardware.pim_clock_hz, 1 << TVCParams().frac_bits
    k = _TYPICAL_PASS_DRAFTS
    npu = hardware.verify_pass(k + 1, prompt).seconds * clock
    draft = hardware.draft_pass(1, prompt).seconds * clock
    pre = hardware.preverify_pass(k + 2, prompt).seconds * clock
    return {
        "nvct": int(npu * scale // prompt),
        "pdct": int(draft * scale),
        "pvct": int(pre * scale),
    }


def simulate(
    settings: RunSettings,
    *,
    trace: Trace | None = None,
    library: SpecLibrary | None = None,
    controller: Controller | None = None,
    policy=None,
    hardware: Hardware | None = None,
) -> RunResult:
    """Run one configuration.

    Parameters
    ----------
    settings : the configuration.
    trace : use this trace instead of resolving ``settings.trace``.
    library : spec library (default: built-in plus ``settings.spec_dirs``).
    controller : EDC/TVC/GTSU controller for the async modes (default
        :class:`GoldenController` with presets from the cost model).
    policy : a policy object instead of ``make_policy(settings.policy, ...)``.
    hardware : cost models instead of :func:`build_hardware` (tests inject fixed costs).
    """
    if settings.mode not in MODES:
        raise UserError(f"unknown mode {settings.mode!r} (known: {', '.join(MODES)})")
    library = library or load_library(settings.spec_dirs)
    pair = library.pair(settings.pair)
    if policy is None:
        policy = make_policy(
            settings.policy, fallback=settings.fallback, **dict(settings.policy_params)
        )
    hardware = hardware or build_hardware(settings, library)
    if trace is None:
        trace = resolve_trace(settings.trace, pair.preset, settings.tokens, settings.seed)
    elif len(trace) < settings.tokens:
        raise UserError(
            f"trace has {len(trace)} positions, fewer than the generation length {settings.tokens}"
        )
    outcome_seed, policy_seed = np.random.SeedSequence(settings.seed).spawn(2)
    accept = _outcomes(trace, np.random.default_rng(outcome_seed))
    policy.reset(np.random.default_rng(policy_seed))
    metrics = Metrics(record_timeline=settings.record_timeline)
    loop = EventLoop()
    args = (settings, hardware, trace, policy, metrics, loop, accept)
    if settings.mode in SYNC_MODES:
        run = _SyncRun(*args)
    else:
        flags = _ASYNC_FLAGS[settings.mode]
        if controller is None:
            controller = GoldenController(
                EDCParams(),
                TVCParams(ratio_bits=settings.tvc_ratio_bits, cycle_bits=settings.tvc_cycle_bits),
                GTSUParams(),
                tvc_presets=_tvc_presets(hardware, settings.prompt_tokens),
            )
        efix = [entropy_to_fixed(min(h, 15.0)) for h in trace.draft_entropy.tolist()]
        run = _AsyncRun(
            *args,
            controller=controller,
            flags=flags,
            efix=efix,
            max_batches=EDCParams().llr_max,
            max_batch=(1 << EDCParams().length_bits) - 1,
        )
    run.start()
    loop.run()
    if not run.done:
        raise RuntimeError(f"{settings.mode}: the run stalled at {run.committed} tokens")
    summary = metrics.result(
        makespan=run.end_time,
        tokens=run.committed,
        static_w=hardware.static_w,
        devices=hardware.devices,
    )
    summary = {
        "mode": settings.mode,
        "pair": settings.pair,
        "policy": settings.policy,
        "seed": settings.seed,
        "trace": settings.trace or f"synthetic:{pair.preset}",
        **summary,
        "events": loop.dispatched,
        "notes": list(hardware.notes),
        **hardware.details,
    }
    if settings.mode in ASYNC_MODES:
        summary["controller"] = controller.counters() if hasattr(controller, "counters") else {}
    return RunResult(summary, metrics)
