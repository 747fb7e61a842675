"""The ``ahasd`` command line.

Each subcommand lives beside the code it drives and exposes ``register(subparsers)``,
which adds its parser and sets ``func(args) -> int`` as the handler. A
:class:`ahasd.errors.UserError` becomes a one-line message and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ahasd import __version__
from ahasd.errors import UserError

# Modules that contribute subcommands, in the order `ahasd --help` lists them.
COMMAND_MODULES = [
    "ahasd.hw.cli",
    "ahasd.sim.trace_cli",
    "ahasd.sim.sim_cli",
    "ahasd.hw.regmap_cli",
    "ahasd.sim.cosim_cli",
]


def build_parser() -> argparse.ArgumentParser:
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


if __name__ == "__main__":
    sys.exit(main())
