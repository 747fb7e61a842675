"""The ``ahasd`` command line: the layer above ``ahasd.hw``, ``ahasd.golden`` and ``ahasd.sim``.

One module per group of subcommands, in the order ``ahasd --help`` lists them
(:data:`COMMAND_MODULES`): :mod:`~ahasd.cli.hw` (``verilog``, ``area``),
:mod:`~ahasd.cli.trace` (``trace``), :mod:`~ahasd.cli.simulate` (``simulate`` with the
phone-SoC scenario, ``sweep``, ``report``), :mod:`~ahasd.cli.reproduce` (``reproduce``),
:mod:`~ahasd.cli.regmap` (``regmap``) and
``cosim``. Each exposes ``register(subparsers)``, which adds its parsers and sets
``func(args) -> int`` as the handler. Nothing below this package imports it.

A :class:`ahasd.errors.UserError` becomes a one-line message and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ahasd import __version__
from ahasd.errors import UserError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

# Modules that contribute subcommands, in the order `ahasd --help` lists them.
COMMAND_MODULES = [
    "ahasd.cli.hw",
    "ahasd.cli.trace",
    "ahasd.cli.simulate",
    "ahasd.cli.reproduce",
    "ahasd.cli.regmap",
    "ahasd.cli.cosim",
]


def build_parser() -> argparse.ArgumentParser:
    """The ``ahasd`` parser with every subcommand of :data:`COMMAND_MODULES`."""
    parser = argparse.ArgumentParser(
        prog="ahasd",
        description="AHASD reference implementation: RTL, golden models, system model.",
    )
    parser.add_argument("--version", action="version", version=f"ahasd {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``ahasd`` with ``argv`` (default: the process arguments); the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as error:
        print(f"ahasd: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ahasd: interrupted", file=sys.stderr)
        return 130
