"""``tests/harness/equiv.py`` on designs small enough to judge by eye: the same design, and the
same design with its registers moved into a submodule (names stripped of its prefix), are
equivalent; a design that adds one more per cycle is not, and the command line says so with
exit status 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.equiv import check

SCRIPT = Path(__file__).with_name("equiv.py")

# A delay register feeding an accumulator, observed only through a compare.
FLAT = """
module acc(input clk, input rst, input [3:0] x, output hit);
  reg [7:0] count; reg [3:0] delayed;
  always @(posedge clk)
    if (rst) begin count <= 0; delayed <= 0; end
    else begin delayed <= x; count <= count + delayed; end
  assign hit = count == 8'd77;
endmodule
"""
# The same registers inside a submodule u.
NESTED = """
module inner(input clk, input rst, input [3:0] x, output [7:0] total);
  reg [7:0] count; reg [3:0] delayed;
  always @(posedge clk)
    if (rst) begin count <= 0; delayed <= 0; end
    else begin delayed <= x; count <= count + delayed; end
  assign total = count;
endmodule
module acc(input clk, input rst, input [3:0] x, output hit);
  wire [7:0] total;
  inner u(.clk(clk), .rst(rst), .x(x), .total(total));
  assign hit = total == 8'd77;
endmodule
"""
# Counts one more per cycle: hit comes at another time.
OFF_BY_ONE = FLAT.replace("count + delayed", "count + delayed + 8'd1")


@pytest.fixture
def designs(tmp_path):
    paths = {}
    for name, text in {"flat": FLAT, "nested": NESTED, "off": OFF_BY_ONE}.items():
        paths[name] = tmp_path / f"{name}.v"
        paths[name].write_text(text)
    return paths


def test_a_design_is_equivalent_to_itself(designs):
    equivalent, verdict = check(designs["flat"], designs["flat"], "acc")
    assert equivalent, verdict
    assert verdict.startswith("acc: equivalent")


def test_registers_moved_into_a_submodule_are_paired_by_their_stripped_names(designs):
    equivalent, verdict = check(designs["flat"], designs["nested"], "acc", strip=["u."])
    assert equivalent, verdict


def test_a_changed_adder_is_reported_not_equivalent(designs):
    equivalent, verdict = check(designs["flat"], designs["off"], "acc")
    assert not equivalent
    assert verdict.startswith("acc: NOT equivalent")


def run_command_line(*arguments):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, arguments)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_command_line_exits_1_with_one_line_for_different_designs(designs):
    run = run_command_line(designs["nested"], designs["off"], "acc")
    assert run.returncode == 1
    assert run.stdout.count("\n") == 1
    assert run.stdout.startswith("acc: NOT equivalent")


def test_the_command_line_exits_0_for_the_same_design(designs):
    run = run_command_line(designs["flat"], designs["flat"], "acc")
    assert (run.returncode, run.stdout.strip()[:15]) == (0, "acc: equivalent")


def test_the_command_line_takes_the_prefixes_to_strip(designs):
    run = run_command_line(designs["flat"], designs["nested"], "acc", "--strip", "u.")
    assert (run.returncode, run.stdout.strip()[:15]) == (0, "acc: equivalent")
