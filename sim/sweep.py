"""Sweeps: a grid of run settings, run once each, resumable, on processes or on Ray.

- **Grid files** (:func:`load_grid`): a TOML file whose ``[axes]`` table names the values of
  any run setting, spec-file number, policy parameter or controller parameter; the sweep
  runs their product (:func:`expand`). See ``docs/reproduce.md`` for the format.
- **Identity** (:func:`run_identity`): every run has a hash of its fully resolved
  configuration (the resolved settings, every spec value of the devices, models and pair it
  reads, the controller and policy parameters), the content hash of its trace and the tool
  version. A results row carries all three; resume skips exactly the runs whose identity is
  already in the results file, so a changed spec or trace file reruns what it affects.
  Two requested runs with one identity (the GPU-only baseline under two NPU+PIM platforms)
  are simulated once.
- **Results** (:class:`ResultsDir`): ``DIR/results.jsonl``, one JSON line per run
  (schema :data:`ROW_SCHEMA`, docs/json.md), appended and fsynced as runs finish
  (:class:`ahasd.output.Journal`); a half-written last line (a killed sweep) is dropped,
  saying so; a whole last row without its newline is kept. A
  lock file (``DIR/.lock``, ``fcntl.flock``, holding the owner's pid and start time) makes a
  second sweep into the same directory stop with a message naming the holder.
- **Backends** (:func:`run_sweep`): ``local`` (a process pool, or in-process for one job)
  and ``ray`` (Ray tasks on a local instance, or on a cluster given its address).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import fcntl
import functools
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import ahasd
from ahasd import golden
from ahasd.errors import UserError
from ahasd.output import Journal, check_folder, open_regular
from ahasd.params import TVCParams
from ahasd.sim.library.files import read_toml
from ahasd.sim.library.loading import SpecLibrary, load_library
from ahasd.sim.library.overrides import integer_spec_fields, role_path
from ahasd.sim.library.platforms import DEVICE_SETTINGS
from ahasd.sim.modes import prepare_run, simulate
from ahasd.sim.modes.hardware import ASSEMBLY_ROLES
from ahasd.sim.settings import CONTROLLER_BLOCKS, SEED_MAX, RunSettings, controller_params, resolve
from ahasd.sim.traces.format import builtin_trace_paths
from ahasd.sim.traces.sources import builtin_trace_names

__all__ = [
    "BACKENDS",
    "MAX_GRID_RUNS",
    "RESULTS_FILE",
    "ROW_SCHEMA",
    "ResultsDir",
    "check_one_setter_per_field",
    "expand",
    "finished_rows",
    "load_grid",
    "run_identity",
    "run_sweep",
    "scenario_label",
    "settings_key",
]

RESULTS_FILE = "results.jsonl"
LOCK_FILE = ".lock"
# The schema of a results row (docs/json.md): /2 identifies runs by their hashes.
ROW_SCHEMA = "ahasd-sweep-run/2"
BACKENDS = ("local", "ray")
# The most runs one sweep takes (docs/reproduce.md): every run's settings and identity are
# built and held before the first run starts, so a bigger grid is refused at once rather than
# filling memory for minutes with no output.
MAX_GRID_RUNS = 100_000

# RunSettings fields a grid axis may not set (they say how to run, not what).
_NOT_AXES = {"spec_overrides", "controller_params", "policy_params", "spec_dirs", "record_timeline"}
# Settings that do not change what a run computes (labels, or folded into spec values).
_NOT_HASHED = {"platform", "spec_overrides", "spec_dirs", "record_timeline"}
# Settings only the asynchronous engine reads (the controller's are hashed as parameters).
_ASYNC_ONLY = (
    "draft_queue_tokens",
    "tvc_ratio_bits",
    "tvc_cycle_bits",
    "controller_params",
    "preverify_kv_reuse",
)
# Settings that label a scenario only when they differ from their default.
_SCENARIO_SKIP = {"mode", "pair", "policy", "seed", "trace", "spec_dirs", "record_timeline"}


# -- grid files ----------------------------------------------------------------------------


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


# The longest KV cache the controller's default length fields hold (as ahasd.cli.args).
KV_LENGTH_MAX = (1 << TVCParams().length_bits) - 1
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


# -- identity of a run -----------------------------------------------------------------------


def settings_key(settings: RunSettings) -> str:
    """The requested settings as canonical JSON (what a results row was asked for)."""
    data = dataclasses.asdict(settings)
    data.pop("record_timeline")
    return json.dumps(data, sort_keys=True)


def scenario_label(settings: RunSettings) -> str:
    """Everything a run was asked for beyond mode, pair, policy, seed and trace, as
    ``key=value`` words (settings that differ from their default, overrides, parameters);
    runs of one scenario are compared with each other in the report."""
    words = []
    for item in fields(RunSettings):
        name = item.name
        value = getattr(settings, name)
        if name in _SCENARIO_SKIP or (name != "platform" and value == item.default):
            continue
        if name in ("spec_overrides", "controller_params", "policy_params"):
            words += [f"{path}={_short(v)}" for path, v in value]
        else:
            words.append(f"{name}={_short(value)}")
    return " ".join(words)


def _short(value) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _spec_dict(spec) -> dict:
    data = dataclasses.asdict(spec)
    data.pop("sources", None)
    return data


def run_identity(settings: RunSettings, library: SpecLibrary) -> dict:
    """``config_hash``, ``trace_hash``, ``version`` and their combination ``run_id``.

    The configuration hash covers the resolved settings (without the platform's name and
    the override list: their effect is in the spec values), the specs of the devices the
    mode's hardware assembly reads (and their power figures), the pair and its two models,
    the controller parameters (asynchronous modes) and the policy parameters.
    """
    prepared = prepare_run(settings, library)
    resolved, used, mode = prepared.settings, prepared.library, prepared.mode
    roles = ASSEMBLY_ROLES[mode.assembly]
    config = {
        key: value
        for key, value in dataclasses.asdict(resolved).items()
        if key not in _NOT_HASHED and (key not in DEVICE_SETTINGS or key in roles)
    }
    if "pim" not in roles:
        del config["memory_sharing"]  # a mode without the LPDDR5-PIM shares nothing
    if mode.engine != "async":
        for name in _ASYNC_ONLY:
            del config[name]
    if mode.assembly not in ("specpim-gpu", "specpim-npu"):
        del config["specpim_planned_draft"]
    if "pim" not in roles:
        del config["rank_split"]
    pair = used.pair(resolved.pair)
    draft = used.model(resolved.draft_model or pair.draft)
    target = used.model(resolved.target_model or pair.target)
    specs = {
        "devices": {role: _spec_dict(used.device(getattr(resolved, role))) for role in roles},
        "power": {role: _spec_dict(used.power_of(getattr(resolved, role))) for role in roles},
        "pair": dataclasses.asdict(pair),
        "models": [_spec_dict(draft), _spec_dict(target)],
    }
    if mode.engine == "async":
        specs["controller"] = [p.as_dict() for p in controller_params(resolved)]
    config_hash = _digest({"settings": config, "specs": specs})
    trace_hash = _trace_hash(resolved, pair.preset)
    version = model_version()
    return {
        "run_id": _digest([config_hash, trace_hash, version]),
        "config_hash": config_hash,
        "trace_hash": trace_hash,
        "version": version,
    }


@functools.cache
def model_version() -> str:
    """The tool version plus a digest of the code a run's result depends on.

    ``ahasd.__version__`` alone would let a resumed sweep reuse rows an edited model would
    now compute differently; the digest covers the source of the system model, the golden
    models and the shared parameters (``+`` and 12 hex digits, e.g. ``0.1.0+3f2a...``).
    """
    root = Path(ahasd.__file__).parent
    packages = (Path(__file__).parent, Path(golden.__file__).parent)
    files = sorted(p for package in packages for p in package.rglob("*.py"))
    files += [root / "params.py", root / "errors.py"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return f"{ahasd.__version__}+{digest.hexdigest()[:12]}"


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _trace_hash(settings: RunSettings, preset: str) -> str:
    """Content hash of a trace file; for a generated trace, of what generates it."""
    spec = settings.trace
    builtin = {p.name.removesuffix(".jsonl"): p for p in builtin_trace_paths()}
    if spec is not None and not spec.startswith("iid:") and spec in builtin:
        return _file_digest(builtin[spec])
    if spec is not None and not spec.startswith("iid:") and Path(spec).is_file():
        return _file_digest(Path(spec))
    generated = spec or f"synthetic:{preset}"
    return _digest([generated, settings.tokens, settings.seed])


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:20]


# -- the results directory -----------------------------------------------------------------


class ResultsDir:
    """``DIR/results.jsonl`` under ``DIR/.lock``: use as a context manager.

    Entering takes the lock (a UserError naming the holder if another process has it),
    reads the finished rows and drops a half-written last line; :meth:`append` writes one
    row and fsyncs it. Leaving releases the lock.
    """

    def __init__(self, directory: Path, *, option: str | None = "--out") -> None:
        self.directory = Path(directory)
        self.path = self.directory / RESULTS_FILE
        self.option = option
        self.rows: list[dict] = []
        self._lock = None
        self._journal = None

    def __enter__(self) -> ResultsDir:
        check_folder(self.directory, option=self.option, files=(RESULTS_FILE, LOCK_FILE))
        self.directory.mkdir(parents=True, exist_ok=True)
        # Not followed if a link: truncating it below would clobber whatever it points to.
        fd = open_regular(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, option=self.option)
        lock = os.fdopen(fd, "r+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            pid = _holder_pid(holder)
            if pid is not None and not _running(pid):
                raise UserError(
                    f"{self.directory} is locked by processes left behind by a sweep whose pid "
                    f"{pid} is no longer running ({holder}); end them, or write to another "
                    "--out"
                ) from None
            raise UserError(
                f"{self.directory} is in use by another sweep ({holder}); wait for it to "
                "finish (it resumes where it stops) or write to another --out"
            ) from None
        lock.seek(0)
        previous = lock.read().strip()
        pid = _holder_pid(previous)
        if pid is not None and pid != os.getpid() and not _running(pid):
            # flock is released by the kernel when its holder dies; the file's words stay.
            print(
                f"ahasd: note: {self.directory / LOCK_FILE}: the last sweep ({previous}) did "
                "not finish and is no longer running; taking its lock",
                file=sys.stderr,
            )
        started = datetime.datetime.now().isoformat(timespec="seconds")
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, started {started}\n")
        lock.flush()
        self._lock = lock
        try:
            self.rows, valid = read_results(self.path)
            self._journal = Journal(self.path, valid_bytes=valid, option=self.option)
        except BaseException:
            self._unlock()
            raise
        return self

    def append(self, row: dict) -> None:
        self._journal.append(json.dumps(row))
        self.rows.append(row)

    def _unlock(self) -> None:
        # An empty lock file says the last sweep finished; one naming a dead pid, that it
        # was killed (the next sweep says so).
        with contextlib.suppress(OSError):
            self._lock.seek(0)
            self._lock.truncate()
            self._lock.flush()
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()

    def lock_fd(self) -> int:
        """The lock file's descriptor (a forked worker closes its copy, so that the lock
        never outlives this process)."""
        return self._lock.fileno()

    def __exit__(self, *exc) -> None:
        self._journal.close()
        self._unlock()


def _holder_pid(words: str) -> int | None:
    """The pid a lock file names (``pid 123, started ...``), or None."""
    first = words.split(",")[0].split()
    if len(first) == 2 and first[0] == "pid" and first[1].isdigit():
        return int(first[1])
    return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def read_results(path: Path) -> tuple[list[dict], int]:
    """Result rows of ``path`` and the byte length they occupy.

    A last line without its newline is kept if it is a whole JSON object (an editor that
    saves without a final newline); one that is not (a sweep killed mid-write) is left out,
    with a note on stderr, and the writer truncates it away before appending. Any other
    line that is not a JSON object (NaN and Infinity included), and a row whose labels or
    figures are missing or of the wrong kind, is a UserError naming the line.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return [], 0
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror or error})") from None
    end = data.rfind(b"\n") + 1
    rows = []
    number = 0
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        row = _parse_row(line)
        if row is None:
            raise UserError(
                f"{path}: line {number} is not a JSON object (or holds NaN or Infinity); move "
                "the file away"
            )
        _check_row(path, number, row)
        rows.append(row)
    tail = data[end:]
    if tail.strip():
        row = _parse_row(tail)
        if row is not None:
            _check_row(path, number + 1, row)
            rows.append(row)
            end = len(data)
        else:
            print(
                f"ahasd: note: {path}: its last line is incomplete ({len(tail)} bytes without "
                "a newline, not a JSON object: an interrupted run's); left out, and a sweep "
                "into this folder drops it",
                file=sys.stderr,
            )
    return rows, end


def _parse_row(line: bytes) -> dict | None:
    """The JSON object on ``line``, or None if it is not one (NaN and Infinity, which
    Python's reader takes but JSON has not and no sweep writes, make it none)."""
    try:
        row = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, an integer too long to read
        return None
    return row if isinstance(row, dict) else None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


# What the fields of a results row must hold: the labels and identity every row has (a
# refused run's too), and the figures a finished run has, which resume reuses and the
# report reads. A row is checked when read, so a corrupt one is named by file and line
# instead of failing later in a hash table or a sum.
_ROW_LABELS = ("mode", "pair", "policy")
_ROW_STRINGS = ("schema", "key", "run_id", "config_hash", "trace_hash", "version", "scenario")
_ROW_FIGURES = {
    "tokens": int,
    "tokens_per_s": float,
    "energy_per_token_mj": float,
    "acceptance_rate": float,
    "drafted": int,
    "accepted": int,
}
# Figures the report reads where a row has them.
_ROW_OPTIONAL = {"seconds": float, "accepted_per_drafted": float}


def _finite(value) -> bool:
    """A JSON number that is finite as a float (an integer of 400 digits is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_row(path: Path, number: int, row: dict) -> None:
    """UserError naming ``path``, line ``number`` and the field of ``row`` that is missing
    or of the wrong kind."""
    where = f"{path}: line {number}"
    missing = [key for key in _ROW_LABELS if key not in row]
    if "error" not in row:
        missing += [key for key in _ROW_FIGURES if key not in row]
    if missing:
        raise UserError(f"{where}: the row lacks {', '.join(missing)}; move the file away")
    for key in (*_ROW_LABELS, *_ROW_STRINGS, "error"):
        if key in row and not isinstance(row[key], str):
            raise UserError(f"{where}, field '{key}': must be a string, not {row[key]!r}")
    if "error" in row:
        return
    figures = {**_ROW_FIGURES, **{k: v for k, v in _ROW_OPTIONAL.items() if k in row}}
    busy = row.get("busy_s", {})
    if not isinstance(busy, dict) or not all(_finite(v) for v in busy.values()):
        raise UserError(f"{where}, field 'busy_s': must map devices to seconds, not {busy!r}")
    for key, kind in figures.items():
        value = row[key]
        good = isinstance(value, kind if kind is int else int | float)
        if not good or not _finite(value) or value < 0:
            reads = "an integer" if kind is int else "a finite number"
            raise UserError(f"{where}, field '{key}': must be {reads} >= 0, not {value!r}")
    if row["tokens"] < 1 or row["tokens_per_s"] <= 0 or row["energy_per_token_mj"] <= 0:
        raise UserError(
            f"{where}: tokens, tokens_per_s and energy_per_token_mj must be > 0 in a finished run"
        )


# -- running ---------------------------------------------------------------------------------


def _run_one(settings: RunSettings) -> dict:
    """The summary of one run (module level: it is pickled to worker processes).

    A run the model refuses while running (a :class:`UserError`, e.g. a controller width
    that would saturate under a perturbed number) gives a row with its ``error`` instead of
    stopping the sweep; such rows are kept (resume does not retry them) and left out of
    every table.
    """
    try:
        return simulate(settings).summary
    except UserError as error:
        return {
            "mode": settings.mode,
            "pair": settings.pair,
            "policy": settings.policy,
            "seed": settings.seed,
            "error": str(error),
        }


class Progress:
    """A plain progress line on stderr per finished run (the command line passes its own
    bar, :class:`ahasd.cli.progress.Progress`, which has the same two methods)."""

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()

    def update(self, done: int, note: str = "") -> None:
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"{self.label}: {done}/{self.total} runs, {elapsed:.1f} s {note}\n")
        self.stream.flush()

    def close(self) -> None:
        """Nothing to finish: every line is complete."""


def run_sweep(
    grid: list[RunSettings],
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "local",
    address: str | None = None,
    label: str = "sweep",
    progress: Callable[[str, int], object] = Progress,
) -> tuple[list[dict], int]:
    """Run every point of ``grid`` not yet in ``out/results.jsonl``; return the rows of
    the grid in grid order and how many runs were simulated.

    Every point is checked (platform, devices, overrides, controller parameters) before
    anything runs. Points with equal identity are simulated once; a point whose identity
    is in the file under other labels gets a row copied from it. ``progress(label, total)``
    makes the progress display (``update(done, note)``, ``close()``), shown while runs are
    simulated.
    """
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {jobs}")
    libraries = {}
    identities = []
    for settings in grid:
        library = libraries.get(settings.spec_dirs) or load_library(settings.spec_dirs)
        libraries[settings.spec_dirs] = library
        identities.append(run_identity(settings, library))
    with ResultsDir(out) as results:
        by_request = {(r.get("key"), r.get("run_id")): r for r in results.rows}
        by_run = {r.get("run_id"): r for r in results.rows}
        # The report keeps each request's last row: after an edit and its revert the current
        # identity's row is an older one, so it is appended again to come last.
        last_of = {r.get("key"): r.get("run_id") for r in results.rows}
        requests: dict[str, list[RunSettings]] = {}  # run id -> the points asking for it
        for settings, identity in zip(grid, identities, strict=True):
            requests.setdefault(identity["run_id"], []).append(settings)
        to_run = {run_id: points[0] for run_id, points in requests.items() if run_id not in by_run}
        identity_of = {i["run_id"]: i for i in identities}

        def record(run_id: str) -> None:
            """Append a row for every request of ``run_id`` that has none yet."""
            for settings in requests[run_id]:
                key = (settings_key(settings), run_id)
                if key not in by_request:
                    by_request[key] = _row(settings, identity_of[run_id], by_run[run_id])
                elif last_of.get(key[0]) == run_id:
                    continue
                results.append(by_request[key])
                last_of[key[0]] = run_id

        bar = progress(label, len(to_run)) if to_run else None
        done = []

        def finished(run_id: str, summary: dict) -> None:
            by_run[run_id] = summary
            record(run_id)  # at once: an interrupted sweep keeps what finished
            done.append(run_id)
            bar.update(len(done), f"{summary['mode']} {summary['pair']} {summary['policy']}")

        try:
            with _terminate_as_interrupt():
                _execute(
                    to_run,
                    finished,
                    jobs=jobs,
                    backend=backend,
                    address=address,
                    inherited=results.lock_fd(),
                )
        finally:
            if bar is not None:
                bar.close()
        for run_id in requests:
            record(run_id)
        rows = [
            by_request[(settings_key(settings), identity["run_id"])]
            for settings, identity in zip(grid, identities, strict=True)
        ]
    return rows, len(to_run)


_ROW_META = ("schema", "key", "run_id", "config_hash", "trace_hash", "version", "scenario")


def finished_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """``rows`` split into the runs that finished and the runs the model refused."""
    return [r for r in rows if "error" not in r], [r for r in rows if "error" in r]


def _row(settings: RunSettings, identity: dict, summary: dict) -> dict:
    """A results row: the request's identity and labels, then the run's summary."""
    summary = {k: v for k, v in summary.items() if k not in _ROW_META}
    return {
        "schema": ROW_SCHEMA,
        "key": settings_key(settings),
        **identity,
        "scenario": scenario_label(settings),
        **summary,
        "platform": settings.platform,
    }


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt while the block runs, as Ctrl-C does, so that the
    workers are ended and the lock released on the way out (the default action would kill
    this process alone and leave its pool's workers holding the lock)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _worker_start(parent: int, inherited: int) -> None:
    """A pool worker's first act: close its copy of the sweep's lock (a forked child shares
    the lock and would hold it after the parent's death) and ask the kernel to end it when
    the parent dies, however the parent dies."""
    with contextlib.suppress(OSError):
        os.close(inherited)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _execute(
    to_run: dict[str, RunSettings],
    finished: Callable[[str, dict], None],
    *,
    jobs: int,
    backend: str,
    address: str | None,
    inherited: int = -1,
) -> None:
    if not to_run:
        return
    if backend == "ray":
        _execute_ray(to_run, finished, jobs=jobs, address=address)
    elif jobs == 1 or len(to_run) == 1:
        for run_id, settings in to_run.items():
            finished(run_id, _run_one(settings))
    else:
        before = set(multiprocessing.active_children())
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs, initializer=_worker_start, initargs=(os.getpid(), inherited)
        )
        try:
            futures = {pool.submit(_run_one, s): run_id for run_id, s in to_run.items()}
            for future in concurrent.futures.as_completed(futures):
                finished(futures[future], future.result())
        except BaseException:
            # Interrupted or failed: end the workers now rather than wait for their runs.
            pool.shutdown(wait=False, cancel_futures=True)
            for worker in set(multiprocessing.active_children()) - before:
                worker.terminate()
            raise
        pool.shutdown()


def _execute_ray(
    to_run: dict[str, RunSettings],
    finished: Callable[[str, dict], None],
    *,
    jobs: int,
    address: str | None,
) -> None:
    """Ray tasks, one per run; a local instance of ``jobs`` CPUs unless ``address`` names
    a cluster (whose workers must have this package installed)."""
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install 'ahasd[ray]'") from None
    import logging

    started_here = not ray.is_initialized()
    if started_here:
        options = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": False,
        }
        if address is None:
            # A small local instance: the sweep's CPUs, a minimal object store (the results
            # are small dicts).
            options.update(num_cpus=jobs, object_store_memory=96 * 1024 * 1024)
        ray.init(address=address, **options)
    try:
        remote = ray.remote(num_cpus=1)(_run_one)
        pending = {remote.remote(s): run_id for run_id, s in to_run.items()}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                finished(pending.pop(ref), ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()
