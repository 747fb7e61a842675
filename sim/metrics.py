"""Run metrics: token accounting, device busy time, energy, queue occupancy, timeline.

The engine calls the ``record_*`` hooks; :meth:`Metrics.result` turns them into one
JSON-able dict (the row of a sweep and the ``--json`` output of ``ahasd simulate``).

Token accounting (the conservation law the tests check): every drafted token ends exactly
once as **accepted** (the target agreed), **rejected** (the first token of its batch the
target disagreed with) or **squashed** (discarded unverified: after a rejection, dropped by
the policy, on a stale prefix, or still unverified when the generation ended). Committed
tokens = accepted drafts + target tokens (corrections after a rejection, bonus tokens after a
full accept, autoregressive steps), capped at the generation length.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["Metrics"]


class Metrics:
    """Accumulators for one run (no global state: one object per run)."""

    def __init__(self, *, record_timeline: bool = False) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.busy: dict[str, float] = defaultdict(float)  # device -> seconds
        self.busy_by_task: dict[str, float] = defaultdict(float)  # "device:task" -> seconds
        self.times: dict[str, float] = defaultdict(float)  # other durations the engine names
        self.energy: dict[str, float] = defaultdict(float)  # component -> joules
        # (time, queued tokens, queued batches, unverified tokens incl. the NPU's pass)
        self.queue_samples: list[tuple[float, int, int, int]] = [(0.0, 0, 0, 0)]
        self.round_tokens: list[int] = []  # tokens committed per verification pass
        self.record_timeline = record_timeline
        self.timeline: list[tuple[str, str, float, float, dict]] = []

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def add_time(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to the named duration (e.g. ``"pim_idle:edc"``)."""
        self.times[name] += seconds

    def task(self, device: str, name: str, start: float, seconds: float, energy_j: float, **args):
        """A device did ``name`` from ``start`` for ``seconds`` costing ``energy_j``."""
        self.busy[device] += seconds
        self.busy_by_task[f"{device}:{name}"] += seconds
        self.energy[f"{device}:dynamic"] += energy_j
        if self.record_timeline:
            self.timeline.append((device, name, start, seconds, args))

    def queue(self, time: float, tokens: int, batches: int, unverified: int) -> None:
        """Unverified-draft queue occupancy changed: tokens and batches waiting for the NPU,
        and all drafted-but-unverified tokens (those in the NPU's running pass included)."""
        last = self.queue_samples[-1]
        if last[1:] != (tokens, batches, unverified):
            self.queue_samples.append((time, tokens, batches, unverified))

    def queue_mean(self, end: float) -> float:
        """Time-averaged queued tokens over ``[0, end]``."""
        if end <= 0:
            return 0.0
        total = 0.0
        samples = self.queue_samples
        for (t0, tokens, *_), (t1, *_) in zip(samples, [*samples[1:], (end,)], strict=True):
            total += tokens * (min(t1, end) - min(t0, end))
        return total / end

    def result(self, *, makespan: float, tokens: int, static_w: dict[str, float], devices) -> dict:
        """The run's summary (JSON-able).

        Parameters
        ----------
        makespan : simulated seconds until the last committed token.
        tokens : committed tokens (the generation length).
        static_w : device -> static power (W), charged over ``makespan``.
        devices : device names to report busy/idle time for.
        """
        for device, watts in static_w.items():
            self.energy[f"{device}:static"] += watts * makespan
        energy_j = sum(self.energy.values())
        c = self.counts
        drafted = c["drafted"]
        verified = c["accepted"] + c["rejected"]
        tasks = self.busy_by_task
        npu_verify = tasks.get("npu:verify", 0.0) + tasks.get("npu:ar-step", 0.0)
        npu_blocked = tasks.get("npu:blocked-by-pim", 0.0)
        npu_serving = tasks.get("npu:serving-pim", 0.0)
        npu_waiting = max(0.0, makespan - self.busy.get("npu", 0.0)) if "npu" in devices else 0.0
        return {
            "tokens": tokens,
            "seconds": makespan,
            "tokens_per_s": tokens / makespan if makespan > 0 else 0.0,
            # Two acceptance figures, never to be confused: of the drafts the target judged
            # (accepted / (accepted + rejected)), and of every drafted token, squashed
            # look-ahead included (accepted / drafted: how the paper counts it, the figure
            # look-ahead lowers and the EDC recovers).
            "acceptance_rate": c["accepted"] / verified if verified else 0.0,
            "accepted_per_drafted": c["accepted"] / drafted if drafted else 0.0,
            "energy_j": energy_j,
            "energy_per_token_mj": 1e3 * energy_j / tokens if tokens else 0.0,
            "drafted": drafted,
            "accepted": c["accepted"],
            "rejected": c["rejected"],
            "squashed": c["squashed"],
            "dropped": c["dropped"],
            "target_tokens": c["target_tokens"],
            "verify_passes": c["verify_passes"],
            "ar_steps": c["ar_steps"],
            "preverify_passes": c["preverify_passes"],
            "preverify_tokens": c["preverify_tokens"],
            "preverify_rejections": c["preverify_rejections"],
            "edc_suppressions": c["edc_suppressions"],
            "early_rejections": c["early_rejections"],
            # What each ladder mechanism did (docs/system-model.md, "Mechanism counters").
            "squashed_by_rollback": c["squashed_by_rollback"],
            "preverify_useful": c["preverify_useful"],
            "preverify_wasted_late": c["preverify_wasted_late"],
            "preverify_all_accepted": c["preverify_all_accepted"],
            "npu_reused_preverified": c["npu_reused_preverified"],
            "edc_suppressed_idle_s": self.times.get("pim_idle:edc", 0.0),
            "pim_idle_lookahead_limit_s": self.times.get("pim_idle:lookahead", 0.0),
            "pim_waiting_for_npu_s": self.times.get("pim_waiting_for_npu", 0.0),
            "npu_verify_s": npu_verify,
            "npu_blocked_by_pim_s": npu_blocked,
            "npu_serving_pim_s": npu_serving,
            "npu_waiting_for_drafts_s": npu_waiting,
            "mean_tokens_per_pass": (
                sum(self.round_tokens) / len(self.round_tokens) if self.round_tokens else 0.0
            ),
            "queue_mean_tokens": self.queue_mean(makespan),
            "queue_max_tokens": max(s[1] for s in self.queue_samples),
            "busy_s": {d: self.busy.get(d, 0.0) for d in devices},
            "idle_s": {d: max(0.0, makespan - self.busy.get(d, 0.0)) for d in devices},
            "busy_by_task_s": dict(sorted(self.busy_by_task.items())),
            "energy_breakdown_j": dict(sorted(self.energy.items())),
        }

    def chrome_trace(self) -> dict:
        """Device activity in the Chrome trace-event format (chrome://tracing, Perfetto)."""
        devices = sorted({entry[0] for entry in self.timeline})
        tids = {device: i + 1 for i, device in enumerate(devices)}
        events = [
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": device}}
            for device, tid in tids.items()
        ]
        for device, name, start, seconds, args in self.timeline:
            events.append(
                {
                    "name": name,
                    "ph": "X",
                    "pid": 1,
                    "tid": tids[device],
                    "ts": start * 1e6,
                    "dur": seconds * 1e6,
                    "args": args,
                }
            )
        for time, tokens, batches, unverified in self.queue_samples:
            events.append(
                {
                    "name": "draft queue",
                    "ph": "C",
                    "pid": 1,
                    "ts": time * 1e6,
                    "args": {"queued": tokens, "unverified": unverified, "batches": batches},
                }
            )
        return {"traceEvents": events, "displayTimeUnit": "ms"}
