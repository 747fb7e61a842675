"""Trace file format: round trip, atomic write, and every rejection the loader promises."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ahasd.errors import UserError
from ahasd.sim.traces.format import (
    FORMAT_VERSION,
    Trace,
    TraceHeader,
    builtin_trace_paths,
    load_builtin,
    load_trace,
    save_trace,
)


def small_trace(accept: bool = True) -> Trace:
    """Four hand-written positions; top1 >= exp(-entropy) holds for each."""
    header = TraceHeader(
        pair="p",
        draft_model="d",
        target_model="t",
        prompt_id="x",
        temperature=0.7,
        source="recorded",
        meta={"note": "hand-made"},
    )
    return Trace(
        header=header,
        draft_entropy=np.array([0.0, 0.5, 1.25, 3.0]),
        draft_top1=np.array([1.0, 0.7, 0.4, 0.1]),
        beta=np.array([1.0, 0.8, math.nan, 0.2]) if accept else np.array([1.0, 0.8, 0.5, 0.2]),
        accept=np.array([1, 1, 0, 0], dtype=np.int8) if accept else None,
        target_entropy=np.array([0.1, math.nan, 0.9, 2.0]),
    )


def write_lines(path, header: dict, records: list) -> None:
    lines = [json.dumps(header)] + [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")


def good_header(**changes) -> dict:
    header = {
        "format": "ahasd-trace",
        "version": 1,
        "pair": "p",
        "draft_model": "d",
        "target_model": "t",
        "prompt_id": "x",
        "temperature": 1.0,
        "source": "synthetic",
        "length": 2,
        "columns": ["entropy", "top1", "beta", "target_entropy"],
        "meta": {},
    }
    header.update(changes)
    return header


GOOD_RECORDS = [[0.5, 0.7, 0.8, 0.3], [1.0, 0.5, 0.6, None]]


def test_round_trip(tmp_path):
    trace = small_trace()
    path = tmp_path / "t.jsonl"
    save_trace(trace, path)
    loaded = load_trace(path)
    assert loaded.header == trace.header
    np.testing.assert_array_equal(loaded.draft_entropy, trace.draft_entropy)
    np.testing.assert_array_equal(loaded.draft_top1, trace.draft_top1)
    np.testing.assert_array_equal(loaded.beta, trace.beta)  # NaN == NaN for this assert
    np.testing.assert_array_equal(loaded.accept, trace.accept)
    np.testing.assert_array_equal(loaded.target_entropy, trace.target_entropy)
    assert len(loaded) == 4
    # Acceptance: realised flags 1,1,0,0 -> 0.5 (hand count).
    assert loaded.acceptance_rate() == 0.5
    assert not list(tmp_path.glob(".*tmp")), "the temporary file must be renamed away"


def test_round_trip_gzip_and_beta_only(tmp_path):
    trace = small_trace(accept=False)
    path = tmp_path / "t.jsonl.gz"
    save_trace(trace, path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    loaded = load_trace(path)
    assert loaded.accept is None
    # Mean of beta 1.0, 0.8, 0.5, 0.2 = 0.625 (hand sum 2.5 / 4).
    assert loaded.acceptance_rate() == pytest.approx(0.625)


def test_file_is_readable_text(tmp_path):
    path = tmp_path / "t.jsonl"
    save_trace(small_trace(), path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == FORMAT_VERSION
    assert header["columns"] == ["entropy", "top1", "beta", "accept", "target_entropy"]
    assert json.loads(lines[3]) == [1.25, 0.4, None, 0, 0.9]


def test_values_rounded_to_six_decimals(tmp_path):
    trace = small_trace()
    trace.draft_entropy[2] = 1.23456789
    path = tmp_path / "t.jsonl"
    save_trace(trace, path)
    assert load_trace(path).draft_entropy[2] == 1.234568


def test_builtin_traces_present_and_valid():
    paths = builtin_trace_paths()
    assert len(paths) >= 3
    assert sum(p.stat().st_size for p in paths) < 2_000_000
    for path in paths:
        trace = load_builtin(path.name.removesuffix(".jsonl"))
        assert len(trace) >= 1100
        assert trace.header.source == "recorded"
        assert trace.accept is not None


@pytest.mark.parametrize(
    ("header", "records", "expected"),
    [
        (good_header(version=2), GOOD_RECORDS, r"header \(line 1\), field 'version': unsupported"),
        (good_header(format="csv"), GOOD_RECORDS, r"field 'format'"),
        (
            {k: v for k, v in good_header().items() if k != "pair"},
            GOOD_RECORDS,
            r"header \(line 1\), field 'pair': missing",
        ),
        (
            good_header(columns=["entropy", "top1", "beta"]),
            GOOD_RECORDS,
            r"'target_entropy' missing",
        ),
        (
            good_header(columns=["entropy", "top1", "beta", "target_entropy", "x"]),
            GOOD_RECORDS,
            "unknown column 'x'",
        ),
        (good_header(source="dreamt"), GOOD_RECORDS, r"field 'source'"),
        (good_header(temperature=-1), GOOD_RECORDS, r"field 'temperature'"),
        (good_header(length=0), GOOD_RECORDS, r"field 'length'"),
        (good_header(length=3), GOOD_RECORDS, r"record 3 \(line 4\): missing: file truncated"),
        (good_header(length=1), GOOD_RECORDS, r"record 2 \(line 3\): unexpected"),
        (
            good_header(),
            [GOOD_RECORDS[0], [0.5, 0.7, 0.8]],
            r"record 2 \(line 3\): expected an array of 4",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [0.5, 1.7, 0.8, 0.1]],
            r"record 2 \(line 3\), field 'top1': probability 1.7 outside \[0, 1\]",
        ),
        (
            good_header(),
            [[0.5, 0.7, -0.1, 0.1], GOOD_RECORDS[1]],
            r"record 1 \(line 2\), field 'beta': probability -0.1 outside",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [None, 0.7, 0.8, 0.1]],
            r"record 2 \(line 3\), field 'entropy': null",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [-1.0, 0.7, 0.8, 0.1]],
            r"record 2 \(line 3\), field 'entropy': entropy -1.0",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [0.5, 0.7, None, 0.1]],
            r"record 2 \(line 3\), field 'beta': unknown, and the trace has no 'accept'",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [0.5, "x", 0.8, 0.1]],
            r"record 2 \(line 3\), field 'top1': must be a number",
        ),
        (
            good_header(),
            [GOOD_RECORDS[0], [3.0, 0.01, 0.8, 0.1]],
            r"record 2 \(line 3\), field 'top1': top-1 probability 0.01 is below",
        ),
        (
            good_header(columns=["entropy", "top1", "beta", "accept", "target_entropy"]),
            [[0.5, 0.7, 0.8, 1, 0.3], [1.0, 0.5, 0.6, 2, 0.1]],
            r"record 2 \(line 3\), field 'accept': accept flag must be 0 or 1",
        ),
    ],
)
def test_loader_rejects(tmp_path, header, records, expected):
    path = tmp_path / "bad.jsonl"
    write_lines(path, header, records)
    with pytest.raises(UserError, match=expected) as error:
        load_trace(path)
    assert str(path) in str(error.value)


def test_nan_literal_rejected_where_not_allowed(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good_header()) + "\n[0.5,0.7,0.8,0.3]\n[NaN,0.5,0.6,0.1]\n")
    with pytest.raises(UserError, match=r"record 2 \(line 3\), field 'entropy': NaN"):
        load_trace(path)


def test_truncated_mid_record(tmp_path):
    path = tmp_path / "cut.jsonl"
    save_trace(small_trace(), path)
    text = path.read_text()
    path.write_text(text[: len(text) - 9])  # cut inside the last record
    with pytest.raises(UserError, match=r"record 4 \(line 5\): not valid JSON .*truncated"):
        load_trace(path)


def test_bad_header_json_and_missing_file(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text("{not json\n")
    with pytest.raises(UserError, match=r"header \(line 1\): not valid JSON"):
        load_trace(path)
    with pytest.raises(UserError, match="no such trace file"):
        load_trace(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UserError, match="empty file"):
        load_trace(empty)


def test_unknown_builtin_lists_known():
    with pytest.raises(UserError, match=r"unknown built-in trace 'nope' \(known: stdlib-code"):
        load_builtin("nope")


def test_trace_constructor_validates():
    good = small_trace()
    with pytest.raises(ValueError, match=r"record 2, field 'top1': probability 1.5"):
        Trace(
            header=good.header,
            draft_entropy=good.draft_entropy,
            draft_top1=np.array([1.0, 1.5, 0.4, 0.1]),
            beta=good.beta,
            accept=good.accept,
            target_entropy=good.target_entropy,
        )
    with pytest.raises(ValueError, match="field 'beta': has shape"):
        Trace(
            header=good.header,
            draft_entropy=good.draft_entropy,
            draft_top1=good.draft_top1,
            beta=good.beta[:3],
            accept=good.accept,
            target_entropy=good.target_entropy,
        )
