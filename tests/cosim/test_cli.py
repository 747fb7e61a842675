"""``ahasd cosim`` command line: user errors exit 2 before anything is built; ``--json`` prints
the model's summary plus the co-simulation's ``cosim`` object (one short run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahasd.cli import main

# The build tests/top and the identity test share (same Verilog text, same directory name).
ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "cocotb" / "verilator"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--mode", "bogus", "unknown mode 'bogus'"),
        ("--policy", "nope", "unknown policy 'nope'"),
        ("--pair", "no-such-pair", "no-such-pair"),
    ],
)
def test_cosim_rejects_bad_names_with_exit_2(option, value, message, capsys, tmp_path):
    args = {"--mode": "ahasd", "--pair": "opt-1.3b-6.7b", "--policy": "fixed", option: value}
    argv = ["cosim", *[x for kv in args.items() for x in kv], "--build-dir", str(tmp_path)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was built


def test_cosim_check_refuses_rtl_latency(capsys, tmp_path):
    argv = ["cosim", "--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "fixed"]
    argv += ["--check", "--rtl-latency", "--build-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "--rtl-latency" in capsys.readouterr().err


def test_cosim_refuses_tvc_widths_that_would_saturate_before_building(capsys, tmp_path):
    argv = ["cosim", "--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "fixed"]
    argv += ["--tvc-ratio-bits", "32", "--tvc-cycle-bits", "32", "--build-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "--tvc-ratio-bits 32: " in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was built


@pytest.mark.cocotb
def test_cosim_json_holds_summary_and_cosim(capsys):
    # A configuration whose TVC values fit the top's 32-bit registers (test_identity.py).
    argv = ["cosim", "--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "fixed"]
    argv += ["--pim", "lpddr5-pim-x16", "--spec-dir", str(ROOT / "tests" / "sim" / "specs")]
    argv += ["--draft-model", "smollm-135m", "--target-model", "qwen2.5-0.5b"]
    argv += ["--draft-queue-tokens", "16"]
    argv += ["--tokens", "32", "--check", "--json", "--build-dir", str(BUILD)]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["mode"] == "ahasd"
    assert result["tokens"] == 32
    assert result["cosim"]["identical"] is True
    assert result["cosim"]["first_divergence"] is None


@pytest.mark.cocotb
@pytest.mark.long
def test_cosim_builds_the_top_with_the_runs_controller_parameters(capsys):
    # Issue 30: with --controller-param the RTL side was built with the defaults and the
    # golden side ran them too, and the run was still called identical. Here both take the
    # parameters (a top of its own), agree with each other and with `ahasd simulate`.
    argv = ["--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "adaedl"]
    argv += ["--pim", "lpddr5-pim-x16", "--spec-dir", str(ROOT / "tests" / "sim" / "specs")]
    argv += ["--draft-model", "smollm-135m", "--target-model", "qwen2.5-0.5b"]
    argv += ["--draft-queue-tokens", "16", "--tokens", "64", "--json"]
    argv += ["--controller-param", "edc.counter_bits=1", "--controller-param", "edc.update=current"]
    assert main(["simulate", *argv]) == 0
    simulated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["cosim", *argv, "--check", "--build-dir", str(BUILD)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["cosim"]["identical"] is True
    assert "edc-" in result["cosim"]["run_dir"]  # not the default top's build
    for key in ("tokens_per_s", "energy_per_token_mj", "drafted", "accepted", "controller"):
        assert result[key] == simulated[key], key
