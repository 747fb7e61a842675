"""Cost of a phone mode: pass-cost models per throttle level and the platform's power.

:func:`build_phone_hardware` gives, for every (clock, DDR) throttle level of the platform,
the target's verification pass on the GPU and the draft pass where the mode's table row
puts it (GPU, or the NPU with its weights in SRAM: :class:`TieredPassModel`), with compute
and energy per op scaled by the clock and ``v(s)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ahasd.sim.cost import Cost, Executor, PassModel, executor_for, operators
from ahasd.sim.phone.platform import PlatformSpec
from ahasd.sim.phone.prepare import PreparedPhoneRun

__all__ = ["PhoneHardware", "TieredPassModel", "build_phone_hardware"]


class TieredPassModel(PassModel):
    """A pass whose weights and KV cache live in different memories (the NPU draft).

    The executor's ``bytes_per_s``/``pj_per_byte`` are the weight tier's (on-chip SRAM, or a
    blend of SRAM and DRAM when the weights spill); attention's KV-cache bytes use
    ``kv_bytes_per_s``/``kv_pj_per_byte`` (LPDDR5X). Otherwise the roofline of
    :class:`ahasd.sim.cost.PassModel`.
    """

    def __init__(self, executor: Executor, model, kv_bytes_per_s: float, kv_pj_per_byte: float):
        super().__init__(executor, model)
        self.kv_bytes_per_s = kv_bytes_per_s
        self.kv_pj_per_byte = kv_pj_per_byte

    def compute(self, tokens: int, context: int) -> Cost:
        ex = self.executor
        matrix, elements, _ = operators(self.model, tokens, context)
        seconds = macs = memory_bytes = energy = 0.0
        for name, count, op_macs, op_bytes in matrix:
            kv = name.startswith("attention")
            bandwidth = self.kv_bytes_per_s if kv else ex.bytes_per_s
            pj_per_byte = self.kv_pj_per_byte if kv else ex.pj_per_byte
            seconds += count * max(op_macs / ex.macs_per_s, op_bytes / bandwidth)
            energy += count * (op_macs * ex.pj_per_mac + op_bytes * pj_per_byte)
            macs += count * op_macs
            memory_bytes += count * op_bytes
        path = ex.nonlinear
        seconds += elements / path.elements_per_s
        energy += elements * path.pj_per_element
        return Cost(seconds, energy * 1e-12, macs, memory_bytes, 0.0, elements)


def _voltage(platform: PlatformSpec, s: float) -> float:
    """Relative supply voltage at clock fraction ``s`` (linear V-f model)."""
    v0 = platform.voltage_floor
    return v0 + (1.0 - v0) * s


def _scaled(ex: Executor, s: float, m: float, v2: float) -> Executor:
    """``ex`` at clock fraction ``s``, memory fraction ``m``, relative V^2 ``v2``."""
    path = replace(
        ex.nonlinear,
        elements_per_s=ex.nonlinear.elements_per_s * s,
        pj_per_element=ex.nonlinear.pj_per_element * v2,
    )
    return replace(
        ex,
        macs_per_s=ex.macs_per_s * s,
        bytes_per_s=ex.bytes_per_s * m,
        pj_per_mac=ex.pj_per_mac * v2,
        nonlinear=path,
    )


@dataclass
class PhoneHardware:
    """Pass-cost models per throttle level, and the power figures of the platform."""

    platform: PlatformSpec
    mode: str
    draft_device: str | None
    verify_device: str
    draft_passes: list  # per level: (tokens, context) -> Cost, or None (no draft model)
    verify_passes: list
    active_w: dict  # device -> clocked power at fmax (W)
    gated_w: dict  # device -> clock-gated power (W)
    gpu_clock_hz: float
    notes: list = field(default_factory=list)
    details: dict = field(default_factory=dict)

    def clocked_w(self, device: str, level: int) -> float:
        s = self.platform.clock_levels[level]
        return self.active_w[device] * s * _voltage(self.platform, s) ** 2


def build_phone_hardware(prepared: PreparedPhoneRun) -> PhoneHardware:
    """Executors of the platform's GPU and NPU at every throttle level, for the prepared
    run's mode."""
    settings, platform, library = prepared.settings, prepared.platform, prepared.library
    pair, draft_device = prepared.pair, prepared.mode.draft_device
    draft, target = library.model(pair.draft), library.model(pair.target)
    gpu = library.device(platform.gpu, "gpu")
    npu = library.device(platform.npu, "npu")
    gpu_power, npu_power = library.power_of(gpu.name), library.power_of(npu.name)
    if settings.dram_pj_per_bit is not None:
        gpu_power = replace(gpu_power, pj_per_byte_memory=8.0 * settings.dram_pj_per_bit)
        npu_power = replace(npu_power, pj_per_byte_memory=8.0 * settings.dram_pj_per_bit)
    gpu_ex = executor_for(gpu, gpu_power)
    npu_ex = executor_for(npu, npu_power)
    notes = []
    details = {
        "draft_model": draft.name,
        "target_model": target.name,
        "dram_pj_per_bit": gpu_power.pj_per_byte_memory / 8.0,
        "draft_weights": settings.draft_weights,
    }
    weights = draft.weight_bytes_total + target.weight_bytes_total
    if gpu.capacity_bytes and weights > gpu.capacity_bytes:
        notes.append(
            f"weights ({weights / 1e9:.1f} GB) exceed {gpu.name}'s memory; modelled as if they fit"
        )
    sram = npu.sram_bytes or 0.0
    fit = min(1.0, sram / draft.weight_bytes_total) if draft.weight_bytes_total else 1.0
    if draft_device == "npu" and fit < 1.0:
        notes.append(
            f"{draft.name} INT4 weights ({draft.weight_bytes_total / 1e6:.0f} MB) do not fit "
            f"{npu.name}'s {sram / 2**20:.0f} MiB SRAM; "
            + (
                "modelled as if they did (--draft-weights sram, spec section 5's reading)"
                if settings.draft_weights == "sram"
                else f"{fit:.1%} read from SRAM, the rest streamed from LPDDR5X"
            )
        )
    sram_fraction = fit if settings.draft_weights == "spill" else 1.0
    details["draft_sram_fraction"] = sram_fraction
    draft_passes, verify_passes = [], []
    for s, m in zip(platform.clock_levels, platform.memory_levels, strict=True):
        v2 = _voltage(platform, s) ** 2
        gpu_level = _scaled(gpu_ex, s, m, v2)
        verify_passes.append(PassModel(gpu_level, target))
        if draft_device is None:
            draft_passes.append(None)
        elif draft_device == "gpu":
            draft_passes.append(PassModel(gpu_level, draft))
        else:
            dram_bw = npu.memory_bandwidth * npu.eta_memory * m
            sram_bw = platform.npu_sram_bandwidth * npu.eta_memory * s  # SRAM runs at the NPU clock
            seconds_per_byte = sram_fraction / sram_bw + (1.0 - sram_fraction) / dram_bw
            weight_pj = (
                sram_fraction * npu_power.pj_per_byte_sram
                + (1.0 - sram_fraction) * npu_power.pj_per_byte_memory
            )
            npu_level = replace(
                _scaled(npu_ex, s, 1.0, v2),
                bytes_per_s=1.0 / seconds_per_byte,
                pj_per_byte=weight_pj,
            )
            draft_passes.append(
                TieredPassModel(npu_level, draft, dram_bw, npu_power.pj_per_byte_memory)
            )
    return PhoneHardware(
        platform=platform,
        mode=settings.mode,
        draft_device=draft_device,
        verify_device="gpu",
        draft_passes=draft_passes,
        verify_passes=verify_passes,
        active_w={"gpu": platform.gpu_active_w, "npu": platform.npu_active_w},
        gated_w={"gpu": gpu_power.static_w, "npu": npu_power.static_w},
        gpu_clock_hz=gpu.clock_hz,
        notes=notes,
        details=details,
    )
