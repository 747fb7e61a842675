"""``ahasd sweep`` and ``ahasd report``: grids of system-model runs and their tables.

- ``sweep`` runs a grid (``--grid paper``: :data:`ahasd.sim.grid.PAPER_GRID` at 1024 tokens;
  ``--grid FILE``: the product of a grid file's axes, :mod:`ahasd.sim.grid_files`) over seeds,
  traces and platforms, on ``--jobs`` processes or Ray tasks (``--backend ray``), with
  progress on stderr. Every finished run is appended to ``DIR/results.jsonl`` as one JSON
  line and fsynced, so an interrupted sweep resumes where it stopped (runs whose
  configuration, trace and version hashes are in the file are skipped); one sweep writes a
  folder at a time.
- ``report`` turns a results file into the ablation and comparison tables (terminal, CSV)
  and figures (PNG), as one output set.

Every name, number and output path is checked before anything runs or is written; a bad
one is a UserError (exit 2). The run settings' options are built from
:class:`~ahasd.sim.settings.RunSettings` (:mod:`ahasd.cli.options`). The JSON objects
(``--json``, ``results.jsonl``) carry a ``schema`` field and are documented in
``docs/json.md``.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ahasd.cli.args import path_arg
from ahasd.cli.options import (
    add_backend_options,
    add_list_options,
    add_system_options,
    check_backend,
    check_devices,
    check_lengths,
    check_names,
    system_settings,
    wrote,
)
from ahasd.cli.progress import Progress, end_line
from ahasd.errors import UserError
from ahasd.output import OutputSet, check_folder
from ahasd.sim import comparison, report
from ahasd.sim.grid import GRIDS, PAPER_GRID
from ahasd.sim.grid_files import check_one_setter_per_field, expand, load_grid
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.platforms import DEFAULT_PLATFORM, PLATFORM_KIND
from ahasd.sim.modes import MODES, check_tvc_widths_for_runs
from ahasd.sim.policies import make_policy
from ahasd.sim.results import RESULTS_FILE, ROW_SCHEMA, finished_rows, read_results
from ahasd.sim.scenarios import SCENARIOS
from ahasd.sim.settings import RunSettings, field_default, resolve
from ahasd.sim.sweep import run_sweep
from ahasd.sim.traces.sources import resolve_trace

__all__ = [
    "ABLATION_SCHEMA",
    "COMPARISON_SCHEMA",
    "DEFAULT_RESULTS",
    "REPORT_FILES",
    "REPORT_SCHEMA",
    "RESULTS_FILE",
    "SWEEP_SCHEMA",
    "register",
]

# The files `report` writes into its --out folder, checked before it starts.
REPORT_FILES = (
    "ablation.csv",
    "comparison.csv",
    "ladder.csv",
    "other-class.csv",
    "reading.txt",
    "ablation.png",
    "comparison.png",
)
DEFAULT_RESULTS = Path("ahasd-sweep")
# The `schema` of every JSON object the commands print or write (docs/json.md).
SWEEP_SCHEMA = ROW_SCHEMA
REPORT_SCHEMA = "ahasd-report/1"
ABLATION_SCHEMA = "ahasd-ablation-row/1"
COMPARISON_SCHEMA = "ahasd-comparison-row/1"


def register(subparsers) -> None:
    """Add ``ahasd sweep`` and ``ahasd report``."""
    paper = PAPER_GRID
    sweep = subparsers.add_parser(
        "sweep",
        help="run a grid of system-model configurations (resumable)",
        description="Run a grid (the paper's, or the product of a grid file's axes) x seeds x "
        "traces x platforms; results appended to DIR/results.jsonl, resumable, one sweep per "
        "DIR at a time.",
    )
    sweep.add_argument(
        "--grid",
        metavar="NAME|FILE",
        help="; ".join(f"{name}: {grid.describe()}" for name, grid in GRIDS.items())
        + "; or a grid file (TOML: an [axes] table naming the values of any run setting, "
        "spec field, policy or controller parameter; docs/reproduce.md)",
    )
    add_list_options(
        sweep,
        platforms="NPU+PIM platforms, or 'all' for every one in the spec library (default: "
        f"{DEFAULT_PLATFORM})",
        pairs=f"pairs (default: the paper's {len(paper.pairs)}: {', '.join(paper.pairs)})",
        policies=f"policies (default: the paper's {len(paper.policies)}: "
        f"{', '.join(paper.policies)})",
        modes=f"modes (default: all {len(paper.modes)})",
    )
    sweep.add_argument(
        "--out",
        type=path_arg,
        default=DEFAULT_RESULTS,
        help=f"results folder (default: {DEFAULT_RESULTS})",
    )
    add_backend_options(sweep)
    sweep.add_argument(
        "--json", action="store_true", help="print the results as a JSON array (docs/json.md)"
    )
    add_system_options(sweep, many_traces=True)
    sweep.set_defaults(func=_sweep)

    rep = subparsers.add_parser(
        "report",
        help="ablation and comparison tables and figures from sweep results",
        description="Read DIR/results.jsonl (or a results file) and write tables and PNGs.",
    )
    rep.add_argument(
        "--results",
        type=path_arg,
        default=DEFAULT_RESULTS,
        help=f"results folder or file (default: {DEFAULT_RESULTS})",
    )
    rep.add_argument(
        "--out",
        type=path_arg,
        help="output folder (default: the folder of the results file)",
    )
    rep.add_argument("--json", action="store_true", help="print the tables as JSON (docs/json.md)")
    rep.set_defaults(func=_report)


# The sweep options that set an axis, by axis.
_AXIS_OPTIONS = {
    "pair": "--pairs",
    "policy": "--policies",
    "mode": "--modes",
    "seed": "--seeds",
    "trace": "--trace",
    "platform": "--platforms",
}


def _grid_points(args) -> list[RunSettings]:
    """The settings of every run of ``ahasd sweep``: the grid file's axes (outermost, in file
    order), then seeds, traces, platforms, pairs, policies and modes from the options (or the
    paper grid's), each only where the grid file does not name it."""
    base = system_settings(args)
    if args.platforms == ["all"]:
        # Sweeps run the NPU+PIM scenario: its platforms, by the scenario table.
        args.platforms = sorted(SCENARIOS[PLATFORM_KIND].platforms(tuple(args.spec_dir)))
    given = {
        "pair": args.pairs,
        "policy": args.policies,
        "mode": args.modes,
        "seed": args.seeds,
        "trace": args.traces,
        "platform": args.platforms,
    }
    file_axes: tuple = ()
    grid = PAPER_GRID
    if args.grid is not None and args.grid in GRIDS:
        if args.pairs or args.policies or args.modes:
            raise UserError(
                f"--grid {args.grid} fixes pairs, policies and modes; drop --pairs etc."
            )
        grid = GRIDS[args.grid]
    elif args.grid is not None:
        grid_file = load_grid(Path(args.grid))
        for key in grid_file.axis_names():
            if given.get(key):
                option = _AXIS_OPTIONS[key]
                raise UserError(f"{option} and the grid file {args.grid} both set {key}")
            if key in base and key not in ("spec_overrides", "controller_params"):
                base.pop(key)
        file_axes = grid_file.axes
        # Expanded first (small: the axes' own product), to check the fields they name.
        check_one_setter_per_field(
            grid_file, expand(file_axes, base), base, load_library(base["spec_dirs"])
        )
    defaults = {
        "seed": [field_default(RunSettings, "seed")],
        "trace": ["none"],
        "platform": [DEFAULT_PLATFORM],
        "pair": list(grid.pairs),
        "policy": list(grid.policies),
        "mode": list(grid.modes),
    }
    named = {key for key, _ in file_axes}
    option_axes = tuple(
        (key, tuple(given[key] or defaults[key]))
        for key in ("seed", "trace", "platform", "pair", "policy", "mode")
        if key not in named
    )
    return expand(file_axes + option_axes, base)


def _sweep(args) -> int:
    check_backend(args)
    points = _grid_points(args)
    if not points:
        raise UserError("the grid is empty")
    library = load_library(points[0].spec_dirs)
    check_names(
        library,
        sorted({p.mode for p in points}),
        sorted({p.pair for p in points}),
        sorted({p.policy for p in points}),
    )
    for policy in {(p.policy, p.fallback, p.policy_params) for p in points}:
        # A grid's policy_params axis is checked here, before the lock and any run.
        make_policy(policy[0], fallback=policy[1], **dict(policy[2]))
    checked = set()
    for point in points:  # fail on a bad setting or a bad or short trace before running
        check_lengths(point.tokens, point.prompt_tokens)
        if (point.trace, point.pair, point.tokens) not in checked:
            checked.add((point.trace, point.pair, point.tokens))
            resolve_trace(point.trace, library.pair(point.pair).preset, point.tokens, point.seed)
        check_devices(library, point)
    # Before anything runs: a TVC width a configuration would saturate writes nothing.
    check_tvc_widths_for_runs([resolve(point, library)[0] for point in points], library)
    check_folder(args.out, option="--out")
    rows, simulated = run_sweep(
        points,
        args.out,
        jobs=args.jobs,
        backend=args.backend,
        address=args.address,
        progress=lambda label, total: Progress(label, total, "runs"),
    )
    rows, refused = finished_rows(rows)
    if refused:
        end_line()
        print(
            f"ahasd: note: {len(refused)} runs refused (kept in the results, left out of the "
            f"tables), e.g. {refused[0]['mode']} {refused[0]['pair']}: {refused[0]['error']}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(rows))
        return 0
    results_path = args.out / RESULTS_FILE
    reused = len(points) - simulated
    print(f"{len(points)} runs ({simulated} new, {reused} already in {results_path})")
    ablation = report.ablation_rows(rows, MODES)
    print(report.format_table(ablation, report.table_columns(ablation, report.ABLATION_COLUMNS)))
    print(f"results: {results_path}  (tables and figures: ahasd report --results {args.out})")
    return 0


def _report(args) -> int:
    path = args.results / RESULTS_FILE if args.results.is_dir() else args.results
    if not path.is_file():
        raise UserError(f"no results at {path} (run `ahasd sweep --out DIR` first)")
    rows, _ = read_results(path)
    rows = finished_rows(rows)[0]
    if not rows:
        raise UserError(f"{path} holds no finished runs")
    # A request rerun after a spec or trace change appends a new row: the last one counts.
    # Every row was checked as it was read (sim.results.read_results), naming its line.
    rows = list({row.get("key", number): row for number, row in enumerate(rows)}.values())
    # In a fixed order, not the file's: a sweep on several workers appends rows as runs
    # finish, and sums of floats in another order differ in their last bits, so the tables
    # and figures would change from one sweep of the same grid to the next.
    rows.sort(key=lambda row: json.dumps(row, sort_keys=True))
    out = args.out or path.parent
    check_folder(out, option="--out", files=REPORT_FILES)
    ablation = report.ablation_rows(rows, MODES)
    per_pair = report.comparison_rows(rows, MODES)
    outputs = OutputSet(option="--out")
    outputs.add(out / "ablation.csv", report.csv_text(ablation))
    outputs.add(out / "comparison.csv", report.csv_text(per_pair))
    ladder = comparison.ladder_rows(rows)
    other = comparison.other_class_rows(rows)
    reading = comparison.reading(ladder)
    outputs.add(out / "ladder.csv", report.csv_text(ladder))
    outputs.add(out / "other-class.csv", report.csv_text(other))
    outputs.add(out / "reading.txt", "".join(line + "\n" for line in reading))
    outputs.add(out / "ablation.png", report.png_bytes(report.ablation_figure(rows, MODES)))
    outputs.add(out / "comparison.png", report.png_bytes(report.comparison_figure(rows, MODES)))
    written = outputs.commit()
    if args.json:
        document = {
            "schema": REPORT_SCHEMA,
            "ablation": [{"schema": ABLATION_SCHEMA, **row} for row in ablation],
            "comparison": [{"schema": COMPARISON_SCHEMA, **row} for row in per_pair],
            "ladder": [{"schema": "ahasd-ladder-row/1", **row} for row in ladder],
            "other_class": [{"schema": "ahasd-other-class-row/1", **row} for row in other],
            "reading": reading,
        }
        print(json.dumps(document))
        return 0
    print(
        "The ladder on the same chip, per platform (mean over pairs, policies and seeds; "
        "ratios are geometric means over matching runs)"
    )
    for scenario in dict.fromkeys(row["scenario"] for row in ladder):
        print(f"\n[{scenario or 'default'}]")
        print(
            report.format_table(
                [row for row in ladder if row["scenario"] == scenario], comparison.LADDER_COLUMNS
            )
        )
    if other:
        print(
            "\nAnother power class: GPU-hosted modes on a laptop RTX 4090 (80-150 W), not "
            "the phone's NPU + PIM; memory capacity enforced"
        )
        print(report.format_table(other, comparison.OTHER_CLASS_COLUMNS))
    if reading:
        print("\nReading (generated from the numbers above)")
        for line in reading:
            print(textwrap.fill(line, width=100, subsequent_indent="  "))
    print()
    print(wrote(written, out))
    return 0
