"""Synthetic drafting traces: a regime-switching generator with cited presets, and i.i.d. traces.

Model (one trace position = one position of the target's output):

1. **Regime.** A two-state Markov chain alternates *strongly* and *weakly* context-constrained
   stretches (the AHASD paper's section 3 describes both: long confident drafts in the first,
   short low-acceptance drafts in the second). Stretch lengths are geometric with means
   ``strong_stretch`` and ``weak_stretch`` tokens; the chain starts in its stationary mix.
2. **Draft entropy** ``H`` (nats) is Gamma-distributed with a regime-dependent mean, capped at
   ``ln(vocab)``.
3. **Top-1 probability** ``exp(-c * H)`` with ``c ~ U(c_low, c_high)``, ``0 < c <= 1``: any
   distribution has ``top1 >= exp(-H)``, and ``c < 1`` spreads the rest of the mass.
4. **Acceptance probability** ``beta = sigmoid(b0 + early - slope * sqrt(H) + noise)``, falling
   monotonically with draft entropy in expectation as SVIP (``beta >= 1 - sqrt(c H)``, the
   ``sqrt(H)`` shape) and AdaEDL describe. ``noise ~ N(0, noise_sd)`` models what entropy does
   not explain. ``early`` is an offset for the first ``early_positions`` tokens.
5. **Target entropy** ``H * exp(N(ln 0.7, 0.35))``: illustrative only (no source; no policy here
   uses it).

**Calibration** (``calibrate``): only the intercept ``b0`` and the early offset are fitted, by
bisection over a fixed reference sample of the model (200,000 positions, fixed seed), so that
the mean acceptance probability equals the preset's *published acceptance statistic*. Nothing
is fitted to speedups. The regime lengths, entropy means, slope and noise are modelling
assumptions (documented in ``docs/traces.md``), the same for every preset, because no public
source gives per-token draft entropy for these pairs (``docs/sources.md``, drafting traces).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from ahasd.errors import UserError
from ahasd.sim.traces.format import MAX_RECORDS, Trace, TraceHeader

__all__ = [
    "PRESETS",
    "SPEC_BENCH_ALPHA",
    "TASKS",
    "Preset",
    "alpha_from_tokens_per_step",
    "calibrate",
    "generate",
    "iid_trace",
    "with_acceptance",
]

_CALIBRATION_SEED = 20240607
_CALIBRATION_SAMPLES = 200_000


@dataclass(frozen=True)
class Preset:
    """One draft/target pair's synthetic-trace parameters.

    Attributes
    ----------
    name : preset name (also the trace's ``pair``).
    draft_model, target_model : model names written to the header.
    acceptance : mean acceptance probability of a drafted token past the early positions (the
        calibration target), per task type in ``task_acceptance`` when the source gives one.
    citation : where the acceptance figure comes from, and how directly it applies.
    task_acceptance : optional per-task acceptance targets (task name -> acceptance).
    early_positions : the first positions that reject more (0 = no early effect).
    early_rejection_ratio : rejection rate of early positions / rejection rate later.
    strong_stretch, weak_stretch : mean lengths (tokens) of the two regimes' stretches.
    strong_entropy, weak_entropy : mean draft entropy (nats) in each regime.
    strong_shape, weak_shape : Gamma shape of the entropy in each regime.
    slope : decrease of logit(beta) per sqrt(nat) of draft entropy.
    noise_sd : standard deviation of the logit noise.
    c_low, c_high : range of the top-1 exponent ``c``.
    vocab : vocabulary size; entropy is capped at ``ln(vocab)``, the uniform distribution's.
    """

    name: str
    draft_model: str
    target_model: str
    acceptance: float
    citation: str
    task_acceptance: tuple[tuple[str, float], ...] = ()
    early_positions: int = 0
    early_rejection_ratio: float = 1.0
    strong_stretch: float = 24.0
    weak_stretch: float = 8.0
    strong_entropy: float = 0.5
    weak_entropy: float = 2.5
    strong_shape: float = 1.5
    weak_shape: float = 3.0
    slope: float = 2.5
    noise_sd: float = 0.75
    c_low: float = 0.45
    c_high: float = 0.95
    vocab: int = 32000

    def target_for(self, task: str | None) -> float:
        """The acceptance target for ``task`` (None = the preset's headline figure)."""
        if task is None:
            return self.acceptance
        tasks = dict(self.task_acceptance)
        if task not in tasks:
            known = ", ".join(tasks) or "none for this preset"
            raise UserError(f"preset {self.name!r} has no task {task!r} (known: {known})")
        return tasks[task]


def alpha_from_tokens_per_step(tokens: float, draft_len: int) -> float:
    """Invert ``E = (1 - a**(g+1)) / (1 - a)`` (Leviathan et al.) for ``a`` by bisection."""
    if not 1.0 < tokens < draft_len + 1:
        raise ValueError(f"tokens per step must lie in (1, {draft_len + 1}), not {tokens}")
    low, high = 0.0, 1.0
    for _ in range(100):
        middle = 0.5 * (low + high)
        if sum(middle**i for i in range(draft_len + 1)) < tokens:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


# Spec-Bench: 2.29 accepted tokens per step at draft length 4 -> alpha = 0.5962.
SPEC_BENCH_ALPHA = alpha_from_tokens_per_step(2.29, 4)

_SPEC_BENCH = (
    "Spec-Bench (Xia et al. 2024), Vicuna-7B with a small draft model, greedy: 2.29 accepted "
    "tokens per step at draft length 4, i.e. alpha = 0.5962 by inverting "
    "E = (1 - a**(g+1)) / (1 - a) (about 0.6). "
)
_QWEN = (
    "Qwen2.5-7B with a Qwen2.5-0.5B draft: per-token rejection 13.7% (code) to 33.5% "
    "(translation); tokens before position 20 reject 33.0% vs 23.8% later "
    "(a published per-token measurement of that pair; docs/sources.md). "
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="opt-1.3b-6.7b",
            draft_model="OPT-1.3B",
            target_model="OPT-6.7B",
            acceptance=SPEC_BENCH_ALPHA,
            vocab=50272,
            citation=_SPEC_BENCH + "Borrowed: no public per-token acceptance statistic exists "
            "for the OPT pair; sweep --acceptance to cover the uncertainty.",
        ),
        Preset(
            name="llama2-7b-13b",
            draft_model="LLaMA2-7B",
            target_model="LLaMA2-13B",
            acceptance=SPEC_BENCH_ALPHA,
            citation=_SPEC_BENCH + "Same model family (Vicuna-7B is a LLaMA fine-tune); a 7B "
            "draft for a 13B target probably accepts more than Spec-Bench's small drafts, so "
            "this figure is conservative.",
        ),
        Preset(
            name="palm-8b-30b",
            draft_model="PaLM-like-8B",
            target_model="PaLM-like-30B",
            acceptance=SPEC_BENCH_ALPHA,
            vocab=256000,
            citation=_SPEC_BENCH + "Borrowed: PaLM-like surrogates have no published "
            "acceptance statistic.",
        ),
        Preset(
            name="smollm-135m-llama3.1-8b",
            draft_model="SmolLM-135M",
            target_model="Llama-3.1-8B",
            acceptance=1.0 - 0.238,
            vocab=49152,
            citation=_QWEN + "Borrowed from the closest published small-draft/8B-class pair; "
            "headline = later-token acceptance 76.2%; tasks code 86.3%, translation 66.5%.",
            task_acceptance=(
                ("mixed", 1.0 - 0.238),
                ("code", 1.0 - 0.137),
                ("translation", 1.0 - 0.335),
            ),
            early_positions=20,
            early_rejection_ratio=0.330 / 0.238,
        ),
    )
}

TASKS = tuple(sorted({task for p in PRESETS.values() for task, _ in p.task_acceptance}))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _sample_features(preset: Preset, length: int, rng: np.random.Generator):
    """Regime path, entropy, top-1 and the entropy/noise part of the acceptance logit."""
    stay_strong = 1.0 - 1.0 / preset.strong_stretch
    stay_weak = 1.0 - 1.0 / preset.weak_stretch
    p_strong = preset.strong_stretch / (preset.strong_stretch + preset.weak_stretch)
    uniforms = rng.random(length)
    strong = np.empty(length, dtype=bool)
    state = bool(rng.random() < p_strong)
    # A short sequential loop: the chain is inherently sequential and cheap.
    for pos in range(length):
        strong[pos] = state
        stay = stay_strong if state else stay_weak
        if uniforms[pos] >= stay:
            state = not state
    mean = np.where(strong, preset.strong_entropy, preset.weak_entropy)
    shape = np.where(strong, preset.strong_shape, preset.weak_shape)
    entropy = np.minimum(rng.gamma(shape, mean / shape), math.log(preset.vocab))
    c = rng.uniform(preset.c_low, preset.c_high, size=length)
    top1 = np.exp(-c * entropy)
    logit_part = -preset.slope * np.sqrt(entropy) + rng.normal(0.0, preset.noise_sd, size=length)
    return strong, entropy, top1, logit_part


def _solve_offset(logit_part: np.ndarray, target: float) -> float:
    """The offset ``b`` with ``mean(sigmoid(b + logit_part)) == target`` (bisection)."""
    low, high = -30.0, 30.0
    for _ in range(80):
        middle = 0.5 * (low + high)
        if np.mean(_sigmoid(middle + logit_part)) < target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


@functools.lru_cache(maxsize=64)
def calibrate(preset: Preset, acceptance: float) -> tuple[float, float]:
    """Intercept and early offset that make the model's mean acceptance match the targets.

    Parameters
    ----------
    preset : the model shape.
    acceptance : target mean acceptance probability past the early positions, in (0, 1).

    Returns
    -------
    (b0, early_offset) : logit intercept, and the extra logit offset of early positions so that
        their rejection rate is ``early_rejection_ratio`` times the later one.
    """
    rng = np.random.default_rng(_CALIBRATION_SEED)
    _, _, _, logit_part = _sample_features(preset, _CALIBRATION_SAMPLES, rng)
    b0 = _solve_offset(logit_part, acceptance)
    if preset.early_positions == 0 or preset.early_rejection_ratio == 1.0:
        return b0, 0.0
    early_target = 1.0 - (1.0 - acceptance) * preset.early_rejection_ratio
    if not 0.0 < early_target < 1.0:
        raise UserError(
            f"acceptance {acceptance} with early rejection ratio "
            f"{preset.early_rejection_ratio:.3f} gives an impossible early acceptance"
        )
    return b0, _solve_offset(logit_part, early_target) - b0


def _check_length(length: int) -> None:
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_RECORDS:
        raise UserError(f"trace length must be an integer in 1..{MAX_RECORDS}, not {length!r}")


def _check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, not {seed!r}")


def _check_acceptance(acceptance: float, option: str = "acceptance") -> None:
    if not isinstance(acceptance, int | float) or not 0.0 < acceptance < 1.0:
        raise UserError(f"{option} must be a number strictly between 0 and 1, not {acceptance!r}")


def generate(
    preset: str | Preset,
    length: int,
    seed: int,
    *,
    acceptance: float | None = None,
    task: str | None = None,
    realise: bool = False,
    temperature: float = 1.0,
    prompt_id: str | None = None,
) -> Trace:
    """A synthetic regime-switching trace (see the module docstring).

    Parameters
    ----------
    preset : a name from ``PRESETS`` or a :class:`Preset`.
    length : number of positions.
    seed : RNG seed; the same arguments give the same trace.
    acceptance : override of the calibration target (for sweeps); default the preset's.
    task : task type for presets that cite per-task figures (``Preset.task_acceptance``).
    realise : also draw the realised accept flags ``accept ~ Bernoulli(beta)``.
    temperature : written to the header (the published figures are what they are).
    prompt_id : header prompt id; default ``"synthetic-<seed>"``.
    """
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
        preset = PRESETS[preset]
    _check_length(length)
    _check_seed(seed)
    target = preset.target_for(task) if acceptance is None else acceptance
    _check_acceptance(target)
    b0, early_offset = calibrate(preset, float(target))
    rng = np.random.default_rng(seed)
    strong, entropy, top1, logit_part = _sample_features(preset, length, rng)
    logit = b0 + logit_part
    logit[: preset.early_positions] += early_offset
    beta = _sigmoid(logit)
    accept = (rng.random(length) < beta).astype(np.int8) if realise else None
    target_entropy = entropy * np.exp(rng.normal(math.log(0.7), 0.35, size=length))
    header = TraceHeader(
        pair=preset.name,
        draft_model=preset.draft_model,
        target_model=preset.target_model,
        prompt_id=prompt_id or f"synthetic-{seed}",
        temperature=temperature,
        source="synthetic",
        meta={
            # The generator's name as traces have always carried it, not its module's path
            # today: the same arguments give the same bytes wherever the code lives.
            "generator": "ahasd.sim.synth.generate",
            "preset": preset.name,
            "seed": seed,
            "task": task,
            "acceptance_target": float(target),
            "citation": preset.citation,
            "strong_fraction": float(np.mean(strong)),
        },
    )
    return Trace(
        header=header,
        draft_entropy=entropy,
        draft_top1=top1,
        beta=beta,
        accept=accept,
        target_entropy=target_entropy,
    )


def iid_trace(length: int, acceptance: float, seed: int, *, realise: bool = False) -> Trace:
    """A validation trace: every position accepted with the same probability ``acceptance``.

    Entropy is drawn i.i.d. (Gamma, mean 1.2 nats) *independently* of acceptance, so an
    entropy-driven policy has nothing to learn; with a fixed draft length the closed forms of
    Leviathan et al. apply exactly.
    """
    _check_length(length)
    _check_seed(seed)
    _check_acceptance(acceptance)
    rng = np.random.default_rng(seed)
    entropy = rng.gamma(2.0, 0.6, size=length)
    top1 = np.exp(-0.7 * entropy)
    beta = np.full(length, float(acceptance))
    accept = (rng.random(length) < beta).astype(np.int8) if realise else None
    header = TraceHeader(
        pair="iid",
        draft_model="iid-draft",
        target_model="iid-target",
        prompt_id=f"iid-{seed}",
        temperature=1.0,
        source="synthetic",
        # As in generate: the generator's name as traces carry it, not today's module path.
        meta={"generator": "ahasd.sim.synth.iid_trace", "seed": seed, "acceptance": acceptance},
    )
    return Trace(
        header=header,
        draft_entropy=entropy,
        draft_top1=top1,
        beta=beta,
        accept=accept,
        target_entropy=np.full(length, math.nan),
    )


def with_acceptance(preset: str, acceptance: float) -> Preset:
    """A copy of a preset with another headline acceptance (for sweeps from code)."""
    return replace(PRESETS[preset], acceptance=acceptance, task_acceptance=())
