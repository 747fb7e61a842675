"""Grid files: the axes of a sweep, read from TOML and expanded into run settings.

A grid file's ``[axes]`` table names the values of any run setting, spec-file number,
policy parameter or controller parameter (:func:`load_grid`, each value checked against the
field's type and the command line's bounds); the sweep runs their product (:func:`expand`,
at most :data:`MAX_GRID_RUNS` points). :func:`check_one_setter_per_field` refuses two axes
(or an axis and a command-line override) that set one field. See ``docs/reproduce.md`` for
the format.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.files import read_toml
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.library.overrides import integer_spec_fields, role_path
from ahasd.sim.library.platforms import DEVICE_SETTINGS
from ahasd.sim.settings import (
    CONTROLLER_BLOCKS,
    KV_LENGTH_MAX,
    SEED_MAX,
    RunSettings,
    resolve,
)
from ahasd.sim.traces.sources import builtin_trace_names

__all__ = [
    "MAX_GRID_RUNS",
    "GridFile",
    "check_one_setter_per_field",
    "expand",
    "load_grid",
    "setting_axes",
]

# The most runs one sweep takes (docs/reproduce.md): every run's settings and identity are
# built and held before the first run starts, so a bigger grid is refused at once rather than
# filling memory for minutes with no output.
MAX_GRID_RUNS = 100_000

# RunSettings fields a grid axis may not set (they say how to run, not what).
_NOT_AXES = {"spec_overrides", "controller_params", "policy_params", "spec_dirs", "record_timeline"}


def setting_axes() -> tuple[str, ...]:
    """The RunSettings fields a grid axis may name."""
    return tuple(f.name for f in fields(RunSettings) if f.name not in _NOT_AXES)


def _axis_kind(key: str) -> str:
    """``setting``, ``spec``, ``policy`` or ``controller``; UserError on anything else."""
    if key in setting_axes():
        return "setting"
    head = key.partition(".")[0]
    if head in ("devices", "power", "models") and key.count(".") >= 2:
        return "spec"
    if head == "policy_params" and key.count(".") == 1:
        return "policy"
    if head in CONTROLLER_BLOCKS and key.count(".") == 1:
        return "controller"
    raise UserError(
        f"grid axis {key!r} is unknown: use a run setting ({', '.join(setting_axes())}), "
        "devices.NAME.FIELD, power.NAME.FIELD, models.NAME.FIELD, policy_params.KEY or "
        f"{'/'.join(CONTROLLER_BLOCKS)}.FIELD"
    )


@dataclass(frozen=True)
class GridFile:
    """A parsed grid file: its axes in file order, each a key and its values."""

    path: str
    description: str
    axes: tuple[tuple[str, tuple], ...]

    def axis_names(self) -> tuple[str, ...]:
        """The axes' keys in file order."""
        return tuple(key for key, _ in self.axes)


def load_grid(path: Path) -> GridFile:
    """Read a grid file (UserError naming the file and the axis on anything wrong).

    Format: an optional ``description`` string and an ``[axes]`` table; each key an axis
    (see :func:`expand`), each value a list of values or a single value (a list of one).
    """
    data = read_toml(Path(path))
    axes = data.get("axes")
    if not isinstance(axes, dict) or not axes:
        raise UserError(f"{path}: needs an [axes] table with at least one axis")
    unknown = sorted(set(data) - {"axes", "description"})
    if unknown:
        raise UserError(f"{path}: unknown top-level key {unknown[0]!r} (description, [axes])")
    parsed = []
    for key, values in axes.items():
        kind = _axis_kind(key)
        values = tuple(values) if isinstance(values, list) else (values,)
        if not values:
            raise UserError(f"{path}: axis {key!r} has no values")
        if kind != "policy":  # a policy checks its own parameters (any JSON value)
            expected = _axis_type(key, kind)
            for value in values:
                _check_axis_value(path, key, value, expected)
                low, high = _AXIS_BOUNDS.get(key, (None, None))
                if low is not None and not low <= value <= high:
                    raise UserError(
                        f"{path}: axis {key!r}: value {value!r} must be in {low}..{high}, as "
                        f"the command line's --{key.replace('_', '-')}"
                    )
        parsed.append((key, values))
    return GridFile(str(path), str(data.get("description", "")), tuple(parsed))


# Run settings whose grid values have the command line's bounds (ahasd.cli.args): a seed a
# sweep option would refuse is refused in a grid file too.
_AXIS_BOUNDS = {
    "seed": (0, SEED_MAX),
    "tokens": (1, KV_LENGTH_MAX - 1),
    "prompt_tokens": (1, KV_LENGTH_MAX - 1),
    "draft_queue_tokens": (1, KV_LENGTH_MAX),
    "specpim_planned_draft": (1, KV_LENGTH_MAX),
    "tvc_ratio_bits": (16, 48),
    "tvc_cycle_bits": (16, 48),
}

# What a grid value of each kind of field must be: (accepted types, how it reads).
_VALUE_TYPES = {
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "str": ((str,), "a string"),
    "bool": ((bool,), "true or false"),
}


def _axis_type(key: str, kind: str) -> str:
    """``int``, ``float``, ``str`` or ``bool``: what the field an axis sets holds."""
    if kind == "spec":
        section, _, rest = key.partition(".")
        name = rest.rpartition(".")[2]
        return "int" if name in integer_spec_fields(section) else "float"
    if kind == "controller":
        block, _, name = key.partition(".")
        annotations = {f.name: str(f.type) for f in fields(CONTROLLER_BLOCKS[block])}
        return annotations.get(name, "str").split("|")[0].strip()
    annotation = {f.name: str(f.type) for f in fields(RunSettings)}[key]
    return annotation.split("|")[0].strip()


def _check_axis_value(path, key: str, value, expected: str) -> None:
    """UserError naming the grid file, the axis and the value unless it is of the field's
    type: TOML's true/false for a switch (the string "no" is not false), integers for
    counts (neither a bool nor 2.0)."""
    types, reads = _VALUE_TYPES.get(expected, _VALUE_TYPES["str"])
    wrong = not isinstance(value, types) or (bool not in types and isinstance(value, bool))
    if isinstance(value, float) and not math.isfinite(value):
        wrong = True
    if wrong:
        raise UserError(
            f"{path}: axis {key!r}: value {value!r} must be {reads}, not {_toml_kind(value)}"
        )


def _toml_kind(value) -> str:
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a float")):
        if isinstance(value, kind):
            return name
    return {str: "a string", list: "an array", dict: "a table"}.get(
        type(value), type(value).__name__
    )


def expand(axes: Iterable[tuple[str, tuple]], base: dict) -> list[RunSettings]:
    """The settings of every point of the product of ``axes`` (first axis outermost) on top
    of ``base`` (RunSettings keyword arguments).

    An axis is a run setting (``mode``, ``platform``, ``tokens``, ...; ``trace`` accepts
    ``builtin`` for every built-in trace, ``none`` for the pair's synthetic preset), a spec
    field (``devices.NAME.FIELD``, ``power.NAME.FIELD``, ``models.NAME.FIELD``, NAME may be
    ``@npu`` etc.), a policy parameter (``policy_params.KEY``) or a controller parameter
    (``edc.FIELD``, ``tvc.FIELD``, ``gtsu.FIELD``).
    """
    axes = [(key, _expand_values(key, values)) for key, values in axes]
    count = math.prod(len(values) for _, values in axes)
    if count > MAX_GRID_RUNS:
        sizes = " x ".join(f"{key} {len(values)}" for key, values in axes)
        raise UserError(
            f"the grid has {count:,} runs ({sizes}), more than the limit of "
            f"{MAX_GRID_RUNS:,} runs in one sweep; split it into smaller grids"
        )
    points = []
    for combination in itertools.product(*(values for _, values in axes)):
        kwargs = dict(base)
        overrides = list(kwargs.pop("spec_overrides", ()))
        controller = list(kwargs.pop("controller_params", ()))
        policy = list(kwargs.pop("policy_params", ()))
        for (key, _), value in zip(axes, combination, strict=True):
            kind = _axis_kind(key)
            if kind == "setting":
                kwargs[key] = value
            elif kind == "spec":
                overrides.append((key, value))
            elif kind == "policy":
                policy.append((key.partition(".")[2], value))
            else:
                controller.append((key, value))
        points.append(
            RunSettings(
                **kwargs,
                spec_overrides=tuple(overrides),
                controller_params=tuple(controller),
                policy_params=tuple(policy),
            )
        )
    return points


# Run settings that set a controller field also named by a controller axis.
_SETTING_FIELDS = {"tvc_ratio_bits": "tvc.ratio_bits", "tvc_cycle_bits": "tvc.cycle_bits"}


def check_one_setter_per_field(
    grid: GridFile, points: list[RunSettings], base: dict, library: SpecLibrary
) -> None:
    """UserError naming the grid file if two of its axes, or an axis and a command-line
    override, set one field: ``tvc_cycle_bits`` and ``tvc.cycle_bits``, or
    ``devices.@npu.X`` and ``devices.npu-mobile.X`` on a run whose NPU is ``npu-mobile``.
    Otherwise the later would win silently and the run's label would show both."""
    given = [(f"--spec-override {p}", p) for p, _ in base.get("spec_overrides", ())]
    given += [(f"--controller-param {p}", p) for p, _ in base.get("controller_params", ())]
    axes = [(f"axis {key!r}", _SETTING_FIELDS.get(key, key)) for key in grid.axis_names()]
    seen_devices = set()
    for point in points:
        devices = tuple(getattr(point, name) for name in ("platform", *DEVICE_SETTINGS))
        if devices in seen_devices:
            continue
        seen_devices.add(devices)
        resolved = resolve(point, library)[0]
        roles = {role: getattr(resolved, role) for role in DEVICE_SETTINGS}
        setters: dict[str, str] = {}
        for label, name in given + axes:
            field = role_path(name, roles) if name.startswith(_SPEC_HEADS) else name
            if field in setters and label.startswith("axis"):
                raise UserError(
                    f"{grid.path}: {setters[field]} and {label} both set {field}; keep one"
                )
            setters.setdefault(field, label)


_SPEC_HEADS = ("devices.", "power.", "models.")


def _expand_values(key: str, values: tuple) -> tuple:
    if key != "trace":
        return tuple(tuple(v) if isinstance(v, list) else v for v in values)
    out = []
    for value in values:
        if value == "builtin":
            out += builtin_trace_names()
        else:
            out.append(None if value == "none" else value)
    return tuple(out)
