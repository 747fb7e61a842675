"""Spec-field overrides (``--spec-override devices.NAME.FIELD=VALUE``): a spec library
with numbers replaced, each keeping where the original came from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import fields

from ahasd.errors import UserError
from ahasd.sim.library.files import SPEC_VALUE_MAX, SPEC_VALUE_MIN, Sourced
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.library.specs import (
    DEVICE_INT_FIELDS,
    MODEL_CHOICES,
    MODEL_INT_FIELDS,
    ZERO_OK_FIELDS,
    DeviceSpec,
    ModelSpec,
    PowerSpec,
    check_device,
    check_model,
)

# Override sections: spec-file kind -> (SpecLibrary attribute, dataclass, field check).
_OVERRIDE_SECTIONS = {"devices": DeviceSpec, "power": PowerSpec, "models": ModelSpec}
# Not numbers: left out of the spec-field overrides (a model's operator fields are names).
_OVERRIDE_TEXT_FIELDS = {"name", "kind", "description", "sources", "device", *MODEL_CHOICES}


def overridable_fields(section: str) -> tuple[str, ...]:
    """The numeric fields of a spec-file kind (``devices``, ``power``, ``models``)."""
    cls = _OVERRIDE_SECTIONS[section]
    return tuple(f.name for f in fields(cls) if f.name not in _OVERRIDE_TEXT_FIELDS)


def integer_spec_fields(section: str) -> frozenset[str]:
    """The overridable fields of a spec-file kind that hold integers (``units``,
    ``layers``, ...); an unknown section has none."""
    if section not in _OVERRIDE_SECTIONS:
        return frozenset()
    return frozenset(overridable_fields(section)) & (DEVICE_INT_FIELDS | MODEL_INT_FIELDS)


def _split_override(path: str) -> tuple[str, str, str]:
    """``devices.opt-1.3b.layers`` -> ``("devices", "opt-1.3b", "layers")`` (names may hold
    dots; the field is the last part); a malformed path is a UserError."""
    section, _, rest = path.partition(".")
    name, _, field_name = rest.rpartition(".")
    if section not in _OVERRIDE_SECTIONS or not name or not field_name:
        raise UserError(
            f"unknown spec field {path!r}: expected devices.NAME.FIELD, power.NAME.FIELD or "
            "models.NAME.FIELD"
        )
    return section, name, field_name


def _override_one(library: dict, path: str, value) -> None:
    section, name, field_name = _split_override(path)
    table = library[section]
    if name not in table and section == "power" and name in library["devices"]:
        table[name] = PowerSpec(device=name)  # a device without a power file: all zeros
    if name not in table:
        known = ", ".join(sorted(table))
        raise UserError(f"spec override {path!r}: unknown {section[:-1]} {name!r} (known: {known})")
    known_fields = overridable_fields(section)
    if field_name not in known_fields:
        raise UserError(
            f"unknown spec field {path!r} (known fields of {section}: {', '.join(known_fields)})"
        )
    spec = table[name]
    integer = field_name in (DEVICE_INT_FIELDS | MODEL_INT_FIELDS)
    where = f"spec override {path}"
    if integer and not isinstance(value, int):
        raise UserError(f"{where}: value must be an integer, not {value!r}")
    zero_ok = section == "power" or field_name in ZERO_OK_FIELDS
    if value < 0 or (value == 0 and not zero_ok):
        bound = "non-negative" if zero_ok else "positive"
        raise UserError(f"{where}: value must be {bound}, not {value!r}")
    if value != 0 and not SPEC_VALUE_MIN <= value <= SPEC_VALUE_MAX:
        raise UserError(
            f"{where}: value must lie in {SPEC_VALUE_MIN:g}..{SPEC_VALUE_MAX:g}, not {value!r}"
        )
    old = dict(spec.sources).get(field_name)
    sourced = Sourced(
        value=value,
        source=f"override ({old.source if old else 'no value in the file'})",
        confidence=old.confidence if old else "override",
    )
    sources = (*tuple((k, v) for k, v in spec.sources if k != field_name), (field_name, sourced))
    spec = dataclasses.replace(spec, **{field_name: value}, sources=sources)
    if section == "devices":
        check_device(spec, where)
    elif section == "models":
        check_model(spec, where)
    table[name] = spec


def apply_overrides(library: SpecLibrary, overrides: tuple) -> SpecLibrary:
    """``library`` (its file values, whatever overrides it already carries) with
    ``overrides`` applied in order; memoised, so equal overrides share cost caches."""
    root = library.root or library
    overrides = tuple(overrides)
    if not overrides:
        return root
    cache = _OVERRIDE_CACHE.setdefault(id(root), (root, {}))[1]
    if overrides not in cache:
        tables = {name: dict(getattr(root, name)) for name in _OVERRIDE_SECTIONS}
        for path, value in overrides:
            _override_one(tables, path, value)
        cache[overrides] = dataclasses.replace(root, **tables, overrides=overrides, root=root)
    return cache[overrides]


# id(root library) -> (root kept alive so the id stays unique, {overrides: SpecLibrary})
_OVERRIDE_CACHE: dict[int, tuple[SpecLibrary, dict]] = {}


def role_path(path: str, roles: dict[str, str]) -> str:
    """``devices.@npu.x`` -> ``devices.npu-mobile.x`` with the run's device of that role."""
    section, _, rest = path.partition(".")
    if not rest.startswith("@"):
        return path
    role, _, field_name = rest[1:].partition(".")
    if role not in roles:
        raise UserError(
            f"spec override {path!r}: unknown role @{role} (roles: "
            f"{', '.join('@' + r for r in roles)})"
        )
    return f"{section}.{roles[role]}.{field_name}"
