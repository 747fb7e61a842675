"""Configuration of the system model: spec files (devices, models, power) and run settings.

Every number the model uses lives in a TOML spec file under ``sim/specs/`` (or a user
directory given with ``--spec-dir``), with its source and a confidence note:

- ``devices/<name>.toml``: one device (NPU, PIM, GPU, host CPU);
- ``power/<name>.toml``: the energy figures of the device of the same name;
- ``models/<name>.toml``: one model's architecture (INT8);
- ``pairs.toml``: the draft/target pairs and their synthetic-trace presets;
- ``platforms/<name>.toml`` with ``kind = "npu-pim"``: an NPU+PIM platform, the device of
  every role, its memory-sharing model and precision (files without that kind are phone
  SoCs, :mod:`ahasd.sim.phone`).

A numeric field is written ``field = { value = 1.0, source = "...", confidence = "..." }``
(a ``[field]`` table is the same thing); a model's operator fields (``norm``, ``activation``)
take a name in the same shape, ``norm = { value = "rmsnorm", source = "..." }``.
``confidence`` may be given once at file level instead. An uncertain number may add
``range = [lo, hi]`` with a ``range_source`` justifying it: ``ahasd reproduce`` varies it
over that range.

A run's settings (:class:`RunSettings`) name a platform; :func:`resolve` fills the device
fields the settings leave ``None`` from it and applies the platform's precision and the
settings' spec-field overrides to the library (:func:`apply_overrides`).

Files load into nested frozen dataclasses; every field carries a help text in its
``metadata``. Anything a user can get wrong (unknown name or key, missing or non-positive
number, bad TOML) raises :class:`ahasd.errors.UserError` naming the file and the field.

Op convention, used everywhere in the model: **1 MAC = 1 op**. Peak rates are MAC/s
(``matrix_macs_per_s``); vendor figures that count 2 ops per MAC are halved in the spec file.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import stat
import sys
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from ahasd.errors import UserError
from ahasd.output import file_kind
from ahasd.params import EDCParams, GTSUParams, TVCParams

__all__ = [
    "BUILTIN_SPEC_DIR",
    "CONTROLLER_BLOCKS",
    "DEFAULT_PLATFORM",
    "DEVICE_KINDS",
    "DEVICE_SETTINGS",
    "FIELD_KEYS",
    "FILE_NOTES",
    "MEMORY_SHARING",
    "MODEL_CHOICES",
    "NONLINEAR_WITHOUT_AAU",
    "PLATFORM_KIND",
    "RANK_SPLITS",
    "SEED_MAX",
    "SPEC_FILE_MAX_BYTES",
    "SPEC_FOLDERS",
    "SPEC_VALUE_MAX",
    "SPEC_VALUE_MIN",
    "DeviceSpec",
    "ModelSpec",
    "PairSpec",
    "PlatformSpec",
    "PowerSpec",
    "RunSettings",
    "Sourced",
    "SpecLibrary",
    "apply_overrides",
    "check_keys",
    "controller_params",
    "field_default",
    "integer_spec_fields",
    "is_system_platform",
    "load_library",
    "load_system_platform",
    "overridable_fields",
    "read_toml",
    "require_string",
    "resolve",
    "sourced_choice",
    "sourced_number",
    "spec_paths",
]

# Seeds are unsigned 32-bit: NumPy takes any non-negative integer, but a bound keeps seeds
# writable in every tool that reads the results (and -1 out). The command line's --seed and
# a grid's seed axis share it.
SEED_MAX = (1 << 32) - 1

BUILTIN_SPEC_DIR = Path(__file__).parent / "specs"

DEVICE_KINDS = ("npu", "pim", "gpu", "cpu")
CONFIDENCE_LEVELS = ("high", "medium", "low")
# The ``kind`` of a platform file of the NPU+PIM system model (a phone SoC file has none).
PLATFORM_KIND = "npu-pim"
DEFAULT_PLATFORM = "table2"
MEMORY_SHARING = ("shared", "separate")
# How the PIM's ranks are divided between the draft and the target model (paper 5.1: "varying
# rank sizes ... according to model size"; docs/system-model.md, "Rank split"):
# target-first: the target on the ranks its footprint needs, the draft striped over the rest;
# footprint: each model on just the ranks its footprint needs (the rest hold nothing);
# fixed: the PIM device file's draft_ranks.
RANK_SPLITS = ("target-first", "footprint", "fixed")
# Every spec number in SI units lies far inside this range (the shipped ones span 2e-6 to
# 1.3e14); outside it, the cost model's products and quotients leave float range.
# The largest spec or grid file read (the shipped ones are under 10 kB): a bigger one is
# refused rather than read whole.
SPEC_FILE_MAX_BYTES = 1 << 20
SPEC_VALUE_MIN = 1e-12
SPEC_VALUE_MAX = 1e18


def _help(text: str, default=None):
    return field(default=default, metadata={"help": text})


@dataclass(frozen=True)
class Sourced:
    """Where one number (or one named choice, e.g. a model's norm) comes from, and (for
    uncertain numbers) how far it may be off.

    ``span`` is the ``range = [lo, hi]`` of the spec file (``None`` when not given) and
    ``span_source`` its justification; ``ahasd reproduce`` varies the number over it.
    """

    value: float | str
    source: str
    confidence: str
    span: tuple[float, float] | None = None
    span_source: str = ""

    @property
    def level(self) -> str:
        """The first word of the confidence note: ``high``, ``medium`` or ``low``."""
        word = self.confidence.strip().split()[0].rstrip(":;,.").lower()
        return word if word in CONFIDENCE_LEVELS else "unstated"


@dataclass(frozen=True)
class DeviceSpec:
    """One compute or memory device. Unused fields of a kind stay ``None``."""

    name: str = _help("Device name (file stem).")
    kind: str = _help("One of npu, pim, gpu, cpu.")
    description: str = _help("One line for humans.", "")
    clock_hz: float | None = _help("Clock frequency (Hz); the PIM clock times the TVC cycles.")
    matrix_macs_per_s: float | None = _help("Peak matrix throughput, MAC/s (1 MAC = 1 op).")
    vector_ops_per_s: float | None = _help("Peak vector (nonlinear) throughput, ops/s.")
    memory_bandwidth: float | None = _help("Bandwidth to the weights and KV cache (B/s).")
    offchip_bandwidth: float | None = _help("PIM: off-chip bus bandwidth to the SoC (B/s).")
    eta_compute: float = _help("Achieved fraction of the compute peak.", 1.0)
    eta_memory: float = _help("Achieved fraction of the memory bandwidth.", 1.0)
    capacity_bytes: float | None = _help("Memory capacity (B), reported, not enforced.")
    sram_bytes: float | None = _help("On-chip scratchpad (B).")
    units: int | None = _help("PIM: processing units (one per rank).")
    rank_capacity_bytes: float | None = _help("PIM: bytes per rank.")
    draft_ranks: int | None = _help("PIM: ranks tagged DLM; the rest hold the TLM.")
    aau_elements_per_cycle: int | None = _help("PIM: AAU elements per cycle per unit.")
    switch_cycles: int | None = _help("PIM: GTSU rank-role switch, t_off + t_on cycles.")
    sync_latency_s: float | None = _help("Operator-level GPU/PIM hand-off latency (s).")
    nonlinear_elements_per_s: float | None = _help("CPU: nonlinear elements per second.")
    transfer_latency_s: float | None = _help("CPU: latency of one PIM-to-CPU round trip (s).")
    event_service_cycles: int | None = _help(
        "CPU: cycles from a controller interrupt to the register write that answers it (a "
        "pre-verification order passed on); None = not modelled (0)."
    )
    weight_bytes: float | None = _help(
        "Bytes per weight the device computes on (FP16 = 2); None = the model's own (INT8)."
    )
    kv_bytes: float | None = _help("Bytes per KV-cache element on this device; None = the model's.")
    host_link_bandwidth: float | None = _help(
        "GPU: host link (PCIe) bandwidth (B/s). When given, weights beyond capacity_bytes stay "
        "in host memory and stream over this link on every pass; without it capacity is "
        "reported, not enforced."
    )
    pim_request_latency_s: float | None = _help(
        "NPU: hand-off latency of one nonlinear request from a PIM without AAU (s)."
    )
    sources: tuple[tuple[str, Sourced], ...] = _help("(field, Sourced) for every number.", ())


@dataclass(frozen=True)
class PowerSpec:
    """Energy figures of one device (pJ per event, W static); absent figures are 0."""

    device: str = _help("Device this file describes.")
    static_w: float = _help("Static power, charged over the whole run (W).", 0.0)
    pj_per_mac: float = _help("Energy per MAC (pJ).", 0.0)
    pj_per_vector_op: float = _help("Energy per vector op (pJ).", 0.0)
    pj_per_byte_memory: float = _help("Energy per byte read from the device's memory (pJ).", 0.0)
    pj_per_byte_sram: float = _help("Energy per byte through on-chip SRAM (pJ).", 0.0)
    pj_per_byte_link: float = _help("Energy per byte over the off-chip bus (pJ).", 0.0)
    pj_per_aau_element: float = _help("Energy per AAU element (pJ).", 0.0)
    pj_per_cpu_element: float = _help("Energy per CPU nonlinear element (pJ).", 0.0)
    sources: tuple[tuple[str, Sourced], ...] = _help("(field, Sourced) for every number.", ())


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer at a given weight/KV precision."""

    name: str = _help("Model name (file stem).")
    description: str = _help("One line for humans.", "")
    layers: int = _help("Decoder layers.", 0)
    hidden: int = _help("Model width d_model.", 0)
    heads: int = _help("Query heads.", 0)
    kv_heads: int = _help("Key/value heads (multi-query: 1).", 0)
    head_dim: int = _help("Width of one head.", 0)
    ffn: int = _help("FFN intermediate width.", 0)
    ffn_matrices: int = _help("2 (up, down) or 3 (gate, up, down).", 2)
    vocab: int = _help("Vocabulary size (LM head rows).", 0)
    weight_bytes: float = _help("Bytes per weight (INT8 = 1).", 1.0)
    kv_bytes: float = _help("Bytes per KV-cache element.", 1.0)
    nominal_params: float = _help("Parameter count the name claims (reported).", 0.0)
    norm: str = _help("The layers' normalisation: layernorm or rmsnorm.", "layernorm")
    activation: str = _help(
        "The FFN activation: relu, gelu or silu (a gated FFN's SiLU, as SwiGLU).", "relu"
    )
    sources: tuple[tuple[str, Sourced], ...] = _help(
        "(field, Sourced) for every number and named choice.", ()
    )

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) vector of one token in one layer."""
        return self.kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer (projections and FFN; norms are negligible)."""
        h = self.hidden
        attention = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        return attention + self.ffn_matrices * h * self.ffn

    @property
    def params(self) -> int:
        """Weights read by one decode step: all layers plus the LM head."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    @property
    def weight_bytes_total(self) -> float:
        return self.params * self.weight_bytes

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token adds (K and V, every layer)."""
        return 2 * self.layers * self.kv_dim * self.kv_bytes


@dataclass(frozen=True)
class PairSpec:
    """A draft/target pair and the synthetic-trace preset that stands for it."""

    name: str = _help("Pair name.")
    draft: str = _help("Draft model name.")
    target: str = _help("Target model name.")
    preset: str = _help("Synthetic-trace preset of ahasd.sim.synth.")
    source: str = _help("Where the pair comes from.", "")


_DEVICE_INT_FIELDS = {
    "units",
    "draft_ranks",
    "aau_elements_per_cycle",
    "switch_cycles",
    "event_service_cycles",
}
_DEVICE_TEXT_FIELDS = ("name", "kind", "description", "sources")
# Fields that may legitimately be zero (a PIM without AAU, no switch cost, no static power).
_ZERO_OK = {
    "aau_elements_per_cycle",
    "switch_cycles",
    "sync_latency_s",
    "transfer_latency_s",
    "pim_request_latency_s",
    "event_service_cycles",
}
_REQUIRED_BY_KIND = {
    "npu": ("clock_hz", "matrix_macs_per_s", "vector_ops_per_s", "memory_bandwidth"),
    "gpu": ("clock_hz", "matrix_macs_per_s", "vector_ops_per_s", "memory_bandwidth"),
    "pim": (
        "clock_hz",
        "units",
        "matrix_macs_per_s",
        "memory_bandwidth",
        "offchip_bandwidth",
        "draft_ranks",
        "aau_elements_per_cycle",
        "switch_cycles",
    ),
    "cpu": ("nonlinear_elements_per_s", "transfer_latency_s"),
}
# The model fields that name an operator, and the names each may take (the AAU's modes).
MODEL_CHOICES = {"norm": ("layernorm", "rmsnorm"), "activation": ("relu", "gelu", "silu")}
_MODEL_INT_FIELDS = {
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn",
    "ffn_matrices",
    "vocab",
}


def read_toml(path: Path) -> dict:
    """The parsed TOML file ``path``; unreadable or invalid TOML is a UserError naming it,
    and so is anything but a regular file of at most :data:`SPEC_FILE_MAX_BYTES` (a FIFO
    would hang the read, a link to ``/dev/zero`` fill memory; a dangling link is named)."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"{path}: a symbolic link to nothing (dangling)") from None
        raise UserError(f"{path}: cannot read: No such file or directory") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: is {file_kind(info.st_mode)}, not a regular file")
    try:
        with path.open("rb") as handle:
            data = handle.read(SPEC_FILE_MAX_BYTES + 1)
        if len(data) > SPEC_FILE_MAX_BYTES:
            raise UserError(
                f"{path}: more than {SPEC_FILE_MAX_BYTES:,} bytes, the limit of a spec or grid file"
            )
        return tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path}: not valid TOML: not UTF-8 (byte {error.start}: {error.reason})"
        ) from None
    except RecursionError:
        raise UserError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    except ValueError:  # past TOMLDecodeError and UnicodeDecodeError: Python's digit limit
        raise UserError(
            f"{path}: not valid TOML: an integer of more digits than Python reads "
            f"({sys.get_int_max_str_digits()})"
        ) from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None


# The keys of a number's table (``field = {value, source, confidence, ...}``); ``unit`` is a
# note for readers.
FIELD_KEYS = ("value", "source", "confidence", "range", "range_source", "unit")
# Notes any spec file may carry at its top level (read by people, or as every field's
# confidence).
FILE_NOTES = ("description", "source", "confidence")


def check_keys(path: Path, data: dict, known, *, where: str | None = None) -> None:
    """UserError naming the file ``path``, the first key of ``data`` not in ``known`` and
    the nearest known key: a misspelt optional field would otherwise be ignored and its
    default used without a word. ``where`` names the table ``data`` is (``eta_memory``
    for the keys of that field's table)."""
    known = list(dict.fromkeys(known))
    for key in data:
        if key in known:
            continue
        name = f"{where}.{key}" if where else key
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.0)
        hint = f"; the nearest known key is {near[0]!r}" if near else ""
        raise UserError(f"{path}: unknown key {name!r}{hint}")


def require_string(path: Path, data: dict, key: str, default: str | None = None) -> str:
    """``data[key]`` (else ``default``) as a non-empty string; otherwise a UserError naming
    the file ``path`` and the field."""
    value = data.get(key, default)
    if not isinstance(value, str) or not value:
        raise UserError(f"{path}: field '{key}': must be a non-empty string, not {value!r}")
    return value


def sourced_number(path: Path, data: dict, key: str, *, integer: bool, zero_ok: bool) -> Sourced:
    """Parse ``key = {value, source, confidence}``; positive (or >= 0 when ``zero_ok``).

    The spec-file number format of every loader (devices, power, models, phone platforms);
    anything malformed is a UserError naming the file ``path`` and the field.
    """
    entry = data[key]
    if not isinstance(entry, dict):
        raise UserError(
            f"{path}: field '{key}': must be a table with value, source and confidence, "
            f"not {entry!r}"
        )
    check_keys(path, entry, FIELD_KEYS, where=key)
    value = entry.get("value")
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or not math.isfinite(value):
        raise UserError(f"{path}: field '{key}': value must be {kind}, not {value!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "non-negative" if zero_ok else "positive"
        raise UserError(f"{path}: field '{key}': value must be {bound}, not {value!r}")
    if value != 0 and not SPEC_VALUE_MIN <= value <= SPEC_VALUE_MAX:
        raise UserError(
            f"{path}: field '{key}': value must lie in {SPEC_VALUE_MIN:g}..{SPEC_VALUE_MAX:g} "
            f"(or be 0 where allowed), not {value!r}"
        )
    source, confidence = _provenance(path, data, key, entry)
    span = _span(path, key, entry, value, integer=integer, zero_ok=zero_ok)
    return Sourced(
        value=value,
        source=source,
        confidence=confidence,
        span=span,
        span_source=str(entry.get("range_source", "")),
    )


def _span(path: Path, key: str, entry: dict, value, *, integer: bool, zero_ok: bool):
    """The ``range = [lo, hi]`` of a number (None if absent): two numbers of the field's
    kind with lo <= value <= hi, justified by a ``range_source`` string."""
    if "range" not in entry:
        return None
    span = entry["range"]
    kind = int if integer else int | float
    ok = isinstance(span, list) and len(span) == 2
    ok = ok and all(isinstance(v, kind) and not isinstance(v, bool) for v in span)
    if not ok or not all(math.isfinite(v) and (v > 0 or (zero_ok and v == 0)) for v in span):
        raise UserError(f"{path}: field '{key}': range must be [lo, hi], two valid values")
    low, high = span
    if not low <= value <= high:
        raise UserError(
            f"{path}: field '{key}': range [{low}, {high}] must contain the value {value}"
        )
    note = entry.get("range_source")
    if not isinstance(note, str) or not note.strip():
        raise UserError(f"{path}: field '{key}': a range needs a 'range_source' string")
    return (low, high)


def sourced_choice(path: Path, data: dict, key: str, choices: tuple[str, ...]) -> Sourced:
    """Parse ``key = {value = "<name>", source, confidence}`` with ``<name>`` one of
    ``choices``; anything else is a UserError naming the file ``path`` and the field."""
    entry = data[key]
    if not isinstance(entry, dict):
        raise UserError(
            f"{path}: field '{key}': must be a table with value, source and confidence, "
            f"not {entry!r}"
        )
    check_keys(path, entry, FIELD_KEYS, where=key)
    value = entry.get("value")
    if value not in choices:
        raise UserError(
            f"{path}: field '{key}': value must be one of {', '.join(choices)}, not {value!r}"
        )
    source, confidence = _provenance(path, data, key, entry)
    return Sourced(value=value, source=source, confidence=confidence)


def _provenance(path: Path, data: dict, key: str, entry: dict) -> tuple[str, str]:
    """The ``source`` and ``confidence`` of the field ``key`` (``entry``, or the file's
    confidence); a UserError naming the file and the field when one is missing."""
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UserError(f"{path}: field '{key}': needs a 'source' string")
    confidence = entry.get("confidence", data.get("confidence"))
    if not isinstance(confidence, str) or not confidence.strip():
        raise UserError(f"{path}: field '{key}': needs a 'confidence' note (or a file-level one)")
    return source, confidence


def _numbers(path: Path, data: dict, names, int_fields, zero_ok) -> dict[str, Sourced]:
    return {
        name: sourced_number(path, data, name, integer=name in int_fields, zero_ok=name in zero_ok)
        for name in names
        if name in data
    }


def load_device(path: Path) -> DeviceSpec:
    data = read_toml(path)
    name = require_string(path, data, "name")
    kind = require_string(path, data, "kind")
    if kind not in DEVICE_KINDS:
        raise UserError(f"{path}: field 'kind': must be one of {', '.join(DEVICE_KINDS)}")
    numeric = [f.name for f in fields(DeviceSpec) if f.name not in _DEVICE_TEXT_FIELDS]
    check_keys(path, data, ["name", "kind", *numeric, *FILE_NOTES])
    parsed = _numbers(path, data, numeric, _DEVICE_INT_FIELDS, _ZERO_OK)
    for required in _REQUIRED_BY_KIND[kind]:
        if required not in parsed:
            raise UserError(f"{path}: field '{required}': required for a {kind} device")
    spec = DeviceSpec(
        name=name,
        kind=kind,
        description=str(data.get("description", "")),
        sources=tuple(parsed.items()),
        **{key: item.value for key, item in parsed.items()},
    )
    _check_device(spec, str(path))
    return spec


def _check_device(spec: DeviceSpec, where: str) -> None:
    """The checks that span fields (a spec file or an override may break them)."""
    for eta in ("eta_compute", "eta_memory"):
        if getattr(spec, eta) > 1:
            raise UserError(f"{where}: field '{eta}': value must be at most 1")
    if spec.kind == "pim" and spec.draft_ranks >= spec.units:
        raise UserError(
            f"{where}: field 'draft_ranks': must be below units ({spec.units}), "
            f"not {spec.draft_ranks}"
        )


def load_power(path: Path) -> PowerSpec:
    data = read_toml(path)
    device = require_string(path, data, "device")
    numeric = [f.name for f in fields(PowerSpec) if f.name not in ("device", "sources")]
    check_keys(path, data, ["device", *numeric, *FILE_NOTES])
    zero_ok = set(numeric)  # every energy figure may be 0 (not modelled)
    parsed = _numbers(path, data, numeric, set(), zero_ok)
    return PowerSpec(
        device=device,
        sources=tuple(parsed.items()),
        **{key: float(item.value) for key, item in parsed.items()},
    )


def load_model(path: Path) -> ModelSpec:
    data = read_toml(path)
    name = require_string(path, data, "name")
    numeric = [f.name for f in fields(ModelSpec) if f.name not in ("name", "description")]
    numeric = [n for n in numeric if n != "sources" and n not in MODEL_CHOICES]
    check_keys(path, data, ["name", *numeric, *MODEL_CHOICES, *FILE_NOTES])
    parsed = _numbers(path, data, numeric, _MODEL_INT_FIELDS, set())
    for key, choices in MODEL_CHOICES.items():
        if key in data:
            parsed[key] = sourced_choice(path, data, key, choices)
    for required in (*numeric, *MODEL_CHOICES):
        if required not in parsed:
            raise UserError(f"{path}: field '{required}': required for a model")
    spec = ModelSpec(
        name=name,
        description=str(data.get("description", "")),
        sources=tuple(parsed.items()),
        **{key: item.value for key, item in parsed.items()},
    )
    _check_model(spec, str(path))
    return spec


def _check_model(spec: ModelSpec, where: str) -> None:
    if spec.ffn_matrices not in (2, 3):
        raise UserError(f"{where}: field 'ffn_matrices': value must be 2 or 3")
    if spec.kv_heads > spec.heads:
        raise UserError(f"{where}: field 'kv_heads': must not exceed heads")


def load_pairs(path: Path) -> dict[str, PairSpec]:
    data = read_toml(path)
    pairs = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise UserError(f"{path}: pair '{name}': must be a table")
        check_keys(path, entry, ("draft", "target", "preset", "source"), where=name)
        pairs[name] = PairSpec(
            name=name,
            draft=require_string(path, entry, "draft"),
            target=require_string(path, entry, "target"),
            preset=require_string(path, entry, "preset"),
            source=str(entry.get("source", "")),
        )
    return pairs


# The roles a platform fills, each with the kind of device it names (the RunSettings fields
# of the same names).
DEVICE_SETTINGS = {"npu": "npu", "pim": "pim", "cpu": "cpu", "gpu": "gpu", "specpim_pim": "pim"}
# Precision a platform may impose on the models its NPU and PIM run (DeviceSpec fields).
_PRECISION_FIELDS = ("weight_bytes", "kv_bytes")


@dataclass(frozen=True)
class PlatformSpec:
    """An NPU+PIM platform (``platforms/<name>.toml`` with ``kind = "npu-pim"``).

    It names the device of every role (the defaults of :class:`RunSettings`' device
    fields), the memory-sharing model and the precision its NPU and PIM compute at.
    """

    name: str = _help("Platform name (file stem).")
    description: str = _help("One line for humans.", "")
    devices: tuple[tuple[str, str], ...] = _help("(role, device name) for every role.", ())
    memory_sharing: str = _help(
        "shared: the NPU's stream and the PIM's compute share the LPDDR5 ranks; separate: "
        "each has its own memory (the authors' artifact).",
        "shared",
    )
    memory_sharing_source: str = _help("Why this memory-sharing model.", "")
    precision: tuple[tuple[str, Sourced], ...] = _help(
        "(weight_bytes | kv_bytes, Sourced) applied to the NPU and PIM devices.", ()
    )
    gpu_baselines: tuple[str, ...] = _help(
        "GPU devices ahasd reproduce compares this platform with (default: its gpu).", ()
    )
    rank_split: str = _help(
        "How the PIM's ranks are divided between the models (RANK_SPLITS).", "target-first"
    )
    rank_split_source: str = _help("Why this rank split.", "")
    preverify_kv_reuse: bool = _help(
        "Whether the NPU may skip re-verifying tokens a pre-verification accepted, reading "
        "the target KV entries the PIM wrote (only where both read one memory).",
        False,
    )
    preverify_kv_reuse_source: str = _help("Why the KV reuse is or is not possible.", "")
    path: str = _help("The file it was read from.", "")

    def device(self, role: str) -> str:
        return dict(self.devices)[role]


def load_system_platform(path: Path) -> PlatformSpec:
    """Read and validate an NPU+PIM platform file (UserError naming the file and field)."""
    data = read_toml(path)
    name = require_string(path, data, "name")
    if data.get("kind") != PLATFORM_KIND:
        raise UserError(f"{path}: field 'kind': must be {PLATFORM_KIND!r} for an NPU+PIM platform")
    tables = ("memory_sharing", "rank_split", "preverify_kv_reuse")
    known = ["name", "kind", "devices", "gpu_baselines", *tables, *_PRECISION_FIELDS]
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
    precision = _numbers(path, data, _PRECISION_FIELDS, set(), set())
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


def is_system_platform(path: Path) -> bool:
    """Whether ``platforms/<name>.toml`` is an NPU+PIM platform (else a phone SoC's)."""
    return read_toml(path).get("kind") == PLATFORM_KIND


@dataclass(frozen=True)
class SpecLibrary:
    """Every device, power, model and pair spec found in the spec directories.

    Later directories override earlier ones by name, so a user directory can replace a
    built-in file or add new ones.
    """

    devices: dict = field(metadata={"help": "name -> DeviceSpec"})
    power: dict = field(metadata={"help": "device name -> PowerSpec"})
    models: dict = field(metadata={"help": "name -> ModelSpec"})
    pairs: dict = field(metadata={"help": "name -> PairSpec"})
    directories: tuple = _help("Directories read, in order.", ())
    platforms: dict = field(default_factory=dict, metadata={"help": "name -> PlatformSpec"})
    overrides: tuple = _help("(path, value) spec-field overrides applied to the files.", ())
    root: object = _help("The library as read from the files (None: this one).", None)

    def device(self, name: str, kind: str | None = None) -> DeviceSpec:
        if name not in self.devices:
            raise UserError(f"unknown device {name!r} (known: {', '.join(sorted(self.devices))})")
        spec = self.devices[name]
        if kind is not None and spec.kind != kind:
            raise UserError(f"device {name!r} is a {spec.kind}, not a {kind}")
        return spec

    def power_of(self, device: str) -> PowerSpec:
        # A device without a power file consumes nothing we model: say so with zeros.
        return self.power.get(device, PowerSpec(device=device))

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            raise UserError(f"unknown model {name!r} (known: {', '.join(sorted(self.models))})")
        return self.models[name]

    def pair(self, name: str) -> PairSpec:
        if name not in self.pairs:
            raise UserError(f"unknown pair {name!r} (known: {', '.join(sorted(self.pairs))})")
        return self.pairs[name]

    def platform(self, name: str) -> PlatformSpec:
        if name not in self.platforms:
            known = ", ".join(sorted(self.platforms))
            raise UserError(
                f"unknown platform {name!r} (known NPU+PIM platforms: {known}; phone SoCs: "
                "see docs/phone-soc.md)"
            )
        return self.platforms[name]


@functools.lru_cache(maxsize=8)
def _load(directories: tuple[Path, ...], signature: tuple) -> SpecLibrary:
    devices, power, models, pairs, platforms = {}, {}, {}, {}, {}
    for directory in directories:
        if not directory.is_dir():
            raise UserError(f"spec directory {directory} does not exist")
        for path in spec_paths(directory, "devices"):
            spec = load_device(path)
            devices[spec.name] = spec
        for path in spec_paths(directory, "power"):
            spec = load_power(path)
            power[spec.device] = spec
        for path in spec_paths(directory, "models"):
            spec = load_model(path)
            models[spec.name] = spec
        if os.path.lexists(directory / "pairs.toml"):
            pairs.update(load_pairs(directory / "pairs.toml"))
        for path in spec_paths(directory, "platforms"):
            if is_system_platform(path):
                spec = load_system_platform(path)
                platforms[spec.name] = spec
    for pair in pairs.values():
        for role, name in (("draft", pair.draft), ("target", pair.target)):
            if name not in models:
                raise UserError(f"pair {pair.name!r}: unknown {role} model {name!r}")
    for platform in platforms.values():
        roles = [*platform.devices, *(("gpu", name) for name in platform.gpu_baselines)]
        for role, name in roles:
            if name not in devices:
                raise UserError(f"{platform.path}: devices.{role}: unknown device {name!r}")
            if devices[name].kind != DEVICE_SETTINGS[role]:
                raise UserError(
                    f"{platform.path}: devices.{role}: {name!r} is a {devices[name].kind}, "
                    f"not a {DEVICE_SETTINGS[role]}"
                )
    return SpecLibrary(devices, power, models, pairs, directories, platforms)


def load_library(extra_dirs=()) -> SpecLibrary:
    """The built-in specs plus ``extra_dirs`` (later wins), cached per directory list and
    the size and modification time of every spec file in them (an edited file is read
    again, so a long-lived process never runs on stale numbers)."""
    directories = (BUILTIN_SPEC_DIR, *(Path(d).resolve() for d in extra_dirs))
    return _load(directories, _files_signature(directories))


# The folders of a spec directory, each of ``*.toml`` files (``pairs.toml`` at the top).
SPEC_FOLDERS = ("devices", "power", "models", "platforms")


def spec_paths(directory: Path, folder: str) -> list[Path]:
    """The spec files of ``directory/folder``, sorted: ``*.toml`` names not starting with
    a dot (an editor's lock or backup file such as ``.#npu.toml``, often a dangling link,
    is not a spec). Only that folder is listed, never a whole tree (``--spec-dir /``)."""
    return sorted(p for p in (directory / folder).glob("*.toml") if not p.name.startswith("."))


def _files_signature(directories: tuple[Path, ...]) -> tuple:
    signature = []
    for directory in directories:
        paths = [p for folder in SPEC_FOLDERS for p in spec_paths(directory, folder)]
        for path in [*paths, directory / "pairs.toml"]:
            try:
                info = os.stat(path)
            except OSError:
                # Missing or dangling: the loader says which (pairs.toml is optional).
                signature.append((str(path), None, None))
                continue
            signature.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(signature)


def field_default(settings_class, name: str):
    """The default of field ``name`` of a settings dataclass (:class:`RunSettings`, the phone
    settings): the one place the command line takes its defaults and their help texts from.
    A field without a default gives ``dataclasses.MISSING``."""
    for item in fields(settings_class):
        if item.name == name:
            return item.default
    raise KeyError(f"{settings_class.__name__} has no field {name!r}")


def _role_help(role: str, used: str) -> str:
    return f"{role} device ({used}); None = the platform's."


# Where a PIM without AAU sends its nonlinear operators (RunSettings.nonlinear_without_aau).
NONLINEAR_WITHOUT_AAU = ("npu", "host")
# memory_sharing (MEMORY_SHARING) may be None, "the platform's": checked on its own.
_CHOICES = {"nonlinear_without_aau": NONLINEAR_WITHOUT_AAU}


@dataclass(frozen=True)
class RunSettings:
    """One simulated configuration (what ``ahasd simulate`` takes on its command line).

    The device fields and ``memory_sharing`` default to ``None``, "the platform's": the
    platform file is the one place device defaults live, and :func:`resolve` fills them in
    (an explicit device name overrides the platform's).
    """

    mode: str = _help("Execution mode (ahasd.sim.modes.MODES).")
    pair: str = _help("Draft/target pair (pairs.toml).")
    policy: str = _help("Drafting policy (ahasd.sim.policies.POLICY_NAMES).")
    tokens: int = _help("Generation length (committed target tokens).", 1024)
    seed: int = _help("Seed of the run: synthetic trace, acceptance draws, policy RNG.", 0)
    prompt_tokens: int = _help("KV-cache length before the first generated token.", 128)
    trace: str | None = _help(
        "None = the pair's synthetic preset; else a trace file, a built-in trace name, a "
        "synthetic preset name, or 'iid:<acceptance>'.",
        None,
    )
    policy_params: tuple[tuple[str, object], ...] = _help("Policy keyword arguments.", ())
    fallback: bool = _help("Wrap the policy in the autoregression fallback.", False)
    platform: str = _help(
        "NPU+PIM platform (platforms/<name>.toml, kind npu-pim): the device of every role, "
        "the memory-sharing model, the precision of the NPU and PIM.",
        DEFAULT_PLATFORM,
    )
    npu: str | None = _help(_role_help("NPU", "async and npu-only modes"), None)
    pim: str | None = _help(_role_help("PIM", "async modes; plain memory in npu-only"), None)
    cpu: str | None = _help(_role_help("Host CPU", "every mode"), None)
    gpu: str | None = _help(_role_help("GPU", "gpu-only, specpim"), None)
    specpim_pim: str | None = _help(_role_help("SpecPIM's PIM", "specpim"), None)
    memory_sharing: str | None = _help(
        "'shared': the NPU streams the target's weights and KV cache from the LPDDR5 ranks "
        "the PIM computes in, over the off-chip bus the PIM's requests use too (spec 4); "
        "'separate': NPU and PIM have memories of their own (the authors' artifact); None = "
        "the platform's.",
        None,
    )
    rank_split: str | None = _help(
        "How the PIM's ranks are divided between the draft and the target model: "
        "'target-first' (the target on the ranks its weights and KV cache need, the draft "
        "striped over the rest), 'footprint' (each model on just the ranks it needs), "
        "'fixed' (the PIM file's draft_ranks); None = the platform's.",
        None,
    )
    preverify_kv_reuse: bool | None = _help(
        "Whether the NPU skips re-verifying tokens a pre-verification accepted (it reads the "
        "target KV entries the PIM wrote); None = the platform's (on with shared memory).",
        None,
    )
    draft_model: str | None = _help("Override of the pair's draft model.", None)
    target_model: str | None = _help("Override of the pair's target model.", None)
    specpim_planned_draft: int = _help("Draft length SpecPIM's split is balanced for.", 4)
    draft_queue_tokens: int = _help("Unverified-draft budget of the draft queue (tokens).", 64)
    tvc_ratio_bits: int = _help(
        "TVC table entry width (UQ(bits-F).F ratios; default TVCParams().ratio_bits).",
        TVCParams().ratio_bits,
    )
    tvc_cycle_bits: int = _help(
        "TVC cycle-count width (default TVCParams().cycle_bits).", TVCParams().cycle_bits
    )
    nonlinear_without_aau: str = _help(
        "Where a PIM without AAU computes its nonlinear operators: 'npu' (the NPU's vector "
        "unit, activations over the off-chip bus, in contention with the verification; paper "
        "4.1) or 'host' (the host CPU, nothing contends).",
        "npu",
    )
    spec_overrides: tuple[tuple[str, float], ...] = _help(
        "(path, value) overrides of spec-file numbers: devices.NAME.FIELD, power.NAME.FIELD, "
        "models.NAME.FIELD; NAME may be @ROLE (@npu, @pim, @cpu, @gpu, @specpim_pim) for the "
        "device of that role. Applied after the platform's precision, in order.",
        (),
    )
    controller_params: tuple[tuple[str, object], ...] = _help(
        "(block.field, value) overrides of the controller parameters (edc., tvc., gtsu.: the "
        "fields of ahasd.params.EDCParams, TVCParams, GTSUParams).",
        (),
    )
    spec_dirs: tuple[str, ...] = _help("Extra spec directories (later wins).", ())
    record_timeline: bool = _help("Keep every device task for the Chrome trace.", False)

    def __post_init__(self) -> None:
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
            raise UserError(f"seed must be an integer in 0..{SEED_MAX}, not {seed!r}")
        for name, low in (
            ("tokens", 1),
            ("prompt_tokens", 1),
            ("specpim_planned_draft", 1),
            ("draft_queue_tokens", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(
                    f"{name.replace('_', '-')} must be an integer >= {low}, not {value!r}"
                )
        for name in ("tvc_ratio_bits", "tvc_cycle_bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 16 <= value <= 48:
                raise UserError(
                    f"{name.replace('_', '-')} must be an integer in 16..48, not {value!r}"
                )
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise UserError(
                    f"{name.replace('_', '-')} must be one of {', '.join(choices)}, not {value!r}"
                )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"seed must be a non-negative integer, not {self.seed!r}")
        if not isinstance(self.platform, str) or not self.platform:
            raise UserError(f"platform must be a platform name, not {self.platform!r}")
        if self.rank_split is not None and self.rank_split not in RANK_SPLITS:
            raise UserError(
                f"rank-split must be one of {', '.join(RANK_SPLITS)}, not {self.rank_split!r}"
            )
        if self.preverify_kv_reuse is not None and not isinstance(self.preverify_kv_reuse, bool):
            raise UserError(
                f"preverify-kv-reuse must be true or false, not {self.preverify_kv_reuse!r}"
            )
        if self.memory_sharing is not None and self.memory_sharing not in MEMORY_SHARING:
            raise UserError(
                f"memory-sharing must be one of {', '.join(MEMORY_SHARING)}, "
                f"not {self.memory_sharing!r}"
            )
        for path, value in self.spec_overrides:
            if not isinstance(path, str) or isinstance(value, bool):
                raise UserError(f"spec override {path!r}: expected a path and a number")
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise UserError(f"spec override {path}: value must be a number, not {value!r}")
        for path, _ in self.controller_params:
            if not isinstance(path, str) or path.partition(".")[0] not in CONTROLLER_BLOCKS:
                raise UserError(
                    f"controller parameter {path!r}: expected BLOCK.FIELD with BLOCK one of "
                    f"{', '.join(CONTROLLER_BLOCKS)}"
                )

    def key(self) -> str:
        """Identity of the run in a sweep's results file."""
        return f"{self.mode}|{self.pair}|{self.policy}|{self.tokens}|{self.seed}|{self.trace}"


# -- resolution: platform defaults, spec overrides, controller parameters ----------------------

# Controller blocks whose parameters a run may override, and their parameter classes.
CONTROLLER_BLOCKS = {"edc": EDCParams, "tvc": TVCParams, "gtsu": GTSUParams}
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
    return frozenset(overridable_fields(section)) & (_DEVICE_INT_FIELDS | _MODEL_INT_FIELDS)


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
    integer = field_name in (_DEVICE_INT_FIELDS | _MODEL_INT_FIELDS)
    where = f"spec override {path}"
    if integer and not isinstance(value, int):
        raise UserError(f"{where}: value must be an integer, not {value!r}")
    zero_ok = section == "power" or field_name in _ZERO_OK
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
        _check_device(spec, where)
    elif section == "models":
        _check_model(spec, where)
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


def resolve(
    settings: RunSettings, library: SpecLibrary | None = None
) -> tuple[RunSettings, SpecLibrary]:
    """The run's settings with every platform default filled in, and the spec library the
    run uses (the platform's precision and the settings' overrides applied).

    Idempotent: resolving resolved settings changes nothing. UserError on an unknown
    platform, device (or one of the wrong kind), override path or value.
    """
    base = library or load_library(settings.spec_dirs)
    platform = base.platform(settings.platform)
    roles = {role: getattr(settings, role) or platform.device(role) for role in DEVICE_SETTINGS}
    for role, kind in DEVICE_SETTINGS.items():
        base.device(roles[role], kind)
    precision = tuple(
        (f"devices.{roles[role]}.{name}", sourced.value)
        for role in ("npu", "pim")
        for name, sourced in platform.precision
    )
    user = tuple((role_path(path, roles), value) for path, value in settings.spec_overrides)
    sharing = settings.memory_sharing or platform.memory_sharing
    resolved = dataclasses.replace(
        settings,
        **roles,
        memory_sharing=sharing,
        rank_split=settings.rank_split or platform.rank_split,
        preverify_kv_reuse=(
            platform.preverify_kv_reuse and sharing == "shared"
            if settings.preverify_kv_reuse is None
            else settings.preverify_kv_reuse
        ),
        spec_overrides=user,
    )
    if resolved.preverify_kv_reuse and resolved.memory_sharing != "shared":
        raise UserError(
            "preverify-kv-reuse needs memory-sharing 'shared': with separate memories the NPU "
            "cannot read the KV entries the PIM wrote"
        )
    return resolved, apply_overrides(base, precision + user)


def controller_params(settings: RunSettings) -> tuple[EDCParams, TVCParams, GTSUParams]:
    """The EDC, TVC and GTSU parameters of a run: defaults, the TVC widths of the settings,
    then ``settings.controller_params``; UserError on an unknown field or a bad value."""
    given = {"edc": {}, "tvc": {}, "gtsu": {}}
    given["tvc"].update(ratio_bits=settings.tvc_ratio_bits, cycle_bits=settings.tvc_cycle_bits)
    for path, value in settings.controller_params:
        block, _, name = path.partition(".")
        known = [f.name for f in fields(CONTROLLER_BLOCKS[block])]
        if name not in known:
            raise UserError(
                f"unknown controller parameter {path!r} (fields of {block}: {', '.join(known)})"
            )
        given[block][name] = value
    try:
        params = tuple(CONTROLLER_BLOCKS[block](**given[block]) for block in CONTROLLER_BLOCKS)
    except (TypeError, ValueError) as error:
        raise UserError(f"controller parameters: {error}") from None
    _check_controller_lengths(settings, params[1])
    return params


def _check_controller_lengths(settings: RunSettings, tvc) -> None:
    """UserError naming ``tvc.length_bits`` if the TVC's length fields (L_kv, LEARN's
    length, P) cannot hold the run's KV length, ``prompt_tokens + tokens``.

    Checked here, where the settings become parameters, for every mode alike (as the
    command line's default width is): otherwise the golden TVC's port check would raise
    a ValueError from deep inside the run.
    """
    longest = settings.prompt_tokens + settings.tokens
    if longest.bit_length() > tvc.length_bits:
        given = dict(settings.controller_params).get("tvc.length_bits", tvc.length_bits)
        raise UserError(
            f"controller parameter tvc.length_bits={given}: the TVC's length fields hold at "
            f"most {(1 << tvc.length_bits) - 1}, but prompt {settings.prompt_tokens} + "
            f"{settings.tokens} tokens = {longest} needs {longest.bit_length()} bits"
        )
