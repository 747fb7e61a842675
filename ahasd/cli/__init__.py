"""The ``ahasd`` command line: the layer above ``ahasd.hw``, ``ahasd.golden`` and ``ahasd.sim``.

One module per group of subcommands, in the order ``ahasd --help`` lists them
(:data:`COMMAND_MODULES`): :mod:`~ahasd.cli.hw` (``verilog``, ``area``),
:mod:`~ahasd.cli.trace` (``trace``), :mod:`~ahasd.cli.simulate` (``simulate`` with the
phone-SoC scenario), :mod:`~ahasd.cli.sweep` (``sweep``, ``report``),
:mod:`~ahasd.cli.reproduce` (``reproduce``), :mod:`~ahasd.cli.regmap` (``regmap``) and
``cosim``. Each exposes ``register(subparsers)``, which adds its parsers and sets
``func(args) -> int`` as the handler. Nothing below this package imports it. Shared pieces:
:mod:`~ahasd.cli.args` (parser, bounded argument types), :mod:`~ahasd.cli.options` (the
system-model commands' options, built from the settings dataclasses),
:mod:`~ahasd.cli.progress`; every file is written through :mod:`ahasd.output`.

What a user sees when something goes wrong (:func:`main`): a usage error or a
:class:`ahasd.errors.UserError` is one line on stderr and exit status 2; an interrupt is
``ahasd: interrupted`` on its own line and status 130; standard output that cannot be
written (a full disk) is one line and status 2, and so is a closed one (``>&-``), refused
before any work; a path the system cannot look up (a name over 255 bytes) is one line
naming it; a reader that closed the pipe
(``ahasd trace list | head -1``) ends the command silently with status 141, as SIGPIPE
would. None is a traceback.
"""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import threading

from ahasd import __version__
from ahasd.cli import progress
from ahasd.cli.args import Parser
from ahasd.errors import UsageError, UserError
from ahasd.output import interrupted, mark_interrupted

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

# Modules that contribute subcommands, in the order `ahasd --help` lists them.
COMMAND_MODULES = [
    "ahasd.cli.hw",
    "ahasd.cli.trace",
    "ahasd.cli.simulate",
    "ahasd.cli.sweep",
    "ahasd.cli.reproduce",
    "ahasd.cli.regmap",
    "ahasd.cli.cosim",
]


def build_parser() -> Parser:
    """The ``ahasd`` parser with every subcommand of :data:`COMMAND_MODULES`."""
    parser = Parser(
        prog="ahasd",
        description="AHASD reference implementation: RTL, golden models, system model.",
    )
    parser.add_argument("--version", action="version", version=f"ahasd {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


class _StdoutError(UserError):
    """Standard output could not be written."""


class _StdoutClosed(Exception):
    """The reader of standard output went away (``ahasd ... | head``)."""


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a failed write or flush (a full disk, a closed
    pipe) becomes a one-line :class:`UserError` instead of a traceback."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def _guard(self, action, *args):
        try:
            return action(*args)
        except BrokenPipeError:
            raise _StdoutClosed from None
        except OSError as error:
            raise _StdoutError(
                f"cannot write to standard output ({error.strerror or error})"
            ) from None

    def write(self, text: str) -> int:
        return self._guard(self.stream.write, text)

    def flush(self) -> None:
        self._guard(self.stream.flush)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _silence_stdout() -> None:
    """After a failed write to the real standard output, point it at /dev/null so that the
    interpreter's own flush at exit does not print a second error."""
    try:
        if sys.__stdout__ is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.__stdout__.fileno())
            os.close(devnull)
    except (OSError, ValueError):
        pass


# OSError numbers that mean "this path cannot be looked up" rather than a fault of ahasd.
_PATH_ERRORS = (errno.ENAMETOOLONG, errno.ELOOP)


def main(argv: list[str] | None = None) -> int:
    """Run ``ahasd`` with ``argv`` (default: the process arguments); the exit status."""
    stdout = sys.stdout
    if stdout is None:
        # Started with standard output closed (``ahasd ... >&-``): every command prints, so
        # refuse before any work rather than fail at the first line, after files were written.
        _say("ahasd: error: standard output is closed; redirect it (>/dev/null) to discard it")
        return 2
    sys.stdout = _GuardedStdout(stdout)
    previous = _catch_interrupts()
    try:
        try:
            args = build_parser().parse_args(argv)
            status = int(args.func(args) or 0)
        except SystemExit as stop:  # --help and --version print and stop here
            status = stop.code if isinstance(stop.code, int) else 0
        if interrupted():
            raise KeyboardInterrupt  # one that a library swallowed on the way
        sys.stdout.flush()
        return status
    except UsageError as error:
        _say(str(error))
        return 2
    except _StdoutError as error:
        _silence_stdout()
        _say(f"ahasd: error: {error}")
        return 2
    except _StdoutClosed:
        # The reader stopped reading on purpose; say nothing, like a tool ended by SIGPIPE.
        _silence_stdout()
        return 128 + 13
    except UserError as error:
        _say(f"ahasd: error: {error}")
        return 2
    except KeyboardInterrupt:
        _say("ahasd: interrupted")
        return 130
    except OSError as error:
        if error.errno not in _PATH_ERRORS or error.filename is None:
            raise
        # A path the operating system cannot look up at all (a name over NAME_MAX, a loop of
        # links), met where an input path is first touched: the path and the reason.
        _say(f"ahasd: error: {os.fsdecode(error.filename)}: {error.strerror}")
        return 2
    finally:
        sys.stdout = stdout
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        mark_interrupted(False)


def _catch_interrupts():
    """Install the SIGINT handler of a command; the one it replaces, or None if none was
    installed (not the main thread, or SIGINT ignored, as for a background job).

    The handler records the interrupt before raising KeyboardInterrupt: Python drops an
    exception raised inside a finalizer (amaranth's ``MustUse.__del__`` runs during
    elaboration), and the command would otherwise finish, write and exit 0.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    current = signal.getsignal(signal.SIGINT)
    if current is not signal.default_int_handler:
        return None

    def interrupt(signum, frame):
        mark_interrupted()
        raise KeyboardInterrupt

    mark_interrupted(False)
    signal.signal(signal.SIGINT, interrupt)
    if sys.unraisablehook is not _quiet_recorded_interrupt:
        _quiet_recorded_interrupt.wrapped = sys.unraisablehook
        sys.unraisablehook = _quiet_recorded_interrupt
    return current


def _quiet_recorded_interrupt(unraisable) -> None:
    """``sys.unraisablehook`` of a command: a KeyboardInterrupt raised inside a finalizer
    (which Python drops) is already recorded, and the command stops with "ahasd:
    interrupted" and 130 at its next check; printing its traceback too would only alarm.
    Anything else goes to the hook it replaced."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt) and interrupted():
        return
    _quiet_recorded_interrupt.wrapped(unraisable)


_quiet_recorded_interrupt.wrapped = sys.unraisablehook


def _say(message: str) -> None:
    """``message`` on stderr, on one line of its own even if a progress bar was being drawn.

    Control characters are escaped (``\\n``, ``\\x1b``): a path or value with a newline would
    split the message over lines, and an escape sequence would reach the terminal.
    """
    progress.end_line()
    print(message.translate(_CONTROL_ESCAPES), file=sys.stderr)


# Every C0 control character and DEL, written as Python writes it in a string literal.
_CONTROL_ESCAPES = {code: repr(chr(code))[1:-1] for code in (*range(32), 127)}
