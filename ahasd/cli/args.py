"""Argument parsing shared by every ``ahasd`` command.

- :class:`Parser`: an ``argparse`` parser whose usage errors are one line,
  ``ahasd simulate: --tokens: must be an integer in 1..65535, not 'x' (see ahasd simulate
  --help)``, raised as :class:`~ahasd.errors.UsageError` (exit status 2) instead of usage
  text and ``SystemExit``.
- :func:`integer` and :func:`real`: argument types with their bounds in the message, checked
  while parsing, so nothing starts on a value that cannot work; ASCII digits only.
- :func:`path_arg`: a file or folder argument; never the empty string.
- :class:`UniqueList`: a list option that drops repeated values (order kept) with a note on
  stderr, so ``--policies fixed fixed`` runs ``fixed`` once.
- The bounds of the options that are no setting's (:data:`JOBS_MAX`, ...), each with the
  reason for its value; a setting's bounds are in its field's metadata.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ahasd.errors import UsageError
from ahasd.sim.settings import SEED_MAX as _SETTINGS_SEED_MAX

__all__ = [
    "BINS_MAX",
    "JOBS_MAX",
    "RECORD_LENGTH_MAX",
    "SEED_MAX",
    "Parser",
    "UniqueList",
    "integer",
    "path_arg",
    "real",
]

# Seeds: unsigned 32-bit, the bound the run settings check (a grid's seeds too).
SEED_MAX = _SETTINGS_SEED_MAX
# Recorders run a real model per position (n-gram: about 2 ms each): 100,000 positions is a
# few minutes and a few MB of trace.
RECORD_LENGTH_MAX = 100_000
# Lines of the entropy histogram of `trace info`.
BINS_MAX = 200
# Worker processes of a sweep.
JOBS_MAX = 64


def _tidy(message: str) -> str:
    """argparse's ``argument --x: msg`` as ``--x: msg``."""
    return message.removeprefix("argument ")


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one-line :class:`UsageError` s.

    Subparsers made with ``add_subparsers`` are of the same class, so every subcommand
    reports its errors the same way, prefixed with its own program name.
    """

    def parse_known_args(self, args=None, namespace=None):
        # Remember the innermost (sub)parser that parsed, so that arguments nobody
        # recognised are reported by the subcommand they were given to (see parse_args).
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "usage_parser"):
            namespace.usage_parser = self
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            namespace.usage_parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {_tidy(message)} (see {self.prog} --help)")


def integer(low: int, high: int):
    """An argument type: an integer in ``low..high`` (both included)."""

    def parse(text: str) -> int:
        try:
            # ASCII only: Python's int() also reads other scripts' digits ("\u0663" is 3),
            # which no file or tool downstream would read back as the same number.
            value = int(text) if text.isascii() else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}, not {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def real(low: float, high: float, *, low_open: bool = False):
    """An argument type: a finite number in ``low..high`` (``(low, high]`` if ``low_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text) if text.isascii() else math.nan  # as integer() does
        except ValueError:
            value = math.nan
        inside = low < value <= high if low_open else low <= value <= high
        if not (math.isfinite(value) and inside):
            span = f"({low:g}, {high:g}]" if low_open else f"{low:g}..{high:g}"
            raise argparse.ArgumentTypeError(f"must be a number in {span}, not {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def path_arg(text: str) -> Path:
    """An argument type: a file or folder name; the empty string is refused (``Path("")``
    is the current folder, so ``--out ''`` would write there unasked)."""
    if not text:
        raise argparse.ArgumentTypeError("must name a file or folder, not ''")
    return Path(text)


path_arg.__name__ = "path"


class UniqueList(argparse.Action):
    """``nargs="+"`` values with repeats dropped (first occurrence kept), noted on stderr."""

    def __call__(self, parser, namespace, values, option_string=None):
        unique = list(dict.fromkeys(values))
        if len(unique) < len(values):
            repeated = [v for v in unique if values.count(v) > 1]
            print(
                f"{parser.prog}: note: {option_string} lists "
                f"{', '.join(map(str, repeated))} more than once; each runs once",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, unique)
