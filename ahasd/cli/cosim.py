"""``ahasd cosim``: the system model with the RTL controller top in the loop.

Same options as ``ahasd simulate`` (``--json`` included; the phone-SoC scenario is not
co-simulated), plus:

- ``--waves``: record waveforms, written as ``<run name>.vcd`` in the run directory;
- ``--rtl-latency``: feed the controller latencies measured in the RTL back into the model's
  timing (off by default, so that the run is identical to ``ahasd simulate``);
- ``--check``: also run the golden controller and fail (exit 1) on the first divergence;
- ``--irq``: the CPU learns of pending pre-verification orders from the interrupt instead of
  by polling a register (the results are the same);
- ``--build-dir``: where the Verilator builds and runs go (default ``build/cosim``).

The summary printed is the model's; ``cosim`` (in ``--json``, or a few lines of text) holds
what the co-simulation measured: controller latencies, cycles simulated and warped, wall time.
"""

from __future__ import annotations

import dataclasses
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ahasd.cli.args import path_arg
from ahasd.cli.options import (
    add_run_options,
    add_system_options,
    check_devices,
    check_names,
    run_settings,
)
from ahasd.cli.simulate import RUN_SCHEMA, RUN_TABLE
from ahasd.errors import UserError
from ahasd.output import OutputSet, check_folder
from ahasd.sim import report
from ahasd.sim.library.loading import load_library
from ahasd.sim.modes import ASYNC_MODES, check_tvc_widths_for_runs
from ahasd.sim.settings import RunSettings

__all__ = [
    "COSIM_FILES",
    "COSIM_SCHEMA",
    "COSIM_STATS_SCHEMA",
    "DECISIONS_SCHEMA",
    "register",
    "run_name",
]

#: The ``schema`` of ``cosim --json`` (docs/json.md): a run's keys plus ``cosim``.
COSIM_SCHEMA = "ahasd-cosim-run/1"
#: The ``schema`` of ``cosim.json`` (the statistics) and ``decisions.json`` (the decision
#: log under ``decisions``), as every JSON object ahasd writes has one (docs/json.md).
COSIM_STATS_SCHEMA = "ahasd-cosim-stats/1"
DECISIONS_SCHEMA = "ahasd-cosim-decisions/1"
#: What ``--out DIR`` holds after a run, all written together or none.
COSIM_FILES = ("summary.json", "cosim.json", "decisions.json")


def register(subparsers) -> None:
    cos = subparsers.add_parser(
        "cosim",
        help="simulate one configuration with the RTL controller in the loop (cocotb)",
        description="Run the system model with every EDC, TVC and GTSU decision taken by the "
        "generated Verilog of the controller top under cocotb and Verilator.",
    )
    add_run_options(cos, required=True)  # --mode: an asynchronous one (checked in _cosim)
    cos.add_argument("--out", type=path_arg, help="write summary.json, cosim.json, decisions.json")
    add_system_options(cos)
    cos.add_argument("--waves", action="store_true", help="write waveforms named after the run")
    cos.add_argument(
        "--rtl-latency",
        action="store_true",
        help="feed the RTL-measured controller latencies back into the model's timing",
    )
    cos.add_argument(
        "--check", action="store_true", help="compare with the golden controller (exit 1 if not)"
    )
    cos.add_argument(
        "--irq",
        action="store_true",
        help="learn of pending pre-verification orders from the interrupt, not by polling",
    )
    cos.add_argument(
        "--build-dir",
        type=path_arg,
        default=Path("build/cosim"),
        help="build root (default: build/cosim)",
    )
    cos.set_defaults(func=_cosim)


def run_name(settings: RunSettings, feedback: bool, irq: bool = False) -> str:
    """A file-name-safe name for a run: mode, pair, policy, seed, tokens, trace."""
    trace = settings.trace or "synthetic"
    parts = [
        settings.mode,
        settings.pair,
        settings.policy,
        f"s{settings.seed}",
        f"n{settings.tokens}",
        Path(trace).stem if trace else trace,
    ]
    if feedback:
        parts.append("rtl-latency")
    if irq:
        parts.append("irq")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def _cosim(args) -> int:
    from ahasd.sim.cosim import (
        check_build_root,
        first_divergence,
        model_top_params,
        run_cosim,
        run_model,
        settings_to_dict,
    )

    settings = run_settings(args)
    if settings.trace is not None and Path(settings.trace).is_file():
        # The simulator process runs in its own directory: hand it an absolute path.
        settings = dataclasses.replace(settings, trace=str(Path(settings.trace).resolve()))
    library = load_library(settings.spec_dirs)
    check_names(library, [settings.mode], [settings.pair], [settings.policy])
    if settings.mode not in ASYNC_MODES:
        # Refused before the build (minutes): the controller top only decides for the
        # asynchronous engine; a synchronous mode never calls it.
        raise UserError(
            f"cosim --mode {settings.mode}: a synchronous mode has no controller to put the RTL "
            f"in the loop of; cosim runs {', '.join(ASYNC_MODES)} (ahasd simulate runs every mode)"
        )
    check_devices(library, settings)
    if args.check and args.rtl_latency:
        raise UserError("--check compares with the golden timing: drop --rtl-latency")
    check_tvc_widths_for_runs([settings], library)  # a TVC that would saturate: refuse now
    # The RTL is built with the run's controller parameters (or refused, naming them),
    # before anything is built: a run must never be called identical to one it ignored.
    top_params = model_top_params(settings)
    build_root = check_build_root(args.build_dir)
    if args.out is not None:
        check_folder(args.out, option="--out", files=COSIM_FILES)
    name = run_name(settings, args.rtl_latency, args.irq)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The golden run (~1 s) overlaps the simulator process, which this one only waits for.
        golden_run = pool.submit(run_model, settings) if args.check else None
        run = run_cosim(
            {"settings": settings_to_dict(settings), "feedback": args.rtl_latency, "irq": args.irq},
            top_params,
            run_name=name,
            build_root=build_root,
            waves=args.waves,
        )
    result = json.loads(run.result_file.read_text())
    summary, stats = result["summary"], result["cosim"]
    stats["run_dir"] = str(run.run_dir)
    stats["waves"] = str(run.waves) if run.waves else None
    status = 0
    if golden_run is not None:
        golden, golden_log = golden_run.result()
        divergence = first_divergence(golden_log, result["log"])
        stats["identical"] = divergence is None and golden == summary
        stats["first_divergence"] = divergence
        status = 0 if stats["identical"] else 1
    if args.out is not None:
        outputs = OutputSet(option="--out")
        outputs.add(args.out / "summary.json", report.json_text({"schema": RUN_SCHEMA, **summary}))
        outputs.add(
            args.out / "cosim.json", report.json_text({"schema": COSIM_STATS_SCHEMA, **stats})
        )
        decisions = {"schema": DECISIONS_SCHEMA, "decisions": result["log"]}
        outputs.add(args.out / "decisions.json", report.json_text(decisions))
        outputs.commit()
    if args.json:
        print(json.dumps({"schema": COSIM_SCHEMA, **summary, "cosim": stats}))
        return status
    print(report.format_table([summary], RUN_TABLE))
    print()
    print(
        f"cosim: {stats['calls']} controller calls, {stats['simulated_cycles']} PIM cycles "
        f"simulated + {stats['warped_cycles']} warped ({stats['warps']} warps, "
        f"{stats['rewinds']} rewinds), {stats['wall_s']:.1f} s"
    )
    print(
        f"cosim: pending orders learned by {'interrupt' if stats['irq'] else 'polling'}: "
        f"{stats['interrupts']} interrupts, {stats['polls']} polls"
    )
    for key in ("edc_decision_latency", "tvc_answer_latency", "gtsu_switch_cycles"):
        print(f"cosim: {key} (cycles: count) {stats[key]}")
    if run.waves:
        print(f"waves: {run.waves}")
    if args.check:
        if stats["identical"]:
            print("check: identical to the golden-controller run")
        else:
            print(f"check: DIVERGES: {json.dumps(stats['first_divergence'])}")
    return status
