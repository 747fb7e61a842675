"""``ahasd simulate``, ``ahasd sweep`` and ``ahasd report``: the system model's command line.

- ``simulate`` runs one configuration and prints a table (or one JSON object with
  ``--json``); ``--out DIR`` also writes the summary (JSON, CSV), the queue occupancy (CSV),
  a Chrome trace of device activity and a PNG.
- ``sweep`` runs a grid (``--grid paper``: 3 pairs x 4 algorithms x 7 modes at 1024 tokens)
  over seeds, on ``--jobs`` processes, with a progress bar on stderr. Every finished run is
  appended to ``DIR/results.jsonl`` as one JSON line and fsynced, so an interrupted sweep
  resumes where it stopped (finished runs, identified by their full settings, are skipped).
- ``report`` turns a results file into the ablation and comparison tables (terminal, CSV)
  and figures (PNG).

Every name is checked before anything runs or is written; a bad one is a UserError (exit 2).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from ahasd.errors import UserError
from ahasd.sim import phone, report
from ahasd.sim.config import RunSettings, load_library
from ahasd.sim.modes import MODES, PAPER_POLICIES, resolve_trace, simulate
from ahasd.sim.policies import POLICY_NAMES
from ahasd.sim.traces import builtin_trace_paths

__all__ = ["register"]

PAPER_PAIRS = ("opt-1.3b-6.7b", "llama2-7b-13b", "palm-8b-30b")
RESULTS_FILE = "results.jsonl"

_TABLE = [
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("acceptance_rate", "accept", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("drafted", "drafted", "d"),
    ("accepted", "accepted", "d"),
    ("rejected", "rejected", "d"),
    ("squashed", "squashed", "d"),
]
_ABLATION_TABLE = [
    ("mode", "mode", ""),
    ("runs", "runs", "d"),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("acceptance_rate", "accept", ".3f"),
    ("drafted_per_token", "drafted/token", ".2f"),
    ("speedup_vs_pim_async", "x pim-async", ".3f"),
    ("energy_vs_pim_async", "energy x pim-async", ".3f"),
]
_COMPARISON_TABLE = [
    ("pair", "pair", ""),
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("speedup_vs_gpu_only", "x gpu-only", ".3f"),
    ("energy_efficiency_vs_gpu_only", "energy eff. x gpu-only", ".3f"),
]


def add_run_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The options naming one run, shared by ``ahasd simulate`` and ``ahasd cosim``."""
    suffix = "" if required else " (required)"
    parser.add_argument(
        "--mode", required=required, help=f"execution mode: {', '.join(MODES)}{suffix}"
    )
    parser.add_argument(
        "--pair", required=required, help=f"model pair: {', '.join(PAPER_PAIRS)}{suffix}"
    )
    parser.add_argument(
        "--policy", required=required, help=f"drafting policy: {', '.join(POLICY_NAMES)}{suffix}"
    )
    parser.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="policy parameter (repeatable; VALUE is JSON or a string)",
    )
    parser.add_argument("--draft-model", help="override the pair's draft model")
    parser.add_argument("--target-model", help="override the pair's target model")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_settings(args: argparse.Namespace, **extra: object) -> RunSettings:
    """The settings of the one run named by :func:`add_run_options` (simulate and cosim)."""
    return RunSettings(
        **_base_settings(
            args,
            mode=args.mode,
            pair=args.pair,
            policy=args.policy,
            seed=args.seed,
            policy_params=_policy_params(args.policy_param),
            draft_model=args.draft_model,
            target_model=args.target_model,
            **extra,
        )
    )


def register(subparsers) -> None:
    sim = subparsers.add_parser(
        "simulate",
        help="simulate one configuration of the NPU+PIM system model",
        description="Simulate speculative decoding of one pair with one policy in one mode.",
    )
    # --mode, --pair and --policy are required without --platform (checked in _simulate).
    add_run_options(sim, required=False)
    sim.add_argument("--out", type=Path, help="write summary, queue CSV, Chrome trace, PNG here")
    _system_options(sim)
    phone.add_options(sim)  # --platform, --duration, ...: the phone-SoC scenario
    sim.set_defaults(func=_simulate)

    sweep = subparsers.add_parser(
        "sweep",
        help="run a grid of system-model configurations (resumable)",
        description="Run pairs x policies x modes x seeds; results appended to DIR/results.jsonl.",
    )
    sweep.add_argument("--grid", choices=("paper",), help="paper: 3 pairs x 4 algorithms x 7 modes")
    sweep.add_argument("--pairs", nargs="+", help="pairs (default: the paper's three)")
    sweep.add_argument("--policies", nargs="+", help="policies (default: the paper's four)")
    sweep.add_argument("--modes", nargs="+", help="modes (default: all seven)")
    sweep.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (default 0)")
    sweep.add_argument("--out", type=Path, default=Path("ahasd-sweep"), help="results directory")
    sweep.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    sweep.add_argument("--json", action="store_true", help="print the results as a JSON array")
    _system_options(sweep, many_traces=True)
    sweep.set_defaults(func=_sweep)

    rep = subparsers.add_parser(
        "report",
        help="ablation and comparison tables and figures from sweep results",
        description="Read DIR/results.jsonl (or a results file) and write tables and PNGs.",
    )
    rep.add_argument(
        "--results", type=Path, default=Path("ahasd-sweep"), help="results directory or file"
    )
    rep.add_argument("--out", type=Path, help="output directory (default: next to the results)")
    rep.add_argument("--json", action="store_true", help="print the tables as JSON")
    rep.set_defaults(func=_report)


def _system_options(parser: argparse.ArgumentParser, *, many_traces: bool = False) -> None:
    if many_traces:
        parser.add_argument(
            "--trace",
            nargs="+",
            help="traces to run every configuration on: files, built-in trace names, "
            "synthetic presets, iid:<acceptance>, or 'builtin' for every built-in trace "
            "(default: each pair's synthetic preset)",
        )
    else:
        parser.add_argument(
            "--trace",
            help="trace file, built-in trace name, synthetic preset or iid:<acceptance> "
            "(default: the pair's synthetic preset)",
        )
    parser.add_argument("--tokens", type=int, default=1024, help="generation length (1024)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="prompt KV length (128)")
    parser.add_argument("--fallback", action="store_true", help="autoregression fallback")
    parser.add_argument("--spec-dir", action="append", default=[], help="extra spec directory")
    for role, default in (
        ("npu", "npu-mobile"),
        ("pim", "lpddr5-pim"),
        ("cpu", "host-cpu"),
        ("gpu", "rtx4090-laptop"),
        ("specpim-pim", "gddr6-aim"),
    ):
        parser.add_argument(f"--{role}", default=default, help=f"{role} device ({default})")
    parser.add_argument("--draft-queue-tokens", type=int, default=64, help="look-ahead budget")
    parser.add_argument("--specpim-planned-draft", type=int, default=4, help="SpecPIM's K")
    parser.add_argument("--tvc-ratio-bits", type=int, default=32, help="TVC entry width (32)")
    parser.add_argument("--tvc-cycle-bits", type=int, default=32, help="TVC cycle width (32)")


def _policy_params(items: list[str]) -> tuple:
    params = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UserError(f"--policy-param {item!r}: expected KEY=VALUE")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if isinstance(value, list):
            value = tuple(value)
        params.append((key, value))
    return tuple(params)


def _base_settings(args, **extra) -> dict:
    return {
        "tokens": args.tokens,
        "prompt_tokens": args.prompt_tokens,
        "trace": args.trace if isinstance(args.trace, str | None) else None,
        "fallback": args.fallback,
        "npu": args.npu,
        "pim": args.pim,
        "cpu": args.cpu,
        "gpu": args.gpu,
        "specpim_pim": args.specpim_pim,
        "draft_queue_tokens": args.draft_queue_tokens,
        "specpim_planned_draft": args.specpim_planned_draft,
        "tvc_ratio_bits": args.tvc_ratio_bits,
        "tvc_cycle_bits": args.tvc_cycle_bits,
        "spec_dirs": tuple(str(Path(d).resolve()) for d in args.spec_dir),
        **extra,
    }


def _check_names(library, modes, pairs, policies) -> None:
    for mode in modes:
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    for pair in pairs:
        library.pair(pair)
    for policy in policies:
        if policy not in POLICY_NAMES:
            raise UserError(f"unknown policy {policy!r} (known: {', '.join(POLICY_NAMES)})")


def _check_devices(library, settings: RunSettings) -> None:
    library.device(settings.npu, "npu")
    library.device(settings.pim, "pim")
    library.device(settings.cpu, "cpu")
    library.device(settings.gpu, "gpu")
    library.device(settings.specpim_pim, "pim")
    for name in (settings.draft_model, settings.target_model):
        if name is not None:
            library.model(name)


def _simulate(args) -> int:
    if phone.wants_phone(args):
        return phone.run_cli(args)
    missing = [f"--{name}" for name in ("mode", "pair", "policy") if getattr(args, name) is None]
    if missing:
        raise UserError(f"simulate needs {', '.join(missing)} (or --platform for a phone SoC)")
    settings = run_settings(args, record_timeline=args.out is not None)
    library = load_library(settings.spec_dirs)
    _check_names(library, [settings.mode], [settings.pair], [settings.policy])
    _check_devices(library, settings)
    result = simulate(settings, library=library)
    summary = result.summary
    if args.out is not None:
        out = args.out
        report.write_json(out / "summary.json", summary)
        report.write_csv(out / "summary.csv", [summary])
        report.write_csv(
            out / "queue.csv",
            [
                {"time_s": t, "queued_tokens": n, "queued_batches": b, "unverified_tokens": u}
                for t, n, b, u in result.metrics.queue_samples
            ],
        )
        report.write_json(out / "chrome_trace.json", result.metrics.chrome_trace())
        report.plot_run(summary, result.metrics, out / "run.png")
    if args.json:
        print(json.dumps(summary))
        return 0
    print(report.format_table([summary], _TABLE))
    print()
    for device in summary["busy_s"]:
        busy, idle = summary["busy_s"][device], summary["idle_s"][device]
        print(f"{device:>4}: busy {busy:9.3f} s, idle {idle:9.3f} s")
    for note in summary["notes"]:
        print(f"note: {note}")
    if args.out is not None:
        print(f"wrote {args.out}/summary.json, summary.csv, queue.csv, chrome_trace.json, run.png")
    return 0


def _settings_key(settings: RunSettings) -> str:
    return json.dumps(dataclasses.asdict(settings), sort_keys=True)


def _load_results(path: Path) -> tuple[list[dict], int]:
    """Complete result lines of ``path`` and the byte length they occupy.

    A final line without its newline (the sweep was killed mid-write) is ignored; the
    caller truncates it away before appending.
    """
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    rows = []
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise UserError(f"{path}: line {number} is not JSON; move the file away") from None
    return rows, end


def _run_one(settings: RunSettings) -> dict:
    summary = simulate(settings).summary
    return {"key": _settings_key(settings), **summary}


def _progress(done: int, total: int, started: float, label: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    elapsed = time.perf_counter() - started
    sys.stderr.write(f"\rsweep [{bar}] {done}/{total} {elapsed:6.1f} s {label[:40]:<40}")
    sys.stderr.flush()


def _sweep(args) -> int:
    pairs = args.pairs or list(PAPER_PAIRS)
    policies = args.policies or list(PAPER_POLICIES)
    modes = args.modes or list(MODES)
    if args.grid == "paper":
        if args.pairs or args.policies or args.modes:
            raise UserError("--grid paper fixes pairs, policies and modes; drop --pairs etc.")
        pairs, policies, modes = list(PAPER_PAIRS), list(PAPER_POLICIES), list(MODES)
    if args.jobs < 1:
        raise UserError(f"--jobs must be at least 1, not {args.jobs}")
    traces = [None] if not args.trace else list(args.trace)
    if "builtin" in traces:
        names = [p.name.removesuffix(".jsonl") for p in builtin_trace_paths()]
        traces = [t for t in traces if t != "builtin"] + names
    base = _base_settings(args, trace=None)
    library = load_library(base["spec_dirs"])
    _check_names(library, modes, pairs, policies)
    grid = [
        RunSettings(**{**base, "trace": trace}, mode=mode, pair=pair, policy=policy, seed=seed)
        for seed in args.seeds
        for trace in traces
        for pair in pairs
        for policy in policies
        for mode in modes
    ]
    _check_devices(library, grid[0])
    for trace in traces:  # fail on a bad or short trace before running anything
        for pair in pairs:
            resolve_trace(trace, library.pair(pair).preset, args.tokens, args.seeds[0])
    results_path = args.out / RESULTS_FILE
    existing, valid_bytes = _load_results(results_path)
    done_keys = {row.get("key") for row in existing}
    pending = [s for s in grid if _settings_key(s) not in done_keys]
    args.out.mkdir(parents=True, exist_ok=True)
    new_rows = []
    started = time.perf_counter()
    with results_path.open("ab") as handle:
        handle.truncate(valid_bytes)  # drop a half-written last line

        def append(row: dict) -> None:
            handle.write((json.dumps(row) + "\n").encode())
            handle.flush()
            os.fsync(handle.fileno())
            new_rows.append(row)
            _progress(
                len(new_rows), len(pending), started, f"{row['mode']} {row['pair']} {row['policy']}"
            )

        if pending:
            _progress(0, len(pending), started, "")
        if args.jobs == 1 or len(pending) <= 1:
            for settings in pending:
                append(_run_one(settings))
        else:
            with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
                futures = [pool.submit(_run_one, s) for s in pending]
                for future in concurrent.futures.as_completed(futures):
                    append(future.result())
    if pending:
        sys.stderr.write("\n")
    wanted = {_settings_key(s) for s in grid}
    rows = [r for r in existing + new_rows if r.get("key") in wanted]
    order = {_settings_key(s): i for i, s in enumerate(grid)}
    rows.sort(key=lambda r: order[r["key"]])
    if args.json:
        print(json.dumps(rows))
        return 0
    skipped = len(grid) - len(pending)
    print(f"{len(grid)} runs ({len(pending)} new, {skipped} already in {results_path})")
    print(report.format_table(report.ablation_rows(rows, MODES), _ABLATION_TABLE))
    print(f"results: {results_path}  (tables and figures: ahasd report --results {args.out})")
    return 0


def _report(args) -> int:
    path = args.results / RESULTS_FILE if args.results.is_dir() else args.results
    if not path.exists():
        raise UserError(f"no results at {path} (run `ahasd sweep --out DIR` first)")
    rows, _ = _load_results(path)
    if not rows:
        raise UserError(f"{path} holds no finished runs")
    for number, row in enumerate(rows, 1):
        missing = [k for k in ("mode", "pair", "policy", "tokens_per_s") if k not in row]
        if missing:
            raise UserError(f"{path}: run {number} lacks {', '.join(missing)}")
    out = args.out or path.parent
    ablation = report.ablation_rows(rows, MODES)
    comparison = report.comparison_rows(rows, MODES)
    report.write_csv(out / "ablation.csv", ablation)
    report.write_csv(out / "comparison.csv", comparison)
    report.plot_ablation(rows, MODES, out / "ablation.png")
    report.plot_comparison(rows, MODES, out / "comparison.png")
    if args.json:
        print(json.dumps({"ablation": ablation, "comparison": comparison}))
        return 0
    print("Ablation (mean over pairs, policies and seeds; ratios are geometric means)")
    print(report.format_table(ablation, _ABLATION_TABLE))
    print()
    print("Comparison per pair")
    print(report.format_table(comparison, _COMPARISON_TABLE))
    print()
    print(f"wrote {out}/ablation.csv, comparison.csv, ablation.png, comparison.png")
    return 0
