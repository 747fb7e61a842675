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
    path = tmp_path / "queues.v"
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

    def broken(block, params=None):
        return f"module {block.name}(input a, output b);\nassign b = c;\nendmodule\n"

    monkeypatch.setattr(cli, "convert", broken)
    assert main(["verilog", "--out", str(tmp_path), "queues"]) == 1
    assert "LINT ERRORS" in capsys.readouterr().out


def test_icarus_variant_runs_every_combinational_block_at_time_zero():
    from ahasd.hw.blocks import lookup
    from ahasd.hw.tb.build import icarus_time_zero_fix
    from ahasd.hw.verilog import convert

    text = convert(lookup("edc"))
    triggers = text.count("verilog_backend.cc")  # declarations and sensitivity uses
    fixed = icarus_time_zero_fix(text)
    declared = [line for line in text.splitlines() if "dump_module$" in line and "reg " in line]
    assert declared, "Amaranth's Verilog no longer declares yosys' dummy trigger"
    assert fixed.count("initial #0") == len(declared)
    assert fixed.count("verilog_backend.cc") == triggers + len(declared)
