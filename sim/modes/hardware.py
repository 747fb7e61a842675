"""Hardware assembly: the executors and pass-cost models of the devices one mode uses.

:func:`build_hardware` reads the mode's row of the mode table (``assembly``, the draft and
verify devices, the devices it reports) and the devices and models named by the run
settings from the spec library, and returns a :class:`Hardware`: callables
``(tokens, context) -> Cost`` for a draft pass, a verification pass and (asynchronous
modes) a pre-verification pass on the PIM's target ranks, plus static power and notes.
:func:`tvc_presets` derives the TVC tables' offline-profiling presets from those costs.

The settings are resolved against their platform first (:func:`ahasd.sim.config.resolve`:
devices, precision, spec overrides). A device with ``weight_bytes``/``kv_bytes`` runs every
model at that precision; a GPU with ``host_link_bandwidth`` streams the weights that do not
fit its memory over that link (:class:`~ahasd.sim.cost.OffloadPassModel`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ahasd.params import TVCParams
from ahasd.sim.config import DeviceSpec, ModelSpec, RunSettings, SpecLibrary, resolve
from ahasd.sim.cost import OffloadPassModel, PassModel, SplitPassModel, executor_for
from ahasd.sim.modes.table import Mode, find_mode

__all__ = ["ASSEMBLY_ROLES", "Hardware", "build_hardware", "tvc_presets"]

_TYPICAL_PASS_DRAFTS = 4  # for the TVC presets ("offline profiling") only


@dataclass
class Hardware:
    """Cost models and bookkeeping of the devices one mode uses."""

    draft_pass: object  # (tokens, context) -> Cost
    verify_pass: object
    preverify_pass: object | None
    draft_device: str
    verify_device: str
    devices: tuple[str, ...]
    static_w: dict[str, float]
    pim_clock_hz: float = 800e6
    switch_cycles: int = 0
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


# The settings a Hardware depends on (the memo key of build_hardware).
_HARDWARE_FIELDS = (
    "mode",
    "pair",
    "prompt_tokens",
    "npu",
    "pim",
    "cpu",
    "gpu",
    "specpim_pim",
    "draft_model",
    "target_model",
    "specpim_planned_draft",
    "memory_sharing",
    "nonlinear_without_aau",
)


def build_hardware(settings: RunSettings, library: SpecLibrary) -> Hardware:
    """Executors and pass-cost models for ``settings.mode`` from the spec library.

    Memoised per library and hardware-relevant settings: the pass-cost caches are pure, so
    runs that differ only in policy, seed or trace share them (a sweep's main saving).
    """
    settings, library = resolve(settings, library)
    key = tuple(getattr(settings, name) for name in _HARDWARE_FIELDS)
    cache = _HARDWARE_CACHE.setdefault(id(library), (library, {}))[1]
    if key not in cache:
        mode = find_mode(settings.mode)
        cache[key] = _ASSEMBLERS[mode.assembly](mode, settings, library)
    return cache[key]


# id(library) -> (library kept alive so the id stays unique, {settings key: Hardware})
_HARDWARE_CACHE: dict[int, tuple[SpecLibrary, dict]] = {}


def _models(settings: RunSettings, library: SpecLibrary):
    pair = library.pair(settings.pair)
    draft = library.model(settings.draft_model or pair.draft)
    target = library.model(settings.target_model or pair.target)
    return draft, target, {"draft_model": draft.name, "target_model": target.name}


def _at_precision(model: ModelSpec, device: DeviceSpec) -> ModelSpec:
    """``model`` as ``device`` runs it: at the device's weight/KV precision if it has one."""
    changes = {
        name: getattr(device, name)
        for name in ("weight_bytes", "kv_bytes")
        if getattr(device, name) is not None
    }
    return dataclasses.replace(model, **changes) if changes else model


def _gpu(settings: RunSettings, library: SpecLibrary, draft, target, *, offload: bool = True):
    """The GPU's executor, its models at its precision, their resident fractions, its
    static power and a note when the weights exceed its memory.

    Without a host link the weights are modelled as if they fit (resident 1); with one, the
    draft is kept resident first (it runs most often) and the target gets what is left.
    """
    gpu = library.device(settings.gpu, "gpu")
    power = library.power_of(gpu.name)
    gpu_ex = executor_for(gpu, power)
    draft, target = _at_precision(draft, gpu), _at_precision(target, gpu)
    notes = []
    resident = {draft.name: 1.0, target.name: 1.0}
    weights = draft.weight_bytes_total + target.weight_bytes_total
    capacity = gpu.capacity_bytes
    if capacity and weights > capacity:
        sizes = f"{draft.name} + {target.name} weights ({weights / 1e9:.1f} GB)"
        if offload and gpu.host_link_bandwidth:
            draft_share = min(1.0, capacity / draft.weight_bytes_total)
            left = max(0.0, capacity - draft.weight_bytes_total)
            resident = {draft.name: draft_share, target.name: left / target.weight_bytes_total}
            notes.append(
                f"{sizes} exceed {gpu.name}'s {capacity / 2**30:.0f} GiB: "
                f"{(weights - capacity) / 1e9:.1f} GB stream over the host link "
                f"({gpu.host_link_bandwidth / 1e9:.1f} GB/s) every pass"
            )
        else:
            notes.append(
                f"{sizes} exceed {gpu.name}'s {capacity / 2**30:.0f} GiB; modelled as if they fit"
            )
    return gpu_ex, (draft, target), resident, {"gpu": power.static_w}, notes


def _gpu_pass(settings: RunSettings, library: SpecLibrary, gpu_ex, model, resident: float):
    if resident >= 1.0:
        return PassModel(gpu_ex, model)
    gpu = library.device(settings.gpu, "gpu")
    return OffloadPassModel(
        gpu_ex,
        model,
        resident=resident,
        link_bytes_per_s=gpu.host_link_bandwidth,
        pj_per_link_byte=library.power_of(gpu.name).pj_per_byte_link,
    )


def _assemble_gpu(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    library.device(settings.cpu, "cpu")
    gpu_ex, (draft, target), resident, static, notes = _gpu(settings, library, draft, target)
    if resident[target.name] < 1:
        details.update(gpu_resident_target=resident[target.name])
    return Hardware(
        _gpu_pass(settings, library, gpu_ex, draft, resident[draft.name]),
        _gpu_pass(settings, library, gpu_ex, target, resident[target.name]),
        None,
        mode.draft_device,
        mode.verify_device,
        mode.devices,
        static,
        notes=notes,
        details=details,
    )


def _assemble_specpim_split(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    cpu = library.device(settings.cpu, "cpu")
    cpu_power = library.power_of(cpu.name)
    # SpecPIM splits every operator with the PIM in the GPU's memory: the weights are there,
    # at the GPU's precision (a host link does not apply: the split needs them in memory).
    gpu_ex, (draft, target), _, static, notes = _gpu(
        settings, library, draft, target, offload=False
    )
    aim = library.device(settings.specpim_pim, "pim")
    aim_power = library.power_of(aim.name)
    aim_ex = executor_for(aim, aim_power, host=cpu, host_power=cpu_power)
    context = settings.prompt_tokens
    planned = settings.specpim_planned_draft
    p_draft = SplitPassModel.balanced(gpu_ex, aim_ex, draft, 1, context)
    p_target = SplitPassModel.balanced(gpu_ex, aim_ex, target, planned + 1, context)
    sync = aim.sync_latency_s or 0.0
    static["pim"] = aim_power.static_w
    details.update(specpim_pim_fraction_draft=p_draft, specpim_pim_fraction_target=p_target)
    return Hardware(
        SplitPassModel(gpu_ex, aim_ex, draft, p_draft, sync),
        SplitPassModel(gpu_ex, aim_ex, target, p_target, sync),
        None,
        mode.draft_device,
        mode.verify_device,
        mode.devices,
        static,
        notes=notes,
        details=details,
    )


def _assemble_npu(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    library.device(settings.cpu, "cpu")
    npu = library.device(settings.npu, "npu")
    npu_ex = executor_for(npu, library.power_of(npu.name))
    pim = library.device(settings.pim, "pim")
    static = {
        "npu": library.power_of(npu.name).static_w,
        # The same LPDDR5 package as plain memory.
        "memory": library.power_of(pim.name).static_w,
    }
    return Hardware(
        PassModel(npu_ex, _at_precision(draft, npu)),
        PassModel(npu_ex, _at_precision(target, npu)),
        None,
        mode.draft_device,
        mode.verify_device,
        mode.devices,
        static,
        details=details,
    )


def _assemble_pim_npu(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    cpu = library.device(settings.cpu, "cpu")
    cpu_power = library.power_of(cpu.name)
    npu = library.device(settings.npu, "npu")
    npu_ex = executor_for(npu, library.power_of(npu.name))
    pim = library.device(settings.pim, "pim")
    pim_power = library.power_of(pim.name)
    static = {"npu": library.power_of(npu.name).static_w}
    notes = []
    npu_target = _at_precision(target, npu)
    draft, target = _at_precision(draft, pim), _at_precision(target, pim)
    draft_share = pim.draft_ranks / pim.units
    rank_bytes = pim.rank_capacity_bytes or 0
    if rank_bytes:
        for model, ranks, role in (
            (draft, pim.draft_ranks, "DLM"),
            (target, pim.units - pim.draft_ranks, "TLM"),
        ):
            if model.weight_bytes_total > ranks * rank_bytes:
                notes.append(
                    f"{model.name} ({model.weight_bytes_total / 1e9:.1f} GB) exceeds the "
                    f"{ranks} {role} ranks of {pim.name}; modelled as if it fits"
                )
    # Without the AAU the PIM's nonlinear operators go to the NPU's vector unit (paper 4.1),
    # or, as an option, to the host CPU.
    if settings.nonlinear_without_aau == "npu":
        host = {"host": npu, "host_power": library.power_of(npu.name)}
    else:
        host = {"host": cpu, "host_power": cpu_power}
    pim_draft = executor_for(pim, pim_power, share=draft_share, aau=mode.aau, **host)
    pim_target = executor_for(pim, pim_power, share=1 - draft_share, aau=mode.aau, **host)
    static["pim"] = pim_power.static_w
    static["cpu"] = cpu_power.static_w
    details.update(pim_draft_ranks=pim.draft_ranks, pim_units=pim.units)
    return Hardware(
        PassModel(pim_draft, draft),
        PassModel(npu_ex, npu_target),
        PassModel(pim_target, target),
        mode.draft_device,
        mode.verify_device,
        mode.devices,
        static,
        pim_clock_hz=pim.clock_hz,
        switch_cycles=pim.switch_cycles or 0,
        notes=notes,
        details=details,
    )


# Mode.assembly -> the device roles (RunSettings fields) whose numbers its costs depend on:
# what a run's configuration hash covers (ahasd.sim.sweep). The GPU assemblies check the
# CPU's name but use none of its numbers (SpecPIM's nonlinear operators run on the GPU).
ASSEMBLY_ROLES = {
    "gpu": ("gpu",),
    "specpim-split": ("gpu", "specpim_pim"),
    "npu": ("npu", "pim"),
    "pim-npu": ("npu", "pim", "cpu"),
}

# Mode.assembly -> the function that builds it (one per entry of table.ASSEMBLIES).
_ASSEMBLERS = {
    "gpu": _assemble_gpu,
    "specpim-split": _assemble_specpim_split,
    "npu": _assemble_npu,
    "pim-npu": _assemble_pim_npu,
}


def tvc_presets(hardware: Hardware, prompt: int) -> dict[str, int]:
    """Offline-profiling presets of the TVC tables from the cost model (ratios with
    ``TVCParams().frac_bits`` fraction bits, not yet fitted to any width).

    NVCT from a verification pass of a typical batch, PDCT from one draft token, PVCT from a
    pre-verification pass of the same batch, all at context ``prompt``, in PIM cycles.
    """
    clock, scale = hardware.pim_clock_hz, 1 << TVCParams().frac_bits
    k = _TYPICAL_PASS_DRAFTS
    npu = hardware.verify_pass(k + 1, prompt).seconds * clock
    draft = hardware.draft_pass(1, prompt).seconds * clock
    pre = hardware.preverify_pass(k + 2, prompt).seconds * clock
    return {
        "nvct": int(npu * scale // prompt),
        "pdct": int(draft * scale),
        "pvct": int(pre * scale),
    }
