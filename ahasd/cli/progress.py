"""Progress of long commands on stderr: a redrawn bar on a terminal, plain lines in a log.

On a terminal, :class:`Progress` redraws one line (``\\r``) at most ten times a second;
otherwise (stderr redirected to a file or a pipe) it writes a plain line when it starts,
every :data:`LOG_INTERVAL_S` seconds and when it ends, so a log holds readable lines and no
carriage-return frames. :func:`end_line` closes a half-drawn bar so that whatever is printed
next (an error, ``ahasd: interrupted``) starts on its own line; the CLI's ``main`` calls it
before every message.
"""

from __future__ import annotations

import sys
import time

__all__ = ["LOG_INTERVAL_S", "Progress", "end_line"]

LOG_INTERVAL_S = 10.0
_REDRAW_S = 0.1
_BAR_WIDTH = 30

# The stream a bar was drawn on without its newline yet (None: every line is closed).
_open_line = None


def end_line() -> None:
    """Finish a half-drawn bar with a newline (nothing if no bar is open)."""
    global _open_line
    if _open_line is not None:
        stream, _open_line = _open_line, None
        try:
            stream.write("\n")
            stream.flush()
        except (OSError, ValueError):
            pass  # stderr is gone: nothing more to say on it


class Progress:
    """Progress of ``total`` steps of a command.

    Parameters
    ----------
    label : what is progressing (``"sweep"``, ``"phone sd8gen3"``), first on every line.
    total : number of steps (runs, positions, simulated seconds).
    unit : the steps' unit, shown after the count.
    stream : where to write (default: ``sys.stderr`` at construction).
    clock : seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, label: str, total: float, unit: str, *, stream=None, clock=None) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock or time.monotonic
        self.terminal = _isatty(self.stream)
        self.started = self.clock()
        self.last_drawn = -1e30
        self.done = 0.0
        self.note = ""
        self._draw(force=True)

    def update(self, done: float, note: str = "") -> None:
        """``done`` steps finished so far; ``note`` says which (shown on a terminal)."""
        self.done = done
        self.note = note
        self._draw(force=False)

    def close(self) -> None:
        """The final state, then a newline on a terminal."""
        self._draw(force=True, final=True)
        end_line()

    def _amount(self, value: float) -> str:
        whole = float(value).is_integer() or self.total >= 100
        return f"{value:,.0f}" if whole else f"{value:,.1f}"

    def _draw(self, *, force: bool, final: bool = False) -> None:
        global _open_line
        now = self.clock()
        interval = _REDRAW_S if self.terminal else LOG_INTERVAL_S
        if not force and now - self.last_drawn < interval:
            return
        self.last_drawn = now
        elapsed = now - self.started
        count = f"{self._amount(self.done)}/{self._amount(self.total)} {self.unit}"
        try:
            if self.terminal:
                filled = int(_BAR_WIDTH * min(1.0, self.done / max(self.total, 1e-300)))
                bar = "#" * filled + "." * (_BAR_WIDTH - filled)
                text = f"{self.label} [{bar}] {count} {elapsed:6.1f} s {self.note[:40]:<40}"
                self.stream.write("\r" + text)
                _open_line = self.stream
            else:
                state = "done" if final else "running"
                self.stream.write(f"{self.label}: {count}, {elapsed:.1f} s, {state}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # progress is a courtesy: a broken stderr must not stop the work


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
