"""``ahasd verilog``: deterministic text, stable mtimes, lint, and the unknown-block error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ahasd.cli import main
from ahasd.hw.blocks import BLOCKS


def _convert_in_fresh_interpreter(block: str, hash_seed: str) -> str:
    """The block's Verilog from a new interpreter with a given string-hash seed."""
    code = (
        "import sys; from ahasd.hw.blocks import lookup; from ahasd.hw.verilog import convert; "
        f"sys.stdout.write(convert(lookup({block!r})))"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_verilog_text_does_not_depend_on_the_interpreter(block):
    assert _convert_in_fresh_interpreter(block, "1") == _convert_in_fresh_interpreter(block, "2")


def test_unchanged_text_keeps_its_mtime_and_lints_clean(tmp_path, capsys):
    assert main(["verilog", "--out", str(tmp_path), "queues"]) == 0
    path = tmp_path / "ahasd_queues.v"
    os.utime(path, (1_000_000, 1_000_000))
    assert main(["verilog", "--out", str(tmp_path), "queues"]) == 0
    assert path.stat().st_mtime == 1_000_000
    out = capsys.readouterr().out
    assert "(unchanged, lint clean)" in out
    assert str(tmp_path.resolve()) in out


def test_unknown_block_lists_the_known_ones_and_exits_2(capsys):
    assert main(["verilog", "no-such-block"]) == 2
    err = capsys.readouterr().err
    assert "unknown block 'no-such-block'" in err
    for name in BLOCKS:
        assert name in err


def test_lint_errors_exit_1(tmp_path, monkeypatch, capsys):
    from ahasd.cli import hw as cli

    def broken(block, params=None, prefix="ahasd_"):
        return f"module {prefix}{block.name}(input a, output b);\nassign b = c;\nendmodule\n"

    monkeypatch.setattr(cli, "convert", broken)
    assert main(["verilog", "--out", str(tmp_path), "queues"]) == 1
    assert "LINT ERRORS" in capsys.readouterr().out


def test_every_combinational_block_runs_at_time_zero_outside_verilator_and_synthesis():
    from ahasd.hw.blocks import lookup
    from ahasd.hw.verilog import convert

    text = convert(lookup("edc"))
    declared = [line for line in text.splitlines() if "dump_module$" in line and "reg " in line]
    assert declared, "Amaranth's Verilog no longer declares yosys' dummy trigger"
    lines = text.splitlines()
    for line in declared:
        at = lines.index(line)
        name = line.split("reg ", 1)[1].split(" = ")[0]
        assert lines[at + 1 : at + 6] == [
            "`ifndef SYNTHESIS",
            "`ifndef VERILATOR",
            f"{line[: len(line) - len(line.lstrip())]}initial #0 {name} = 1'b1;",
            "`endif",
            "`endif",
        ]


def test_prefix_names_every_module_and_the_waiver_file_alone_makes_lint_clean(tmp_path):
    """Another prefix reaches every module; ``verilator --lint-only -Wall`` with the shipped
    ``ahasd.vlt`` (and no waiver on the command line) is clean, and without it is not."""
    from ahasd.hw.blocks import lookup
    from ahasd.hw.tb.build import module_ports
    from ahasd.hw.verilog import WAIVER_FILE, convert, lint, waiver_file

    text = convert(lookup("top"), prefix="soc7_")
    modules = [
        line.split()[1].lstrip("\\") for line in text.splitlines() if line.startswith("module ")
    ]
    assert modules[0].startswith("soc7_top(")
    assert all(name.startswith("soc7_top") for name in modules), modules
    assert module_ports(text, "soc7_top")
    path = tmp_path / "soc7_top.v"
    path.write_text(text)
    (tmp_path / WAIVER_FILE).write_text(waiver_file("soc7_"))
    result = lint(path, "soc7_top")
    assert result.ok, result.output
    (tmp_path / "empty.vlt").write_text("`verilator_config\n")
    assert not lint(path, "soc7_top", waivers=tmp_path / "empty.vlt").ok


def test_a_prefix_that_is_no_verilog_identifier_is_refused(capsys):
    assert main(["verilog", "--prefix", "9-bad", "queues", "--out", "/tmp/never"]) == 2
    assert "--prefix" in capsys.readouterr().err
