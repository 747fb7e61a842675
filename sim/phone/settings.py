"""What a phone run is: the phone modes, task types and :class:`PhoneSettings`.

The phone modes are a small table (:data:`PHONE_MODE_TABLE`): each names where its draft
model runs; :data:`PHONE_MODES` derives from it. Task types set the draft length cap
(:data:`TASK_DRAFT_LENGTH`) and pick the synthetic preset's task (:data:`TASK_PRESET_TASK`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ahasd.errors import UserError

__all__ = [
    "DRAFT_WEIGHTS",
    "DURATION_MAX_S",
    "MIX_ORDER",
    "PHONE_MODES",
    "PHONE_MODE_TABLE",
    "SKIN_LIMIT_RANGE",
    "TASKS",
    "TASK_DRAFT_LENGTH",
    "TASK_PRESET_TASK",
    "TEMPERATURE_RANGE",
    "PhoneMode",
    "PhoneSettings",
    "find_phone_mode",
]


@dataclass(frozen=True)
class PhoneMode:
    """One phone mode: its name, where its draft model runs (None: no draft model, plain
    autoregression), one line for humans and its colour in figures (a matplotlib colour)."""

    name: str
    draft_device: str | None
    summary: str
    colour: str


PHONE_MODE_TABLE = (
    PhoneMode("gpu-ar", None, "plain autoregressive decoding on the GPU", "tab:red"),
    PhoneMode("gpu-spec", "gpu", "draft and target alternate on the GPU", "tab:blue"),
    PhoneMode(
        "npu-gpu-hetero",
        "npu",
        "the NPU drafts from its SRAM, then the GPU verifies",
        "tab:green",
    ),
)
PHONE_MODES = tuple(mode.name for mode in PHONE_MODE_TABLE)
# Issue 10: draft length by task type.
TASK_DRAFT_LENGTH = {"code": 5, "dialogue": 3, "text": 1}
# Task type -> task of the synthetic preset (sim/traces/synthetic.py): code = code; dialogue = the
# preset's mixed figure; high-entropy text = its lowest-acceptance task (translation).
TASK_PRESET_TASK = {"code": "code", "dialogue": "mixed", "text": "translation"}
TASKS = (*TASK_DRAFT_LENGTH, "mix")
MIX_ORDER = ("code", "dialogue", "text")
SKIN_LIMIT_RANGE = (42.0, 45.0)
# Ambient and start temperatures, C.
TEMPERATURE_RANGE = (-20.0, 60.0)
_TEMPERATURES = f"{TEMPERATURE_RANGE[0]:g}..{TEMPERATURE_RANGE[1]:g} C"
# Simulated seconds of a phone run: a day. The thermal state settles within minutes; a day
# of simulated time is minutes of wall time and tens of MB of samples.
DURATION_MAX_S = 86_400.0
DRAFT_WEIGHTS = ("sram", "spill")


def find_phone_mode(name: str) -> PhoneMode:
    """The row of phone mode ``name``; an unknown name is a UserError listing the known ones."""
    for mode in PHONE_MODE_TABLE:
        if mode.name == name:
            return mode
    raise UserError(f"unknown phone mode {name!r} (known: {', '.join(PHONE_MODES)})")


@dataclass(frozen=True)
class PhoneSettings:
    """One sustained phone run (what ``ahasd simulate --platform`` takes).

    The help texts of the fields only a phone run has are the ones their flags print; the
    rest of their metadata says how the flag reads them (:mod:`ahasd.cli.options`).
    """

    platform: str = field(metadata={"help": "Platform name (sim/specs/platforms)."})
    mode: str = field(default="npu-gpu-hetero", metadata={"help": "One of PHONE_MODES."})
    pair: str | None = field(default=None, metadata={"help": "Pair; None = the platform's."})
    policy: str = field(default="threshold", metadata={"help": "Drafting policy."})
    fallback: bool = field(default=True, metadata={"help": "Autoregression fallback."})
    task: str = field(
        default="mix",
        metadata={
            "help": f"task type: {', '.join(TASKS)}",
            "default_help": "(mix: requests cycle; default: {})",
        },
    )
    duration_s: float = field(
        default=600.0,
        metadata={
            "help": f"simulated seconds of generation, at most {DURATION_MAX_S:g}",
            "flag": "--duration",
            "bounds": (0.0, DURATION_MAX_S),
            "low_open": True,
        },
    )
    tokens: int = field(default=1024, metadata={"help": "Tokens per request."})
    prompt_tokens: int = field(default=128, metadata={"help": "KV length at request start."})
    seed: int = field(default=0, metadata={"help": "Seed of traces, outcomes, policy."})
    # The overrides below default to None, the platform's (its spec and thermal files).
    dram_pj_per_bit: float | None = field(
        default=None,
        metadata={
            "help": "DRAM energy, pJ/bit, at most 1000",
            "bounds": (0.0, 1000.0),
            "low_open": True,
            "default_help": "(default: the platform's spec files, 10)",
        },
    )
    skin_limit_c: float | None = field(
        default=None,
        metadata={
            "help": f"skin throttle limit, {SKIN_LIMIT_RANGE[0]:g}..{SKIN_LIMIT_RANGE[1]:g} C",
            "flag": "--skin-limit",
            "bounds": SKIN_LIMIT_RANGE,
            "default_help": "(default: 45)",
        },
    )
    ambient_c: float | None = field(
        default=None,
        metadata={
            "help": f"ambient temperature, {_TEMPERATURES}",
            "flag": "--ambient",
            "bounds": TEMPERATURE_RANGE,
            "default_help": "(default: 25)",
        },
    )
    start_c: float | None = field(
        default=None,
        metadata={
            "help": f"initial die/skin temperature, {_TEMPERATURES}",
            "flag": "--start-temp",
            "bounds": TEMPERATURE_RANGE,
            "default_help": "(default: the ambient)",
        },
    )
    # spill: capacity enforced.
    draft_weights: str = field(
        default="spill",
        metadata={
            "help": "spill: the draft weights that do not fit the NPU's SRAM stream from "
            "LPDDR5X; sram: all read from SRAM as if they fit (spec section 5's reading)"
        },
    )
    # Shortens drafts above the thermal model's arbiter_c.
    arbiter: bool = field(
        default=True,
        metadata={"help": "do not shorten drafts above 41 C skin", "flag": "--no-arbiter"},
    )
    policy_params: tuple = field(default=(), metadata={"help": "Policy keyword arguments."})
    spec_dirs: tuple = field(default=(), metadata={"help": "Extra spec directories."})

    def __post_init__(self) -> None:
        find_phone_mode(self.mode)
        # The policy and its parameters too, here: the run builds the policy only after the
        # first modes of `--mode all` have run (minutes), too late to refuse a typo.
        from ahasd.sim.policies import make_policy

        make_policy(self.policy, fallback=self.fallback, **dict(self.policy_params))
        if self.task not in TASKS:
            raise UserError(f"unknown task {self.task!r} (known: {', '.join(TASKS)})")
        if self.draft_weights not in DRAFT_WEIGHTS:
            raise UserError(
                f"draft-weights must be one of {', '.join(DRAFT_WEIGHTS)}, not "
                f"{self.draft_weights!r}"
            )
        for name, low in (("tokens", 2), ("prompt_tokens", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(
                    f"{name.replace('_', '-')} must be an integer >= {low}, not {value!r}"
                )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"seed must be a non-negative integer, not {self.seed!r}")
        if not _positive(self.duration_s):
            raise UserError(
                f"duration must be a positive number of seconds, not {self.duration_s!r}"
            )
        if self.dram_pj_per_bit is not None and not _positive(self.dram_pj_per_bit):
            raise UserError(
                f"dram-pj-per-bit must be a positive number, not {self.dram_pj_per_bit!r}"
            )
        low, high = SKIN_LIMIT_RANGE
        if self.skin_limit_c is not None and not (
            _real(self.skin_limit_c) and low <= self.skin_limit_c <= high
        ):
            raise UserError(
                f"skin-limit must be a temperature in {low:g}..{high:g} C, "
                f"not {self.skin_limit_c!r}"
            )
        for name in ("ambient_c", "start_c"):
            value = getattr(self, name)
            coldest, hottest = TEMPERATURE_RANGE
            if value is not None and not (_real(value) and coldest <= value <= hottest):
                raise UserError(
                    f"{name.removesuffix('_c')} must be a temperature in {_TEMPERATURES}, "
                    f"not {value!r}"
                )


def _real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value) -> bool:
    return _real(value) and value > 0
