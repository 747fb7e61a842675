"""Drafting traces: the per-position record of what the draft model saw and what the target did.

A trace describes one generation of the *target* model. For every position ``pos`` of the
target's output it holds the draft model's distribution statistics at that position *given the
correct prefix* (entropy in nats, top-1 probability), the acceptance probability of the drafted
token ``beta = sum_v min(p(v), q(v))`` (spec section 6: the chance rejection sampling keeps the
draft's token), optionally the realised accept flag of one rejection-sampling draw, and the
target's entropy. Because every record is conditioned on the correct prefix, the trace stays
valid for look-ahead drafting: a drafted token at ``pos`` is accepted with ``beta[pos]``
whatever the round structure around it.

File format (version 1, documented in ``docs/traces.md``): JSON Lines, UTF-8.

- line 1, the header: a JSON object ``{"format": "ahasd-trace", "version": 1, "pair": ...,
  "draft_model": ..., "target_model": ..., "prompt_id": ..., "temperature": ...,
  "source": "synthetic"|"recorded", "length": N, "columns": [...], "meta": {...}}``;
- lines 2..N+1, one record per position: a JSON array of the values in ``columns`` order.
  Unknown values are ``null``. The ``accept`` column is optional (absent = no realised flags).

Why this format: a person can read it with ``head``, diff it, and load it from any language
without a library; the header says which column is which so nothing depends on position
conventions; the record count in the header catches truncation; and the body parses in one
``json.loads`` call (about 1 ms per thousand records here), so loading is never the bottleneck.
A ``.gz`` suffix selects gzip compression for large traces.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ahasd.errors import UserError
from ahasd.output import write_file

__all__ = [
    "COLUMNS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_HEADER_DEPTH",
    "MAX_RECORDS",
    "SOURCES",
    "Trace",
    "TraceHeader",
    "builtin_trace_paths",
    "encode_trace",
    "load_builtin",
    "load_trace",
    "save_trace",
]

FORMAT_NAME = "ahasd-trace"
FORMAT_VERSION = 1
SOURCES = ("synthetic", "recorded")

# Column name -> (attribute, nullable, kind). kind: "nats" = finite >= 0, "prob" = [0, 1],
# "flag" = 0 or 1. The order is the order a writer emits.
COLUMNS = ("entropy", "top1", "beta", "accept", "target_entropy")
_COLUMN_SPEC = {
    "entropy": ("draft_entropy", False, "nats"),
    "top1": ("draft_top1", False, "prob"),
    "beta": ("beta", True, "prob"),
    "accept": ("accept", False, "flag"),
    "target_entropy": ("target_entropy", True, "nats"),
}
_REQUIRED_COLUMNS = ("entropy", "top1", "beta", "target_entropy")
_HEADER_STRINGS = ("pair", "draft_model", "target_model", "prompt_id")

# A distribution with top-1 probability t has entropy >= -ln t, so t >= exp(-H). Files round
# values to 6 decimals; the slack covers that rounding and nothing more.
_TOP1_SLACK = 1e-5
_DECIMALS = 6

# Guards on what a reader accepts, so that a hostile or broken file is a one-line error and
# not a MemoryError or RecursionError. A million records is far beyond any generation the
# controller's 16-bit length fields allow (65,535 tokens); a header carries a few KB of
# metadata (a recorder's prompt and output), and its JSON nests a few levels.
MAX_RECORDS = 1_000_000
MAX_HEADER_BYTES = 1 << 20
MAX_HEADER_DEPTH = 32
MAX_FILE_BYTES = 256 << 20


@dataclass(frozen=True)
class TraceHeader:
    """What a trace is about.

    Attributes
    ----------
    pair : short name of the draft/target pair, e.g. ``"opt-1.3b-6.7b"``.
    draft_model, target_model : model names (or local paths) as recorded.
    prompt_id : identifier of the prompt the target generated from.
    temperature : sampling temperature applied to both models (0 = greedy).
    source : ``"synthetic"`` or ``"recorded"``.
    version : trace format version (``FORMAT_VERSION``).
    meta : free-form JSON-able details (generator preset and seed, citation, task type...).
    """

    pair: str
    draft_model: str
    target_model: str
    prompt_id: str
    temperature: float
    source: str  # "synthetic" | "recorded"
    version: int = FORMAT_VERSION
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Trace:
    """One target generation as seen by a draft model (see the module docstring).

    Attributes
    ----------
    header : :class:`TraceHeader`.
    draft_entropy : float64, nats, finite and >= 0, one per position.
    draft_top1 : float64 in [0, 1]; at least ``exp(-draft_entropy)``.
    beta : float64 in [0, 1], acceptance probability of the drafted token; NaN where unknown
        (allowed only where ``accept`` is given).
    accept : int8 0/1 realised accept flag per position, or None.
    target_entropy : float64 nats, NaN where unknown.
    """

    header: TraceHeader
    draft_entropy: np.ndarray
    draft_top1: np.ndarray
    beta: np.ndarray
    accept: np.ndarray | None
    target_entropy: np.ndarray

    def __post_init__(self) -> None:
        problem = _find_problem(self._columns())
        if problem is not None:
            record, column, message = problem
            raise ValueError(f"record {record}, field '{column}': {message}")

    def _columns(self) -> dict[str, np.ndarray]:
        columns = {
            "entropy": self.draft_entropy,
            "top1": self.draft_top1,
            "beta": self.beta,
            "target_entropy": self.target_entropy,
        }
        if self.accept is not None:
            columns["accept"] = self.accept
        return columns

    def __len__(self) -> int:
        return int(self.draft_entropy.shape[0])

    def acceptance_rate(self) -> float:
        """Fraction of positions whose drafted token is accepted.

        The realised flags when the trace has them, else the mean acceptance probability.
        """
        if self.accept is not None:
            return float(np.mean(self.accept))
        return float(np.mean(self.beta))


def _find_problem(columns: dict[str, np.ndarray]) -> tuple[int, str, str] | None:
    """First violation as ``(record number (1-based), column, message)``, or None.

    Checks shapes, finiteness, ranges, the ``top1 >= exp(-H)`` identity and that every position
    has either a realised flag or an acceptance probability.
    """
    lengths = {name: np.shape(values) for name, values in columns.items()}
    first_shape = lengths["entropy"]
    if len(first_shape) != 1 or first_shape[0] < 1:
        return (0, "entropy", f"must be a non-empty 1-D array, not shape {first_shape}")
    for name, shape in lengths.items():
        if shape != first_shape:
            return (0, name, f"has shape {shape}, expected {first_shape} like 'entropy'")
    for name, values in columns.items():
        _, nullable, kind = _COLUMN_SPEC[name]
        values = np.asarray(values, dtype=np.float64)
        if kind == "flag":
            bad = ~np.isin(values, (0.0, 1.0))
            message = "accept flag must be 0 or 1, not {value}"
        else:
            unknown = np.isnan(values)
            if kind == "prob":
                in_range = (values >= 0.0) & (values <= 1.0)
                message = "probability {value} outside [0, 1]"
            else:
                in_range = np.isfinite(values) & (values >= 0.0)
                message = "entropy {value} must be a finite number of nats >= 0"
            if nullable:
                bad = ~(unknown | in_range)
            else:
                bad = ~in_range
                nan_bad = unknown & bad
                if nan_bad.any():
                    index = int(np.argmax(nan_bad))
                    return (index + 1, name, "NaN/unknown not allowed in this field")
        if bad.any():
            index = int(np.argmax(bad))
            return (index + 1, name, message.format(value=values[index]))
    entropy = np.asarray(columns["entropy"], dtype=np.float64)
    top1 = np.asarray(columns["top1"], dtype=np.float64)
    inconsistent = top1 < np.exp(-entropy) - _TOP1_SLACK
    if inconsistent.any():
        index = int(np.argmax(inconsistent))
        return (
            index + 1,
            "top1",
            f"top-1 probability {top1[index]} is below exp(-entropy) = "
            f"{math.exp(-entropy[index]):.6g}, impossible for a distribution "
            f"(columns swapped?)",
        )
    if "accept" not in columns:
        unknown_beta = np.isnan(np.asarray(columns["beta"], dtype=np.float64))
        if unknown_beta.any():
            index = int(np.argmax(unknown_beta))
            return (index + 1, "beta", "unknown, and the trace has no 'accept' column")
    return None


def _open_text(path: Path, mode: str):
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def encode_trace(trace: Trace, *, compress: bool = False) -> bytes:
    """The bytes of ``trace`` in the file format (gzip-compressed if ``compress``, with a
    zero gzip timestamp so the same trace gives the same bytes). Values are rounded to 6
    decimals."""
    columns = trace._columns()
    names = [name for name in COLUMNS if name in columns]
    header = {
        "format": FORMAT_NAME,
        "version": trace.header.version,
        "pair": trace.header.pair,
        "draft_model": trace.header.draft_model,
        "target_model": trace.header.target_model,
        "prompt_id": trace.header.prompt_id,
        "temperature": float(trace.header.temperature),
        "source": trace.header.source,
        "length": len(trace),
        "columns": names,
        "meta": trace.header.meta,
    }
    as_lists = []
    for name in names:
        values = np.asarray(columns[name], dtype=np.float64)
        if name == "accept":
            as_lists.append([int(v) for v in values])
        else:
            rounded = np.round(values, _DECIMALS)
            as_lists.append([None if math.isnan(v) else float(v) for v in rounded])
    lines = [json.dumps(header, sort_keys=False)]
    lines.extend(
        json.dumps(list(row), separators=(",", ":")) for row in zip(*as_lists, strict=True)
    )
    data = ("\n".join(lines) + "\n").encode("utf-8")
    return gzip.compress(data, mtime=0) if compress else data


def save_trace(trace: Trace, path) -> bool:
    """Write ``trace`` to ``path`` (JSON Lines, gzip if the name ends in ``.gz``).

    Through :func:`ahasd.output.write_file`: a temporary sibling renamed into place (a reader
    never sees half a trace), the umask's permissions, and an unchanged file keeps its
    mtime. Returns True if the file was (re)written.
    """
    path = Path(path)
    return write_file(path, encode_trace(trace, compress=path.suffix == ".gz"))


def _fail(path: Path, where: str, message: str) -> UserError:
    return UserError(f"{path}: {where}: {message}")


def _nesting_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (brackets inside strings
    are not counted); computed without parsing, so a hostile depth costs no recursion."""
    outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    codes = np.frombuffer(outside_strings.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    steps = np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
    steps -= np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def _lone_surrogate(value) -> bool:
    """True if a string in ``value`` (a parsed JSON value) holds half a UTF-16 pair, which
    JSON's ``\\ud800`` escapes allow and no UTF-8 output can print."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list) -> dict:
    """``json.loads``'s object hook: the object, or :class:`_DuplicateKey` on a repeat."""
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _parse_header(path: Path, line: str) -> dict:
    if len(line) > MAX_HEADER_BYTES:
        raise _fail(
            path,
            "header (line 1)",
            f"{len(line):,} characters long; a header holds at most {MAX_HEADER_BYTES:,}",
        )
    depth = _nesting_depth(line)
    if depth > MAX_HEADER_DEPTH:
        raise _fail(
            path,
            "header (line 1)",
            f"nested {depth:,} levels deep; a header nests at most {MAX_HEADER_DEPTH}",
        )
    try:
        header = json.loads(line, object_pairs_hook=_unique_keys)
    except _DuplicateKey as error:
        # JSON readers disagree on which of two equal keys wins; a header is refused
        # rather than read as the last one says (a second "length" made the body look cut).
        raise _fail(path, "header (line 1)", f"the key {error.key!r} appears twice") from None
    except json.JSONDecodeError as error:
        raise _fail(path, "header (line 1)", f"not valid JSON ({error.msg})") from None
    except ValueError:  # an integer past Python's digit limit
        raise _fail(path, "header (line 1)", "an integer with too many digits") from None
    if not isinstance(header, dict):
        raise _fail(path, "header (line 1)", "must be a JSON object")
    if _lone_surrogate(header):
        raise _fail(path, "header (line 1)", "a string holds an unpaired UTF-16 surrogate")
    if header.get("format") != FORMAT_NAME:
        raise _fail(
            path,
            "header (line 1), field 'format'",
            f"expected {FORMAT_NAME!r}, found {header.get('format')!r} (not a trace file?)",
        )
    version = header.get("version")
    # type() and not isinstance(): True == 1 and 1.0 == 1, neither is a version number.
    if type(version) is not int or version != FORMAT_VERSION:
        raise _fail(
            path,
            "header (line 1), field 'version'",
            f"unsupported version {version!r}; this reader knows version {FORMAT_VERSION} "
            "(an integer)",
        )
    for name in (*_HEADER_STRINGS, "temperature", "source", "length", "columns"):
        if name not in header:
            raise _fail(path, f"header (line 1), field '{name}'", "missing")
    for name in _HEADER_STRINGS:
        if not isinstance(header[name], str):
            raise _fail(path, f"header (line 1), field '{name}'", "must be a string")
    temperature = header["temperature"]
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise _fail(
            path,
            "header (line 1), field 'temperature'",
            f"must be a finite number >= 0, not {temperature!r}",
        )
    if header["source"] not in SOURCES:
        raise _fail(
            path,
            "header (line 1), field 'source'",
            f"must be one of {', '.join(SOURCES)}, not {header['source']!r}",
        )
    length = header["length"]
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_RECORDS:
        raise _fail(
            path,
            "header (line 1), field 'length'",
            f"must be an integer in 1..{MAX_RECORDS}, not {length!r}",
        )
    columns = header["columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise _fail(path, "header (line 1), field 'columns'", "must be a list of column names")
    for name in columns:
        if name not in _COLUMN_SPEC:
            raise _fail(
                path,
                "header (line 1), field 'columns'",
                f"unknown column {name!r} (known: {', '.join(COLUMNS)})",
            )
    if len(set(columns)) != len(columns):
        raise _fail(path, "header (line 1), field 'columns'", "a column is listed twice")
    for name in _REQUIRED_COLUMNS:
        if name not in columns:
            raise _fail(path, "header (line 1), field 'columns'", f"column {name!r} missing")
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise _fail(path, "header (line 1), field 'meta'", "must be a JSON object")
    return header


def _column_values(path: Path, rows: list, index: int, name: str) -> np.ndarray:
    """Column ``name`` (at ``index`` in each row) as float64, NaN for null; type-checked."""
    nullable = _COLUMN_SPEC[name][1]
    out = np.empty(len(rows), dtype=np.float64)
    for record, row in enumerate(rows):
        value = row[index]
        if value is None:
            if not nullable:
                raise _fail(
                    path,
                    f"record {record + 1} (line {record + 2}), field '{name}'",
                    "null (unknown) not allowed in this field",
                )
            out[record] = math.nan
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(
                path,
                f"record {record + 1} (line {record + 2}), field '{name}'",
                f"must be a number, not {value!r}",
            )
        else:
            try:
                out[record] = value
            except OverflowError:  # an integer beyond float range: as infinite as 1e400
                out[record] = math.inf
    return out


def load_trace(path) -> Trace:
    """Read and validate a trace file.

    Raises
    ------
    ahasd.errors.UserError
        naming the file, the record (1-based, with its line) and the field at fault: unreadable
        file, bad header (missing field, wrong version, unknown column), truncated or overlong
        body, a record of the wrong size, a NaN/null where not allowed, a probability outside
        [0, 1], a negative entropy, an impossible top-1/entropy pair.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a trace file")
    try:
        with _open_text(path, "r") as stream:
            # One character more than allowed tells a file over the limit from one at it,
            # without reading (or decompressing) an endless or enormous file whole.
            text = stream.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise UserError(f"{path}: cannot read trace file ({error})") from None
    if len(text) > MAX_FILE_BYTES:
        raise UserError(
            f"{path}: more than {MAX_FILE_BYTES:,} characters (after decompression); a trace "
            f"holds at most {MAX_RECORDS:,} records"
        )
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise _fail(path, "header (line 1)", "missing (empty file)")
    header = _parse_header(path, lines[0])
    body = lines[1:]
    length = header["length"]
    names = header["columns"]
    for record, line in enumerate(body):
        if not line.strip():
            # Said as what it is; counted, it read as "unexpected" or "missing" records.
            raise _fail(
                path,
                f"line {record + 2}",
                "blank: a trace holds one record per line, with no blank lines",
            )
    if len(body) < length:
        raise _fail(
            path,
            f"record {len(body) + 1} (line {len(body) + 2})",
            f"missing: file truncated, header promises {length} records, file has {len(body)}",
        )
    if len(body) > length:
        raise _fail(
            path,
            f"record {length + 1} (line {length + 2})",
            f"unexpected: header promises {length} records, file has {len(body)}",
        )
    try:
        rows = json.loads("[" + ",".join(body) + "]")
    except (ValueError, RecursionError):  # ValueError: bad JSON or a too-long integer
        rows = None
    if rows is None or len(rows) != length:
        # Slow path, only to name the bad record.
        for record, line in enumerate(body):
            where = f"record {record + 1} (line {record + 2})"
            try:
                json.loads(line)
            except json.JSONDecodeError as error:
                raise _fail(
                    path, where, f"not valid JSON ({error.msg}; file truncated or corrupted?)"
                ) from None
            except RecursionError:
                raise _fail(path, where, "nested too deeply (a record is a flat array)") from None
            except ValueError:  # an integer past Python's digit limit
                raise _fail(path, where, "an integer with too many digits") from None
        raise _fail(path, "body", "records are not one JSON array per line")
    for record, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(names):
            size = len(row) if isinstance(row, list) else "not an array"
            raise _fail(
                path,
                f"record {record + 1} (line {record + 2})",
                f"expected an array of {len(names)} values ({', '.join(names)}), got {size}",
            )
    columns = {name: _column_values(path, rows, i, name) for i, name in enumerate(names)}
    problem = _find_problem(columns)
    if problem is not None:
        record, name, message = problem
        where = f"record {record} (line {record + 1}), field '{name}'" if record else name
        raise _fail(path, where, message)
    trace_header = TraceHeader(
        pair=header["pair"],
        draft_model=header["draft_model"],
        target_model=header["target_model"],
        prompt_id=header["prompt_id"],
        temperature=float(header["temperature"]),
        source=header["source"],
        version=header["version"],
        meta=header.get("meta", {}),
    )
    accept = columns.get("accept")
    return Trace(
        header=trace_header,
        draft_entropy=columns["entropy"],
        draft_top1=columns["top1"],
        beta=columns["beta"],
        accept=None if accept is None else accept.astype(np.int8),
        target_entropy=columns["target_entropy"],
    )


_DATA_DIR = Path(__file__).parents[1] / "data"


def builtin_trace_paths() -> list[Path]:
    """The recorded traces shipped with the package (``sim/data/*.jsonl``), sorted by name."""
    return sorted(_DATA_DIR.glob("*.jsonl"))


def load_builtin(name: str) -> Trace:
    """Load a shipped trace by file stem (e.g. ``"stdlib-code-t1.0-a"``)."""
    paths = {p.name.removesuffix(".jsonl"): p for p in builtin_trace_paths()}
    if name not in paths:
        known = ", ".join(paths) or "none shipped"
        raise UserError(f"unknown built-in trace {name!r} (known: {known})")
    return load_trace(paths[name])
