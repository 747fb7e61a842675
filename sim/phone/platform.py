"""Phone platforms: ``sim/specs/platforms/<name>.toml`` with ``kind = "phone"``, one SoC
class each.

:func:`load_platform` reads and validates one file (every number with its source, in the
spec-file format of :mod:`ahasd.sim.library.files`); :func:`known_platforms` lists the built-in and
``--spec-dir`` ones; :func:`find_platform` loads one by name.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.files import (
    FILE_NOTES,
    Sourced,
    check_keys,
    read_toml,
    require_string,
    sourced_number,
)
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR, spec_paths
from ahasd.sim.library.platforms import platform_kind

__all__ = ["PHONE_KIND", "PlatformSpec", "find_platform", "known_platforms", "load_platform"]

# The ``kind`` of a phone SoC's platform file (one of library.platforms.PLATFORM_KINDS).
PHONE_KIND = "phone"

_PLATFORM_NUMBERS = (
    "npu_sram_bandwidth",
    "gpu_active_w",
    "npu_active_w",
    "soc_base_w",
    "dram_idle_w",
    "ambient_c",
    "skin_limit_c",
    "arbiter_c",
    "die_limit_c",
    "r_skin_k_per_w",
    "tau_skin_s",
    "r_die_k_per_w",
    "tau_die_s",
    "governor_period_s",
    "hysteresis_c",
    "voltage_floor",
)


@dataclass(frozen=True)
class PlatformSpec:
    """One SoC class: its NPU and GPU device names and the platform-level figures."""

    name: str
    description: str
    npu: str
    gpu: str
    pair: str
    npu_sram_bandwidth: float
    gpu_active_w: float
    npu_active_w: float
    soc_base_w: float
    dram_idle_w: float
    ambient_c: float
    skin_limit_c: float
    arbiter_c: float
    die_limit_c: float
    r_skin_k_per_w: float
    tau_skin_s: float
    r_die_k_per_w: float
    tau_die_s: float
    governor_period_s: float
    hysteresis_c: float
    voltage_floor: float
    clock_levels: tuple[float, ...]
    memory_levels: tuple[float, ...]
    path: str = ""
    sources: tuple[tuple[str, Sourced], ...] = ()


def _levels(path: Path, data: dict, key: str) -> tuple[tuple[float, ...], Sourced]:
    entry = data.get(key)
    if not isinstance(entry, dict):
        raise UserError(f"{path}: field '{key}': required, a table with value, source, confidence")
    values = entry.get("value")
    ok = isinstance(values, list) and values
    ok = ok and all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1 for v in values
    )
    if not ok:
        raise UserError(
            f"{path}: field '{key}': value must be a non-empty list of numbers in (0, 1]"
        )
    if any(b > a for a, b in itertools.pairwise(values)) or values[0] != 1:
        raise UserError(f"{path}: field '{key}': levels must start at 1 and never increase")
    scalar = sourced_number(
        path, {**data, key: {**entry, "value": 1.0}}, key, integer=False, zero_ok=False
    )
    return tuple(float(v) for v in values), scalar


def load_platform(path: Path) -> PlatformSpec:
    """Read and validate ``platforms/<name>.toml`` (UserError naming the file and field)."""
    data = read_toml(path)
    if data.get("kind") != PHONE_KIND:
        raise UserError(f"{path}: field 'kind': must be {PHONE_KIND!r} for a phone SoC")
    levels = ("clock_levels", "memory_levels")
    known = ["name", "kind", "npu", "gpu", "pair", *_PLATFORM_NUMBERS, *levels, *FILE_NOTES]
    check_keys(path, data, known)
    strings = {key: require_string(path, data, key) for key in ("name", "npu", "gpu", "pair")}
    numbers = {}
    for key in _PLATFORM_NUMBERS:
        if key not in data:
            raise UserError(f"{path}: field '{key}': required for a platform")
        zero_ok = key in ("ambient_c", "hysteresis_c")
        numbers[key] = sourced_number(path, data, key, integer=False, zero_ok=zero_ok)
    if not numbers["voltage_floor"].value <= 1:
        raise UserError(f"{path}: field 'voltage_floor': value must be at most 1")
    clock, clock_src = _levels(path, data, "clock_levels")
    memory, memory_src = _levels(path, data, "memory_levels")
    if len(clock) != len(memory):
        raise UserError(
            f"{path}: field 'memory_levels': needs one entry per clock level ({len(clock)})"
        )
    sources = (*numbers.items(), ("clock_levels", clock_src), ("memory_levels", memory_src))
    return PlatformSpec(
        description=str(data.get("description", "")),
        clock_levels=clock,
        memory_levels=memory,
        path=str(path),
        sources=sources,
        **strings,
        **{key: float(item.value) for key, item in numbers.items()},
    )


def known_platforms(spec_dirs=()) -> dict[str, Path]:
    """Phone platform name -> file, built-in first, later ``spec_dirs`` override by file stem.

    The platform files of other kinds (:func:`~ahasd.sim.library.platforms.platform_kind`)
    share the folder and are left out; a file without a known kind is a UserError."""
    found = {}
    for directory in (BUILTIN_SPEC_DIR, *(Path(d) for d in spec_dirs)):
        for path in spec_paths(directory, "platforms"):
            if platform_kind(path) == PHONE_KIND:
                found[path.stem] = path
    return found


def find_platform(name: str, spec_dirs=()) -> PlatformSpec:
    """Load platform ``name`` (UserError listing the known ones if there is none)."""
    found = known_platforms(spec_dirs)
    if name not in found:
        raise UserError(f"unknown platform {name!r} (known: {', '.join(sorted(found))})")
    spec = load_platform(found[name])
    if spec.name != name:
        raise UserError(f"{found[name]}: field 'name': {spec.name!r} differs from the file name")
    return spec
