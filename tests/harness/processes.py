"""Child processes that can be stopped whole: the formal tier's sby runs and the mutation
campaign's workers both start trees of processes (sby starts yosys and the solvers; a cocotb
worker starts the simulator), and killing the parent alone leaves the rest running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def run_in_own_group(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    capture: bool = True,
) -> tuple[int | None, str]:
    """Run ``command`` in a process group of its own; ``(exit status, output)``, or
    ``(None, output so far)`` when it outlives ``timeout_s``.

    On a timeout, or when this process is interrupted, the whole group is killed and
    reaped, so no orphan keeps holding a core. With ``capture=False`` the output is
    discarded (the mutation workers write logs of their own) and returned as ``""``.
    """
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if capture else subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
        return process.returncode, output or ""
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        return None, output or ""
    except BaseException:
        _kill_group(process)
        process.communicate()
        raise


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
