"""The spec files of devices, their power figures, models and pairs, as frozen dataclasses.

- ``devices/<name>.toml``: one device (NPU, PIM, GPU, host CPU);
- ``power/<name>.toml``: the energy figures of the device of the same name;
- ``models/<name>.toml``: one model's architecture (INT8);
- ``pairs.toml``: the draft/target pairs and their synthetic-trace presets.

Every field carries a help text in its ``metadata``. Op convention, used everywhere in the
model: **1 MAC = 1 op**. Peak rates are MAC/s (``matrix_macs_per_s``); vendor figures that
count 2 ops per MAC are halved in the spec file.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.library.files import (
    FILE_NOTES,
    Sourced,
    check_keys,
    described,
    read_toml,
    require_string,
    sourced_choice,
    sourced_numbers,
)

DEVICE_KINDS = ("npu", "pim", "gpu", "cpu")


@dataclass(frozen=True)
class DeviceSpec:
    """One compute or memory device. Unused fields of a kind stay ``None``."""

    name: str = described("Device name (file stem).")
    kind: str = described("One of npu, pim, gpu, cpu.")
    description: str = described("One line for humans.", "")
    clock_hz: float | None = described("Clock frequency (Hz); the PIM clock times the TVC cycles.")
    matrix_macs_per_s: float | None = described("Peak matrix throughput, MAC/s (1 MAC = 1 op).")
    vector_ops_per_s: float | None = described("Peak vector (nonlinear) throughput, ops/s.")
    memory_bandwidth: float | None = described("Bandwidth to the weights and KV cache (B/s).")
    offchip_bandwidth: float | None = described("PIM: off-chip bus bandwidth to the SoC (B/s).")
    eta_compute: float = described("Achieved fraction of the compute peak.", 1.0)
    eta_memory: float = described("Achieved fraction of the memory bandwidth.", 1.0)
    capacity_bytes: float | None = described("Memory capacity (B), reported, not enforced.")
    sram_bytes: float | None = described("On-chip scratchpad (B).")
    units: int | None = described("PIM: processing units (one per rank).")
    rank_capacity_bytes: float | None = described("PIM: bytes per rank.")
    draft_ranks: int | None = described("PIM: ranks tagged DLM; the rest hold the TLM.")
    aau_elements_per_cycle: int | None = described("PIM: AAU elements per cycle per unit.")
    switch_cycles: int | None = described("PIM: GTSU rank-role switch, t_off + t_on cycles.")
    sync_latency_s: float | None = described("Operator-level GPU/PIM hand-off latency (s).")
    nonlinear_elements_per_s: float | None = described("CPU: nonlinear elements per second.")
    transfer_latency_s: float | None = described("CPU: latency of one PIM-to-CPU round trip (s).")
    event_service_cycles: int | None = described(
        "CPU: cycles from a controller interrupt to the register write that answers it (a "
        "pre-verification order passed on); None = not modelled (0)."
    )
    weight_bytes: float | None = described(
        "Bytes per weight the device computes on (FP16 = 2); None = the model's own (INT8)."
    )
    kv_bytes: float | None = described(
        "Bytes per KV-cache element on this device; None = the model's."
    )
    host_link_bandwidth: float | None = described(
        "GPU: host link (PCIe) bandwidth (B/s). When given, weights beyond capacity_bytes stay "
        "in host memory and stream over this link on every pass; without it capacity is "
        "reported, not enforced."
    )
    pim_request_latency_s: float | None = described(
        "NPU: hand-off latency of one nonlinear request from a PIM without AAU (s)."
    )
    sources: tuple[tuple[str, Sourced], ...] = described("(field, Sourced) for every number.", ())


@dataclass(frozen=True)
class PowerSpec:
    """Energy figures of one device (pJ per event, W static); absent figures are 0."""

    device: str = described("Device this file describes.")
    static_w: float = described("Static power, charged over the whole run (W).", 0.0)
    pj_per_mac: float = described("Energy per MAC (pJ).", 0.0)
    pj_per_vector_op: float = described("Energy per vector op (pJ).", 0.0)
    pj_per_byte_memory: float = described(
        "Energy per byte read from the device's memory (pJ).", 0.0
    )
    pj_per_byte_sram: float = described("Energy per byte through on-chip SRAM (pJ).", 0.0)
    pj_per_byte_link: float = described("Energy per byte over the off-chip bus (pJ).", 0.0)
    pj_per_aau_element: float = described("Energy per AAU element (pJ).", 0.0)
    pj_per_cpu_element: float = described("Energy per CPU nonlinear element (pJ).", 0.0)
    sources: tuple[tuple[str, Sourced], ...] = described("(field, Sourced) for every number.", ())


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer at a given weight/KV precision."""

    name: str = described("Model name (file stem).")
    description: str = described("One line for humans.", "")
    layers: int = described("Decoder layers.", 0)
    hidden: int = described("Model width d_model.", 0)
    heads: int = described("Query heads.", 0)
    kv_heads: int = described("Key/value heads (multi-query: 1).", 0)
    head_dim: int = described("Width of one head.", 0)
    ffn: int = described("FFN intermediate width.", 0)
    ffn_matrices: int = described("2 (up, down) or 3 (gate, up, down).", 2)
    vocab: int = described("Vocabulary size (LM head rows).", 0)
    weight_bytes: float = described("Bytes per weight (INT8 = 1).", 1.0)
    kv_bytes: float = described("Bytes per KV-cache element.", 1.0)
    nominal_params: float = described("Parameter count the name claims (reported).", 0.0)
    norm: str = described("The layers' normalisation: layernorm or rmsnorm.", "layernorm")
    activation: str = described(
        "The FFN activation: relu, gelu or silu (a gated FFN's SiLU, as SwiGLU).", "relu"
    )
    sources: tuple[tuple[str, Sourced], ...] = described(
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

    name: str = described("Pair name.")
    draft: str = described("Draft model name.")
    target: str = described("Target model name.")
    preset: str = described("Synthetic-trace preset of ahasd.sim.traces.synthetic.")
    source: str = described("Where the pair comes from.", "")


DEVICE_INT_FIELDS = {
    "units",
    "draft_ranks",
    "aau_elements_per_cycle",
    "switch_cycles",
    "event_service_cycles",
}
_DEVICE_TEXT_FIELDS = ("name", "kind", "description", "sources")
# Fields that may legitimately be zero (a PIM without AAU, no switch cost, no static power).
ZERO_OK_FIELDS = {
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
MODEL_INT_FIELDS = {
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn",
    "ffn_matrices",
    "vocab",
}


def load_device(path: Path) -> DeviceSpec:
    data = read_toml(path)
    name = require_string(path, data, "name")
    kind = require_string(path, data, "kind")
    if kind not in DEVICE_KINDS:
        raise UserError(f"{path}: field 'kind': must be one of {', '.join(DEVICE_KINDS)}")
    numeric = [f.name for f in fields(DeviceSpec) if f.name not in _DEVICE_TEXT_FIELDS]
    check_keys(path, data, ["name", "kind", *numeric, *FILE_NOTES])
    parsed = sourced_numbers(path, data, numeric, DEVICE_INT_FIELDS, ZERO_OK_FIELDS)
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
    check_device(spec, str(path))
    return spec


def check_device(spec: DeviceSpec, where: str) -> None:
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
    parsed = sourced_numbers(path, data, numeric, set(), zero_ok)
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
    parsed = sourced_numbers(path, data, numeric, MODEL_INT_FIELDS, set())
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
    check_model(spec, str(path))
    return spec


def check_model(spec: ModelSpec, where: str) -> None:
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
