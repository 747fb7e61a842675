"""The results directory of a sweep: ``DIR/results.jsonl`` under ``DIR/.lock``.

- :class:`ResultsDir`: one JSON line per run (schema :data:`ROW_SCHEMA`, docs/json.md),
  appended and fsynced as runs finish (:class:`ahasd.output.Journal`); a lock file
  (``fcntl.flock``, holding the owner's pid and start time) makes a second sweep into the
  same directory stop with a message naming the holder.
- :func:`read_results`: the rows, each checked (labels, identity, figures); a half-written
  last line (a killed sweep) is dropped, saying so; a whole last row without its newline is
  kept.
- :func:`result_row`: a request's row from its identity and the run's summary;
  :func:`finished_rows` splits rows into finished and refused runs.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import math
import os
import sys
from pathlib import Path

from ahasd.errors import UserError
from ahasd.output import Journal, check_folder, open_regular
from ahasd.sim.run_identity import scenario_label, settings_key
from ahasd.sim.settings import RunSettings

__all__ = [
    "RESULTS_FILE",
    "ROW_META",
    "ROW_SCHEMA",
    "ResultsDir",
    "finished_rows",
    "read_results",
    "result_row",
]

RESULTS_FILE = "results.jsonl"
LOCK_FILE = ".lock"
# The schema of a results row (docs/json.md): /2 identifies runs by their hashes.
ROW_SCHEMA = "ahasd-sweep-run/2"
# The fields of a row that label the request and its identity (strings), before the run's
# summary.
ROW_META = ("schema", "key", "run_id", "config_hash", "trace_hash", "version", "scenario")


class ResultsDir:
    """``DIR/results.jsonl`` under ``DIR/.lock``: use as a context manager.

    Entering takes the lock (a UserError naming the holder if another process has it),
    reads the finished rows and drops a half-written last line; :meth:`append` writes one
    row and fsyncs it. Leaving releases the lock.
    """

    def __init__(self, directory: Path, *, option: str | None = "--out") -> None:
        self.directory = Path(directory)
        self.path = self.directory / RESULTS_FILE
        self.option = option
        self.rows: list[dict] = []
        self._lock = None
        self._journal = None

    def __enter__(self) -> ResultsDir:
        check_folder(self.directory, option=self.option, files=(RESULTS_FILE, LOCK_FILE))
        self.directory.mkdir(parents=True, exist_ok=True)
        # Not followed if a link: truncating it below would clobber whatever it points to.
        fd = open_regular(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, option=self.option)
        lock = os.fdopen(fd, "r+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            lock.close()
            pid = _holder_pid(holder)
            if pid is not None and not _running(pid):
                raise UserError(
                    f"{self.directory} is locked by processes left behind by a sweep whose pid "
                    f"{pid} is no longer running ({holder}); end them, or write to another "
                    "--out"
                ) from None
            raise UserError(
                f"{self.directory} is in use by another sweep ({holder}); wait for it to "
                "finish (it resumes where it stops) or write to another --out"
            ) from None
        lock.seek(0)
        previous = lock.read().strip()
        pid = _holder_pid(previous)
        if pid is not None and pid != os.getpid() and not _running(pid):
            # flock is released by the kernel when its holder dies; the file's words stay.
            print(
                f"ahasd: note: {self.directory / LOCK_FILE}: the last sweep ({previous}) did "
                "not finish and is no longer running; taking its lock",
                file=sys.stderr,
            )
        started = datetime.datetime.now().isoformat(timespec="seconds")
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, started {started}\n")
        lock.flush()
        self._lock = lock
        try:
            self.rows, valid = read_results(self.path)
            self._journal = Journal(self.path, valid_bytes=valid, option=self.option)
        except BaseException:
            self._unlock()
            raise
        return self

    def append(self, row: dict) -> None:
        self._journal.append(json.dumps(row))
        self.rows.append(row)

    def _unlock(self) -> None:
        # An empty lock file says the last sweep finished; one naming a dead pid, that it
        # was killed (the next sweep says so).
        with contextlib.suppress(OSError):
            self._lock.seek(0)
            self._lock.truncate()
            self._lock.flush()
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()

    def lock_fd(self) -> int:
        """The lock file's descriptor (a forked worker closes its copy, so that the lock
        never outlives this process)."""
        return self._lock.fileno()

    def __exit__(self, *exc) -> None:
        self._journal.close()
        self._unlock()


def _holder_pid(words: str) -> int | None:
    """The pid a lock file names (``pid 123, started ...``), or None."""
    first = words.split(",")[0].split()
    if len(first) == 2 and first[0] == "pid" and first[1].isdigit():
        return int(first[1])
    return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def read_results(path: Path) -> tuple[list[dict], int]:
    """Result rows of ``path`` and the byte length they occupy.

    A last line without its newline is kept if it is a whole JSON object (an editor that
    saves without a final newline); one that is not (a sweep killed mid-write) is left out,
    with a note on stderr, and the writer truncates it away before appending. Any other
    line that is not a JSON object (NaN and Infinity included), and a row whose labels or
    figures are missing or of the wrong kind, is a UserError naming the line.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return [], 0
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror or error})") from None
    end = data.rfind(b"\n") + 1
    rows = []
    number = 0
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        row = _parse_row(line)
        if row is None:
            raise UserError(
                f"{path}: line {number} is not a JSON object (or holds NaN or Infinity); move "
                "the file away"
            )
        _check_row(path, number, row)
        rows.append(row)
    tail = data[end:]
    if tail.strip():
        row = _parse_row(tail)
        if row is not None:
            _check_row(path, number + 1, row)
            rows.append(row)
            end = len(data)
        else:
            print(
                f"ahasd: note: {path}: its last line is incomplete ({len(tail)} bytes without "
                "a newline, not a JSON object: an interrupted run's); left out, and a sweep "
                "into this folder drops it",
                file=sys.stderr,
            )
    return rows, end


def _parse_row(line: bytes) -> dict | None:
    """The JSON object on ``line``, or None if it is not one (NaN and Infinity, which
    Python's reader takes but JSON has not and no sweep writes, make it none)."""
    try:
        row = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, an integer too long to read
        return None
    return row if isinstance(row, dict) else None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


# What the fields of a results row must hold: the labels and identity every row has (a
# refused run's too), and the figures a finished run has, which resume reuses and the
# report reads. A row is checked when read, so a corrupt one is named by file and line
# instead of failing later in a hash table or a sum.
_ROW_LABELS = ("mode", "pair", "policy")
_ROW_FIGURES = {
    "tokens": int,
    "tokens_per_s": float,
    "energy_per_token_mj": float,
    "acceptance_rate": float,
    "drafted": int,
    "accepted": int,
}
# Figures the report reads where a row has them.
_ROW_OPTIONAL = {"seconds": float, "accepted_per_drafted": float}


def _finite(value) -> bool:
    """A JSON number that is finite as a float (an integer of 400 digits is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_row(path: Path, number: int, row: dict) -> None:
    """UserError naming ``path``, line ``number`` and the field of ``row`` that is missing
    or of the wrong kind."""
    where = f"{path}: line {number}"
    missing = [key for key in _ROW_LABELS if key not in row]
    if "error" not in row:
        missing += [key for key in _ROW_FIGURES if key not in row]
    if missing:
        raise UserError(f"{where}: the row lacks {', '.join(missing)}; move the file away")
    for key in (*_ROW_LABELS, *ROW_META, "error"):
        if key in row and not isinstance(row[key], str):
            raise UserError(f"{where}, field '{key}': must be a string, not {row[key]!r}")
    if "error" in row:
        return
    figures = {**_ROW_FIGURES, **{k: v for k, v in _ROW_OPTIONAL.items() if k in row}}
    busy = row.get("busy_s", {})
    if not isinstance(busy, dict) or not all(_finite(v) for v in busy.values()):
        raise UserError(f"{where}, field 'busy_s': must map devices to seconds, not {busy!r}")
    for key, kind in figures.items():
        value = row[key]
        good = isinstance(value, kind if kind is int else int | float)
        if not good or not _finite(value) or value < 0:
            reads = "an integer" if kind is int else "a finite number"
            raise UserError(f"{where}, field '{key}': must be {reads} >= 0, not {value!r}")
    if row["tokens"] < 1 or row["tokens_per_s"] <= 0 or row["energy_per_token_mj"] <= 0:
        raise UserError(
            f"{where}: tokens, tokens_per_s and energy_per_token_mj must be > 0 in a finished run"
        )


def finished_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """``rows`` split into the runs that finished and the runs the model refused."""
    return [r for r in rows if "error" not in r], [r for r in rows if "error" in r]


def result_row(settings: RunSettings, identity: dict, summary: dict) -> dict:
    """A results row: the request's identity and labels, then the run's summary."""
    summary = {k: v for k, v in summary.items() if k not in ROW_META}
    return {
        "schema": ROW_SCHEMA,
        "key": settings_key(settings),
        **identity,
        "scenario": scenario_label(settings),
        **summary,
        "platform": settings.platform,
    }
