"""``ahasd.cli.progress``: a redrawn bar on a terminal, plain periodic lines in a log."""

from __future__ import annotations

import io

from ahasd.cli import progress
from ahasd.cli.progress import LOG_INTERVAL_S, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_at_start_every_interval_and_at_the_end():
    clock, log = Clock(), io.StringIO()
    bar = Progress("sweep", 10, "runs", stream=log, clock=clock)
    for done in range(1, 11):
        clock.now += LOG_INTERVAL_S / 4  # four updates per interval
        bar.update(done)
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[0] == "sweep: 0/10 runs, 0.0 s, running"
    # 25 s in all: lines at 10 s and 20 s, then the final one.
    assert lines[1:] == [
        "sweep: 4/10 runs, 10.0 s, running",
        "sweep: 8/10 runs, 20.0 s, running",
        "sweep: 10/10 runs, 25.0 s, done",
    ]


def test_a_terminal_gets_redrawn_frames_and_a_final_newline():
    clock, terminal = Clock(), Terminal()
    bar = Progress("phone", 600, "simulated s", stream=terminal, clock=clock)
    clock.now = 1.0
    bar.update(300, "half")
    bar.close()
    frames = terminal.getvalue().split("\r")[1:]
    assert len(frames) == 3
    assert "[" + "#" * 15 + "." * 15 + "]" in frames[1]
    assert "300/600 simulated s" in frames[1]
    assert frames[-1].endswith("\n")
    assert frames[-1].count("\n") == 1


def test_end_line_closes_an_open_bar_once():
    terminal = Terminal()
    Progress("sweep", 3, "runs", stream=terminal, clock=Clock())
    progress.end_line()
    progress.end_line()
    assert terminal.getvalue().endswith("\n")
    assert terminal.getvalue().count("\n") == 1


def test_a_broken_stream_does_not_stop_the_work():
    class Broken(Terminal):
        def write(self, text):
            raise OSError(5, "Input/output error")

    bar = Progress("sweep", 3, "runs", stream=Broken(), clock=Clock())
    bar.update(1)
    bar.close()  # no exception escapes
    assert progress._open_line is None  # nothing half-drawn left to close on that stream
