"""Every case of the adversarial-user report (issue 20), each a test.

A refusal is one line on stderr, exit status 2, no traceback, and the output folder exactly
as it was (nothing written, nothing half-written). Expected messages are written from the
issue's wording and the documented limits, not copied from the code.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from harness.cli import snapshot

from ahasd.sim.library.loading import BUILTIN_SPEC_DIR
from ahasd.sim.modes import MODES

RUN = ["simulate", "--mode", "pim-async", "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
SHORT = ["--tokens", "16"]
PHONE = ["simulate", "--platform", "sd8gen3", "--duration", "2", "--tokens", "64"]
SWEEP = [
    "sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "gpu-only",
    "pim-async", "--tokens", "16", "--jobs", "1",
]  # fmt: skip


@pytest.fixture
def results(tmp_path, ahasd):
    """A small finished sweep (results.jsonl) in tmp_path/sweep."""
    assert ahasd(*SWEEP, "--out", tmp_path / "sweep").code == 0
    return tmp_path / "sweep"


# -- output paths -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [*RUN, *SHORT],
        PHONE,
        SWEEP,
        ["report", "--results", "RESULTS"],
        ["verilog", "queues"],
    ],
    ids=["simulate", "phone", "sweep", "report", "verilog"],
)
def test_out_naming_an_existing_file_is_one_line_and_writes_nothing(
    tmp_path, ahasd, results, command
):
    command = [str(results) if part == "RESULTS" else part for part in command]
    blocker = tmp_path / "taken"
    blocker.write_text("mine\n")
    before = snapshot(tmp_path)
    line = ahasd(*command, "--out", blocker).one_line_error()
    assert line == f"ahasd: error: --out {blocker}: is a file, not a folder"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "command",
    [[*RUN, *SHORT], PHONE, SWEEP, ["trace", "gen", "--iid", "0.5", "--length", "8"]],
    ids=["simulate", "phone", "sweep", "trace-gen"],
)
def test_out_in_an_unwritable_place_is_one_line_naming_it(ahasd, command):
    # /proc takes no new entries, whoever runs the test (root included).
    target = "/proc/ahasd-out/x.jsonl" if "trace" in command else "/proc/ahasd-out"
    line = ahasd(*command, "--out", target).one_line_error()
    assert line.startswith(f"ahasd: error: --out {target}: cannot write in /proc (")


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ([*RUN, *SHORT], "run.png"),
        ([*RUN, *SHORT], "chrome_trace.json"),
        (PHONE, "phone.png"),
        (["report", "--results", "RESULTS"], "ablation.png"),
        (["verilog", "queues"], "ahasd_queues.v"),
    ],
    ids=["simulate-png", "simulate-json", "phone-png", "report-png", "verilog"],
)
def test_a_folder_where_a_file_goes_is_refused_before_anything_is_written(
    tmp_path, ahasd, results, command, name
):
    command = [str(results) if part == "RESULTS" else part for part in command]
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    before = snapshot(tmp_path)
    line = ahasd(*command, "--out", out).one_line_error()
    assert line == f"ahasd: error: --out {out / name}: is a folder, not a file"
    assert snapshot(tmp_path) == before


def test_trace_gen_out_naming_a_folder(tmp_path, ahasd):
    line = ahasd("trace", "gen", "--iid", "0.5", "--out", tmp_path).one_line_error()
    assert line == f"ahasd: error: --out {tmp_path}: is a folder, not a file"
    assert list(tmp_path.iterdir()) == []


def test_a_failure_while_writing_leaves_the_previous_output_set(tmp_path, ahasd, monkeypatch):
    out = tmp_path / "run"
    assert ahasd(*RUN, *SHORT, "--out", out).code == 0
    before = snapshot(tmp_path)
    from ahasd import output

    real_stage = output._stage
    staged = []

    def full_after_two(path, data, mode):
        if len(staged) == 2:
            raise OSError(28, "No space left on device")
        staged.append(path)
        return real_stage(path, data, mode)

    monkeypatch.setattr(output, "_stage", full_after_two)
    # Another seed: every file's bytes change, so every file is staged.
    line = ahasd(*RUN, *SHORT, "--seed", "5", "--out", out).one_line_error()
    assert "cannot write (No space left on device); nothing of this output set was written" in line
    assert snapshot(tmp_path) == before


def test_stdout_on_a_full_device_is_one_line(ahasd, monkeypatch):
    class Full:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    outcome = ahasd("trace", "list")
    assert outcome.one_line_error() == (
        "ahasd: error: cannot write to standard output (No space left on device)"
    )


def test_stdout_on_dev_full_in_a_real_process_says_one_line():
    if not os.path.exists("/dev/full"):
        pytest.fail("/dev/full is missing: the test needs a Linux machine")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "ahasd.cli", "regmap"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert done.returncode == 2
    assert (
        done.stderr == "ahasd: error: cannot write to standard output (No space left on device)\n"
    )


# -- bounds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["trace", "gen", "--iid", "0.5", "--seed", "-1", "--out", "x.jsonl"],
            "ahasd trace gen: --seed: must be an integer in 0..4294967295, not '-1'",
        ),
        (
            ["trace", "record", "ngram", "--seed", "-1", "--out", "x.jsonl"],
            "ahasd trace record ngram: --seed: must be an integer in 0..4294967295, not '-1'",
        ),
        (
            ["trace", "gen", "--iid", "0.5", "--length", str(10**13), "--out", "x.jsonl"],
            "ahasd trace gen: --length: must be an integer in 1..1000000, not '10000000000000'",
        ),
        (
            ["trace", "record", "ngram", "--length", str(10**13), "--out", "x.jsonl"],
            "ahasd trace record ngram: --length: must be an integer in 1..100000, "
            "not '10000000000000'",
        ),
        (
            [*RUN, "--tokens", str(10**13)],
            "ahasd simulate: --tokens: must be an integer in 1..65534, not '10000000000000'",
        ),
        (
            ["trace", "info", "stdlib-code-t0.7-a", "--bins", str(10**13)],
            "ahasd trace info: --bins: must be an integer in 1..200, not '10000000000000'",
        ),
        (
            ["simulate", "--platform", "sd8gen3", "--duration", "1e12"],
            "ahasd simulate: --duration: must be a number in (0, 86400], not '1e12'",
        ),
        (
            [*SWEEP, "--jobs", "1000"],
            "ahasd sweep: --jobs: must be an integer in 1..64, not '1000'",
        ),
    ],
)
def test_numbers_out_of_bounds_are_refused_with_the_limit(
    tmp_path, monkeypatch, ahasd, argv, expected
):
    monkeypatch.chdir(tmp_path)
    line = ahasd(*argv).one_line_error()
    command = expected.split(":")[0]
    assert line == f"{expected} (see {command} --help)"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode", MODES)
def test_prompt_plus_tokens_beyond_the_16_bit_fields_is_refused_in_every_mode(ahasd, mode):
    argv = ["simulate", "--mode", mode, "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
    line = ahasd(*argv, "--prompt-tokens", "65530", "--tokens", "16").one_line_error()
    assert line.startswith(
        "ahasd: error: --prompt-tokens 65530 + --tokens 16 = 65546 is more than 65535"
    )


@pytest.mark.parametrize("mode", ["gpu-only", "ahasd"])
def test_prompt_plus_tokens_at_the_limit_runs_in_every_kind_of_mode(ahasd, mode):
    argv = ["simulate", "--mode", mode, "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
    outcome = ahasd(*argv, "--prompt-tokens", "65519", "--tokens", "16", "--json")
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["tokens"] == 16


def test_the_phone_scenario_keeps_the_same_length_limit(ahasd):
    line = ahasd(*PHONE[:-2], "--prompt-tokens", "65530", "--tokens", "16").one_line_error()
    assert "65546 is more than 65535" in line


def test_sweep_refuses_the_same_lengths(tmp_path, ahasd):
    outcome = ahasd(*SWEEP, "--prompt-tokens", "65530", "--out", tmp_path / "s")
    assert "is more than 65535" in outcome.one_line_error()
    assert not (tmp_path / "s").exists()


# -- malformed inputs ---------------------------------------------------------------------


def _header(**changes) -> dict:
    header = {
        "format": "ahasd-trace", "version": 1, "pair": "p", "draft_model": "d",
        "target_model": "t", "prompt_id": "x", "temperature": 1.0, "source": "synthetic",
        "length": 1, "columns": ["entropy", "top1", "beta", "target_entropy"], "meta": {},
    }  # fmt: skip
    header.update(changes)
    return header


def test_a_trace_header_nested_100000_levels_is_one_line(tmp_path, ahasd):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"format": "ahasd-trace", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    line = ahasd("trace", "info", path).one_line_error()
    assert line == (
        f"ahasd: error: {path}: header (line 1): nested 100,001 levels deep; a header nests "
        "at most 32"
    )


def test_version_true_in_a_trace_header_is_refused(tmp_path, ahasd):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_header(version=True)) + "\n[0.5, 0.9, 0.7, null]\n")
    line = ahasd("trace", "info", path).one_line_error()
    assert line.startswith(f"ahasd: error: {path}: header (line 1), field 'version': ")
    assert "True" in line


def test_the_same_header_with_version_1_is_read(tmp_path, ahasd):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_header()) + "\n[0.5, 0.9, 0.7, null]\n")
    assert ahasd("trace", "info", path).code == 0


def test_a_non_utf8_toml_in_a_spec_dir_is_one_line(tmp_path, ahasd):
    spec = tmp_path / "specs" / "devices" / "npu-mobile.toml"
    spec.parent.mkdir(parents=True)
    spec.write_bytes(b'name = "npu-\xff"\n')
    line = ahasd(*RUN, *SHORT, "--spec-dir", tmp_path / "specs").one_line_error()
    assert line.startswith(f"ahasd: error: {spec}: not valid TOML: not UTF-8")


def test_a_non_utf8_platform_file_is_one_line(tmp_path, ahasd):
    spec = tmp_path / "specs" / "platforms" / "sd8gen3.toml"
    spec.parent.mkdir(parents=True)
    spec.write_bytes(b"\xff\n")
    line = ahasd(*PHONE, "--spec-dir", tmp_path / "specs").one_line_error()
    assert line.startswith(f"ahasd: error: {spec}: not valid TOML: not UTF-8")


# -- unchanged outputs keep their mtime; permissions follow the umask ------------------------


def _age(folder: Path) -> None:
    for path in folder.rglob("*"):
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))


@pytest.mark.parametrize(
    "command",
    [
        [*RUN, *SHORT, "--out", "OUT"],
        [*PHONE, "--mode", "all", "--out", "OUT"],
        ["trace", "gen", "--preset", "opt-1.3b-6.7b", "--length", "50", "--out", "OUT/t.jsonl"],
        ["trace", "gen", "--iid", "0.5", "--length", "50", "--out", "OUT/t.jsonl.gz"],
        ["regmap", "--out", "OUT/registers.md"],
    ],
    ids=["simulate", "phone", "trace-gen", "trace-gen-gz", "regmap"],
)
def test_a_second_identical_run_rewrites_nothing(tmp_path, ahasd, command):
    out = tmp_path / "out"
    argv = [part.replace("OUT", str(out)) for part in command]
    assert ahasd(*argv).code == 0
    _age(out)
    before = snapshot(out)
    assert ahasd(*argv).code == 0
    assert snapshot(out) == before


def test_report_twice_rewrites_nothing(tmp_path, ahasd, results):
    assert ahasd("report", "--results", results).code == 0
    _age(results)
    before = snapshot(results)
    assert ahasd("report", "--results", results).code == 0
    assert snapshot(results) == before


def test_outputs_get_the_umask_permissions(tmp_path, ahasd, results):
    old = os.umask(0o022)
    try:
        assert ahasd(*RUN, *SHORT, "--out", tmp_path / "run").code == 0
        assert ahasd("report", "--results", results).code == 0
    finally:
        os.umask(old)
    written = [*(tmp_path / "run").iterdir(), results / "ablation.png", results / "comparison.csv"]
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {"0o644"}


# -- usage errors, repeated values, progress ------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([*RUN, "--frob"], "ahasd simulate: unrecognized arguments: --frob"),
        ([*RUN, "--tokens"], "ahasd simulate: --tokens: expected one argument"),
        ([*RUN, "--tokens", "many"], "ahasd simulate: --tokens: must be an integer in 1..65534"),
        (["frobnicate"], "ahasd: COMMAND: invalid choice: 'frobnicate'"),
        ([], "ahasd: the following arguments are required: COMMAND"),
        (["cosim", "--pair", "p"], "ahasd cosim: the following arguments are required: --mode"),
    ],
)
def test_usage_errors_are_one_line_with_a_hint(ahasd, argv, expected):
    line = ahasd(*argv).one_line_error()
    assert line.startswith(expected)
    command = expected.split(":")[0]
    assert line.endswith(f"(see {command} --help)")


def test_repeated_list_values_run_once_with_a_note(tmp_path, ahasd):
    argv = [*SWEEP, "--policies", "fixed", "fixed", "--seeds", "3", "3", "--json"]
    outcome = ahasd(*argv, "--out", tmp_path / "s")
    assert outcome.code == 0, outcome.err
    rows = json.loads(outcome.out)
    assert sorted((r["mode"], r["policy"], r["seed"]) for r in rows) == [
        ("gpu-only", "fixed", 3),
        ("pim-async", "fixed", 3),
    ]
    assert "ahasd sweep: note: --policies lists fixed more than once; each runs once" in outcome.err
    assert "ahasd sweep: note: --seeds lists 3 more than once; each runs once" in outcome.err


def test_progress_in_a_log_is_plain_lines(tmp_path, ahasd):
    outcome = ahasd(*SWEEP, "--out", tmp_path / "s")
    assert outcome.code == 0
    assert "\r" not in outcome.err
    lines = [line for line in outcome.err.splitlines() if line.startswith("sweep:")]
    assert lines[0] == "sweep: 0/2 runs, 0.0 s, running"
    assert lines[-1].startswith("sweep: 2/2 runs, ")
    assert lines[-1].endswith(", done")


class _Terminal:
    """A stderr that says it is a terminal, recording what is written."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_interrupted_lands_on_its_own_line_after_a_bar(tmp_path, monkeypatch):
    from ahasd.cli import main
    from ahasd.sim import sweep as cli  # where a sweep's runs are started

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    real = cli._run_one
    calls = []

    def interrupt_the_second(settings):
        calls.append(settings)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(settings)

    monkeypatch.setattr(cli, "_run_one", interrupt_the_second)
    assert main([*SWEEP, "--out", str(tmp_path / "s")]) == 130
    assert "\rsweep [" in terminal.text
    assert terminal.text.endswith("\nahasd: interrupted\n")
    # The run finished before the interrupt is kept for the next sweep to resume from.
    assert len((tmp_path / "s" / "results.jsonl").read_text().splitlines()) == 1


def test_phone_runs_and_recordings_report_progress(tmp_path, ahasd):
    phone = ahasd(*PHONE)
    assert phone.code == 0
    assert "sd8gen3 npu-gpu-hetero: 0/2 simulated s, 0.0 s, running" in phone.err
    ngram = ahasd("trace", "record", "ngram", "--length", "20", "--out", tmp_path / "r.jsonl")
    assert ngram.code == 0
    assert "record ngram: 20/20 positions," in ngram.err


def test_the_spec_dir_test_fixture_is_the_shipped_one():
    # The non-UTF-8 test above overrides a shipped device by name: it must exist.
    assert (BUILTIN_SPEC_DIR / "devices" / "npu-mobile.toml").is_file()


def test_a_prompt_index_out_of_range_is_refused_before_recording_starts(tmp_path, ahasd):
    outcome = ahasd(
        "trace", "record", "ngram", "--prompt-index", "-1", "--out", tmp_path / "r.jsonl"
    )
    assert outcome.one_line_error().startswith("ahasd: error: prompt index -1 out of range (0..")
    assert list(tmp_path.iterdir()) == []
