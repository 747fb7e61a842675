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
    "MIX_ORDER",
    "PHONE_MODES",
    "PHONE_MODE_TABLE",
    "SKIN_LIMIT_RANGE",
    "TASKS",
    "TASK_DRAFT_LENGTH",
    "TASK_PRESET_TASK",
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
DRAFT_WEIGHTS = ("sram", "spill")


def find_phone_mode(name: str) -> PhoneMode:
    """The row of phone mode ``name``; an unknown name is a UserError listing the known ones."""
    for mode in PHONE_MODE_TABLE:
        if mode.name == name:
            return mode
    raise UserError(f"unknown phone mode {name!r} (known: {', '.join(PHONE_MODES)})")


@dataclass(frozen=True)
class PhoneSettings:
    """One sustained phone run (what ``ahasd simulate --platform`` takes)."""

    platform: str = field(metadata={"help": "Platform name (sim/specs/platforms)."})
    mode: str = field(default="npu-gpu-hetero", metadata={"help": "One of PHONE_MODES."})
    pair: str | None = field(default=None, metadata={"help": "Pair; None = the platform's."})
    policy: str = field(default="threshold", metadata={"help": "Drafting policy."})
    fallback: bool = field(default=True, metadata={"help": "Autoregression fallback."})
    task: str = field(default="mix", metadata={"help": "code, dialogue, text or mix."})
    duration_s: float = field(default=600.0, metadata={"help": "Simulated seconds."})
    tokens: int = field(default=1024, metadata={"help": "Tokens per request."})
    prompt_tokens: int = field(default=128, metadata={"help": "KV length at request start."})
    seed: int = field(default=0, metadata={"help": "Seed of traces, outcomes, policy."})
    dram_pj_per_bit: float | None = field(default=None, metadata={"help": "DRAM override."})
    skin_limit_c: float | None = field(default=None, metadata={"help": "Skin limit override."})
    ambient_c: float | None = field(default=None, metadata={"help": "Ambient override."})
    start_c: float | None = field(default=None, metadata={"help": "Start temp (ambient)."})
    draft_weights: str = field(
        default="spill",
        metadata={
            "help": "spill: the part of the draft's weights that does not fit the NPU's SRAM "
            "streams from LPDDR5X (capacity enforced); sram: every weight read from SRAM as "
            "if it fit (spec section 5's reading)."
        },
    )
    arbiter: bool = field(default=True, metadata={"help": "Shorten drafts above arbiter_c."})
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
            if value is not None and not (_real(value) and -20.0 <= value <= 60.0):
                raise UserError(
                    f"{name.removesuffix('_c')} must be a temperature in -20..60 C, not {value!r}"
                )


def _real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value) -> bool:
    return _real(value) and value > 0
