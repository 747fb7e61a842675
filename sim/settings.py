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
# The controller's length fields (TVC L_kv, the KV length the NPU pass reports) are
# TVCParams.length_bits wide; prompt plus generated tokens must fit them in every mode, so a
# setting is accepted or refused the same way whichever mode runs it.
KV_LENGTH_MAX = (1 << TVCParams().length_bits) - 1


def field_default(settings_class, name: str):
    """The default of field ``name`` of a settings dataclass (:class:`RunSettings`, the phone
    settings): the one place the command line takes its defaults and their help texts from.
    A field without a default gives ``dataclasses.MISSING``."""
    for item in fields(settings_class):
        if item.name == name:
            return item.default
    raise KeyError(f"{settings_class.__name__} has no field {name!r}")


# Where a PIM without AAU sends its nonlinear operators (RunSettings.nonlinear_without_aau).
NONLINEAR_WITHOUT_AAU = ("npu", "host")
# memory_sharing (MEMORY_SHARING) may be None, "the platform's": checked on its own.
_CHOICES = {"nonlinear_without_aau": NONLINEAR_WITHOUT_AAU}
# The command line's words for a setting left None, "the platform's" (ahasd.cli.options reads
# the metadata keys: help, flag, bounds, choices, metavar, repeat, default_help).
_PLATFORMS = "(default: the platform's)"
_LENGTHS = f"--prompt-tokens + --tokens <= {KV_LENGTH_MAX}"


def _device(role: str) -> dataclasses.Field:
    """A device role's field: a device name, or None for the platform's."""
    return described(f"{role.replace('_', '-')} device", None, default_help=_PLATFORMS)


@dataclass(frozen=True)
class RunSettings:
    """One simulated configuration (what ``ahasd simulate`` takes on its command line).

    The device fields and ``memory_sharing`` default to ``None``, "the platform's": the
    platform file is the one place device defaults live, and :func:`resolve` fills them in
    (an explicit device name overrides the platform's).

    Each field's help text is the one its flag prints; the rest of its metadata says how the
    flag reads it (:mod:`ahasd.cli.options` builds the flags from them).
    """

    # The names :data:`ahasd.sim.modes.MODES`, the paper's pairs (pairs.toml) and
    # :data:`ahasd.sim.policies.POLICY_NAMES`, listed by the command line after the help.
    mode: str = described("execution mode")
    pair: str = described("model pair")
    policy: str = described("drafting policy")
    # The committed target tokens.
    tokens: int = described(
        f"generation length, tokens; {_LENGTHS}", 1024, bounds=(1, KV_LENGTH_MAX - 1)
    )
    # Seeds the synthetic trace, the acceptance draws and the policy's RNG.
    seed: int = described(f"run seed, 0..{SEED_MAX}", 0, bounds=(0, SEED_MAX))
    # The KV-cache length before the first generated token.
    prompt_tokens: int = described(
        f"prompt KV length, tokens; {_LENGTHS}", 128, bounds=(1, KV_LENGTH_MAX - 1)
    )
    # None = the pair's synthetic preset.
    trace: str | None = described(
        "trace file, built-in trace name, synthetic preset or iid:<acceptance>",
        None,
        default_help="(default: the pair's synthetic preset)",
    )
    # The policy's keyword arguments; the command line lists each policy's after the help.
    policy_params: tuple[tuple[str, object], ...] = described(
        "policy parameter, repeatable; VALUE is JSON or a string. Parameters (defaults):",
        (),
        flag="--policy-param",
        metavar="KEY=VALUE",
        repeat=True,
    )
    # Wraps the policy in the autoregression fallback.
    fallback: bool = described("autoregression fallback", False)
    # A platforms/<name>.toml of kind npu-pim: the device of every role, the memory-sharing
    # model, the precision of the NPU and PIM. The flag also names a phone SoC.
    platform: str = described(
        f"NPU+PIM platform for the modes above ({DEFAULT_PLATFORM} (default), "
        "table2-whole-memory, table2-per-unit, artifact, or a file of yours under "
        "--spec-dir), or a phone SoC class (sd8gen3, m4) for the phone modes "
        "(sim/specs/platforms)",
        DEFAULT_PLATFORM,
        default_help="",
    )
    npu: str | None = _device("npu")  # async and npu-only modes
    pim: str | None = _device("pim")  # async modes; plain memory in npu-only
    cpu: str | None = _device("cpu")  # every mode
    gpu: str | None = _device("gpu")  # gpu-only, specpim
    specpim_pim: str | None = _device("specpim_pim")  # specpim
    # 'shared': the NPU streams the target's weights and KV cache from the LPDDR5 ranks the
    # PIM computes in, over the off-chip bus the PIM's requests use too (spec 4);
    # 'separate': the authors' artifact; None = the platform's.
    memory_sharing: str | None = described(
        "NPU and PIM share the LPDDR5 ranks and bus, or have memories of their own",
        None,
        choices=MEMORY_SHARING,
        default_help=_PLATFORMS,
    )
    # target-first stripes the draft over the ranks the target leaves; None = the platform's.
    rank_split: str | None = described(
        "how the PIM's ranks are divided between the models: target-first (the target on "
        "the ranks its weights and KV cache need, the draft on the rest), footprint (each "
        "on just what it needs) or fixed (the PIM file's draft_ranks)",
        None,
        choices=RANK_SPLITS,
        default_help=_PLATFORMS,
    )
    # None = the platform's: on with shared memory.
    preverify_kv_reuse: bool | None = described(
        "whether the NPU skips re-verifying tokens a pre-verification accepted, reading the "
        "KV entries the PIM wrote; needs shared memory",
        None,
        choices={"on": True, "off": False},
        default_help=_PLATFORMS,
    )
    draft_model: str | None = described("override the pair's draft model", None)
    target_model: str | None = described("override the pair's target model", None)
    specpim_planned_draft: int = described(
        "SpecPIM's K: the draft length its GPU/PIM split is balanced for",
        4,
        bounds=(1, KV_LENGTH_MAX),
    )
    draft_queue_tokens: int = described(
        "look-ahead budget: unverified draft tokens the draft queue may hold",
        64,
        bounds=(1, KV_LENGTH_MAX),
    )
    # The TVC table's UQ(bits-F).F ratios; the default is TVCParams().ratio_bits.
    tvc_ratio_bits: int = described(
        "TVC table entry width, 16..48 bits", TVCParams().ratio_bits, bounds=(16, 48)
    )
    tvc_cycle_bits: int = described(
        "TVC cycle-count width, 16..48 bits", TVCParams().cycle_bits, bounds=(16, 48)
    )
    # 'npu': activations cross the off-chip bus, in contention with the verification (paper
    # 4.1); 'host': nothing contends.
    nonlinear_without_aau: str = described(
        "where pim-async sends the PIM's nonlinear operators: the NPU's vector unit or the "
        "host CPU",
        "npu",
        choices=NONLINEAR_WITHOUT_AAU,
        default_help="({})",
    )
    # (path, value) pairs: devices.NAME.FIELD, power.NAME.FIELD, models.NAME.FIELD, NAME
    # @ROLE for the device of that role; applied after the platform's precision, in order.
    spec_overrides: tuple[tuple[str, float], ...] = described(
        "override a spec-file number, e.g. devices.npu-mobile.memory_bandwidth=1e11 (NAME "
        "may be @npu, @pim, ...; repeatable)",
        (),
        flag="--spec-override",
        metavar="PATH=VALUE",
        repeat=True,
    )
    # (block.field, value) pairs: the fields of ahasd.params.EDCParams, TVCParams, GTSUParams.
    controller_params: tuple[tuple[str, object], ...] = described(
        "override an EDC/TVC/GTSU parameter, e.g. edc.llr_bits=2 (repeatable)",
        (),
        flag="--controller-param",
        metavar="BLOCK.FIELD=VALUE",
        repeat=True,
    )
    # Later directories win.
    spec_dirs: tuple[str, ...] = described(
        "extra spec directory (repeatable)", (), flag="--spec-dir", repeat=True
    )
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
