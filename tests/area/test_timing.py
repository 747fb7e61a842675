"""Timing report: the ASIC estimate's arithmetic, the path finder, and one small block run
through yosys and nextpnr-ecp5 end to end (the full table is ``make area``'s job)."""

from __future__ import annotations

import json
import re

import pytest

from ahasd.cli import main
from ahasd.cli.hw import TIMING_BEGIN, TIMING_END
from ahasd.hw.blocks import lookup
from ahasd.hw.timing_paths import (
    CriticalPath,
    asic_mhz,
    gate_budget,
    longest_paths,
)
from ahasd.hw.verilog import block_digest


def test_asic_clock_from_gate_levels():
    # 14 ps FO4, 2 FO4 a gate, 3 FO4 of flip-flop overhead: 43 gates are
    # 14 * (2 * 43 + 3) = 1246 ps, just inside 1.25 ns (800 MHz); 44 gates are 1274 ps.
    assert asic_mhz(43) == pytest.approx(1e6 / 1246)
    assert asic_mhz(44) < 800 < asic_mhz(43)
    assert gate_budget(800) == 43
    # 1 GHz: 14 * (2 * 34 + 3) = 994 ps.
    assert gate_budget(1000) == 34


def test_cells_summary_collapses_runs():
    path = CriticalPath("a[0]", "b[1]", ("LUT4", "CCU2C", "CCU2C", "CCU2C", "LUT4"))
    assert path.levels == 5
    assert path.cells_summary() == "LUT4, CCU2C x3, LUT4"


def _cell(kind, **pins):
    directions = {pin: ("output" if pin in ("Y", "Q") else "input") for pin in pins}
    return {"type": kind, "connections": pins, "port_directions": directions}


def _netlist():
    """Two domains, hand-built: pim register r0 -> 3 gates -> pim register r1; npu register
    r2 -> 5 gates -> pim register r3 (a crossing, not counted); r2 -> 1 gate -> npu r4."""
    cells = {
        "r0": _cell("$_DFF_P_", C=[2], D=[10], Q=[11]),
        "g1": _cell("$_NOT_", A=[11], Y=[12]),
        "g2": _cell("$_AND_", A=[12], B=[11], Y=[13]),
        "g3": _cell("$_XOR_", A=[13], B=[11], Y=[14]),
        "r1": _cell("$_SDFF_PP0_", C=[2], D=[14], R=[10], Q=[15]),
        "r2": _cell("$_DFF_P_", C=[3], D=[10], Q=[20]),
        "h1": _cell("$_NOT_", A=[20], Y=[21]),
        "h2": _cell("$_NOT_", A=[21], Y=[22]),
        "h3": _cell("$_NOT_", A=[22], Y=[23]),
        "h4": _cell("$_NOT_", A=[23], Y=[24]),
        "h5": _cell("$_NOT_", A=[24], Y=[25]),
        "r3": _cell("$_DFF_P_", C=[2], D=[25], Q=[26]),
        "k1": _cell("$_OR_", A=[20], B=[10], Y=[27]),
        "r4": _cell("$_DFF_P_", C=[3], D=[27], Q=[28]),
    }
    netnames = {
        "pim_clk": {"bits": [2], "attributes": {}},
        "npu_clk": {"bits": [3], "attributes": {}},
        "scan": {"bits": [10], "attributes": {}},
        "dut.count": {"bits": [11, 15], "attributes": {"init": "00"}},
        "dut.alias": {"bits": [11], "attributes": {}},
        "dut.other": {"bits": [20], "attributes": {"init": "0"}},
    }
    ports = {
        "pim_clk": {"direction": "input", "bits": [2]},
        "npu_clk": {"direction": "input", "bits": [3]},
        "scan": {"direction": "input", "bits": [10]},
    }
    return {"modules": {"harness": {"ports": ports, "cells": cells, "netnames": netnames}}}


def test_longest_path_per_capturing_domain_without_crossings():
    paths = longest_paths(_netlist())
    assert set(paths) == {"pim", "npu"}
    # The five-gate npu -> pim crossing is left out: pim's longest is r0 -> r1, three gates.
    assert paths["pim"].levels == 3
    assert paths["pim"].cells == ("NOT", "AND", "XOR")
    # Register names: the one with an init value wins over a plain alias.
    assert paths["pim"].start == "count[0]"
    assert paths["pim"].end == "count[1]"
    assert paths["npu"].levels == 1
    assert paths["npu"].start == "other"


@pytest.mark.slow
def test_timing_of_one_block_end_to_end(tmp_path, capsys):
    doc = tmp_path / "hardware.md"
    doc.write_text(f"# Report\n\n{TIMING_BEGIN}\nold\n{TIMING_END}\n\nafter\n")
    out = tmp_path / "work"
    assert main(["timing", "gtsu", "--out", str(out), "--doc", str(doc), "--seed", "3"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    # A header, its rule, one row (the GTSU has one domain: pim, 800 MHz), a blank line and
    # the line of RTL digests the rows were measured on.
    assert len(printed) == 5
    assert printed[3] == ""
    assert printed[4].startswith("RTL digests")
    assert f"gtsu `{block_digest(lookup('gtsu'))}`" in printed[4]
    header = [cell.strip() for cell in printed[0].strip("|").split("|")]
    assert header[:3] == ["block", "domain (target)", "ECP5 Fmax"]
    row = [cell.strip() for cell in printed[2].strip("|").split("|")]
    assert len(row) == len(header)
    assert row[0] == "gtsu"
    assert row[1] == "pim (800 MHz)"
    fmax = float(re.fullmatch(r"(\d+) MHz", row[2]).group(1))
    # nextpnr's own figure, from its JSON report, rounded as the table rounds it.
    report = json.loads((out / "gtsu" / "report.json").read_text())
    achieved = [f["achieved"] for clock, f in report["fmax"].items() if "pim_clk" in clock]
    assert fmax == round(achieved[0])
    gates = int(row[5])
    # yosys' own longest path over the whole design, a count independent of ours.
    yosys_length = int(re.search(r"length=(\d+)", (out / "gtsu" / "depth.txt").read_text())[1])
    assert gates == yosys_length
    assert row[6].startswith(f"{asic_mhz(gates):.0f} MHz")
    # The document: the table between the markers, the rest untouched.
    text = doc.read_text()
    assert text.startswith(f"# Report\n\n{TIMING_BEGIN}\n{printed[0]}\n")
    assert text.endswith(f"{printed[2]}\n\n{printed[4]}\n{TIMING_END}\n\nafter\n")


def test_timing_rejects_an_unknown_block_and_a_doc_without_markers(tmp_path, capsys):
    assert main(["timing", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown block 'nope'" in capsys.readouterr().err
    doc = tmp_path / "plain.md"
    doc.write_text("# no markers\n")
    assert main(["timing", "gtsu", "--out", str(tmp_path), "--doc", str(doc)]) == 2
    assert "no timing markers" in capsys.readouterr().err
    assert doc.read_text() == "# no markers\n"
    assert not (tmp_path / "gtsu").exists()  # refused before any synthesis
