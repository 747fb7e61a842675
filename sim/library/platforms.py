"""Platform files (``platforms/<name>.toml``) and the NPU+PIM ones among them.

Every platform file names its scenario in ``kind`` (:data:`PLATFORM_KINDS`, read by
:func:`platform_kind`): ``"npu-pim"`` files are read here (the device of every role, the
memory-sharing model, the precision of the NPU and PIM, the GPU baselines, the rank split
and the KV-reuse reading), ``"phone"`` files by :mod:`ahasd.sim.phone`. The scenario table
(:mod:`ahasd.sim.scenarios`) has one row per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.files import (
    FILE_NOTES,
    Sourced,
    check_keys,
    described,
    read_toml,
    require_string,
    sourced_numbers,
)

# The ``kind`` of a platform file of the NPU+PIM system model.
PLATFORM_KIND = "npu-pim"
# Every kind a platform file may have: one per scenario (ahasd.sim.scenarios.SCENARIOS).
PLATFORM_KINDS = (PLATFORM_KIND, "phone")
DEFAULT_PLATFORM = "table2"
MEMORY_SHARING = ("shared", "separate")
# How the PIM's ranks are divided between the draft and the target model (paper 5.1: "varying
# rank sizes ... according to model size"; docs/system-model.md, "Rank split"):
# target-first: the target on the ranks its footprint needs, the draft striped over the rest;
# footprint: each model on just the ranks its footprint needs (the rest hold nothing);
# fixed: the PIM device file's draft_ranks.
RANK_SPLITS = ("target-first", "footprint", "fixed")

# The roles a platform fills, each with the kind of device it names (the RunSettings fields
# of the same names).
DEVICE_SETTINGS = {"npu": "npu", "pim": "pim", "cpu": "cpu", "gpu": "gpu", "specpim_pim": "pim"}
# Precision a platform may impose on the models its NPU and PIM run (DeviceSpec fields).
PRECISION_FIELDS = ("weight_bytes", "kv_bytes")


@dataclass(frozen=True)
class PlatformSpec:
    """An NPU+PIM platform (``platforms/<name>.toml`` with ``kind = "npu-pim"``).

    It names the device of every role (the defaults of :class:`RunSettings`' device
    fields), the memory-sharing model and the precision its NPU and PIM compute at.
    """

    name: str = described("Platform name (file stem).")
    description: str = described("One line for humans.", "")
    devices: tuple[tuple[str, str], ...] = described("(role, device name) for every role.", ())
    memory_sharing: str = described(
        "shared: the NPU's stream and the PIM's compute share the LPDDR5 ranks; separate: "
        "each has its own memory (the authors' artifact).",
        "shared",
    )
    memory_sharing_source: str = described("Why this memory-sharing model.", "")
    precision: tuple[tuple[str, Sourced], ...] = described(
        "(weight_bytes | kv_bytes, Sourced) applied to the NPU and PIM devices.", ()
    )
    gpu_baselines: tuple[str, ...] = described(
        "GPU devices ahasd reproduce compares this platform with (default: its gpu).", ()
    )
    rank_split: str = described(
        "How the PIM's ranks are divided between the models (RANK_SPLITS).", "target-first"
    )
    rank_split_source: str = described("Why this rank split.", "")
    preverify_kv_reuse: bool = described(
        "Whether the NPU may skip re-verifying tokens a pre-verification accepted, reading "
        "the target KV entries the PIM wrote (only where both read one memory).",
        False,
    )
    preverify_kv_reuse_source: str = described("Why the KV reuse is or is not possible.", "")
    path: str = described("The file it was read from.", "")

    def device(self, role: str) -> str:
        return dict(self.devices)[role]


def load_system_platform(path: Path) -> PlatformSpec:
    """Read and validate an NPU+PIM platform file (UserError naming the file and field)."""
    data = read_toml(path)
    name = require_string(path, data, "name")
    if data.get("kind") != PLATFORM_KIND:
        raise UserError(f"{path}: field 'kind': must be {PLATFORM_KIND!r} for an NPU+PIM platform")
    tables = ("memory_sharing", "rank_split", "preverify_kv_reuse")
    known = ["name", "kind", "devices", "gpu_baselines", *tables, *PRECISION_FIELDS]
    check_keys(path, data, [*known, *FILE_NOTES])
    for table in tables:
        if isinstance(data.get(table), dict):
            check_keys(path, data[table], ("value", "source"), where=table)
    roles = data.get("devices")
    if not isinstance(roles, dict):
        raise UserError(f"{path}: field 'devices': a table naming the device of every role")
    devices = tuple((role, require_string(path, roles, role)) for role in DEVICE_SETTINGS)
    unknown = sorted(set(roles) - set(DEVICE_SETTINGS))
    if unknown:
        raise UserError(
            f"{path}: field 'devices': unknown role {unknown[0]!r} "
            f"(roles: {', '.join(DEVICE_SETTINGS)})"
        )
    sharing = data.get("memory_sharing")
    if not isinstance(sharing, dict):
        raise UserError(f"{path}: field 'memory_sharing': a table with value and source")
    value = sharing.get("value")
    if value not in MEMORY_SHARING:
        raise UserError(
            f"{path}: field 'memory_sharing': value must be one of {', '.join(MEMORY_SHARING)}, "
            f"not {value!r}"
        )
    source = require_string(path, sharing, "source")
    precision = sourced_numbers(path, data, PRECISION_FIELDS, set(), set())
    baselines = data.get("gpu_baselines", [dict(devices)["gpu"]])
    if not isinstance(baselines, list) or not all(isinstance(b, str) and b for b in baselines):
        raise UserError(f"{path}: field 'gpu_baselines': must be a list of GPU device names")
    split, split_source = _platform_choice(path, data, "rank_split", RANK_SPLITS, "target-first")
    reuse, reuse_source = _platform_choice(
        path, data, "preverify_kv_reuse", (True, False), value == "shared"
    )
    if reuse and value != "shared":
        raise UserError(
            f"{path}: field 'preverify_kv_reuse': true needs memory_sharing 'shared' (with "
            "separate memories the NPU cannot read the KV entries the PIM wrote)"
        )
    return PlatformSpec(
        name=name,
        description=str(data.get("description", "")),
        devices=devices,
        memory_sharing=value,
        memory_sharing_source=source,
        precision=tuple(precision.items()),
        gpu_baselines=tuple(baselines),
        rank_split=split,
        rank_split_source=split_source,
        preverify_kv_reuse=reuse,
        preverify_kv_reuse_source=reuse_source,
        path=str(path),
    )


def _platform_choice(path: Path, data: dict, key: str, choices: tuple, default):
    """An optional platform table ``[key]`` with ``value`` (one of ``choices``) and
    ``source``; ``(default, "default")`` when the table is absent."""
    if key not in data:
        return default, "default"
    entry = data[key]
    if not isinstance(entry, dict):
        raise UserError(f"{path}: field {key!r}: a table with value and source")
    value = entry.get("value")
    if isinstance(value, bool) != isinstance(choices[0], bool) or value not in choices:
        listed = ", ".join(str(c).lower() for c in choices)
        raise UserError(f"{path}: field {key!r}: value must be one of {listed}, not {value!r}")
    return value, require_string(path, entry, "source")


def platform_kind(path: Path) -> str:
    """The ``kind`` of platform file ``path``, one of :data:`PLATFORM_KINDS`; a file
    without one, or with another, is a UserError naming the file and the known kinds."""
    kind = read_toml(path).get("kind")
    if kind not in PLATFORM_KINDS:
        given = "missing" if kind is None else f"{kind!r} is not a platform kind"
        raise UserError(
            f"{path}: field 'kind': {given} (every platform file names its scenario: "
            f"{', '.join(PLATFORM_KINDS)})"
        )
    return kind
