"""`ahasd trace gen|info|list|record ngram` from the command line."""

from __future__ import annotations

import json

import pytest

from ahasd.cli import main
from ahasd.sim.traces.format import load_trace


def test_gen_preset_then_info(tmp_path, capsys):
    out = tmp_path / "g.jsonl"
    assert (
        main(
            [
                "trace",
                "gen",
                "--preset",
                "opt-1.3b-6.7b",
                "--length",
                "300",
                "--seed",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    trace = load_trace(out)
    assert len(trace) == 300
    assert trace.header.meta["preset"] == "opt-1.3b-6.7b"
    capsys.readouterr()
    assert main(["trace", "info", str(out), "--bins", "4"]) == 0
    text = capsys.readouterr().out
    assert "length:      300 positions" in text
    assert f"mean beta {trace.beta.mean():.4f}" in text
    assert text.count("\n  [") == 4  # four histogram rows


def test_gen_iid_realised(tmp_path, capsys):
    out = tmp_path / "i.jsonl"
    assert (
        main(["trace", "gen", "--iid", "0.8", "--length", "50", "--realise", "--out", str(out)])
        == 0
    )
    trace = load_trace(out)
    assert (trace.beta == 0.8).all()
    assert trace.accept is not None


def test_info_builtin_by_name(capsys):
    assert main(["trace", "info", "stdlib-code-t0.7-a"]) == 0
    text = capsys.readouterr().out
    assert "recorded" in text
    assert "realised" in text


def test_list(capsys):
    assert main(["trace", "list"]) == 0
    text = capsys.readouterr().out
    assert "smollm-135m-llama3.1-8b" in text
    assert "stdlib-code-t1.0-a" in text


def test_bad_trace_file_exits_2_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"format": "ahasd-trace", "version": 9}) + "\n")
    assert main(["trace", "info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ahasd: error: {bad}: header (line 1), field 'version'")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trace", "gen", "--iid", "1.5", "--out", "x.jsonl"], "strictly between 0 and 1"),
        (
            ["trace", "gen", "--iid", "0.5", "--task", "code", "--out", "x.jsonl"],
            "apply to --preset",
        ),
        (["trace", "info", "no-such-trace"], "unknown built-in trace"),
        (["trace", "record", "ngram"], "exactly one of --out FILE and --builtins DIR"),
    ],
)
def test_user_errors_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["trace", "gen", "--preset", "nope", "--out", "x"],
            "ahasd trace gen: --preset: invalid choice: 'nope'",
        ),
        (
            ["trace", "gen", "--iid", "0.5", "--length", "0", "--out", "x"],
            "ahasd trace gen: --length: must be an integer in 1..1000000, not '0' "
            "(see ahasd trace gen --help)",
        ),
    ],
)
def test_argparse_errors_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, line):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(line)
    assert not (tmp_path / "x").exists()


def test_record_ngram(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert (
        main(
            [
                "trace",
                "record",
                "ngram",
                "--out",
                str(out),
                "--length",
                "40",
                "--temperature",
                "0.8",
            ]
        )
        == 0
    )
    trace = load_trace(out)
    assert len(trace) == 40
    assert trace.header.temperature == 0.8
    assert trace.header.source == "recorded"
