"""Record drafting traces from a real Hugging Face ``transformers`` draft/target pair.

Optional extra: ``pip install 'ahasd[hf]'`` (``transformers>=4.40``, ``torch==2.13.0``, the CPU
wheel). Models are loaded from *local* paths only (``local_files_only=True``): nothing is
downloaded.

Recording follows the same rule as :mod:`ahasd.sim.traces.ngram` (one step of
:mod:`ahasd.sim.traces.sampling` per position): at every position of the target's output the
draft distribution ``q`` and target distribution ``p`` are computed for the correct prefix (both
with their KV caches, at the given temperature), ``beta = sum(min(p, q))``, the draft token
``x ~ q`` is accepted with ``min(1, p(x)/q(x))``, otherwise the output token comes from the
residual ``norm(max(p - q, 0))``. The output is therefore a sample of the target, and every
record is the draft's view given the correct prefix, as the trace format requires.

If the two vocabularies differ in size (padding rows), the shorter distribution is padded with
zeros: a token the target cannot produce has ``p = 0`` and is always rejected. The two models
must share a tokenizer for the trace to mean anything; this is checked only through the
vocabulary sizes' overlap, and recorded in the header.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from pathlib import Path

import numpy as np

from ahasd.errors import UserError
from ahasd.sim.traces.format import Trace, TraceHeader
from ahasd.sim.traces.sampling import Recording

__all__ = ["hf_available", "record_hf"]

_EXTRA_HINT = "install the optional extra: pip install 'ahasd[hf]' (transformers, torch==2.13.0)"


def hf_available() -> tuple[bool, str]:
    """Whether ``torch`` and ``transformers`` import, and if not, why."""
    try:
        for module in ("torch", "transformers"):
            importlib.import_module(module)
    except ImportError as error:
        return False, f"{error}"
    return True, ""


def _import():
    ok, why = hf_available()
    if not ok:
        raise UserError(f"trace record hf needs torch and transformers ({why}); {_EXTRA_HINT}")
    import torch
    import transformers

    return torch, transformers


def _load_model(transformers, path: str, role: str):
    folder = Path(path)
    if not folder.is_dir():
        raise UserError(f"{path}: {role} model folder not found (give a local path)")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(folder), local_files_only=True
        )
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path}: cannot load the {role} model ({error})") from None
    model.eval()
    return model


def _stepper(model):
    """``step(ids, state) -> output``: one forward pass continuing the model's KV cache.

    transformers 5 renamed the cache argument and output field from ``past_key_values`` to
    ``cache``; both spellings are supported so the ``>=4.40`` range works.
    """
    parameters = inspect.signature(model.forward).parameters
    name = "cache" if "cache" in parameters else "past_key_values"

    def step(ids, previous):
        if previous is None:
            return model(input_ids=ids, use_cache=True)
        state = getattr(previous, name, None)
        if state is None:
            state = previous.past_key_values
        return model(input_ids=ids, use_cache=True, **{name: state})

    return step


def _distribution(torch, logits, temperature: float, size: int) -> np.ndarray:
    """float64 next-token distribution, zero-padded to ``size``."""
    values = logits.detach().to(torch.float64).cpu().numpy()
    out = np.zeros(size)
    if temperature == 0.0:
        out[int(np.argmax(values))] = 1.0
        return out
    values = values / temperature
    values -= values.max()
    probs = np.exp(values)
    out[: probs.size] = probs / probs.sum()
    return out


def record_hf(
    draft_path: str,
    target_path: str,
    *,
    length: int,
    temperature: float = 1.0,
    seed: int = 0,
    prompt: str | None = None,
    prompt_ids: list[int] | None = None,
    tokenizer_path: str | None = None,
    pair: str | None = None,
    prompt_id: str | None = None,
) -> Trace:
    """Record one trace of ``length`` target positions from a local draft/target pair.

    Parameters
    ----------
    draft_path, target_path : local model folders (``save_pretrained`` layout).
    length : target positions to record.
    temperature : sampling temperature for both models (0 = greedy: ``beta`` is then 1 when the
        two argmaxes agree, else 0).
    seed : seed of the sampling RNG.
    prompt : prompt text (tokenised with ``tokenizer_path``, default the draft's folder).
    prompt_ids : prompt as token ids instead of text.
    pair, prompt_id : header names (defaults derived from the folder names).
    """
    torch, transformers = _import()
    if (prompt is None) == (prompt_ids is None):
        raise UserError("give exactly one of --prompt and --prompt-ids")
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise UserError(f"--length must be an integer >= 1, not {length!r}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise UserError(f"--temperature must be a finite number >= 0, not {temperature!r}")
    draft = _load_model(transformers, draft_path, "draft")
    target = _load_model(transformers, target_path, "target")
    if prompt is not None:
        tokenizer_folder = tokenizer_path or draft_path
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                tokenizer_folder, local_files_only=True
            )
        except (OSError, ValueError, KeyError) as error:
            raise UserError(f"{tokenizer_folder}: cannot load a tokenizer ({error})") from None
        prompt_ids = list(tokenizer(prompt)["input_ids"])
    if not prompt_ids:
        raise UserError("the prompt is empty (no token ids)")
    vocab_draft = int(draft.get_output_embeddings().weight.shape[0])
    vocab_target = int(target.get_output_embeddings().weight.shape[0])
    size = max(vocab_draft, vocab_target)
    for token in prompt_ids:
        if not 0 <= token < min(vocab_draft, vocab_target):
            raise UserError(f"--prompt-ids: token {token} outside both vocabularies")
    rng = np.random.default_rng(seed)
    recording = Recording(length)
    with torch.no_grad():
        ids = torch.tensor([prompt_ids], dtype=torch.long)
        draft_step, target_step = _stepper(draft), _stepper(target)
        draft_out = draft_step(ids, None)
        target_out = target_step(ids, None)
        for _ in range(length):
            q = _distribution(torch, draft_out.logits[0, -1], temperature, size)
            p = _distribution(torch, target_out.logits[0, -1], temperature, size)
            token = recording.sample(p, q, rng)
            step = torch.tensor([[token]], dtype=torch.long)
            draft_out = draft_step(step, draft_out)
            target_out = target_step(step, target_out)
    draft_name = Path(draft_path).name
    target_name = Path(target_path).name
    header = TraceHeader(
        pair=pair or f"{draft_name}-{target_name}",
        draft_model=str(draft_path),
        target_model=str(target_path),
        prompt_id=prompt_id or f"prompt-{len(prompt_ids)}-tokens",
        temperature=float(temperature),
        source="recorded",
        meta={
            # The recorder's name as traces have always carried it, not its module's path
            # today: the same recording gives the same bytes wherever the code lives.
            "recorder": "ahasd.sim.hf_record.record_hf",
            "seed": seed,
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "vocab_draft": vocab_draft,
            "vocab_target": vocab_target,
            "prompt_ids": [int(t) for t in prompt_ids],
            "output_ids": recording.output,
        },
    )
    return recording.trace(header)
