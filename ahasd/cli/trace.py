"""``ahasd trace``: generate, inspect and record drafting traces.

Subcommands::

    ahasd trace gen --preset NAME --length N --seed S --out FILE [--task T] [--acceptance A]
    ahasd trace gen --iid ACCEPTANCE --length N --seed S --out FILE
    ahasd trace info FILE_OR_BUILTIN [--bins 8]
    ahasd trace list
    ahasd trace record ngram --out FILE [--prompt-index I] [--temperature T] [--seed S]
    ahasd trace record ngram --builtins DIR
    ahasd trace record hf --draft PATH --target PATH (--prompt TEXT | --prompt-ids 1,2,3) --out FILE

Every user mistake (bad file, bad option value, an output path that cannot be written)
exits with status 2 and a one-line message, before any work starts where it can be known
then. Traces are written through :mod:`ahasd.output` (an unchanged file keeps its mtime;
``record ngram --builtins`` writes its four traces as one output set); recording shows
progress on stderr.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from ahasd.cli.args import BINS_MAX, RECORD_LENGTH_MAX, SEED_MAX, integer, path_arg, real
from ahasd.cli.progress import Progress
from ahasd.errors import UserError
from ahasd.output import OutputSet, check_file, check_folder
from ahasd.sim.traces import synthetic as synth
from ahasd.sim.traces.format import (
    MAX_RECORDS,
    Trace,
    builtin_trace_paths,
    encode_trace,
    load_builtin,
    load_trace,
    save_trace,
)

__all__ = ["register", "summarise"]

# Sampling temperatures: a recorder's distributions are raised to 1/T; below 0.01 that is
# greedy decoding in all but name.
TEMPERATURE_MIN = 0.01
TEMPERATURE_MAX = 100.0


def _index(text: str) -> int:
    """An integer; its range is the corpus's, checked (and stated) once the corpus is read."""
    try:
        return int(text) if text.isascii() else int("x")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer, a held-out file's number (0 up to the corpus's count), "
            f"not {text!r}"
        ) from None


def _real(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, not {text!r}")
    return value


def _hf_temperature(text: str) -> float:
    """0 (greedy) or a temperature in TEMPERATURE_MIN..TEMPERATURE_MAX."""
    value = _real(text)
    if value != 0.0 and not TEMPERATURE_MIN <= value <= TEMPERATURE_MAX:
        raise argparse.ArgumentTypeError(
            f"must be 0 (greedy) or a number in {TEMPERATURE_MIN:g}..{TEMPERATURE_MAX:g}, "
            f"not {text!r}"
        )
    return value


def register(subparsers) -> None:
    """Add ``ahasd trace`` and its subcommands."""
    parser = subparsers.add_parser(
        "trace",
        help="generate, inspect and record drafting traces",
        description="Drafting traces: synthetic generation, summaries, real recordings.",
    )
    commands = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)

    gen = commands.add_parser("gen", help="write a synthetic trace")
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", choices=sorted(synth.PRESETS), help="model-pair preset")
    source.add_argument(
        "--iid", type=_real, metavar="ACCEPTANCE", help="i.i.d. trace with this acceptance"
    )
    gen.add_argument(
        "--length",
        type=integer(1, MAX_RECORDS),
        default=1024,
        help=f"positions, 1..{MAX_RECORDS} (default: 1024)",
    )
    gen.add_argument(
        "--seed", type=integer(0, SEED_MAX), default=0, help=f"RNG seed, 0..{SEED_MAX} (default: 0)"
    )
    gen.add_argument(
        "--task", help=f"task type for presets that cite one ({', '.join(synth.TASKS)})"
    )
    gen.add_argument(
        "--acceptance", type=_real, help="override the preset's acceptance target, in (0, 1)"
    )
    gen.add_argument(
        "--realise", action="store_true", help="also draw realised accept flags from beta"
    )
    gen.add_argument(
        "--out", type=path_arg, required=True, help="output file (.jsonl or .jsonl.gz)"
    )
    gen.set_defaults(func=_gen)

    info = commands.add_parser("info", help="summarise a trace: length, acceptance, entropy")
    info.add_argument("trace", help="trace file, or the name of a built-in trace")
    info.add_argument(
        "--bins",
        type=integer(1, BINS_MAX),
        default=8,
        help=f"entropy histogram bins, 1..{BINS_MAX} (default: 8)",
    )
    info.set_defaults(func=_info)

    listing = commands.add_parser("list", help="list presets and built-in traces")
    listing.set_defaults(func=_list)

    record = commands.add_parser("record", help="record real rejection-sampling traces")
    recorders = record.add_subparsers(dest="recorder", metavar="RECORDER", required=True)
    ngram = recorders.add_parser(
        "ngram", help="character n-gram pair trained on the Python stdlib (offline, seconds)"
    )
    ngram.add_argument(
        "--builtins", type=path_arg, metavar="DIR", help="rebuild the shipped traces into DIR"
    )
    ngram.add_argument("--out", type=path_arg, help="output trace file")
    ngram.add_argument(
        "--prompt-index",
        type=_index,
        default=3,
        help="held-out file number, 0 up to the corpus's count (default: 3)",
    )
    ngram.add_argument(
        "--temperature",
        type=real(TEMPERATURE_MIN, TEMPERATURE_MAX),
        default=1.0,
        help=f"temperature, {TEMPERATURE_MIN:g}..{TEMPERATURE_MAX:g} (default: 1.0)",
    )
    ngram.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=0,
        help=f"sampling seed, 0..{SEED_MAX} (default: 0)",
    )
    ngram.add_argument(
        "--length",
        type=integer(1, RECORD_LENGTH_MAX),
        default=1200,
        help=f"positions, 1..{RECORD_LENGTH_MAX} (default: 1200)",
    )
    ngram.set_defaults(func=_record_ngram)
    hf = recorders.add_parser("hf", help="Hugging Face transformers pair from local folders")
    hf.add_argument("--draft", required=True, help="draft model folder")
    hf.add_argument("--target", required=True, help="target model folder")
    prompt = hf.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text (needs a tokenizer)")
    prompt.add_argument("--prompt-ids", help="prompt token ids, comma-separated")
    hf.add_argument("--tokenizer", help="tokenizer folder (default: the draft's)")
    hf.add_argument(
        "--length",
        type=integer(1, RECORD_LENGTH_MAX),
        default=256,
        help=f"positions, 1..{RECORD_LENGTH_MAX} (default: 256)",
    )
    hf.add_argument(
        "--temperature",
        type=_hf_temperature,
        default=1.0,
        help=f"temperature, 0 (greedy) or {TEMPERATURE_MIN:g}..{TEMPERATURE_MAX:g} (default: 1.0)",
    )
    hf.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=0,
        help=f"sampling seed, 0..{SEED_MAX} (default: 0)",
    )
    hf.add_argument("--pair", help="pair name for the header")
    hf.add_argument("--prompt-id", help="prompt id for the header")
    hf.add_argument("--out", type=path_arg, required=True, help="output trace file")
    hf.set_defaults(func=_record_hf)


def _saved(path: Path, trace: Trace) -> str:
    changed = save_trace(trace, path)
    state = "wrote" if changed else "unchanged (same bytes)"
    return f"{state} {path}: {len(trace)} positions, acceptance {trace.acceptance_rate():.4f}"


def _gen(args) -> int:
    check_file(args.out, option="--out")
    if args.iid is not None:
        if args.task or args.acceptance is not None:
            raise UserError("--task and --acceptance apply to --preset, not --iid")
        trace = synth.iid_trace(args.length, args.iid, args.seed, realise=args.realise)
    else:
        trace = synth.generate(
            args.preset,
            args.length,
            args.seed,
            acceptance=args.acceptance,
            task=args.task,
            realise=args.realise,
        )
    print(_saved(args.out, trace))
    return 0


def _load(name: str) -> Trace:
    path = Path(name)
    if path.exists() or path.suffix in (".jsonl", ".gz") or "/" in name:
        return load_trace(path)
    return load_builtin(name)


def summarise(trace: Trace, bins: int = 8) -> str:
    """A human-readable summary: header, length, acceptance, entropy histogram."""
    h = trace.header
    lines = [
        f"pair:        {h.pair} ({h.draft_model} -> {h.target_model})",
        f"source:      {h.source}, prompt {h.prompt_id}, temperature {h.temperature:g}, "
        f"format v{h.version}",
        f"length:      {len(trace)} positions",
    ]
    beta_known = ~np.isnan(trace.beta)
    parts = []
    if trace.accept is not None:
        accepted = int(trace.accept.sum())
        parts.append(f"realised {accepted / len(trace):.4f} ({accepted}/{len(trace)})")
    if beta_known.any():
        parts.append(f"mean beta {np.mean(trace.beta[beta_known]):.4f}")
    lines.append(f"acceptance:  {', '.join(parts)}")
    entropy = trace.draft_entropy
    lines.append(
        f"draft H:     mean {entropy.mean():.3f} nats, median {np.median(entropy):.3f}, "
        f"max {entropy.max():.3f}; top-1 mean {trace.draft_top1.mean():.3f}"
    )
    target_known = ~np.isnan(trace.target_entropy)
    if target_known.any():
        lines.append(f"target H:    mean {trace.target_entropy[target_known].mean():.3f} nats")
    top = max(1e-9, float(entropy.max()))
    edges = np.linspace(0.0, top, bins + 1)
    which = np.minimum(np.searchsorted(edges, entropy, side="right") - 1, bins - 1)
    lines.append("draft entropy histogram (nats)   count  share  acceptance in bin")
    counts = np.bincount(which, minlength=bins)
    for b in range(bins):
        mask = which == b
        bar = "#" * round(30 * counts[b] / max(1, counts.max()))
        if trace.accept is not None and mask.any():
            rate = f"{trace.accept[mask].mean():.3f}"
        elif mask.any() and beta_known[mask].any():
            rate = f"{np.mean(trace.beta[mask & beta_known]):.3f}"
        else:
            rate = "-"
        lines.append(
            f"  [{edges[b]:5.2f}, {edges[b + 1]:5.2f})  {bar:<30} {counts[b]:6d} "
            f"{counts[b] / len(trace):6.1%}  {rate}"
        )
    return "\n".join(lines)


def _info(args) -> int:
    print(summarise(_load(args.trace), args.bins))
    return 0


def _list(args) -> int:
    print("presets (ahasd trace gen --preset NAME):")
    for name, preset in synth.PRESETS.items():
        tasks = (
            f" tasks: {', '.join(t for t, _ in preset.task_acceptance)}"
            if preset.task_acceptance
            else ""
        )
        print(f"  {name:26} acceptance {preset.acceptance:.3f}{tasks}")
    print("built-in traces (ahasd trace info NAME):")
    for path in builtin_trace_paths():
        print(f"  {path.name.removesuffix('.jsonl')}")
    return 0


def _record_ngram(args) -> int:
    from ahasd.sim.traces import ngram

    if (args.builtins is None) == (args.out is None):
        raise UserError("give exactly one of --out FILE and --builtins DIR")
    if args.builtins is not None:
        names = [f"{stem}.jsonl" for stem, *_ in ngram.BUILTIN_RECORDINGS]
        check_folder(args.builtins, option="--builtins", files=names)
        total = len(ngram.BUILTIN_RECORDINGS) * ngram.BUILTIN_LENGTH
        bar = Progress("record ngram (built-in traces)", total, "positions")
        traces = ngram.record_builtins(progress=bar.update)
        bar.close()
        outputs = OutputSet(option="--builtins")
        for name, trace in traces.items():
            outputs.add(args.builtins / name, encode_trace(trace))
        for path, changed in outputs.commit().items():
            trace = traces[path.name]
            state = "wrote" if changed else "unchanged (same bytes)"
            print(f"{state} {path}: acceptance {trace.acceptance_rate():.4f}")
        return 0
    check_file(args.out, option="--out")
    corpus, draft, target = ngram.default_pair()
    ngram.check_prompt_index(corpus, args.prompt_index)
    bar = Progress("record ngram", args.length, "positions")
    trace = ngram.record(
        draft,
        target,
        corpus,
        prompt_index=args.prompt_index,
        length=args.length,
        temperature=args.temperature,
        seed=args.seed,
        progress=bar.update,
    )
    bar.close()
    print(_saved(args.out, trace))
    return 0


def _parse_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise UserError(f"--prompt-ids must be comma-separated integers, not {text!r}") from None


def _record_hf(args) -> int:
    from ahasd.sim.traces.hf import record_hf

    check_file(args.out, option="--out")
    trace = record_hf(
        args.draft,
        args.target,
        length=args.length,
        temperature=args.temperature,
        seed=args.seed,
        prompt=args.prompt,
        prompt_ids=None if args.prompt_ids is None else _parse_ids(args.prompt_ids),
        tokenizer_path=args.tokenizer,
        pair=args.pair,
        prompt_id=args.prompt_id,
    )
    print(_saved(args.out, trace))
    return 0
