"""Execution modes of the system model and :func:`simulate`, the entry point of one run.

Where each concern lives (each module has a public interface and an ``__all__``):

- :mod:`~ahasd.sim.modes.table`: the mode table, the one list of modes. Every mode's name,
  engine (sync or async), hardware assembly, devices and, on the asynchronous ladder, its
  features (``aau``, ``edc``, ``tvc``); the ladder order and the report's baselines.
  ``MODES``, ``SYNC_MODES``, ``ASYNC_MODES`` and ``LADDER`` derive from it. **Adding a
  mode starts (and usually ends) here.**
- :mod:`~ahasd.sim.modes.prepare`: a run prepared once, ``PreparedRun`` (the settings
  resolved against their platform, the mode's row, the spec library), which everything
  below reads; ``prepare_run`` makes it.
- :mod:`~ahasd.sim.modes.hardware`: hardware assembly, ``build_hardware`` (cost models of
  the devices a prepared run's mode uses, from its spec library) and the TVC presets.
- :mod:`~ahasd.sim.modes.state`: the run state both engines share, the acceptance draws.
- :mod:`~ahasd.sim.modes.sync`: the synchronous engine, ``SyncRun``; its hook methods are
  the seam other synchronous simulators subclass (:mod:`ahasd.sim.phone`).
- :mod:`~ahasd.sim.modes.ladder`: the asynchronous ladder engine, ``AsyncRun``, with its
  queue entries in :mod:`~ahasd.sim.modes.batches` and TVC's pre-verification in
  :mod:`~ahasd.sim.modes.preverify`; :mod:`~ahasd.sim.modes.contention`: what slows the
  NPU's verification down (PIM compute on shared ranks, nonlinear requests of a PIM
  without AAU).
- :mod:`~ahasd.sim.modes.tvc_widths`: the widths the TVC needs on a run's hardware
  (refused before the run when they would saturate) and the in-run guard.
- :mod:`~ahasd.sim.modes.run`: ``simulate`` (prepares, then ``simulate_prepared``), its
  outcome ``RunResult`` and ``ENGINES``, the engine each mode row names.

Traces are resolved in :mod:`ahasd.sim.traces.sources`; the command line is
:mod:`ahasd.cli.simulate`.

Synchronous modes (draft a round, then verify it; Leviathan et al.'s setting):

- ``gpu-only``: draft and target alternate on the GPU.
- ``npu-only``: draft and target alternate on the NPU, weights over the plain LPDDR5 bus.
- ``specpim``: SpecPIM-style operator-level synchronous GPU + PIM. Every matrix operator is
  split between the GPU and the PIM in its memory with a fixed fraction, balanced offline
  for a planned draft length (``specpim_planned_draft``); the draft length at run time
  follows the policy, so a longer or shorter verification leaves one side waiting.

Asynchronous NPU + PIM modes (the AHASD ladder, :mod:`~ahasd.sim.modes.ladder`):
``pim-async``, ``pim-async-aau``, ``pim-async-aau-edc``, ``ahasd``.

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

from ahasd.sim.modes.hardware import Hardware, build_hardware, tvc_presets
from ahasd.sim.modes.ladder import AsyncRun
from ahasd.sim.modes.prepare import PreparedRun, prepare_run
from ahasd.sim.modes.run import ENGINES, Engine, RunResult, simulate, simulate_prepared
from ahasd.sim.modes.state import RunState, draw_outcomes
from ahasd.sim.modes.sync import SyncRun
from ahasd.sim.modes.table import (
    ABLATION_BASE,
    ASYNC_MODES,
    COMPARISON_BASE,
    LADDER,
    MODE_TABLE,
    MODES,
    SYNC_MODES,
    Mode,
    find_mode,
)
from ahasd.sim.modes.tvc_widths import check_tvc_widths, check_tvc_widths_for_runs

__all__ = [
    "ABLATION_BASE",
    "ASYNC_MODES",
    "COMPARISON_BASE",
    "ENGINES",
    "LADDER",
    "MODES",
    "MODE_TABLE",
    "SYNC_MODES",
    "AsyncRun",
    "Engine",
    "Hardware",
    "Mode",
    "PreparedRun",
    "RunResult",
    "RunState",
    "SyncRun",
    "build_hardware",
    "check_tvc_widths",
    "check_tvc_widths_for_runs",
    "draw_outcomes",
    "find_mode",
    "prepare_run",
    "simulate",
    "simulate_prepared",
    "tvc_presets",
]
