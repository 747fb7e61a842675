"""A run's settings (:class:`RunSettings`, what ``ahasd simulate`` takes) and their
resolution against a platform: :func:`resolve` fills the device fields the settings leave
``None`` from the platform and applies the platform's precision and the settings'
spec-field overrides to the library; :func:`controller_params` gives the controller
blocks' parameters.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields

from ahasd.errors import UserError
from ahasd.params import EDCParams, GTSUParams, TVCParams
from ahasd.sim.library.files import described
from ahasd.sim.library.loading import SpecLibrary, load_library
from ahasd.sim.library.overrides import apply_overrides, role_path
from ahasd.sim.library.platforms import (
    DEFAULT_PLATFORM,
    DEVICE_SETTINGS,
    MEMORY_SHARING,
    RANK_SPLITS,
)

# Seeds are unsigned 32-bit: NumPy takes any non-negative integer, but a bound keeps seeds
# writable in every tool that reads the results (and -1 out). The command line's --seed and
# a grid's seed axis share it.
SEED_MAX = (1 << 32) - 1


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

    mode: str = described("Execution mode (ahasd.sim.modes.MODES).")
    pair: str = described("Draft/target pair (pairs.toml).")
    policy: str = described("Drafting policy (ahasd.sim.policies.POLICY_NAMES).")
    tokens: int = described("Generation length (committed target tokens).", 1024)
    seed: int = described("Seed of the run: synthetic trace, acceptance draws, policy RNG.", 0)
    prompt_tokens: int = described("KV-cache length before the first generated token.", 128)
    trace: str | None = described(
        "None = the pair's synthetic preset; else a trace file, a built-in trace name, a "
        "synthetic preset name, or 'iid:<acceptance>'.",
        None,
    )
    policy_params: tuple[tuple[str, object], ...] = described("Policy keyword arguments.", ())
    fallback: bool = described("Wrap the policy in the autoregression fallback.", False)
    platform: str = described(
        "NPU+PIM platform (platforms/<name>.toml, kind npu-pim): the device of every role, "
        "the memory-sharing model, the precision of the NPU and PIM.",
        DEFAULT_PLATFORM,
    )
    npu: str | None = described(_role_help("NPU", "async and npu-only modes"), None)
    pim: str | None = described(_role_help("PIM", "async modes; plain memory in npu-only"), None)
    cpu: str | None = described(_role_help("Host CPU", "every mode"), None)
    gpu: str | None = described(_role_help("GPU", "gpu-only, specpim"), None)
    specpim_pim: str | None = described(_role_help("SpecPIM's PIM", "specpim"), None)
    memory_sharing: str | None = described(
        "'shared': the NPU streams the target's weights and KV cache from the LPDDR5 ranks "
        "the PIM computes in, over the off-chip bus the PIM's requests use too (spec 4); "
        "'separate': NPU and PIM have memories of their own (the authors' artifact); None = "
        "the platform's.",
        None,
    )
    rank_split: str | None = described(
        "How the PIM's ranks are divided between the draft and the target model: "
        "'target-first' (the target on the ranks its weights and KV cache need, the draft "
        "striped over the rest), 'footprint' (each model on just the ranks it needs), "
        "'fixed' (the PIM file's draft_ranks); None = the platform's.",
        None,
    )
    preverify_kv_reuse: bool | None = described(
        "Whether the NPU skips re-verifying tokens a pre-verification accepted (it reads the "
        "target KV entries the PIM wrote); None = the platform's (on with shared memory).",
        None,
    )
    draft_model: str | None = described("Override of the pair's draft model.", None)
    target_model: str | None = described("Override of the pair's target model.", None)
    specpim_planned_draft: int = described("Draft length SpecPIM's split is balanced for.", 4)
    draft_queue_tokens: int = described("Unverified-draft budget of the draft queue (tokens).", 64)
    tvc_ratio_bits: int = described(
        "TVC table entry width (UQ(bits-F).F ratios; default TVCParams().ratio_bits).",
        TVCParams().ratio_bits,
    )
    tvc_cycle_bits: int = described(
        "TVC cycle-count width (default TVCParams().cycle_bits).", TVCParams().cycle_bits
    )
    nonlinear_without_aau: str = described(
        "Where a PIM without AAU computes its nonlinear operators: 'npu' (the NPU's vector "
        "unit, activations over the off-chip bus, in contention with the verification; paper "
        "4.1) or 'host' (the host CPU, nothing contends).",
        "npu",
    )
    spec_overrides: tuple[tuple[str, float], ...] = described(
        "(path, value) overrides of spec-file numbers: devices.NAME.FIELD, power.NAME.FIELD, "
        "models.NAME.FIELD; NAME may be @ROLE (@npu, @pim, @cpu, @gpu, @specpim_pim) for the "
        "device of that role. Applied after the platform's precision, in order.",
        (),
    )
    controller_params: tuple[tuple[str, object], ...] = described(
        "(block.field, value) overrides of the controller parameters (edc., tvc., gtsu.: the "
        "fields of ahasd.params.EDCParams, TVCParams, GTSUParams).",
        (),
    )
    spec_dirs: tuple[str, ...] = described("Extra spec directories (later wins).", ())
    record_timeline: bool = described("Keep every device task for the Chrome trace.", False)

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
