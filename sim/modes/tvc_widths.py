"""Do the TVC's widths hold what a run will put in them? (docs/system-model.md, "TVC widths")

The TVC (spec 2.2) saturates its ratio tables at ``2**ratio_bits - 1`` and its cycle figures
at ``2**cycle_bits - 1``. A saturated entry is silently wrong: with UQ24.8 tables a target
token on the PIM's TLM ranks (hundreds of milliseconds) reads as 21 ms, and TVC orders
pre-verifications that cannot fit. So before a run the system model computes, from the cost
model, the largest value each quantity can take on the chosen devices, models, prompt and
generation length, and refuses a configuration whose widths cannot hold it
(:func:`check_tvc_widths`, a :class:`~ahasd.errors.UserError` naming the table or counter
and the width it needs). During the run :class:`TVCWidthGuard` checks every value the engine
actually sends, so one the static bound did not foresee is refused too, never clipped.

The bounds (``Q`` = the draft queue's token budget, so a verification pass holds at most
``Q`` drafts and commits at most ``Q + 1`` tokens; ``F`` = fraction bits; ``D`` = table
depth; cycles are PIM cycles):

- **PDCT** and its LEARN cycles: a batch's cycles are its GTSU switch plus its draft tokens,
  each at most one token at the largest context; the ratio is largest for a 1-token batch.
- **NVCT** and its LEARN cycles, **NCR**: a pass of ``Q + 1`` tokens (the largest) over
  ``L`` cached tokens; the ratio ``cycles / L`` is largest at the smallest ``L``, the
  cycles at the largest. With shared memory and pre-verifications a pass is stalled too:
  see the last item.
- **C_npu** ``= (sum(NVCT) * L) >> (F + log2 D)``: the ``D`` entries are the presets or the
  ratios of the last ``D`` passes, which started at most ``D (Q + 1)`` tokens before the
  current one, so an entry was learned at ``L' >= max(prompt, L - D (Q + 1))``; the bound is
  the largest ``ratio(L') * L`` over the run's ``L``.
- **PVCT** and its LEARN cycles: TVC orders a pre-verification only when
  ``avg(PVCT) <= C_left * 2**F`` with ``C_left < C_npu``. While every entry holds its preset
  and the preset exceeds the C_npu bound, no pre-verification is ever ordered and PVCT keeps
  its preset (the usual case on the paper's platform). Otherwise a learned entry can reach
  the cycles of the largest pre-verification (``Q + 1`` tokens at the largest context) for
  one pre-verified token, and with shared memory a verification pass can be stalled by the
  pre-verifications that run beside it (TVC orders them only while ``NCR < C_npu``, so by
  at most the C_npu bound plus one pre-verification): NVCT and NCR get that margin.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from ahasd.errors import UserError
from ahasd.params import EDCParams, TVCParams

__all__ = [
    "TVCBounds",
    "TVCWidthGuard",
    "check_tvc_widths",
    "check_tvc_widths_for_runs",
    "run_description",
    "tvc_bounds",
    "width_option",
]

# Contexts sampled between the prompt and the end of the generation (pass costs are
# monotone in the context: the ends and a few points between are enough for the maxima).
_CONTEXT_SAMPLES = 17


@dataclass(frozen=True)
class TVCBounds:
    """Largest value of each TVC quantity in a run (integer codes: ratios with ``F``
    fraction bits, cycles in PIM cycles)."""

    ratios: dict  # table -> largest entry
    cycles: dict  # "PDCT"/"NVCT"/"PVCT" LEARN inputs, "NCR", "C_npu" -> largest value
    preverify_possible: bool


def _ratio(cycles: int, length: int, frac_bits: int) -> int:
    return (cycles << frac_bits) // length


def tvc_bounds(settings, hardware, presets: dict[str, int], params: TVCParams) -> TVCBounds:
    """The bounds of the module docstring for one run's settings and hardware."""
    clock = hardware.pim_clock_hz
    frac, depth = params.frac_bits, params.depth
    prompt, last = settings.prompt_tokens, settings.prompt_tokens + settings.tokens - 1
    queue = settings.draft_queue_tokens
    batch_max = min(queue, (1 << EDCParams().length_bits) - 1, settings.tokens)

    def cycles(seconds: float) -> int:
        return round(seconds * clock)

    step = max(1, (last - prompt) // (_CONTEXT_SAMPLES - 1))
    contexts = sorted({*range(prompt, last + 1, step), last})

    draft_token = cycles(hardware.draft_pass(1, last).seconds)
    switch = hardware.switch_cycles
    pdct_ratio = max(_ratio(switch + draft_token, 1, frac), presets.get("pdct", 0))
    pdct_cycles = switch + batch_max * draft_token

    def pass_cycles(context: int) -> int:
        return cycles(hardware.verify_pass(queue + 1, context).seconds)

    pass_at = {context: pass_cycles(context) for context in contexts}

    def c_npu_bound(stall: int) -> int:
        worst = 0
        for context in contexts:
            floor = max(prompt, context - depth * (queue + 1))
            learned = max(
                _ratio(pass_at[c] + stall, c, frac) for c in contexts if floor <= c <= context
            )
            # The presets are gone after the first ``depth`` passes.
            preset = presets.get("nvct", 0) if floor == prompt else 0
            entry = max(learned, preset)
            worst = max(worst, (entry * context) >> frac)
        return worst

    c_npu = c_npu_bound(0)
    pvct_preset = presets.get("pvct", 0)
    possible = pvct_preset == 0 or pvct_preset <= c_npu << frac
    stall = 0
    pvct_ratio, pvct_cycles = pvct_preset, 0
    if possible:
        pvct_cycles = cycles(hardware.preverify_pass(queue + 1, last).seconds)
        pvct_ratio = max(pvct_preset, _ratio(pvct_cycles, 1, frac))
        if settings.memory_sharing == "shared":
            stall = c_npu + pvct_cycles
            c_npu = c_npu_bound(stall)
    nvct_ratio = max(
        presets.get("nvct", 0), *(_ratio(pass_at[c] + stall, c, frac) for c in contexts)
    )
    npu_cycles = max(pass_at.values()) + stall
    return TVCBounds(
        ratios={"NVCT": nvct_ratio, "PDCT": pdct_ratio, "PVCT": pvct_ratio},
        cycles={
            "NVCT cycles": npu_cycles,
            "PDCT cycles": pdct_cycles,
            "PVCT cycles": pvct_cycles,
            "NCR": npu_cycles,
            "C_npu": c_npu,
        },
        preverify_possible=possible,
    )


def _needs(value: int, width: int) -> int | None:
    """Bits ``value`` needs when it does not fit in ``width`` bits, else None."""
    return value.bit_length() if value.bit_length() > width else None


def run_description(settings, hardware) -> str:
    """The run in a refusal message: pair (and models), devices, prompt and length."""
    pair = settings.pair
    if settings.draft_model or settings.target_model:
        details = getattr(hardware, "details", {}) or {}
        models = [details.get(k, "?") for k in ("draft_model", "target_model")]
        pair = f"{pair} with {models[0]}/{models[1]}"
    return (
        f"{pair} ({settings.pim} + {settings.npu}, prompt {settings.prompt_tokens}, "
        f"{settings.tokens} tokens)"
    )


def width_option(settings, field: str) -> str:
    """How the run was given the TVC's ``field`` (``ratio_bits``, ``cycle_bits``), for a
    message: ``--controller-param tvc.cycle_bits=16`` if that set it, else
    ``--tvc-cycle-bits 40``."""
    for path, value in getattr(settings, "controller_params", ()):
        if path == f"tvc.{field}":
            return f"--controller-param tvc.{field}={value}"
    return f"--tvc-{field.replace('_', '-')} {getattr(settings, 'tvc_' + field)}"


def check_tvc_widths(settings, hardware, presets: dict[str, int], params) -> TVCBounds:
    """Refuse (:class:`~ahasd.errors.UserError`, one line) a run whose TVC widths cannot hold
    the largest values of :func:`tvc_bounds`; return the bounds otherwise. ``params`` are the
    run's TVC parameters as built (a ``--controller-param tvc.cycle_bits`` wins over
    ``--tvc-cycle-bits``: the prepared run's)."""
    bounds = tvc_bounds(settings, hardware, presets, params)
    problems = []
    for field, width, values in (
        ("ratio_bits", params.ratio_bits, bounds.ratios),
        ("cycle_bits", params.cycle_bits, bounds.cycles),
    ):
        short = [
            f"{name} needs {bits} bits"
            for name, value in values.items()
            if (bits := _needs(value, width)) is not None
        ]
        if short:
            problems.append(f"{width_option(settings, field)}: {', '.join(short)}")
    if problems:
        raise UserError(
            f"{'; '.join(problems)} on {run_description(settings, hardware)}: the TVC would "
            f"saturate (docs/system-model.md, 'TVC widths')"
        )
    return bounds


class TVCWidthGuard:
    """Checks, during a run, every value the engine sends to the TVC against its widths.

    Parameters
    ----------
    params : the TVC's parameters (widths, ``F``, depth).
    presets : the NVCT preset written into every entry (for the C_npu product).
    where : the run, for the message.
    """

    def __init__(
        self, params: TVCParams, presets: dict[str, int], where: str, options: dict | None = None
    ) -> None:
        self.params = params
        self.where = where
        # How each width was given, for the message (see width_option).
        self.options = options or {
            "ratio_bits": f"--tvc-ratio-bits {params.ratio_bits}",
            "cycle_bits": f"--tvc-cycle-bits {params.cycle_bits}",
        }
        self.nvct = deque([presets.get("nvct", 0)] * params.depth, maxlen=params.depth)

    def _refuse(self, field: str, name: str, value: int) -> None:
        raise UserError(
            f"{self.options[field]}: {name} needs {value.bit_length()} bits on {self.where}: "
            f"reached during the run (docs/system-model.md, 'TVC widths')"
        )

    def _cycles(self, name: str, value: int) -> None:
        if value.bit_length() > self.params.cycle_bits:
            self._refuse("cycle_bits", name, value)

    def learn(self, table: str, cycles: int, length: int) -> None:
        """A LEARN of ``cycles`` over ``length`` into ``table`` ("nvct", "pdct", "pvct")."""
        name = table.upper()
        self._cycles(f"{name} cycles", cycles)
        ratio = _ratio(cycles, length, self.params.frac_bits) if length else 0
        if ratio.bit_length() > self.params.ratio_bits:
            self._refuse("ratio_bits", name, ratio)
        if table == "nvct":
            self.nvct.appendleft(ratio)

    def npu_start(self, l_kv: int) -> None:
        """An NPU_START: the C_npu product the ASKs of this pass will form."""
        shift = self.params.frac_bits + (self.params.depth.bit_length() - 1)
        self._cycles("C_npu", (sum(self.nvct) * l_kv) >> shift)

    def npu_done(self, cycles: int) -> None:
        """An NPU_DONE after ``cycles``: what NCR counted up to."""
        self._cycles("NCR", cycles)


def check_tvc_widths_for_runs(runs, library) -> None:
    """:func:`check_tvc_widths` for every run of ``runs`` (RunSettings) whose mode uses the
    TVC, each distinct configuration once (prepared once against ``library``): a sweep calls
    it before running anything."""
    from ahasd.sim.modes.hardware import build_hardware, tvc_presets
    from ahasd.sim.modes.prepare import prepare_run

    seen = set()
    for settings in runs:
        key = replace(settings, policy="", seed=0, trace=None, policy_params=())
        if key in seen:
            continue
        seen.add(key)
        prepared = prepare_run(settings, library)
        if not prepared.mode.tvc:
            continue
        hardware = build_hardware(prepared)
        resolved = prepared.settings
        presets = tvc_presets(hardware, resolved.prompt_tokens)
        check_tvc_widths(resolved, hardware, presets, prepared.controller[1])
