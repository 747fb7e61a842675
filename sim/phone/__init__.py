"""The phone-SoC scenario (spec section 5): sustained speculative decoding under a thermal limit.

Where each concern lives (each module has a public interface and an ``__all__``):

- :mod:`~ahasd.sim.phone.settings`: the phone mode table (``PHONE_MODES`` derives from it),
  task types, :class:`PhoneSettings`. **Adding a phone mode starts here.**
- :mod:`~ahasd.sim.phone.platform`: platform files (``sim/specs/platforms``, ``kind =
  "phone"``), loading and lookup.
- :mod:`~ahasd.sim.phone.prepare`: a phone run prepared once, ``PreparedPhoneRun`` (its
  mode row, platform, spec library and pair), which the hardware and the engine read.
- :mod:`~ahasd.sim.phone.cost`: pass costs per throttle level (:class:`TieredPassModel` for
  the NPU drafting from SRAM) and the platform's power figures (:class:`PhoneHardware`).
- :mod:`~ahasd.sim.phone.governor`: the thermal governor (the RC model itself is
  :mod:`ahasd.sim.thermal`).
- :mod:`~ahasd.sim.phone.run`: the phone engine, a subclass of the synchronous engine
  :class:`ahasd.sim.modes.SyncRun` through its documented hooks, :func:`simulate_phone`
  and :func:`simulate_prepared_phone`.
- :mod:`~ahasd.sim.phone.figures`: the time-series figure.

The command line (``ahasd simulate --platform``) is :mod:`ahasd.cli.simulate`.

A Snapdragon 8 Gen 3 / Apple M4 class SoC runs an INT4 8B target on its GPU and an INT4
draft model (SmolLM-135M or Qwen2.5-0.5B) either on the GPU too or on its NPU with the draft
weights in on-chip SRAM; both share LPDDR5X. Three modes (``PHONE_MODES``):

- ``gpu-ar``: plain autoregressive decoding on the GPU (one M = 1 pass per token);
- ``gpu-spec``: homogeneous speculative decoding, draft and target alternate on the GPU
  (the draft's weights come from DRAM);
- ``npu-gpu-hetero``: the NPU drafts from SRAM while the GPU is clock-gated, then the GPU
  verifies while the NPU is clock-gated (synchronous, as the issue describes).

Mechanisms, all in :class:`PhoneRun` on top of the synchronous engine of
:mod:`ahasd.sim.modes` (same token accounting, same metrics):

- confidence pruning: the ``threshold`` policy of :mod:`ahasd.sim.policies` (top-1 < 0.35
  ends the draft; the low-confidence token is dropped, the first token of a round is kept);
- draft length by task type, ``TASK_DRAFT_LENGTH`` (5 code/JSON, 3 dialogue, 1 high-entropy
  text), as a cap on the round length;
- fallback to autoregression (:class:`ahasd.sim.policies.Fallback`: acceptance below 0.50
  over the last 32 judged tokens);
- O(1) KV-cache rollback: a rejection moves the KV length back to the committed prefix (a
  pointer move, no copy, no task); the next pass simply runs at the shorter context. Counted
  in ``kv_rollbacks``/``kv_rollback_tokens``, costed at zero time and energy;
- a two-node RC thermal model (:mod:`ahasd.sim.thermal`) driven by the package power, a
  governor that steps the GPU/NPU clock (and the DDR frequency cap paired with it) down one
  level when the skin reaches its limit (or the die its limit) and back up below the limit
  minus a hysteresis, polled every ``governor_period_s``;
- a thermal arbiter: above ``arbiter_c`` (41 C) skin, the task's draft length is halved
  (``max(1, L // 2)``).

Power: every task has a constant power over its duration, the sum of its dynamic energy
divided by its time (roofline cost model of :mod:`ahasd.sim.cost`, clock-scaled), the
clocked device's clock-tree/leakage power ``active_w * s * v(s)^2`` (``s`` = clock fraction,
``v(s) = v0 + (1 - v0) s``), the clock-gated power of the other device, the rest of the SoC
and the DRAM background. Dynamic energy per op scales with ``v(s)^2``; DRAM energy per byte
does not. Energy reported = power integrated over the run (a test checks it).

A run generates back-to-back requests of ``tokens`` tokens (each starting again from a
``prompt_tokens`` KV cache, task types cycling code, dialogue, text with ``task="mix"``) until
``duration_s`` of simulated time has passed, and stops at the first round boundary after it.
"""

from __future__ import annotations

from ahasd.sim.phone.cost import PhoneHardware, TieredPassModel, build_phone_hardware
from ahasd.sim.phone.figures import plot_phone
from ahasd.sim.phone.governor import Governor
from ahasd.sim.phone.platform import (
    PHONE_KIND,
    PlatformSpec,
    find_platform,
    known_platforms,
    load_platform,
)
from ahasd.sim.phone.prepare import PreparedPhoneRun, prepare_phone_run
from ahasd.sim.phone.run import (
    PhoneResult,
    PhoneRun,
    request_traces,
    simulate_phone,
    simulate_prepared_phone,
)
from ahasd.sim.phone.settings import (
    DRAFT_WEIGHTS,
    PHONE_MODE_TABLE,
    PHONE_MODES,
    TASK_DRAFT_LENGTH,
    TASKS,
    PhoneMode,
    PhoneSettings,
    find_phone_mode,
)

__all__ = [
    "DRAFT_WEIGHTS",
    "PHONE_KIND",
    "PHONE_MODES",
    "PHONE_MODE_TABLE",
    "TASKS",
    "TASK_DRAFT_LENGTH",
    "Governor",
    "PhoneHardware",
    "PhoneMode",
    "PhoneResult",
    "PhoneRun",
    "PhoneSettings",
    "PlatformSpec",
    "PreparedPhoneRun",
    "TieredPassModel",
    "build_phone_hardware",
    "find_phone_mode",
    "find_platform",
    "known_platforms",
    "load_platform",
    "plot_phone",
    "prepare_phone_run",
    "request_traces",
    "simulate_phone",
    "simulate_prepared_phone",
]
