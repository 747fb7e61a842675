"""``ahasd verilog``: generate and lint the Verilog of every block (or the named ones)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ahasd.hw.blocks import BLOCKS, lookup
from ahasd.hw.verilog import convert, lint, write_if_changed

DEFAULT_OUT = Path("build/verilog")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verilog",
        help="generate and lint the Verilog of the hardware blocks",
        description="Write one .v per block (default parameters) and lint it with "
        "verilator --lint-only -Wall. Exit 1 on lint errors, 2 on an unknown block.",
    )
    parser.add_argument(
        "blocks",
        nargs="*",
        metavar="BLOCK",
        help=f"blocks to emit (default: all of {', '.join(BLOCKS)})",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    blocks = [lookup(name) for name in args.blocks] if args.blocks else list(BLOCKS.values())
    failures = 0
    for block in blocks:
        path = args.out / f"{block.name}.v"
        changed = write_if_changed(path, convert(block))
        result = lint(path, block.name)
        state = "written" if changed else "unchanged"
        verdict = "lint clean" if result.ok else "LINT ERRORS"
        print(f"{block.name:10s} {path}  ({state}, {verdict})")
        if not result.ok:
            failures += 1
            print(result.output, file=sys.stderr)
    print(f"Verilog of {len(blocks)} block(s) in {args.out.resolve()}")
    return 1 if failures else 0
