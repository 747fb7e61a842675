"""A run of the NPU+PIM scenario prepared once: :class:`PreparedRun`, :func:`prepare_run`.

Preparing looks the mode up in the mode table, resolves the settings against their
platform (:func:`ahasd.sim.settings.resolve`: devices, precision, spec overrides) and derives
the controller's parameters (:func:`ahasd.sim.settings.controller_params`), once.
Everything after it (hardware assembly, the TVC width checks, the engine) reads the prepared
run and never looks the mode up or resolves the settings again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ahasd.params import EDCParams, GTSUParams, TVCParams
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.modes.table import Mode, find_mode
from ahasd.sim.settings import RunSettings, controller_params, resolve

__all__ = ["PreparedRun", "prepare_run"]


@dataclass(frozen=True)
class PreparedRun:
    """One run's settings resolved against their platform, its mode row and its library."""

    settings: RunSettings = field(
        metadata={"help": "The settings with every platform default filled in."}
    )
    mode: Mode = field(metadata={"help": "The row of settings.mode in the mode table."})
    library: SpecLibrary = field(
        metadata={
            "help": "The spec library the run reads: the platform's precision and the "
            "settings' spec overrides applied."
        }
    )
    controller: tuple[EDCParams, TVCParams, GTSUParams] = field(
        metadata={"help": "The EDC, TVC and GTSU parameters (controller_params of the settings)."}
    )


def prepare_run(
    settings: RunSettings, library: SpecLibrary | None = None, *, mode: Mode | None = None
) -> PreparedRun:
    """Find the mode's row (unless the caller found it: ``mode``, the row of
    ``settings.mode``) and resolve ``settings`` (against ``library``, default the built-in
    specs plus ``settings.spec_dirs``); UserError on an unknown mode, platform, device or
    override."""
    if mode is None:
        mode = find_mode(settings.mode)
    elif mode.name != settings.mode:
        raise ValueError(f"mode row {mode.name!r} given for settings of mode {settings.mode!r}")
    resolved, used = resolve(settings, library)
    return PreparedRun(resolved, mode, used, controller_params(resolved))
