"""The mode table: every execution mode of the system model, in one place.

A row (:class:`Mode`) says which engine runs the mode, which hardware assembly costs it,
which devices it uses, and for the asynchronous ladder which controller features it turns
on. Everything that lists modes (``MODES``, ``SYNC_MODES``, ``ASYNC_MODES``, the ablation
``LADDER`` and the report's baselines, the command line's help and the sweep's defaults)
is derived from :data:`MODE_TABLE`, so a new mode is one new row here (plus, if no existing
engine or assembly fits, the code for it beside the others in this package).
"""

from __future__ import annotations

from dataclasses import dataclass

from ahasd.errors import UserError

__all__ = [
    "ABLATION_BASE",
    "ASSEMBLIES",
    "ASYNC_MODES",
    "COMPARISON_BASE",
    "ENGINE_NAMES",
    "LADDER",
    "MODES",
    "MODE_TABLE",
    "OTHER_CLASS_MODES",
    "SAME_CHIP_BASES",
    "SAME_CHIP_MODES",
    "SYNC_MODES",
    "Mode",
    "find_mode",
]

# Engines (ENGINES in sim/modes/run.py: sync.py's SyncRun, ladder.py's AsyncRun) and
# hardware assemblies (sim/modes/hardware.py) a mode can name.
ENGINE_NAMES = ("sync", "async")
ASSEMBLIES = ("gpu", "specpim-gpu", "npu", "specpim-npu", "pim-npu")


@dataclass(frozen=True)
class Mode:
    """One execution mode.

    Parameters
    ----------
    name : the name on the command line and in results.
    engine : the key of its engine in :data:`ahasd.sim.modes.run.ENGINES`: ``"sync"`` (draft
        a round, then verify it: :class:`~ahasd.sim.modes.sync.SyncRun`) or ``"async"`` (the
        PIM drafts ahead while the NPU verifies: :class:`~ahasd.sim.modes.ladder.AsyncRun`).
    assembly : the hardware assembly of :func:`~ahasd.sim.modes.hardware.build_hardware`
        that builds its executors, one of :data:`ASSEMBLIES`.
    draft_device, verify_device : where the draft and the target model run.
    devices : the devices whose busy/idle time and static power the run reports, in order.
    summary : one line for humans (``ahasd simulate --help``); a ladder rung says what it
        adds to the rung before.
    aau, edc, tvc : asynchronous ladder features: nonlinear operators in the PIM (AAU),
        entropy-based draft control (EDC), pre-verification on the PIM (TVC with the GTSU).
    """

    name: str
    engine: str
    assembly: str
    draft_device: str
    verify_device: str
    devices: tuple[str, ...]
    summary: str
    aau: bool = False
    edc: bool = False
    tvc: bool = False

    @property
    def other_class(self) -> bool:
        """Runs on the laptop GPU: another power class than the phone's NPU + PIM, reported
        apart from the same-chip comparison."""
        return "gpu" in self.devices

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_NAMES:
            raise ValueError(f"mode {self.name!r}: engine must be one of {ENGINE_NAMES}")
        if self.assembly not in ASSEMBLIES:
            raise ValueError(f"mode {self.name!r}: assembly must be one of {ASSEMBLIES}")
        if self.engine == "sync" and (self.aau or self.edc or self.tvc):
            raise ValueError(f"mode {self.name!r}: aau, edc and tvc need the async engine")


# Synchronous modes first, then the asynchronous ladder in rung order: each rung adds one
# feature to the one before it (the ablation compares them in this order).
MODE_TABLE = (
    Mode(
        "gpu-only",
        "sync",
        "gpu",
        "gpu",
        "gpu",
        ("gpu",),
        "draft and target alternate on the GPU",
    ),
    Mode(
        "specpim-gpu",
        "sync",
        "specpim-gpu",
        "gpu",
        "gpu",
        ("gpu", "pim"),
        "SpecPIM as the paper's section 5 builds it: a laptop GPU hosting GDDR6-AiM PIM, every "
        "matrix operator split between them (another power class)",
    ),
    Mode(
        "npu-only",
        "sync",
        "npu",
        "npu",
        "npu",
        ("npu",),
        "draft and target alternate on the NPU, weights over the plain LPDDR5 bus",
    ),
    Mode(
        "specpim-npu",
        "sync",
        "specpim-npu",
        "pim",
        "npu",
        ("npu", "pim"),
        "operator-level synchronous NPU + PIM on the same chip (SpecPIM's mapping, paper "
        "section 2): every operator split between the NPU and the PIM, balanced for a "
        "planned draft length",
    ),
    Mode(
        "pim-async",
        "async",
        "pim-npu",
        "pim",
        "npu",
        ("pim", "npu", "cpu"),
        "the PIM drafts ahead while the NPU verifies and serves its nonlinear operators",
    ),
    Mode(
        "pim-async-aau",
        "async",
        "pim-npu",
        "pim",
        "npu",
        ("pim", "npu", "cpu"),
        "adds the AAU, nonlinear operators stay in the PIM",
        aau=True,
    ),
    Mode(
        "pim-async-aau-edc",
        "async",
        "pim-npu",
        "pim",
        "npu",
        ("pim", "npu", "cpu"),
        "adds the EDC, drafting waits for verification feedback when confidence is low",
        aau=True,
        edc=True,
    ),
    Mode(
        "ahasd",
        "async",
        "pim-npu",
        "pim",
        "npu",
        ("pim", "npu", "cpu"),
        "adds TVC and the GTSU, pre-verification on the PIM's target ranks while suppressed",
        aau=True,
        edc=True,
        tvc=True,
    ),
)

MODES = tuple(mode.name for mode in MODE_TABLE)
SYNC_MODES = tuple(mode.name for mode in MODE_TABLE if mode.engine == "sync")
ASYNC_MODES = tuple(mode.name for mode in MODE_TABLE if mode.engine == "async")
# The ablation ladder: the asynchronous modes in rung order; ratios are taken against the
# first rung. The comparison's ratios are taken against the plain GPU.
LADDER = ASYNC_MODES
ABLATION_BASE = LADDER[0]
COMPARISON_BASE = "gpu-only"
# The same-chip baselines the paper's claim is tested against: the NPU alone, and
# operator-level synchronous scheduling on the same NPU + PIM.
SAME_CHIP_BASES = ("npu-only", "specpim-npu")
SAME_CHIP_MODES = tuple(mode.name for mode in MODE_TABLE if not mode.other_class)
OTHER_CLASS_MODES = tuple(mode.name for mode in MODE_TABLE if mode.other_class)

_BY_NAME = {mode.name: mode for mode in MODE_TABLE}
# Modes renamed since results files and scripts may name them.
_RENAMED = {"specpim": "specpim-gpu"}


def find_mode(name: str) -> Mode:
    """The row of mode ``name``; an unknown name is a UserError listing the known ones."""
    if name in _RENAMED:
        raise UserError(
            f"mode {name!r} is now {_RENAMED[name]!r} (the same-chip operator-level mode is "
            "'specpim-npu')"
        )
    if name not in _BY_NAME:
        raise UserError(f"unknown mode {name!r} (known: {', '.join(MODES)})")
    return _BY_NAME[name]
