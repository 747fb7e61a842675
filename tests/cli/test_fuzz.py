"""Fuzzing the command line in-process with Hypothesis: malformed traces, spec files and
argument lists.

Whatever it is fed, ``ahasd`` either succeeds (exit 0, its output set complete) or refuses
with one line on stderr and exit status 2, leaving its output folder exactly as it was;
never a traceback. Seeded through ``AHASD_SEED`` (``harness.seeds.choose_seed``), bounded by
``max_examples`` and a per-example deadline; no example database is written.
"""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path

from harness.cli import snapshot
from harness.seeds import choose_seed
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ahasd.cli import main
from ahasd.cli.simulate import SIMULATE_FILES
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR

SEED = choose_seed(20261203)
FUZZ = settings(
    max_examples=25,
    deadline=timedelta(seconds=30),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RUN = ["simulate", "--mode", "pim-async", "--pair", "opt-1.3b-6.7b", "--policy", "svip"]


def _check(capsys, argv: list[str], out: Path | None) -> int:
    """Run ``ahasd argv``; assert success or a one-line refusal that left ``out`` alone."""
    before = snapshot(out) if out is not None and out.exists() else {}
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 0:
        return code
    assert code == 2, (argv, code, err)
    messages = [line for line in err.splitlines() if line.startswith("ahasd")]
    assert len(messages) == 1, err
    assert not messages[0].startswith("ahasd: error: ") or "\n" not in messages[0]
    if out is not None:
        after = snapshot(out) if out.exists() else {}
        assert after == before, f"{argv}: a refused run changed {out}"
    return code


# -- traces -------------------------------------------------------------------------------

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_HEADER = {
    "format": "ahasd-trace", "version": 1, "pair": "p", "draft_model": "d", "target_model": "t",
    "prompt_id": "x", "temperature": 1.0, "source": "synthetic", "length": 3,
    "columns": ["entropy", "top1", "beta", "target_entropy"], "meta": {},
}  # fmt: skip
_ROW = [0.5, 0.9, 0.7, None]


@st.composite
def trace_files(draw) -> bytes:
    """A trace file with some of its header fields, records or bytes broken."""
    kind = draw(st.sampled_from(["header", "records", "bytes", "depth"]))
    header = dict(_HEADER)
    rows = [list(_ROW) for _ in range(3)]
    if kind == "header":
        for key in draw(st.lists(st.sampled_from(sorted(_HEADER)), min_size=1, max_size=3)):
            if draw(st.booleans()):
                header[key] = draw(_json)
            else:
                header.pop(key, None)
    elif kind == "records":
        for _ in range(draw(st.integers(1, 3))):
            row = draw(st.integers(0, 2))
            if draw(st.booleans()) or not isinstance(rows[row], list) or len(rows[row]) < 4:
                rows[row] = draw(_json)
            else:
                rows[row][draw(st.integers(0, 3))] = draw(_json)
    text = json.dumps(header) + "\n" + "\n".join(json.dumps(r) for r in rows) + "\n"
    if kind == "depth":
        depth = draw(st.integers(20, 200_000))
        text = '{"format": "ahasd-trace", "meta": ' + "[" * depth + "]" * depth + "}\n" + text
    data = text.encode("utf-8")
    if kind == "bytes":
        where = draw(st.integers(0, len(data)))
        data = data[:where] + draw(st.binary(min_size=1, max_size=8)) + data[where:]
    return data


@seed(SEED)
@FUZZ
@given(data=trace_files())
def test_malformed_traces(capsys, data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_bytes(data)
        _check(capsys, ["trace", "info", path], None)
        out = Path(folder) / "out"
        _check(capsys, [*RUN, "--tokens", "3", "--trace", path, "--out", out], out)


# -- spec files ---------------------------------------------------------------------------

_DEVICE = (BUILTIN_SPEC_DIR / "devices" / "npu-mobile.toml").read_text()
_toml_values = st.one_of(
    st.sampled_from(["inf", "nan", "-1.0", "0", "0.0", "1e-300", "1e300", "true", '"fast"']),
    st.sampled_from(["[]", "{}", "[1, 2]", "{ value = 1 }", '{ value = "x", source = "s" }']),
    st.floats(min_value=1e-30, max_value=1e30).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
)


@st.composite
def device_files(draw) -> bytes:
    """The shipped NPU device file with values, lines or bytes broken."""
    lines = _DEVICE.splitlines()
    kind = draw(st.sampled_from(["value", "drop", "bytes", "garbage"]))
    if kind == "value":
        numbered = [i for i, line in enumerate(lines) if "value = " in line]
        for i in draw(st.lists(st.sampled_from(numbered), min_size=1, max_size=3)):
            head, _, rest = lines[i].partition("value = ")
            tail = rest[rest.find(",") :] if "," in rest else " }"
            lines[i] = f"{head}value = {draw(_toml_values)}{tail}"
    elif kind == "drop":
        for i in sorted(
            set(draw(st.lists(st.integers(0, len(lines) - 1), max_size=4))), reverse=True
        ):
            del lines[i]
    elif kind == "garbage":
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=20)))
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    if kind == "bytes":
        where = draw(st.integers(0, len(data)))
        data = data[:where] + draw(st.binary(min_size=1, max_size=4)) + data[where:]
    return data


@seed(SEED)
@FUZZ
@given(data=device_files(), mode=st.sampled_from(["npu-only", "ahasd"]))
def test_malformed_spec_files(capsys, data, mode):
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "specs" / "devices" / "npu-mobile.toml"
        spec.parent.mkdir(parents=True)
        spec.write_bytes(data)
        out = Path(folder) / "out"
        argv = [*RUN, "--tokens", "8", "--spec-dir", spec.parents[1], "--out", out]
        argv[2] = mode
        if _check(capsys, argv, out) == 0:
            assert sorted(p.name for p in out.iterdir()) == sorted(SIMULATE_FILES)


# -- argument lists -----------------------------------------------------------------------

_values = st.one_of(
    st.sampled_from(["-1", "0", "1", "1e13", "nan", "inf", "", "-", "--", "x", "65535", "all"]),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8),
)
_BASES = [
    [*RUN],
    ["simulate", "--platform", "sd8gen3"],
    ["trace", "gen", "--preset", "opt-1.3b-6.7b"],
    ["trace", "gen", "--iid", "0.5"],
    ["trace", "info", "stdlib-code-t0.7-a"],
    ["report", "--results", "RESULTS"],
    ["sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "gpu-only"],
    ["regmap"],
    ["trace", "list"],
]
_OPTIONS = [
    "--mode", "--pair", "--policy", "--seed", "--tokens", "--prompt-tokens", "--trace",
    "--policy-param", "--draft-queue-tokens", "--specpim-planned-draft", "--tvc-ratio-bits",
    "--npu", "--spec-dir", "--duration", "--task", "--skin-limit", "--ambient",
    "--dram-pj-per-bit", "--draft-weights", "--length", "--acceptance", "--bins", "--seeds",
    "--jobs", "--grid", "--policies", "--modes", "--json", "--fallback", "--no-arbiter",
    "--realise", "--frob",
]  # fmt: skip
# Appended last (argparse keeps the last value), so every example stays short to run.
_KEEP_SHORT = {
    "simulate": ["--tokens", "8"],
    "gen": ["--length", "16"],
    "sweep": ["--tokens", "8", "--jobs", "1"],
}


@st.composite
def argument_lists(draw) -> list[str]:
    argv = list(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(0, 4))):
        option = draw(st.sampled_from(_OPTIONS))
        values = draw(st.lists(_values, max_size=2))
        where = draw(st.integers(len(argv) // 2, len(argv)))
        argv[where:where] = [option, *values]
    if draw(st.booleans()) and len(argv) > 1:
        del argv[draw(st.integers(1, len(argv) - 1))]
    for command, tail in _KEEP_SHORT.items():
        if command in argv[:3]:
            argv += tail
    if argv[:2] == ["simulate", "--platform"]:
        argv += ["--duration", "1", "--tokens", "16"]
    return argv


@seed(SEED)
@FUZZ
@given(argv=argument_lists())
def test_argument_lists(capsys, argv, tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz-args")
    results = work / "results.jsonl"
    row = {
        "mode": "gpu-only", "pair": "p", "policy": "fixed", "seed": 0, "trace": None,
        "tokens": 8, "tokens_per_s": 10.0, "energy_per_token_mj": 5.0,
        "acceptance_rate": 0.5, "drafted": 9,
    }  # fmt: skip
    results.write_text(json.dumps(row) + "\n")
    argv = [str(results) if a == "RESULTS" else a for a in argv]
    out = work / "out"
    if argv[0] != "report" and "--out" not in argv:
        name = "t.jsonl" if argv[:2] == ["trace", "gen"] else ""
        argv += ["--out", str(out / name) if name else str(out)]
    _check(capsys, argv, out)
