"""The scenario table: every kind of platform the system model runs, in one place.

A platform file names its scenario in ``kind`` (:data:`~ahasd.sim.library.platforms.
PLATFORM_KINDS`); :data:`SCENARIOS` has one row (:class:`Scenario`) per kind, each naming
the scenario's settings class, its mode table, its platform loader, how a run is prepared
once, its hardware builder and its run function. The command line, sweeps and reproduce
choose a scenario here (:func:`scenario_of` for a platform name); a new scenario is a row
here, its kind in ``PLATFORM_KINDS`` and its package beside :mod:`ahasd.sim.modes` and
:mod:`ahasd.sim.phone`.

Every row has one shape::

    row = scenario_of(platform, spec_dirs)
    prepared = row.prepare(row.settings(platform=platform, ...))  # looks everything up once
    result = row.run(prepared)  # builds the hardware (row.build_hardware) and runs
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ahasd.errors import UserError
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.platforms import PLATFORM_KIND, PLATFORM_KINDS, load_system_platform
from ahasd.sim.modes import MODE_TABLE, build_hardware, prepare_run, simulate_prepared
from ahasd.sim.phone import (
    PHONE_KIND,
    PHONE_MODE_TABLE,
    PhoneSettings,
    build_phone_hardware,
    known_platforms,
    load_platform,
    prepare_phone_run,
    simulate_prepared_phone,
)
from ahasd.sim.settings import RunSettings

__all__ = ["SCENARIOS", "Scenario", "scenario_of"]


@dataclass(frozen=True)
class Scenario:
    """One scenario: what runs on the platforms of one ``kind``."""

    kind: str = field(metadata={"help": "The platform files' kind (PLATFORM_KINDS)."})
    summary: str = field(metadata={"help": "One line for humans."})
    settings: type = field(metadata={"help": "The settings dataclass of one run."})
    modes: tuple = field(metadata={"help": "The mode table: rows with name and summary."})
    load_platform: Callable = field(
        metadata={"help": "(path) -> the platform spec; UserError naming the file and field."}
    )
    platforms: Callable[..., tuple[str, ...]] = field(
        metadata={"help": "(spec_dirs) -> the names of the platforms of this kind."}
    )
    prepare: Callable = field(
        metadata={"help": "(settings) -> the prepared run: settings resolved, mode row found."}
    )
    build_hardware: Callable = field(metadata={"help": "(prepared run) -> its cost models."})
    run: Callable = field(
        metadata={"help": "(prepared run, **options) -> the result (summary, metrics, ...)."}
    )


def _system_platforms(spec_dirs=()) -> tuple[str, ...]:
    return tuple(load_library(spec_dirs).platforms)


def _phone_platforms(spec_dirs=()) -> tuple[str, ...]:
    return tuple(known_platforms(spec_dirs))


SCENARIOS = {
    row.kind: row
    for row in (
        Scenario(
            PLATFORM_KIND,
            "NPU + PIM speculative decoding: the AHASD ladder and its baselines",
            RunSettings,
            MODE_TABLE,
            load_system_platform,
            _system_platforms,
            prepare_run,
            build_hardware,
            simulate_prepared,
        ),
        Scenario(
            PHONE_KIND,
            "sustained speculative decoding on a phone SoC under a thermal limit",
            PhoneSettings,
            PHONE_MODE_TABLE,
            load_platform,
            _phone_platforms,
            prepare_phone_run,
            build_phone_hardware,
            simulate_prepared_phone,
        ),
    )
}


def scenario_of(platform: str, spec_dirs=()) -> Scenario:
    """The row of the scenario whose platforms include ``platform`` (the built-in ones and
    those of ``spec_dirs``); UserError naming the known platforms of every kind if none.

    The rows are asked in :data:`PLATFORM_KINDS` order, so an NPU+PIM platform wins over
    a phone SoC of the same name."""
    known = {kind: SCENARIOS[kind].platforms(spec_dirs) for kind in PLATFORM_KINDS}
    for kind, names in known.items():
        if platform in names:
            return SCENARIOS[kind]
    listed = "; ".join(f"{kind}: {', '.join(sorted(names))}" for kind, names in known.items())
    raise UserError(f"unknown platform {platform!r} (known platforms by kind: {listed})")
