"""Helpers of the command-line tests: ``ahasd`` run in-process, folder snapshots."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ahasd.cli import main

__all__ = ["Outcome", "run_cli", "snapshot"]


@dataclass
class Outcome:
    """What one ``ahasd`` call did: exit status, standard output and standard error."""

    code: int
    out: str
    err: str

    def one_line_error(self) -> str:
        """The single stderr line of a refused command; asserts a refusal's shape (status 2,
        one line, no traceback)."""
        lines = self.err.splitlines()
        assert self.code == 2, (self.code, self.err)
        assert len(lines) == 1, self.err
        assert "Traceback" not in self.err
        return lines[0]


def run_cli(capsys, *argv) -> Outcome:
    """``ahasd *argv`` in this process, with pytest's ``capsys`` capturing its output."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and folder under ``folder``: a file's bytes and mtime (ns); a folder as
    ``(b"/", 0)`` (its mtime moves whenever an entry is added or removed, probes included)."""
    state = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        state[name] = (b"/", 0) if path.is_dir() else (path.read_bytes(), os.stat(path).st_mtime_ns)
    return state
