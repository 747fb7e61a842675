"""Hardware assembly: the executors and pass-cost models of the devices one mode uses.

:func:`build_hardware` reads the mode's row of the mode table (``assembly``, the draft and
verify devices, the devices it reports) and the devices and models named by the run
settings from the spec library, and returns a :class:`Hardware`: callables
``(tokens, context) -> Cost`` for a draft pass, a verification pass and (asynchronous
modes) a pre-verification pass on the PIM's target ranks, plus static power and notes.
:func:`tvc_presets` derives the TVC tables' offline-profiling presets from those costs.

It takes a :class:`~ahasd.sim.modes.prepare.PreparedRun`: the settings already resolved
against their platform (devices, precision, spec overrides) and the mode's row. A device
with ``weight_bytes``/``kv_bytes`` runs every model at that precision; a GPU with
``host_link_bandwidth`` streams the weights that do not fit its memory over that link
(:class:`~ahasd.sim.cost.OffloadPassModel`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ahasd.errors import UserError
from ahasd.params import TVCParams
from ahasd.sim.cost import OffloadPassModel, PassModel, executor_for
from ahasd.sim.library.loading import SpecLibrary
from ahasd.sim.library.specs import DeviceSpec, ModelSpec
from ahasd.sim.modes.oplevel import OperatorSplitPassModel, balanced_fractions, operator_times
from ahasd.sim.modes.prepare import PreparedRun
from ahasd.sim.modes.ranks import split_ranks
from ahasd.sim.modes.table import Mode
from ahasd.sim.settings import RunSettings

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
    # The CPU's service of a controller interrupt (it passes a pre-verification order on).
    cpu_event_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)


# The settings a Hardware depends on (the memo key of build_hardware).
_HARDWARE_FIELDS = (
    "mode",
    "pair",
    "prompt_tokens",
    "tokens",
    "rank_split",
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


def build_hardware(prepared: PreparedRun) -> Hardware:
    """Executors and pass-cost models of the prepared run's mode from its spec library.

    Memoised per library and hardware-relevant settings: the pass-cost caches are pure, so
    runs that differ only in policy, seed or trace share them (a sweep's main saving).
    """
    settings, library = prepared.settings, prepared.library
    key = tuple(getattr(settings, name) for name in _HARDWARE_FIELDS)
    cache = _HARDWARE_CACHE.setdefault(id(library), (library, {}))[1]
    if key not in cache:
        cache[key] = _ASSEMBLERS[prepared.mode.assembly](prepared.mode, settings, library)
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
    static power and notes (the precision always; the offload when there is one).

    The GPU's memory holds the weights and the KV cache at the run's length. What exceeds
    its ``capacity_bytes`` streams over its host link on every pass (the draft is kept
    resident first, as it runs most often; the KV cache stays on the GPU). A GPU without a
    host link, or a pass that needs the weights in GPU memory (``offload=False``: SpecPIM's
    split), refuses a pair that does not fit, naming the shortfall. A GPU file without a
    capacity is an upper bound (nothing is enforced).
    """
    gpu = library.device(settings.gpu, "gpu")
    power = library.power_of(gpu.name)
    gpu_ex = executor_for(gpu, power)
    draft, target = _at_precision(draft, gpu), _at_precision(target, gpu)
    notes = [f"{gpu.name}: weights at {_precision(draft.weight_bytes)}"]
    resident = {draft.name: 1.0, target.name: 1.0}
    positions = settings.prompt_tokens + settings.tokens
    kv = positions * (draft.kv_bytes_per_token() + target.kv_bytes_per_token())
    weights = draft.weight_bytes_total + target.weight_bytes_total
    capacity = gpu.capacity_bytes
    if capacity and weights + kv > capacity:
        sizes = (
            f"{draft.name} + {target.name} at {_precision(draft.weight_bytes)} "
            f"({weights / 1e9:.1f} GB of weights + {kv / 1e9:.1f} GB of KV cache at "
            f"{positions} tokens)"
        )
        shortfall = (weights + kv - capacity) / 1e9
        room = capacity / 2**30
        if not (offload and gpu.host_link_bandwidth):
            why = "SpecPIM's split needs them in its memory" if not offload else "no host link"
            raise UserError(
                f"{sizes} exceed {gpu.name}'s {room:.0f} GiB by {shortfall:.1f} GB ({why})"
            )
        left = max(0.0, capacity - kv)
        draft_share = min(1.0, left / draft.weight_bytes_total)
        left = max(0.0, left - draft.weight_bytes_total)
        resident = {draft.name: draft_share, target.name: left / target.weight_bytes_total}
        notes.append(
            f"{sizes} exceed {gpu.name}'s {room:.0f} GiB: {shortfall:.1f} GB stream over "
            f"the host link ({gpu.host_link_bandwidth / 1e9:.1f} GB/s) every pass"
        )
    return gpu_ex, (draft, target), resident, {"gpu": power.static_w}, notes


def _precision(weight_bytes: float) -> str:
    return {1: "INT8", 2: "FP16", 0.5: "INT4"}.get(weight_bytes, f"{weight_bytes:g} B/weight")


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
    details.update(gpu_precision=_precision(draft.weight_bytes))
    if resident[target.name] < 1 or resident[draft.name] < 1:
        details.update(
            gpu_resident_target=resident[target.name], gpu_resident_draft=resident[draft.name]
        )
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


def _assemble_specpim_gpu(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    cpu = library.device(settings.cpu, "cpu")
    cpu_power = library.power_of(cpu.name)
    # SpecPIM splits every operator with the PIM in the GPU's memory: the weights must be
    # there, at the GPU's precision (the split cannot stream them over a host link).
    gpu_ex, (draft, target), _, static, notes = _gpu(
        settings, library, draft, target, offload=False
    )
    details.update(gpu_precision=_precision(draft.weight_bytes))
    aim = library.device(settings.specpim_pim, "pim")
    aim_power = library.power_of(aim.name)
    aim_ex = executor_for(aim, aim_power, host=cpu, host_power=cpu_power)
    static["pim"] = aim_power.static_w
    return _split_hardware(
        mode,
        settings,
        (gpu_ex, "gpu"),
        (aim_ex, aim_ex),
        (draft, target),
        aim.sync_latency_s or 0.0,
        static,
        notes,
        details,
    )


def _assemble_specpim_npu(mode: Mode, settings: RunSettings, library: SpecLibrary) -> Hardware:
    draft, target, details = _models(settings, library)
    library.device(settings.cpu, "cpu")
    npu = library.device(settings.npu, "npu")
    npu_power = library.power_of(npu.name)
    npu_ex = executor_for(npu, npu_power)
    pim = library.device(settings.pim, "pim")
    pim_power = library.power_of(pim.name)
    # The NPU streams its part at its precision, the PIM computes at its own (the same
    # INT8 on the shipped platforms).
    draft, target = _at_precision(draft, pim), _at_precision(target, pim)
    ranks = split_ranks(
        pim, draft, target, settings.prompt_tokens + settings.tokens, settings.rank_split
    )
    notes = [ranks.note] if ranks.note else []
    on_ranks = {
        share: executor_for(
            pim, pim_power, share=share / pim.units, aau=False, host=npu, host_power=npu_power
        )
        for share in (ranks.draft, ranks.target)
    }
    static = {"npu": npu_power.static_w, "pim": pim_power.static_w}
    details.update(
        pim_draft_ranks=ranks.draft,
        pim_target_ranks=ranks.target,
        pim_units=pim.units,
        rank_split=ranks.reading,
    )
    return _split_hardware(
        mode,
        settings,
        (npu_ex, "npu"),
        (on_ranks[ranks.draft], on_ranks[ranks.target]),
        (draft, target),
        npu.pim_request_latency_s or 0.0,
        static,
        notes,
        details,
    )


def _split_hardware(
    mode, settings, host, pims, models, sync_latency_s, static, notes, details
) -> Hardware:
    """Operator-level synchronous hardware (:mod:`~ahasd.sim.modes.oplevel`): each model's
    operators split between ``host = (executor, device)`` and its PIM executor, balanced
    for a draft step and for a verification of the planned draft length."""
    (host_ex, host_device), context = host, settings.prompt_tokens
    planned = settings.specpim_planned_draft
    passes, fractions = [], {}
    for model, pim_ex, tokens, role in zip(
        models, pims, (1, planned + 1), ("draft", "target"), strict=True
    ):
        split = balanced_fractions(host_ex, pim_ex, model, tokens, context)
        fractions[role] = split
        passes.append(
            OperatorSplitPassModel(host_ex, pim_ex, model, split, sync_latency_s, host_device)
        )
    details.update(
        specpim_planned_draft=planned,
        specpim_pim_fraction_draft=_mean_fraction(passes[0], 1, context),
        specpim_pim_fraction_target=_mean_fraction(passes[1], planned + 1, context),
    )
    return Hardware(
        passes[0],
        passes[1],
        None,
        mode.draft_device,
        mode.verify_device,
        mode.devices,
        static,
        notes=notes,
        details=details,
    )


def _mean_fraction(split: OperatorSplitPassModel, tokens: int, context: int) -> float:
    """The PIM's share of a pass's matrix work, weighted by each operator's MACs."""
    total = weighted = 0.0
    for name, count, macs, _, _, _ in operator_times(
        split.sides.host, split.sides.pim, split.model, tokens, context
    ):
        total += count * macs
        weighted += count * macs * split.fractions[name]
    return weighted / total if total else 0.0


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
    ranks = split_ranks(
        pim, draft, target, settings.prompt_tokens + settings.tokens, settings.rank_split
    )
    if ranks.note:
        notes.append(ranks.note)
    # Without the AAU the PIM's nonlinear operators go to the NPU's vector unit (paper 4.1),
    # or, as an option, to the host CPU.
    if settings.nonlinear_without_aau == "npu":
        host = {"host": npu, "host_power": library.power_of(npu.name)}
    else:
        host = {"host": cpu, "host_power": cpu_power}
    pim_draft = executor_for(pim, pim_power, share=ranks.draft / pim.units, aau=mode.aau, **host)
    pim_target = executor_for(pim, pim_power, share=ranks.target / pim.units, aau=mode.aau, **host)
    static["pim"] = pim_power.static_w
    static["cpu"] = cpu_power.static_w
    details.update(
        pim_draft_ranks=ranks.draft,
        pim_target_ranks=ranks.target,
        pim_units=pim.units,
        rank_split=ranks.reading,
    )
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
        cpu_event_s=(cpu.event_service_cycles or 0) / cpu.clock_hz if cpu.clock_hz else 0.0,
        notes=notes,
        details=details,
    )


# Mode.assembly -> the device roles (RunSettings fields) whose numbers its costs depend on:
# what a run's configuration hash covers (ahasd.sim.run_identity). The GPU assemblies check the
# CPU's name but use none of its numbers (SpecPIM's nonlinear operators run on the GPU).
ASSEMBLY_ROLES = {
    "gpu": ("gpu",),
    "specpim-gpu": ("gpu", "specpim_pim"),
    "npu": ("npu", "pim"),
    "specpim-npu": ("npu", "pim", "cpu"),
    "pim-npu": ("npu", "pim", "cpu"),
}

# Mode.assembly -> the function that builds it (one per entry of table.ASSEMBLIES).
_ASSEMBLERS = {
    "gpu": _assemble_gpu,
    "specpim-gpu": _assemble_specpim_gpu,
    "npu": _assemble_npu,
    "specpim-npu": _assemble_specpim_npu,
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
