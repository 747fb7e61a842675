"""A real draft/target pair on every machine: character n-gram models of the Python stdlib.

Recorded traces need a real draft model, a real target model and real rejection sampling. No
weights can be downloaded here, but every machine has the Python standard library's source, so
this module trains two character-level n-gram language models on it in a few seconds:

- **draft**: order 3 (two characters of context), trained on the first 0.5 M characters;
- **target**: order 7 (six characters of context), trained on 3 M characters;

both interpolated with Witten-Bell smoothing down to a uniform distribution, so every character
has non-zero probability (rejection sampling needs ``q > 0`` wherever it can propose).

Corpus (deterministic for a given Python version): every ``*.py`` file under
``sysconfig.get_paths()["stdlib"]``, sorted by relative path, skipping ``site-packages`` and
any path with a ``test``, ``tests`` or ``idle_test`` folder; file number ``i`` (in that order)
is held out for prompts when ``i % 10 == 0``, the rest are concatenated (a newline between
files) in order, cut at the training size. Characters:
printable ASCII and newline keep their identity (tab becomes a space), anything else becomes one
"other" symbol: a vocabulary of 97.

The recorder (:func:`record`) is code completion: the target continues a held-out file from a
``def`` line. At every position it computes the draft's distribution ``q`` and the target's
``p`` for the correct prefix (at the given temperature), draws the draft token ``x ~ q``,
accepts it with ``min(1, p(x)/q(x))`` and otherwise draws from the residual
``norm(max(p - q, 0))``; the output token continues the prefix (one step of
:mod:`ahasd.sim.traces.sampling`, shared with the Hugging Face recorder). So the recorded output
is a sample of the target, ``beta = sum(min(p, q))`` is exact, and ``accept`` is one real draw.
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ahasd.errors import UserError
from ahasd.sim.traces.format import Trace, TraceHeader
from ahasd.sim.traces.sampling import Recording

__all__ = [
    "BUILTIN_RECORDINGS",
    "VOCAB",
    "CharNGram",
    "Corpus",
    "check_prompt_index",
    "decode",
    "default_pair",
    "encode",
    "load_corpus",
    "record",
    "record_builtins",
    "train_pair",
]

# Vocabulary: id 0 = newline, ids 1..95 = ASCII 32..126, id 96 = any other character.
VOCAB = 97
_OTHER = 96
_TABLE = np.full(256, _OTHER, dtype=np.int64)
_TABLE[ord("\n")] = 0
_TABLE[ord("\t")] = 1
_TABLE[32:127] = np.arange(1, 96)
_CHARS = "\n" + "".join(chr(c) for c in range(32, 127)) + "\u00bf"

DRAFT_ORDER = 3
TARGET_ORDER = 7
DRAFT_CHARS = 500_000
TARGET_CHARS = 3_000_000
HOLD_OUT_EVERY = 10


def encode(text: str) -> np.ndarray:
    """Character ids of ``text`` (see the module docstring for the vocabulary)."""
    raw = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    ids = np.full(raw.shape, _OTHER, dtype=np.int64)
    small = raw < 256
    ids[small] = _TABLE[raw[small]]
    return ids


def decode(ids) -> str:
    """Text of character ids (the "other" symbol shows as an inverted question mark)."""
    return "".join(_CHARS[int(i)] for i in ids)


@dataclass(frozen=True)
class Corpus:
    """The deterministic stdlib corpus: training text ids and held-out files."""

    train: np.ndarray
    held_out: tuple[tuple[str, str], ...]  # (relative path, text)
    files: int
    sha256: str
    stdlib: str


def _source_files(stdlib: Path) -> list[Path]:
    files = []
    for path in stdlib.rglob("*.py"):
        parts = path.relative_to(stdlib).parts
        if "site-packages" in parts or any(p in ("test", "tests", "idle_test") for p in parts[:-1]):
            continue
        files.append(path)
    return sorted(files, key=lambda p: p.relative_to(stdlib).as_posix())


def load_corpus(stdlib: str | Path | None = None, chars: int = TARGET_CHARS) -> Corpus:
    """Build the corpus from the stdlib source (``chars`` training characters at most)."""
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    files = _source_files(root)
    if not files:
        raise UserError(f"{root}: no Python source files found for the n-gram corpus")
    pieces: list[str] = []
    held_out: list[tuple[str, str]] = []
    total = 0
    for number, path in enumerate(files):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        relative = path.relative_to(root).as_posix()
        if number % HOLD_OUT_EVERY == 0:
            held_out.append((relative, text))
        elif total < chars:
            pieces.append(text + "\n")
            total += len(text) + 1
    train_text = "".join(pieces)[:chars]
    digest = hashlib.sha256(train_text.encode("utf-8")).hexdigest()
    return Corpus(encode(train_text), tuple(held_out), len(files), digest, str(root))


class CharNGram:
    """An interpolated Witten-Bell character n-gram model.

    ``P_k(c | h) = (C(h c) + T(h) P_{k-1}(c | h')) / (C(h) + T(h))`` for a context ``h`` of ``k``
    characters (``h'`` drops its oldest character), ``T(h)`` the number of distinct characters
    seen after ``h``; an unseen context falls through to ``P_{k-1}``; ``P_{-1}`` is uniform.

    Parameters
    ----------
    order : n (the model conditions on ``n - 1`` characters).
    ids : training character ids.
    """

    def __init__(self, order: int, ids: np.ndarray) -> None:
        if order < 1:
            raise ValueError(f"order must be >= 1, not {order}")
        self.order = order
        self.name = f"char-{order}gram"
        self.tables = []  # per context length k: (sorted keys, counts, context keys, totals, types)
        for k in range(order):
            # key of (context of k chars, next char) = base-V number of the k+1 characters.
            n = ids.size - k
            key = np.zeros(n, dtype=np.int64)
            for offset in range(k + 1):
                key = key * VOCAB + ids[offset : offset + n]
            keys, counts = np.unique(key, return_counts=True)
            contexts = keys // VOCAB
            ctx_keys, first = np.unique(contexts, return_index=True)
            totals = np.add.reduceat(counts, first)
            types = np.diff(np.append(first, keys.size))
            self.tables.append((keys, counts, ctx_keys, totals, types))

    def distribution(self, context: np.ndarray) -> np.ndarray:
        """Next-character distribution (length ``VOCAB``) after the ids in ``context``."""
        probs = np.full(VOCAB, 1.0 / VOCAB)
        for k in range(self.order):
            if k > len(context):
                break
            keys, counts, ctx_keys, totals, types = self.tables[k]
            ctx = 0
            for value in context[len(context) - k :] if k else ():
                ctx = ctx * VOCAB + int(value)
            where = np.searchsorted(ctx_keys, ctx)
            if where == ctx_keys.size or ctx_keys[where] != ctx:
                continue  # unseen context: keep the lower order's estimate
            total, distinct = totals[where], types[where]
            low = np.searchsorted(keys, ctx * VOCAB)
            high = np.searchsorted(keys, ctx * VOCAB + VOCAB)
            seen = np.zeros(VOCAB)
            seen[keys[low:high] % VOCAB] = counts[low:high]
            probs = (seen + distinct * probs) / (total + distinct)
        return probs


def train_pair(corpus: Corpus) -> tuple[CharNGram, CharNGram]:
    """The draft (order 3, first 0.5 M chars) and target (order 7, 3 M chars) models."""
    draft = CharNGram(DRAFT_ORDER, corpus.train[:DRAFT_CHARS])
    target = CharNGram(TARGET_ORDER, corpus.train[:TARGET_CHARS])
    return draft, target


@functools.lru_cache(maxsize=1)
def default_pair() -> tuple[Corpus, CharNGram, CharNGram]:
    """Corpus, draft and target on this machine's stdlib, built once per process (~3 s)."""
    corpus = load_corpus()
    draft, target = train_pair(corpus)
    return corpus, draft, target


def _tempered(probs: np.ndarray, temperature: float) -> np.ndarray:
    if temperature == 1.0:
        return probs
    if temperature == 0.0:
        out = np.zeros_like(probs)
        out[np.argmax(probs)] = 1.0
        return out
    # Shift by the largest log-probability before dividing: the top character gets exactly 0
    # and the rest stay finite or -inf, so a tiny temperature tends to greedy instead of
    # dividing infinities into NaN.
    with np.errstate(divide="ignore", over="ignore"):
        logp = np.log(probs)
        logp = (logp - logp.max()) / temperature
    out = np.exp(logp)
    return out / out.sum()


def check_prompt_index(corpus: Corpus, index: int) -> None:
    """UserError unless ``index`` names a held-out file of ``corpus``."""
    if not 0 <= index < len(corpus.held_out):
        raise UserError(f"prompt index {index} out of range (0..{len(corpus.held_out) - 1})")


def _prompt(corpus: Corpus, index: int, prompt_chars: int) -> tuple[str, str]:
    """(file, prompt text) for held-out file ``index``: text up to and including a ``def ``."""
    check_prompt_index(corpus, index)
    name, text = corpus.held_out[index]
    cut = text.find("\ndef ")
    if cut < 0:
        cut = text.find("\n    def ")
    cut = len(text) if cut < 0 else text.index("def ", cut) + len("def ")
    return name, text[max(0, cut - prompt_chars) : cut]


def record(
    draft: CharNGram,
    target: CharNGram,
    corpus: Corpus,
    *,
    prompt_index: int,
    length: int,
    temperature: float,
    seed: int,
    prompt_chars: int = 256,
    trace_name: str | None = None,
    progress=None,
) -> Trace:
    """Record one real rejection-sampling trace (module docstring) of ``length`` positions.

    ``progress``, if given, is called with the number of positions recorded so far after
    each position (the command line's progress display).
    """
    if length < 1:
        raise UserError(f"trace length must be >= 1, not {length}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, not {seed!r}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise UserError(f"temperature must be > 0 for sampling, not {temperature!r}")
    rng = np.random.default_rng(seed)
    file_name, prompt_text = _prompt(corpus, prompt_index, prompt_chars)
    context = list(encode(prompt_text))
    recording = Recording(length)
    for pos in range(length):
        window = np.asarray(context[-(TARGET_ORDER - 1) :], dtype=np.int64)
        q = _tempered(draft.distribution(window), temperature)
        p = _tempered(target.distribution(window), temperature)
        context.append(recording.sample(p, q, rng))
        if progress is not None:
            progress(pos + 1)
    header = TraceHeader(
        pair="stdlib-char-3gram-7gram",
        draft_model=f"{draft.name} ({DRAFT_CHARS} chars)",
        target_model=f"{target.name} ({TARGET_CHARS} chars)",
        prompt_id=f"{file_name}#def-{prompt_chars}",
        temperature=float(temperature),
        source="recorded",
        meta={
            # The recorder's name as the shipped traces carry it, not its module's path
            # today: re-recording them gives the same bytes wherever the code lives.
            "recorder": "ahasd.sim.ngram.record",
            "name": trace_name,
            "task": "code completion",
            "seed": seed,
            "python": sys.version.split()[0],
            "corpus": {
                "files": corpus.files,
                "train_chars": int(corpus.train.size),
                "sha256": corpus.sha256,
                "rule": "sorted stdlib *.py, no test folders, every 10th file held out",
            },
            "prompt_file": file_name,
            "prompt": prompt_text,
            "output": decode(recording.output),
        },
    )
    return recording.trace(header)


# The shipped traces: (file stem, held-out prompt index, temperature, seed).
BUILTIN_RECORDINGS = (
    ("stdlib-code-t1.0-a", 3, 1.0, 101),  # asyncio/base_tasks.py on Python 3.11
    ("stdlib-code-t1.0-b", 43, 1.0, 102),  # ipaddress.py
    ("stdlib-code-t0.7-a", 32, 0.7, 103),  # fractions.py
    ("stdlib-code-t0.7-b", 64, 0.7, 104),  # traceback.py
)
BUILTIN_LENGTH = 1200


def record_builtins(*, length: int = BUILTIN_LENGTH, progress=None) -> dict[str, Trace]:
    """Record the shipped traces again: ``{file name: trace}`` (the command line writes them
    as one output set). ``progress`` is called with the positions recorded so far, over all
    of them (``len(BUILTIN_RECORDINGS) * length`` in total)."""
    corpus, draft, target = default_pair()
    traces = {}
    for number, (stem, prompt_index, temperature, seed) in enumerate(BUILTIN_RECORDINGS):
        done_before = number * length
        traces[f"{stem}.jsonl"] = record(
            draft,
            target,
            corpus,
            prompt_index=prompt_index,
            length=length,
            temperature=temperature,
            seed=seed,
            trace_name=stem,
            progress=None if progress is None else lambda n, d=done_before: progress(d + n),
        )
    return traces
