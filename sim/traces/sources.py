"""Where a run's trace comes from: :func:`resolve_trace` turns a ``--trace`` value into a
:class:`~ahasd.sim.traces.format.Trace` (a file, a built-in recorded trace, a synthetic preset, an
i.i.d. trace, or by default the pair's synthetic preset).

Separate from :mod:`ahasd.sim.traces.format` (the format), which
:mod:`ahasd.sim.traces.synthetic` imports.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim.traces import synthetic
from ahasd.sim.traces.format import Trace, builtin_trace_paths, load_builtin, load_trace

__all__ = ["builtin_trace_names", "resolve_trace"]


def builtin_trace_names() -> list[str]:
    """Names of the built-in recorded traces (``sim/data/*.jsonl`` without the suffix)."""
    return [p.name.removesuffix(".jsonl") for p in builtin_trace_paths()]


@functools.lru_cache(maxsize=16)
def _synthetic(preset: str, tokens: int, seed: int) -> Trace:
    # Generated traces are pure functions of their arguments and never mutated: a sweep
    # that runs 28 configurations on one (pair, seed) generates its trace once.
    return synthetic.generate(preset, tokens, seed)


def resolve_trace(spec: str | None, preset: str, tokens: int, seed: int) -> Trace:
    """The trace of a run (see :class:`~ahasd.sim.settings.RunSettings` ``trace``): ``spec``
    None = synthetic ``preset``; at least ``tokens`` long, else a UserError."""
    if spec is None:
        trace = _synthetic(preset, tokens, seed)
    elif spec.startswith("iid:"):
        try:
            acceptance = float(spec[4:])
        except ValueError:
            raise UserError(f"--trace {spec!r}: iid:<acceptance> needs a number") from None
        trace = synthetic.iid_trace(tokens, acceptance, seed)
    elif spec in synthetic.PRESETS:
        trace = _synthetic(spec, tokens, seed)
    elif spec in builtin_trace_names():
        trace = load_builtin(spec)
    elif Path(spec).exists():
        trace = load_trace(spec)
    else:
        builtin = ", ".join(builtin_trace_names())
        raise UserError(
            f"--trace {spec!r} is neither a file, a built-in trace ({builtin or 'none'}), a "
            f"synthetic preset ({', '.join(synthetic.PRESETS)}) nor iid:<acceptance>"
        )
    if len(trace) < tokens:
        raise UserError(
            f"trace {spec!r} has {len(trace)} positions, fewer than the generation length "
            f"{tokens} (use --tokens {len(trace)} or a longer trace)"
        )
    return trace
