"""The crossings' SDC file (``ahasd_top.sdc``, :func:`ahasd.hw.verilog.crossings_sdc`).

The file is run by a Tcl interpreter (Python's ``tkinter.Tcl``) with the SDC commands
stubbed to record their calls, under the defaults and under an integrator's settings
(instance path, separator, clock names, periods). Checked against the generated Verilog of
the top: every cell pattern matches registers (or memories) of the design, every
cross-domain pointer and storage of every queue is constrained towards the other clock
with the smaller period and without hold check, the writer's reset assertion is a false path,
and every clock named is one of the design's.
"""

from __future__ import annotations

import fnmatch
import re

import pytest

from ahasd.hw.blocks import lookup
from ahasd.hw.queues import QUEUE_DOMAINS
from ahasd.hw.timing import CLOCK_TARGETS_MHZ
from ahasd.hw.verilog import convert, crossings_sdc

tkinter = pytest.importorskip("tkinter", reason="Python's tkinter (Tcl) is not installed")

STUBS = """
proc record {args} { global calls; lappend calls $args }
proc get_cells {pattern} { return [list cells $pattern] }
proc get_pins {pattern} { return [list pins $pattern] }
proc get_ports {pattern} { return [list ports $pattern] }
proc get_clocks {pattern} { return [list clocks $pattern] }
proc set_max_delay {args} { record set_max_delay {*}$args }
proc set_false_path {args} { record set_false_path {*}$args }
proc create_clock {args} { record create_clock {*}$args }
set calls {}
"""


@pytest.fixture(scope="module")
def design_cells() -> set[str]:
    """``queues/draft/fifo/produce_w_gry``, ...: every reg and memory of the top by path."""
    text = convert(lookup("top"))
    cells, module = set(), None
    for line in text.splitlines():
        if line.startswith("module "):
            name = line.split()[1].split("(")[0].lstrip("\\")
            module = "/".join(name.split(".")[1:])
            continue
        found = re.match(r"\s+reg (?:\[\d+:\d+\] )?([A-Za-z_]\w*)", line)
        if module is not None and found:
            cells.add(f"{module}/{found.group(1)}" if module else found.group(1))
    return cells


def run_sdc(settings: str) -> list[list[str]]:
    tcl = tkinter.Tcl()
    tcl.eval(STUBS + settings)
    tcl.eval(crossings_sdc())
    calls = tcl.eval("set calls")
    return [list(tcl.splitlist(call)) for call in tcl.splitlist(calls)]


def parse(call: list[str], tcl=None) -> dict:
    """``{command, options..., value}`` of one recorded call (objects as 2-lists)."""
    tcl = tcl or tkinter.Tcl()
    out, i = {"command": call[0]}, 1
    while i < len(call):
        if call[i] in ("-from", "-to", "-name", "-period"):
            value = call[i + 1]
            out[call[i]] = tuple(tcl.splitlist(value)) if " " in value else value
            i += 2
        elif call[i].startswith("-"):
            out[call[i]] = True
            i += 1
        else:
            value = call[i]
            out.setdefault("value", tuple(tcl.splitlist(value)) if " " in value else value)
            i += 1
    return out


@pytest.mark.parametrize(
    ("settings", "inst", "sep", "clocks", "periods"),
    [
        ("", "", "/", {d: f"{d}_clk" for d in CLOCK_TARGETS_MHZ}, None),
        (
            'set AHASD_INST "soc.u_ahasd."; set AHASD_SEP "."; set AHASD_PIM_CLOCK clk_pim; '
            "set AHASD_NPU_CLOCK clk_npu; set AHASD_CPU_CLOCK clk_cpu; set AHASD_CPU_PERIOD 2.5; "
            "set AHASD_CREATE_CLOCKS 1",
            "soc.u_ahasd.",
            ".",
            {"pim": "clk_pim", "npu": "clk_npu", "cpu": "clk_cpu"},
            {"pim": 1.25, "npu": 1.0, "cpu": 2.5},
        ),
    ],
    ids=["defaults", "integrator"],
)
def test_every_crossing_is_constrained_on_cells_of_the_design(
    design_cells, settings, inst, sep, clocks, periods
):
    periods = periods or {d: 1e3 / mhz for d, mhz in CLOCK_TARGETS_MHZ.items()}
    calls = [parse(call) for call in run_sdc(settings)]
    by_clock = {name: domain for domain, name in clocks.items()}
    created = [c for c in calls if c["command"] == "create_clock"]
    assert bool(created) == ("CREATE_CLOCKS 1" in settings)
    for c in created:
        domain = by_clock[c["-name"]]
        assert float(c["-period"]) == periods[domain]
        assert c["value"] == ("ports", f"{domain}_clk")

    def cells(obj) -> str:
        kind, pattern = obj
        assert kind == "cells"
        assert pattern.startswith(inst)
        path = pattern[len(inst) :].replace(sep, "/")
        matching = [cell for cell in design_cells if fnmatch.fnmatchcase(cell, path)]
        assert matching, f"{pattern} matches no register of the design"
        return path

    constrained = {}
    for c in calls:
        if c["command"] == "create_clock":
            continue
        if c["-to"][0] == "clocks":
            path, domain = cells(c["-from"]), by_clock[c["-to"][1]]
            constrained.setdefault((path, domain), set()).add(
                ("hold" if c.get("-hold") else "max", c.get("value"))
            )
        else:  # the reset's assertion: port (or pin) to the reader's synchroniser
            kind, name = c["-from"]
            assert c["command"] == "set_false_path"
            assert (kind, name) == (("ports", name) if not inst else ("pins", name))
            path = cells(c["-to"])
            constrained.setdefault((path, "reset"), set()).add(name[len(inst) :])

    expected = {}
    for queue, (w, r) in QUEUE_DOMAINS.items():
        fifo = f"queues/{queue}/fifo"
        limit = f"{min(periods[w], periods[r]):g}"
        for source, to in (("produce_w_gry*", r), ("consume_r_gry*", w), ("storage*", r)):
            expected[(f"{fifo}/{source}", to)] = {("max", limit), ("hold", None)}
        expected[(f"{fifo}/rst_cdc/stage*", "reset")] = {f"{w}_rst"}
        for source, to in (("reset_request*", r), ("reset_to_reader/stage1*", w)):
            expected[(f"{fifo}/{source}", to)] = {("max", limit), ("hold", None)}
    normalised = {
        key: {(k, f"{float(v):g}" if v is not None else None) for k, v in value}
        if key[1] != "reset"
        else value
        for key, value in constrained.items()
    }
    assert normalised == expected
