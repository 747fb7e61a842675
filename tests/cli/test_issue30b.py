"""The rest of issue 30: tracebacks and hangs, promises not kept, messages.

Each test failed before its fix. Expected values come from the issue's wording, the files on
disk or a second path (the file system's own limits, ``ahasd simulate``), never from the
code under test.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahasd.sim import policies

ROOT = Path(__file__).resolve().parents[2]
RUN = ["simulate", "--mode", "ahasd", "--pair", "llama2-7b-13b", "--policy"]
SWEEP = [
    "sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "gpu-only",
    "pim-async", "--tokens", "16", "--jobs", "1",
]  # fmt: skip


# -- tracebacks and hangs ------------------------------------------------------------------


def test_the_issues_policy_noise_runs(ahasd):
    outcome = ahasd(*RUN, "specdecpp", "--policy-param", "noise=300", "--tokens", "256")
    assert outcome.code == 0, outcome.err


def _keyword_parameters():
    """Every (policy, parameter) pair, read from the policy classes' signatures."""
    for cls in vars(policies).values():
        if isinstance(cls, type) and getattr(cls, "name", None) in policies.POLICY_NAMES:
            for p in inspect.signature(cls.__init__).parameters.values():
                if p.kind is inspect.Parameter.KEYWORD_ONLY:
                    yield cls.name, p.name


@pytest.mark.parametrize(("policy", "name"), sorted(_keyword_parameters()))
@pytest.mark.parametrize("value", ["1e400", "1e308", '"no"'], ids=["inf", "huge", "string"])
def test_no_policy_parameter_value_is_a_traceback(ahasd, policy, name, value):
    outcome = ahasd(*RUN, policy, "--tokens", "32", "--policy-param", f"{name}={value}")
    if outcome.code != 0:
        line = outcome.one_line_error()
        assert name in line
    elif value != "1e308":
        # Infinity and a string are never a parameter's value: they are refused.
        pytest.fail(f"{policy} {name}={value} was accepted")


def test_a_string_is_not_a_switch_in_policy_parameters(ahasd):
    line = ahasd(*RUN, "specdecpp", "--policy-param", "first_is_one=no").one_line_error()
    assert "first_is_one" in line
    assert "true or false" in line


@pytest.mark.parametrize("bits", [1, 4, 7])
def test_a_tvc_length_width_too_narrow_is_refused_naming_it(ahasd, bits):
    # prompt 128 + 64 tokens = 192 needs 8 bits.
    line = ahasd(
        *RUN, "fixed", "--tokens", "64", "--controller-param", f"tvc.length_bits={bits}"
    ).one_line_error()
    assert f"tvc.length_bits={bits}" in line
    assert "192" in line


def test_a_tvc_length_width_that_fits_runs(ahasd):
    outcome = ahasd(*RUN, "fixed", "--tokens", "64", "--controller-param", "tvc.length_bits=8")
    assert outcome.code == 0, outcome.err


def _grid_refusal(ahasd, tmp_path, axes: str, *options) -> tuple[str, Path, Path]:
    """A sweep of ``axes`` (the grid file's ``[axes]`` body) refused: its one-line error,
    the grid file and the ``--out`` folder (which must not exist after a refusal)."""
    grid = tmp_path / "grid.toml"
    grid.write_text(f"[axes]\n{axes}")
    out = tmp_path / "sweep"
    line = ahasd(*SWEEP[:5], "--tokens", "16", *options, "--grid", grid, "--out", out)
    return line.one_line_error(), grid, out


def test_a_tvc_length_width_in_a_grid_is_refused_before_the_sweep(ahasd, tmp_path):
    line, _, out = _grid_refusal(ahasd, tmp_path, 'mode = ["ahasd"]\n"tvc.length_bits" = [4]\n')
    assert "tvc.length_bits=4" in line
    assert not out.exists()


def _results(tmp_path: Path, text: str) -> Path:
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "results.jsonl").write_text(text)
    return out


@pytest.mark.parametrize("command", ["report", "sweep"])
@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"run_id": [1]}, "run_id"),
        ({"mode": None}, "mode"),
        ({"key": {"a": 1}}, "key"),
        ({"tokens_per_s": "fast"}, "tokens_per_s"),
    ],
    ids=["list-run-id", "null-mode", "table-key", "string-figure"],
)
def test_a_corrupt_results_row_names_file_line_and_field(ahasd, tmp_path, command, row, field):
    good = {
        "mode": "gpu-only", "pair": "opt-1.3b-6.7b", "policy": "fixed", "tokens": 16,
        "tokens_per_s": 10.0, "energy_per_token_mj": 5.0, "acceptance_rate": 0.5, "drafted": 9,
        "accepted": 4, "run_id": "a", "key": "k",
    }  # fmt: skip
    out = _results(tmp_path, json.dumps(good) + "\n" + json.dumps({**good, **row}) + "\n")
    argv = ["report", "--results", out] if command == "report" else [*SWEEP, "--out", out]
    line = ahasd(*argv).one_line_error()
    assert f"{out / 'results.jsonl'}: line 2" in line
    assert f"'{field}'" in line


@pytest.mark.parametrize("command", ["report", "sweep"])
def test_a_results_row_without_mode_names_file_and_line(ahasd, tmp_path, command):
    out = _results(tmp_path, '{"run_id": "a", "key": "x", "pair": "p"}\n')
    argv = ["report", "--results", out] if command == "report" else [*SWEEP, "--out", out]
    line = ahasd(*argv).one_line_error()
    assert f"{out / 'results.jsonl'}: line 1" in line
    assert "mode" in line


def test_cosim_refuses_a_synchronous_mode_before_building(ahasd, tmp_path):
    build = tmp_path / "build"
    line = ahasd(
        "cosim", "--mode", "gpu-only", "--pair", "llama2-7b-13b", "--policy", "fixed",
        "--tokens", "16", "--build-dir", build,
    ).one_line_error()  # fmt: skip
    assert "gpu-only" in line
    assert not build.exists()


NAME_MAX = os.pathconf("/", "PC_NAME_MAX")


@pytest.mark.parametrize(
    "command",
    [
        ["regmap"],
        ["simulate", "--mode", "npu-only", "--pair", "opt-1.3b-6.7b", "--policy", "fixed",
         "--tokens", "16"],
        SWEEP,
        ["trace", "gen", "--iid", "0.5", "--length", "8"],
    ],
    ids=["regmap", "simulate", "sweep", "trace-gen"],
)  # fmt: skip
@pytest.mark.parametrize("deep", [False, True], ids=["last", "inner"])
def test_an_out_name_over_the_file_systems_limit_is_one_line(ahasd, tmp_path, command, deep):
    long = tmp_path / ("x" * (NAME_MAX + 1))
    target = long / "y" if deep else long
    line = ahasd(*command, "--out", target).one_line_error()
    assert str(target) in line
    assert str(NAME_MAX) in line
    assert list(tmp_path.iterdir()) == []


def test_a_results_path_over_the_limit_is_one_line(ahasd, tmp_path):
    line = ahasd("report", "--results", tmp_path / ("x" * (NAME_MAX + 1))).one_line_error()
    assert "x" * (NAME_MAX + 1) in line


def _ahasd_process(*argv, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ahasd.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        **options,
    )


def test_a_closed_stdout_is_one_line_before_any_work(tmp_path):
    out = tmp_path / "regmap.h"
    done = subprocess.run(
        [sys.executable, "-m", "ahasd.cli", "regmap", "--out", str(out)],
        stdout=None,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        # The child's descriptor 1 is closed, as `ahasd ... >&-` leaves it.
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert "standard output" in done.stderr
    assert not out.exists()


def _catches_sigint(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGINT (Linux: /proc/PID/status)."""
    import signal

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    return False


def test_ctrl_c_during_verilog_elaboration_exits_130_writing_nothing(tmp_path):
    # As a terminal delivers Ctrl-C: SIGINT to the whole foreground process group, while the
    # blocks are being elaborated (seconds before anything is written).
    import signal
    import time

    out = tmp_path / "verilog"
    child = subprocess.Popen(
        [sys.executable, "-m", "ahasd.cli", "verilog", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # Once Python catches SIGINT (before that the default action ends it, as for any
    # program), and a second into the work.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _catches_sigint(child.pid):
        time.sleep(0.05)
    time.sleep(1)
    os.killpg(child.pid, signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert not out.exists()


# -- promises not kept -------------------------------------------------------------------


def test_report_is_byte_identical_whatever_order_the_runs_finished_in(ahasd, tmp_path):
    first = tmp_path / "first"
    sweep = [
        "sweep", "--pairs", "llama2-7b-13b", "opt-1.3b-6.7b", "--policies", "fixed", "adaedl",
        "--modes", "ahasd", "npu-only", "--seeds", "0", "1", "2", "--tokens", "16",
        "--jobs", "1", "--out", first,
    ]  # fmt: skip
    assert ahasd(*sweep).code == 0
    lines = (first / "results.jsonl").read_text().splitlines(keepends=True)
    # Another finishing order, as a --jobs 2 sweep appends them: reversed.
    second = tmp_path / "second"
    second.mkdir()
    (second / "results.jsonl").write_text("".join(reversed(lines)))
    for folder in (first, second):
        assert ahasd("report", "--results", folder).code == 0
    for name in ("ablation.csv", "comparison.csv", "ladder.csv", "reading.txt", "ablation.png"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_a_grid_policy_parameter_is_checked_before_the_lock(ahasd, tmp_path):
    axes = 'mode = ["ahasd"]\n"policy_params.nope" = [1]\n'
    line, _, out = _grid_refusal(ahasd, tmp_path, axes)
    assert "'nope'" in line
    assert not out.exists()


def test_a_phone_runs_unknown_policy_is_refused_before_any_mode_runs(ahasd):
    outcome = ahasd("simulate", "--platform", "sd8gen3", "--mode", "all", "--policy", "nope",
                    "--duration", "30", "--tokens", "16")  # fmt: skip
    line = outcome.one_line_error()
    assert "'nope'" in line
    assert "simulated s" not in outcome.err  # no progress: nothing ran


def test_backend_ray_without_ray_is_refused_before_the_lock(ahasd, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    out = tmp_path / "sweep"
    line = ahasd(*SWEEP, "--backend", "ray", "--out", out).one_line_error()
    assert "Ray" in line
    assert not out.exists()


def test_address_without_backend_ray_is_refused(ahasd, tmp_path):
    out = tmp_path / "sweep"
    line = ahasd(*SWEEP, "--address", "127.0.0.1:6379", "--out", out).one_line_error()
    assert "--address" in line
    assert "--backend ray" in line
    assert not out.exists()


@pytest.mark.parametrize("seed", [2**32, -1])
def test_a_grid_seed_outside_the_command_lines_range_is_refused(ahasd, tmp_path, seed):
    grid = tmp_path / "grid.toml"
    grid.write_text(f"[axes]\nseed = [{seed}]\n")
    out = tmp_path / "sweep"
    line = ahasd(*SWEEP, "--grid", grid, "--out", out).one_line_error()
    assert str(grid) in line
    assert str(seed) in line
    assert str(2**32 - 1) in line  # the --seed bound
    assert not out.exists()


@pytest.mark.parametrize(
    ("axes", "option"),
    [
        ('tvc_cycle_bits = [40]\n"tvc.cycle_bits" = [44]\n', []),
        ('"devices.@npu.eta_memory" = [0.5]\n"devices.npu-mobile.eta_memory" = [0.6]\n', []),
        ('"devices.@npu.eta_memory" = [0.5]\n', ["--spec-override", "devices.@npu.eta_memory=0.4"]),
        ('"edc.llr_bits" = [2]\n', ["--controller-param", "edc.llr_bits=3"]),
    ],
    ids=["setting-and-controller", "role-and-name", "option-and-axis", "controller-option"],
)
def test_two_setters_of_one_field_are_refused(ahasd, tmp_path, axes, option):
    line, grid, out = _grid_refusal(ahasd, tmp_path, f'mode = ["ahasd"]\n{axes}', *option)
    assert str(grid) in line
    assert "both set" in line
    assert not out.exists()


@pytest.mark.parametrize("option", ["--tokens", "--seed", "--duration"])
def test_digits_of_other_scripts_are_not_numbers(ahasd, option):
    arabic_indic_32 = "\u0663\u0662"
    assert int(arabic_indic_32) == 32  # what Python alone would take
    argv = ["simulate", "--platform", "sd8gen3"] if option == "--duration" else [*RUN, "fixed"]
    line = ahasd(*argv, option, arabic_indic_32).one_line_error()
    assert option in line


def test_a_nan_row_is_not_reused_on_resume(ahasd, tmp_path):
    out = tmp_path / "sweep"
    assert ahasd(*SWEEP, "--out", out).code == 0
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    row = json.loads(lines[0])
    row["tokens_per_s"] = float("nan")
    lines[0] = json.dumps(row) + "\n"  # Python writes NaN; JSON has none
    results.write_text("".join(lines))
    before = results.read_bytes()
    line = ahasd(*SWEEP, "--out", out).one_line_error()
    assert f"{results}: line 1" in line
    assert results.read_bytes() == before


def test_a_resumed_sweep_with_nothing_to_run_leaves_its_results_alone(ahasd, tmp_path):
    out = tmp_path / "sweep"
    assert ahasd(*SWEEP, "--out", out).code == 0
    results = out / "results.jsonl"
    old = 1_000_000_000_000_000_000  # 2001, in ns: any change would move it
    os.utime(results, ns=(old, old))
    again = ahasd(*SWEEP, "--out", out)
    assert again.code == 0, again.err
    assert "0 new" in again.out
    assert results.stat().st_mtime_ns == old


def test_a_rewritten_output_keeps_its_permissions(ahasd, tmp_path):
    out = tmp_path / "t.jsonl"
    gen = ["trace", "gen", "--iid", "0.5", "--length", "8", "--out", out]
    assert ahasd(*gen, "--seed", "1").code == 0
    out.chmod(0o640)
    first = out.read_bytes()
    assert ahasd(*gen, "--seed", "2").code == 0
    assert out.read_bytes() != first  # it was rewritten
    assert out.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    "command",
    [
        ["regmap"],
        ["simulate", "--mode", "npu-only", "--pair", "opt-1.3b-6.7b", "--policy", "fixed",
         "--tokens", "16"],
        SWEEP,
        ["report", "--results", "RESULTS"],
        ["verilog", "queues"],
    ],
    ids=["regmap", "simulate", "sweep", "report", "verilog"],
)  # fmt: skip
def test_an_empty_out_is_refused(ahasd, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    line = ahasd(*command, "--out", "").one_line_error()
    assert "--out" in line
    assert list(tmp_path.iterdir()) == []


# -- messages -----------------------------------------------------------------------------


def _trace_lines(ahasd, tmp_path: Path) -> list[str]:
    path = tmp_path / "t.jsonl"
    assert ahasd("trace", "gen", "--iid", "0.5", "--length", "6", "--out", path).code == 0
    return path.read_text().splitlines()


def test_a_blank_line_in_a_trace_is_called_blank(ahasd, tmp_path):
    lines = _trace_lines(ahasd, tmp_path)
    lines.insert(3, "")
    path = tmp_path / "blank.jsonl"
    path.write_text("\n".join(lines) + "\n")
    line = ahasd("trace", "info", path).one_line_error()
    assert "line 4" in line
    assert "blank" in line
    assert "unexpected" not in line


def test_a_duplicate_header_key_is_named_not_called_truncation(ahasd, tmp_path):
    lines = _trace_lines(ahasd, tmp_path)
    header = json.loads(lines[0])
    lines[0] = lines[0][:-1] + f', "length": {header["length"] + 3}}}'
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join(lines) + "\n")
    line = ahasd("trace", "info", path).one_line_error()
    assert "'length'" in line
    assert "twice" in line
    assert "truncated" not in line


def test_a_tvc_width_set_by_controller_param_is_named_as_such(ahasd):
    line = ahasd(
        *RUN, "fixed", "--tokens", "64", "--controller-param", "tvc.cycle_bits=16"
    ).one_line_error()
    assert line.startswith("ahasd: error: --controller-param tvc.cycle_bits=16:")
    assert "--tvc-cycle-bits" not in line


@pytest.mark.parametrize(
    ("argv", "bounds"),
    [
        ([*RUN, "fixed", "--tvc-ratio-bits"], "16..48"),
        ([*RUN, "fixed", "--tvc-cycle-bits"], "16..48"),
        (["simulate", "--platform", "sd8gen3", "--skin-limit"], "42..45"),
        (["simulate", "--platform", "sd8gen3", "--ambient"], "-20..60"),
        (["simulate", "--platform", "sd8gen3", "--start-temp"], "-20..60"),
        (["timing", "--seed"], f"0..{2**32 - 1}"),
        (["trace", "record", "ngram", "--prompt-index"], "0 up to the corpus's count"),
    ],
)
def test_every_number_option_states_its_bounds(ahasd, argv, bounds):
    line = ahasd(*argv, "x").one_line_error()
    assert bounds in line
    assert "invalid" not in line


@pytest.mark.parametrize("character", ["\n", "\r", "\x1b"], ids=["newline", "return", "escape"])
def test_an_error_naming_a_path_with_a_control_character_is_one_line(ahasd, character):
    line = ahasd(*RUN, "fixed", "--trace", f"a{character}b").one_line_error()
    assert repr(character)[1:-1] in line  # escaped as in a Python literal
    assert character not in line


def test_cosim_out_files_carry_a_schema(ahasd, tmp_path, monkeypatch):
    from ahasd.sim.cosim import CosimRun

    def run_cosim(job, params, *, run_name, build_root, waves=False):
        # Without Verilator: the files' shape is what is tested, not the RTL.
        run_dir = Path(build_root) / run_name
        run_dir.mkdir(parents=True)
        result = run_dir / "result.json"
        summary = {"mode": "ahasd", "tokens_per_s": 1.0}
        stats = {"calls": 1, "identical": None, "irq": False}
        result.write_text(
            json.dumps({"summary": summary, "log": [[0, "x", {}, 1]], "cosim": stats})
        )
        return CosimRun(run_dir, result, run_dir / "log", None)

    monkeypatch.setattr("ahasd.sim.cosim.run_cosim", run_cosim)
    out = tmp_path / "out"
    ahasd(*["cosim", *RUN[1:], "fixed", "--tokens", "16", "--json", "--out", out,
            "--build-dir", tmp_path / "b"])  # fmt: skip
    docs = (ROOT / "docs" / "json.md").read_text()
    for name in ("summary.json", "cosim.json", "decisions.json"):
        document = json.loads((out / name).read_text())
        assert isinstance(document, dict), name
        assert f"`{document['schema']}`" in docs, name  # documented
    assert json.loads((out / "decisions.json").read_text())["decisions"] == [[0, "x", {}, 1]]


# -- found by the fuzz of the classes (tests/cli/test_fuzz_classes.py) ----------------------


def test_a_policy_number_past_a_floats_range_is_one_line(ahasd):
    line = ahasd(*RUN, "specdecpp", "--policy-param", f"noise={'9' * 400}").one_line_error()
    assert "noise" in line


@pytest.mark.parametrize(
    ("field", "value"),
    [("tokens_per_s", "9" * 400), ("accepted", None), ("busy_s", "[1]")],
    ids=["figure-past-float", "no-accepted", "busy-not-a-map"],
)
def test_a_results_row_the_report_cannot_read_is_named(ahasd, tmp_path, field, value):
    row = {
        "mode": "gpu-only", "pair": "opt-1.3b-6.7b", "policy": "fixed", "tokens": 16,
        "tokens_per_s": 10.0, "energy_per_token_mj": 5.0, "acceptance_rate": 0.5, "drafted": 9,
        "accepted": 4,
    }  # fmt: skip
    text = json.dumps({k: v for k, v in row.items() if k != field})
    if value is not None:
        text = text[:-1] + f', "{field}": {value}}}'
    out = _results(tmp_path, text + "\n")
    line = ahasd("report", "--results", out).one_line_error()
    assert "line 1" in line
    assert field in line


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_a_finalizer_swallowed_still_stops_the_command(ahasd, tmp_path, monkeypatch):
    # What happened under load in `ahasd verilog`: Ctrl-C arrived while amaranth's
    # MustUse.__del__ ran; Python prints and drops an exception raised in a finalizer, and the
    # command wrote its files and exited 0.
    import gc
    import signal

    from ahasd.cli import hw

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered inside __del__

    real = hw.convert

    def convert(block, **options):
        Finalized()  # collected at once, its __del__ interrupted
        gc.collect()
        return real(block, **options)

    monkeypatch.setattr(hw, "convert", convert)
    out = tmp_path / "verilog"
    outcome = ahasd("verilog", "queues", "--out", out)
    assert outcome.code == 130, outcome.err
    assert not out.exists()
    # The dropped exception is not printed as a traceback (it was recorded, and said once).
    assert "Traceback" not in outcome.err, outcome.err
    assert outcome.err.strip().splitlines()[-1] == "ahasd: interrupted"
