"""Configuration of the system model: spec files (devices, models, power) and run settings.

Every number the model uses lives in a TOML spec file under ``sim/specs/`` (or a user
directory given with ``--spec-dir``), with its source and a confidence note:

- ``devices/<name>.toml``: one device (NPU, PIM, GPU, host CPU);
- ``power/<name>.toml``: the energy figures of the device of the same name;
- ``models/<name>.toml``: one model's architecture (INT8);
- ``pairs.toml``: the draft/target pairs and their synthetic-trace presets.

A numeric field is written ``field = { value = 1.0, source = "...", confidence = "..." }``
(a ``[field]`` table is the same thing); a model's operator fields (``norm``, ``activation``)
take a name in the same shape, ``norm = { value = "rmsnorm", source = "..." }``.
``confidence`` may be given once at file level instead. Files load into nested frozen
dataclasses; every field carries a help text in its ``metadata``. Anything a user can get
wrong (unknown name, missing or non-positive number, bad TOML) raises
:class:`ahasd.errors.UserError` naming the file and the field.

Op convention, used everywhere in the model: **1 MAC = 1 op**. Peak rates are MAC/s
(``matrix_macs_per_s``); vendor figures that count 2 ops per MAC are halved in the spec file.
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from ahasd.errors import UserError

__all__ = [
    "BUILTIN_SPEC_DIR",
    "DEVICE_KINDS",
    "DEVICE_SETTINGS",
    "MODEL_CHOICES",
    "DeviceSpec",
    "ModelSpec",
    "PairSpec",
    "PowerSpec",
    "RunSettings",
    "Sourced",
    "SpecLibrary",
    "field_default",
    "load_library",
    "read_toml",
    "require_string",
    "sourced_choice",
    "sourced_number",
]

BUILTIN_SPEC_DIR = Path(__file__).parent / "specs"

DEVICE_KINDS = ("npu", "pim", "gpu", "cpu")


def _help(text: str, default=None):
    return field(default=default, metadata={"help": text})


@dataclass(frozen=True)
class Sourced:
    """Where one number (or one named choice, e.g. a model's norm) comes from."""

    value: float | str
    source: str
    confidence: str


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


_DEVICE_INT_FIELDS = {"units", "draft_ranks", "aau_elements_per_cycle", "switch_cycles"}
# Fields that may legitimately be zero (a PIM without AAU, no switch cost, no static power).
_ZERO_OK = {"aau_elements_per_cycle", "switch_cycles", "sync_latency_s", "transfer_latency_s"}
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
    """The parsed TOML file ``path``; unreadable or invalid TOML is a UserError naming it."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path}: not valid TOML: {error}") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror}") from None


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
    value = entry.get("value")
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or not math.isfinite(value):
        raise UserError(f"{path}: field '{key}': value must be {kind}, not {value!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "non-negative" if zero_ok else "positive"
        raise UserError(f"{path}: field '{key}': value must be {bound}, not {value!r}")
    return _with_provenance(path, data, key, entry, value)


def _with_provenance(path: Path, data: dict, key: str, entry: dict, value) -> Sourced:
    """``value`` with the ``source`` and ``confidence`` of ``entry`` (or the file's)."""
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise UserError(f"{path}: field '{key}': needs a 'source' string")
    confidence = entry.get("confidence", data.get("confidence"))
    if not isinstance(confidence, str) or not confidence.strip():
        raise UserError(f"{path}: field '{key}': needs a 'confidence' note (or a file-level one)")
    return Sourced(value=value, source=source, confidence=confidence)


def sourced_choice(path: Path, data: dict, key: str, choices: tuple[str, ...]) -> Sourced:
    """Parse ``key = {value = "<name>", source, confidence}`` with ``<name>`` one of
    ``choices``; anything else is a UserError naming the file ``path`` and the field."""
    entry = data[key]
    if not isinstance(entry, dict):
        raise UserError(
            f"{path}: field '{key}': must be a table with value, source and confidence, "
            f"not {entry!r}"
        )
    value = entry.get("value")
    if value not in choices:
        raise UserError(
            f"{path}: field '{key}': value must be one of {', '.join(choices)}, not {value!r}"
        )
    return _with_provenance(path, data, key, entry, value)


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
    numeric = [f.name for f in fields(DeviceSpec) if f.name not in ("name", "kind")]
    numeric = [n for n in numeric if n not in ("description", "sources")]
    parsed = _numbers(path, data, numeric, _DEVICE_INT_FIELDS, _ZERO_OK)
    for required in _REQUIRED_BY_KIND[kind]:
        if required not in parsed:
            raise UserError(f"{path}: field '{required}': required for a {kind} device")
    for eta in ("eta_compute", "eta_memory"):
        if eta in parsed and parsed[eta].value > 1:
            raise UserError(f"{path}: field '{eta}': value must be at most 1")
    if kind == "pim":
        units, ranks = parsed["units"].value, parsed["draft_ranks"].value
        if ranks >= units:
            raise UserError(
                f"{path}: field 'draft_ranks': must be below units ({units}), not {ranks}"
            )
    return DeviceSpec(
        name=name,
        kind=kind,
        description=str(data.get("description", "")),
        sources=tuple(parsed.items()),
        **{key: item.value for key, item in parsed.items()},
    )


def load_power(path: Path) -> PowerSpec:
    data = read_toml(path)
    device = require_string(path, data, "device")
    numeric = [f.name for f in fields(PowerSpec) if f.name not in ("device", "sources")]
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
    parsed = _numbers(path, data, numeric, _MODEL_INT_FIELDS, set())
    for key, choices in MODEL_CHOICES.items():
        if key in data:
            parsed[key] = sourced_choice(path, data, key, choices)
    for required in (*numeric, *MODEL_CHOICES):
        if required not in parsed:
            raise UserError(f"{path}: field '{required}': required for a model")
    if parsed["ffn_matrices"].value not in (2, 3):
        raise UserError(f"{path}: field 'ffn_matrices': value must be 2 or 3")
    if parsed["kv_heads"].value > parsed["heads"].value:
        raise UserError(f"{path}: field 'kv_heads': must not exceed heads")
    return ModelSpec(
        name=name,
        description=str(data.get("description", "")),
        sources=tuple(parsed.items()),
        **{key: item.value for key, item in parsed.items()},
    )


def load_pairs(path: Path) -> dict[str, PairSpec]:
    data = read_toml(path)
    pairs = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise UserError(f"{path}: pair '{name}': must be a table")
        pairs[name] = PairSpec(
            name=name,
            draft=require_string(path, entry, "draft"),
            target=require_string(path, entry, "target"),
            preset=require_string(path, entry, "preset"),
            source=str(entry.get("source", "")),
        )
    return pairs


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


@functools.lru_cache(maxsize=8)
def _load(directories: tuple[Path, ...]) -> SpecLibrary:
    devices, power, models, pairs = {}, {}, {}, {}
    for directory in directories:
        if not directory.is_dir():
            raise UserError(f"spec directory {directory} does not exist")
        for path in sorted((directory / "devices").glob("*.toml")):
            spec = load_device(path)
            devices[spec.name] = spec
        for path in sorted((directory / "power").glob("*.toml")):
            spec = load_power(path)
            power[spec.device] = spec
        for path in sorted((directory / "models").glob("*.toml")):
            spec = load_model(path)
            models[spec.name] = spec
        if (directory / "pairs.toml").is_file():
            pairs.update(load_pairs(directory / "pairs.toml"))
    for pair in pairs.values():
        for role, name in (("draft", pair.draft), ("target", pair.target)):
            if name not in models:
                raise UserError(f"pair {pair.name!r}: unknown {role} model {name!r}")
    return SpecLibrary(devices, power, models, pairs, directories)


def load_library(extra_dirs=()) -> SpecLibrary:
    """The built-in specs plus ``extra_dirs`` (later wins), cached per directory list."""
    directories = (BUILTIN_SPEC_DIR, *(Path(d).resolve() for d in extra_dirs))
    return _load(directories)


def field_default(settings_class, name: str):
    """The default of field ``name`` of a settings dataclass (:class:`RunSettings`, the phone
    settings): the one place the command line takes its defaults and their help texts from.
    A field without a default gives ``dataclasses.MISSING``."""
    for item in fields(settings_class):
        if item.name == name:
            return item.default
    raise KeyError(f"{settings_class.__name__} has no field {name!r}")


# The RunSettings fields that name a device, and the kind of device each must name; their
# defaults are the RunSettings defaults.
DEVICE_SETTINGS = {"npu": "npu", "pim": "pim", "cpu": "cpu", "gpu": "gpu", "specpim_pim": "pim"}


@dataclass(frozen=True)
class RunSettings:
    """One simulated configuration (what ``ahasd simulate`` takes on its command line)."""

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
    npu: str = _help("NPU device (async and npu-only modes).", "npu-mobile")
    pim: str = _help("PIM device (async modes; plain memory in npu-only).", "lpddr5-pim")
    cpu: str = _help("Host CPU device.", "host-cpu")
    gpu: str = _help("GPU device (gpu-only, specpim).", "rtx4090-laptop")
    specpim_pim: str = _help("PIM device of the SpecPIM baseline.", "gddr6-aim")
    draft_model: str | None = _help("Override of the pair's draft model.", None)
    target_model: str | None = _help("Override of the pair's target model.", None)
    specpim_planned_draft: int = _help("Draft length SpecPIM's split is balanced for.", 4)
    draft_queue_tokens: int = _help("Unverified-draft budget of the draft queue (tokens).", 64)
    tvc_ratio_bits: int = _help("TVC table entry width (spec: 32, UQ24.8).", 32)
    tvc_cycle_bits: int = _help("TVC cycle-count width (spec: 32).", 32)
    spec_dirs: tuple[str, ...] = _help("Extra spec directories (later wins).", ())
    record_timeline: bool = _help("Keep every device task for the Chrome trace.", False)

    def __post_init__(self) -> None:
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
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"seed must be a non-negative integer, not {self.seed!r}")

    def key(self) -> str:
        """Identity of the run in a sweep's results file."""
        return f"{self.mode}|{self.pair}|{self.policy}|{self.tokens}|{self.seed}|{self.trace}"
