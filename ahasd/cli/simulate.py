"""``ahasd simulate``, ``ahasd sweep`` and ``ahasd report``: the system model's command line.

- ``simulate`` runs one configuration and prints a table (or one JSON object with
  ``--json``); ``--out DIR`` also writes the summary (JSON, CSV), the queue occupancy (CSV),
  a Chrome trace of device activity and a PNG, as one output set. With ``--platform`` it
  runs the phone-SoC scenario instead (:mod:`ahasd.sim.phone`): one phone mode or all of
  them, a table or JSON, and with ``--out`` the summary, the thermal samples and a figure.
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
one is a UserError (exit 2). Defaults shown in the help come from the settings
dataclasses, mode names from the mode table, policy parameters from the policy classes.
The JSON objects (``--json``, ``summary.json``, ``results.jsonl``) carry a ``schema`` field
and are documented in ``docs/json.md``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import textwrap
from pathlib import Path

from ahasd.cli.args import (
    DURATION_MAX_S,
    JOBS_MAX,
    KV_LENGTH_MAX,
    SEED_MAX,
    UniqueList,
    integer,
    path_arg,
    real,
)
from ahasd.cli.progress import Progress, end_line
from ahasd.errors import UserError
from ahasd.output import OutputSet, check_folder
from ahasd.params import TVCParams
from ahasd.sim import comparison, policies, report
from ahasd.sim.grid import GRIDS, PAPER_GRID
from ahasd.sim.grid_files import check_one_setter_per_field, expand, load_grid
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.platforms import (
    DEFAULT_PLATFORM,
    DEVICE_SETTINGS,
    MEMORY_SHARING,
    RANK_SPLITS,
)
from ahasd.sim.modes import MODE_TABLE, MODES, check_tvc_widths_for_runs, find_mode, simulate
from ahasd.sim.phone import (
    PHONE_MODE_TABLE,
    PHONE_MODES,
    TASKS,
    PhoneSettings,
    find_platform,
    simulate_phone,
)
from ahasd.sim.phone.figures import phone_figure
from ahasd.sim.phone.platform import known_platforms
from ahasd.sim.phone.settings import SKIN_LIMIT_RANGE
from ahasd.sim.policies import POLICY_NAMES, make_policy
from ahasd.sim.results import RESULTS_FILE, ROW_SCHEMA, finished_rows, read_results
from ahasd.sim.settings import (
    NONLINEAR_WITHOUT_AAU,
    RunSettings,
    controller_params,
    field_default,
    resolve,
)
from ahasd.sim.sweep import BACKENDS, run_sweep
from ahasd.sim.traces.sources import resolve_trace

__all__ = [
    "ABLATION_SCHEMA",
    "COMPARISON_SCHEMA",
    "DEFAULT_JOBS",
    "DEFAULT_RESULTS",
    "PHONE_FILES",
    "PHONE_SCHEMA",
    "REPORT_FILES",
    "REPORT_SCHEMA",
    "RESULTS_FILE",
    "RUN_SCHEMA",
    "RUN_TABLE",
    "SIMULATE_FILES",
    "SWEEP_SCHEMA",
    "add_backend_options",
    "add_run_options",
    "add_system_options",
    "check_backend",
    "check_devices",
    "check_lengths",
    "check_names",
    "parse_assignments",
    "parse_policy_params",
    "policy_parameters",
    "register",
    "run_settings",
]

# The files each command writes into its --out folder, checked before it starts.
SIMULATE_FILES = ("summary.json", "summary.csv", "queue.csv", "chrome_trace.json", "run.png")
PHONE_FILES = ("summary.json", "summary.csv", "thermal.csv", "phone.png")
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
DEFAULT_JOBS = min(2, os.cpu_count() or 1)
# The `schema` of every JSON object the commands print or write (docs/json.md): the kind of
# object and the version of its keys; a consumer checks it before reading anything else.
RUN_SCHEMA = "ahasd-run/1"
PHONE_SCHEMA = "ahasd-phone-run/1"
SWEEP_SCHEMA = ROW_SCHEMA
REPORT_SCHEMA = "ahasd-report/1"
ABLATION_SCHEMA = "ahasd-ablation-row/1"
COMPARISON_SCHEMA = "ahasd-comparison-row/1"

# (key, header, format spec) of the one-run table of `simulate` (and `cosim`).
RUN_TABLE = [
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".3f"),
    ("acceptance_rate", "accept", ".3f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("drafted", "drafted", "d"),
    ("accepted", "accepted", "d"),
    ("rejected", "rejected", "d"),
    ("squashed", "squashed", "d"),
]
_PHONE_TABLE = [
    ("mode", "mode", ""),
    ("tokens_per_s", "tokens/s", ".2f"),
    ("energy_per_token_mj", "mJ/token", ".1f"),
    ("package_power_w", "package W", ".2f"),
    ("acceptance_rate", "accept", ".3f"),
    ("tokens_per_s_first_60s", "tok/s 1st min", ".2f"),
    ("tokens_per_s_last_60s", "tok/s last min", ".2f"),
    ("peak_skin_c", "peak skin C", ".1f"),
    ("throttle_events", "throttles", "d"),
    ("final_gpu_clock_mhz", "final MHz", ".0f"),
]
# Phone-only options taking a value (argparse destinations); --no-arbiter is a flag.
_PHONE_OPTIONS = (
    "duration",
    "task",
    "dram_pj_per_bit",
    "skin_limit",
    "ambient",
    "start_temp",
    "draft_weights",
)
# System-model options a platform file fixes: its devices, and the traces (each task's
# synthetic preset); given with --platform they are a UserError.
_NOT_WITH_PLATFORM = (*DEVICE_SETTINGS, "memory_sharing", "trace", "draft_model", "target_model")


def _json_default(value) -> str:
    """A policy parameter's default as it is written after ``KEY=`` (JSON)."""
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, separators=(",", ":"))


def policy_parameters() -> str:
    """Each policy's parameters with their defaults, read from the policy classes (and the
    fallback wrapper's, prefixed ``fallback_``), as one line for ``--help``."""
    classes = {}
    for name in policies.__all__:
        item = getattr(policies, name)
        if isinstance(item, type) and getattr(item, "name", None) in POLICY_NAMES:
            classes[item.name] = item

    def listing(cls, prefix: str = "") -> str:
        parameters = inspect.signature(cls.__init__).parameters.values()
        return " ".join(
            f"{prefix}{p.name}={_json_default(p.default)}"
            for p in parameters
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        )

    parts = [f"{name}: {listing(classes[name])}" for name in POLICY_NAMES]
    parts.append(f"with --fallback: {listing(policies.Fallback, 'fallback_')}")
    return "; ".join(parts)


def add_run_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The options naming one run, shared by ``ahasd simulate`` and ``ahasd cosim``."""
    suffix = "" if required else " (required)"
    parser.add_argument(
        "--mode", required=required, help=f"execution mode: {', '.join(MODES)}{suffix}"
    )
    parser.add_argument(
        "--pair", required=required, help=f"model pair: {', '.join(PAPER_GRID.pairs)}{suffix}"
    )
    parser.add_argument(
        "--policy", required=required, help=f"drafting policy: {', '.join(POLICY_NAMES)}{suffix}"
    )
    seed = field_default(RunSettings, "seed")
    parser.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=seed,
        help=f"run seed, 0..{SEED_MAX} (default: {seed})",
    )
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="policy parameter, repeatable; VALUE is JSON or a string. Parameters (defaults): "
        + policy_parameters(),
    )
    parser.add_argument("--draft-model", help="override the pair's draft model")
    parser.add_argument("--target-model", help="override the pair's target model")
    parser.add_argument("--json", action="store_true", help="print one JSON object (docs/json.md)")


def add_system_options(parser: argparse.ArgumentParser, *, many_traces: bool = False) -> None:
    """Trace, length, devices and controller widths: shared by ``simulate``, ``sweep`` and
    ``cosim``. Defaults are :class:`RunSettings`'s; lengths are bounded by the controller's
    length fields (:data:`~ahasd.cli.args.KV_LENGTH_MAX`)."""

    def default(name: str):
        return field_default(RunSettings, name)

    if many_traces:
        parser.add_argument(
            "--trace",
            nargs="+",
            action=UniqueList,
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
    lengths = f"--prompt-tokens + --tokens <= {KV_LENGTH_MAX}"
    parser.add_argument(
        "--tokens",
        type=integer(1, KV_LENGTH_MAX - 1),
        default=default("tokens"),
        help=f"generation length, tokens; {lengths} (default: {default('tokens')})",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=integer(1, KV_LENGTH_MAX - 1),
        default=default("prompt_tokens"),
        help=f"prompt KV length, tokens; {lengths} (default: {default('prompt_tokens')})",
    )
    parser.add_argument("--fallback", action="store_true", help="autoregression fallback")
    parser.add_argument(
        "--spec-dir", action="append", default=[], help="extra spec directory (repeatable)"
    )
    for name in DEVICE_SETTINGS:
        option = name.replace("_", "-")
        parser.add_argument(f"--{option}", help=f"{option} device (default: the platform's)")
    parser.add_argument(
        "--memory-sharing",
        choices=MEMORY_SHARING,
        help="NPU and PIM share the LPDDR5 ranks and bus, or have memories of their own "
        "(default: the platform's)",
    )
    parser.add_argument(
        "--rank-split",
        choices=RANK_SPLITS,
        help="how the PIM's ranks are divided between the models: target-first (the target "
        "on the ranks its weights and KV cache need, the draft on the rest), footprint (each "
        "on just what it needs) or fixed (the PIM file's draft_ranks) (default: the "
        "platform's)",
    )
    parser.add_argument(
        "--preverify-kv-reuse",
        choices=("on", "off"),
        help="whether the NPU skips re-verifying tokens a pre-verification accepted, reading "
        "the KV entries the PIM wrote; needs shared memory (default: the platform's)",
    )
    parser.add_argument(
        "--spec-override",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a spec-file number, e.g. devices.npu-mobile.memory_bandwidth=1e11 "
        "(NAME may be @npu, @pim, ...; repeatable)",
    )
    parser.add_argument(
        "--controller-param",
        action="append",
        default=[],
        metavar="BLOCK.FIELD=VALUE",
        help="override an EDC/TVC/GTSU parameter, e.g. edc.llr_bits=2 (repeatable)",
    )
    parser.add_argument(
        "--draft-queue-tokens",
        type=integer(1, KV_LENGTH_MAX),
        default=default("draft_queue_tokens"),
        help="look-ahead budget: unverified draft tokens the draft queue may hold "
        f"(default: {default('draft_queue_tokens')})",
    )
    parser.add_argument(
        "--specpim-planned-draft",
        type=integer(1, KV_LENGTH_MAX),
        default=default("specpim_planned_draft"),
        help="SpecPIM's K: the draft length its GPU/PIM split is balanced for "
        f"(default: {default('specpim_planned_draft')})",
    )
    parser.add_argument(
        "--tvc-ratio-bits",
        type=integer(16, 48),
        default=default("tvc_ratio_bits"),
        help=f"TVC table entry width, 16..48 bits (default: {default('tvc_ratio_bits')})",
    )
    parser.add_argument(
        "--tvc-cycle-bits",
        type=integer(16, 48),
        default=default("tvc_cycle_bits"),
        help=f"TVC cycle-count width, 16..48 bits (default: {default('tvc_cycle_bits')})",
    )
    parser.add_argument(
        "--nonlinear-without-aau",
        choices=NONLINEAR_WITHOUT_AAU,
        default=default("nonlinear_without_aau"),
        help="where pim-async sends the PIM's nonlinear operators: the NPU's vector unit "
        f"or the host CPU ({default('nonlinear_without_aau')})",
    )


def _add_phone_options(parser: argparse.ArgumentParser) -> None:
    """The phone-SoC options of ``ahasd simulate``; defaults are :class:`PhoneSettings`'s."""

    def default(name: str):
        return field_default(PhoneSettings, name)

    group = parser.add_argument_group(
        "phone SoC (spec section 5)",
        "With --platform naming a phone SoC, simulate sustained generation on it: modes "
        f"{', '.join(PHONE_MODES)} (or 'all'); --mode defaults to {default('mode')}, "
        f"--policy to {default('policy')} (with the autoregression fallback), --pair to the "
        "platform's; --tokens is the length of each back-to-back request.",
    )
    group.add_argument(
        "--platform",
        help="NPU+PIM platform for the modes above (table2 (default), table2-whole-memory, "
        "table2-per-unit, "
        "artifact, or a file of yours under --spec-dir), or a phone SoC class (sd8gen3, m4) "
        "for the phone modes (sim/specs/platforms)",
    )
    group.add_argument(
        "--duration",
        type=real(0.0, DURATION_MAX_S, low_open=True),
        help=f"simulated seconds of generation, at most {DURATION_MAX_S:g} "
        f"(default: {default('duration_s'):g})",
    )
    group.add_argument(
        "--task", help=f"task type: {', '.join(TASKS)} (mix: requests cycle; default: mix)"
    )
    group.add_argument(
        "--dram-pj-per-bit",
        type=real(0.0, 1000.0, low_open=True),
        help="DRAM energy, pJ/bit, at most 1000 (default: the platform's spec files, 10)",
    )
    group.add_argument(
        "--skin-limit",
        type=real(*SKIN_LIMIT_RANGE),
        help=f"skin throttle limit, {SKIN_LIMIT_RANGE[0]:g}..{SKIN_LIMIT_RANGE[1]:g} C "
        "(default: 45)",
    )
    group.add_argument(
        "--ambient", type=real(-20.0, 60.0), help="ambient temperature, -20..60 C (default: 25)"
    )
    group.add_argument(
        "--start-temp",
        type=real(-20.0, 60.0),
        help="initial die/skin temperature, -20..60 C (default: the ambient)",
    )
    group.add_argument(
        "--no-arbiter", action="store_true", help="do not shorten drafts above 41 C skin"
    )
    group.add_argument(
        "--draft-weights",
        help="spill: the draft weights that do not fit the NPU's SRAM stream from LPDDR5X; "
        "sram: all read from SRAM as if they fit (spec section 5's reading) (default: spill)",
    )


def _mode_list() -> str:
    """The epilog of ``ahasd simulate --help``: every mode with its one line."""
    modes = "; ".join(f"{mode.name}: {mode.summary}" for mode in MODE_TABLE)
    phone = "; ".join(f"{mode.name}: {mode.summary}" for mode in PHONE_MODE_TABLE)
    return f"Modes: {modes}. Phone modes (with --platform): {phone}."


def register(subparsers) -> None:
    """Add ``ahasd simulate``, ``ahasd sweep`` and ``ahasd report``."""
    sim = subparsers.add_parser(
        "simulate",
        help="simulate one configuration of the NPU+PIM system model",
        description="Simulate speculative decoding of one pair with one policy in one mode.",
        epilog=_mode_list(),
    )
    # --mode, --pair and --policy are required without --platform (checked in _simulate).
    add_run_options(sim, required=False)
    sim.add_argument(
        "--out",
        type=path_arg,
        help="also write summary, queue CSV, Chrome trace and PNG into this folder "
        "(default: none, print only)",
    )
    add_system_options(sim)
    _add_phone_options(sim)
    sim.set_defaults(func=_simulate)

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
    sweep.add_argument(
        "--platforms",
        nargs="+",
        action=UniqueList,
        help=f"NPU+PIM platforms, or 'all' for every one in the spec library (default: "
        f"{DEFAULT_PLATFORM})",
    )
    sweep.add_argument(
        "--pairs",
        nargs="+",
        action=UniqueList,
        help=f"pairs (default: the paper's {len(paper.pairs)}: {', '.join(paper.pairs)})",
    )
    sweep.add_argument(
        "--policies",
        nargs="+",
        action=UniqueList,
        help=f"policies (default: the paper's {len(paper.policies)}: {', '.join(paper.policies)})",
    )
    sweep.add_argument(
        "--modes",
        nargs="+",
        action=UniqueList,
        help=f"modes (default: all {len(paper.modes)})",
    )
    sweep.add_argument(
        "--seeds",
        nargs="+",
        type=integer(0, SEED_MAX),
        action=UniqueList,
        help="seeds (default: 0)",
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


def check_backend(args: argparse.Namespace) -> None:
    """UserError, before any work, on ``--address`` without ``--backend ray`` (it would be
    ignored) and on ``--backend ray`` where Ray is not installed."""
    if args.address is not None and args.backend != "ray":
        raise UserError(f"--address needs --backend ray (the {args.backend} backend has none)")
    if args.backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UserError("--backend ray needs Ray: pip install 'ahasd[ray]'")


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--backend`` and ``--address``: where the runs of a sweep execute."""
    parser.add_argument(
        "--jobs",
        type=integer(1, JOBS_MAX),
        default=DEFAULT_JOBS,
        help=f"worker processes (local backend) or CPUs of a local Ray instance, 1..{JOBS_MAX} "
        f"(default: {DEFAULT_JOBS})",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: a process pool; ray: Ray tasks (pip install 'ahasd[ray]') (default: local)",
    )
    parser.add_argument(
        "--address",
        help="with --backend ray: a Ray cluster's address (default: a local instance)",
    )


# What json.loads's ValueError for an integer past sys.get_int_max_str_digits() says.
_TOO_MANY_DIGITS = "the value is an integer of more digits than any parameter takes"


def parse_assignments(items: list[str], option: str) -> tuple:
    """``PATH=VALUE`` items of ``option`` as ``((path, value), ...)``; VALUE is JSON (a
    number for a spec override, an integer or string for a controller parameter)."""
    parsed = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UserError(f"{option} {item!r}: expected PATH=VALUE")
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            value = text
        except ValueError:  # an integer past Python's digit limit
            raise UserError(f"{option} {key}: {_TOO_MANY_DIGITS}") from None
        parsed.append((key, value))
    return tuple(parsed)


def parse_policy_params(items: list[str]) -> tuple:
    """``--policy-param KEY=VALUE`` items as ``((key, value), ...)``; VALUE is JSON if it
    parses (a list becomes a tuple), else the string."""
    params = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UserError(f"--policy-param {item!r}: expected KEY=VALUE")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        except RecursionError:
            raise UserError(
                f"--policy-param {key}: the value nests too deeply (a parameter is a number, "
                "a string, a boolean or a flat list)"
            ) from None
        except ValueError:  # an integer past Python's digit limit
            raise UserError(f"--policy-param {key}: {_TOO_MANY_DIGITS}") from None
        if isinstance(value, list):
            value = tuple(value)
        params.append((key, value))
    return tuple(params)


def check_lengths(tokens: int, prompt_tokens: int) -> None:
    """UserError unless the KV length a run reaches, ``prompt_tokens + tokens``, fits the
    controller's length fields. Checked for every mode alike (the synchronous ones do not use
    the controller) so that a setting is accepted or refused whichever mode runs it."""
    total = prompt_tokens + tokens
    if total > KV_LENGTH_MAX:
        raise UserError(
            f"--prompt-tokens {prompt_tokens} + --tokens {tokens} = {total} is more than "
            f"{KV_LENGTH_MAX}, the longest KV cache the controller's "
            f"{TVCParams().length_bits}-bit length fields hold (in every mode)"
        )


def _base_settings(args, **extra) -> dict:
    check_lengths(args.tokens, args.prompt_tokens)
    settings = {
        "tokens": args.tokens,
        "prompt_tokens": args.prompt_tokens,
        "trace": args.trace if isinstance(args.trace, str | None) else None,
        "fallback": args.fallback,
        **{name: getattr(args, name) for name in DEVICE_SETTINGS},
        "memory_sharing": args.memory_sharing,
        "rank_split": args.rank_split,
        "preverify_kv_reuse": {None: None, "on": True, "off": False}[args.preverify_kv_reuse],
        "draft_queue_tokens": args.draft_queue_tokens,
        "specpim_planned_draft": args.specpim_planned_draft,
        "tvc_ratio_bits": args.tvc_ratio_bits,
        "tvc_cycle_bits": args.tvc_cycle_bits,
        "nonlinear_without_aau": args.nonlinear_without_aau,
        "spec_overrides": parse_assignments(args.spec_override, "--spec-override"),
        "controller_params": parse_assignments(args.controller_param, "--controller-param"),
        "spec_dirs": tuple(str(Path(d).resolve()) for d in args.spec_dir),
    }
    if getattr(args, "platform", None):
        settings["platform"] = args.platform
    return {**settings, **extra}


def run_settings(args: argparse.Namespace, **extra: object) -> RunSettings:
    """The settings of the one run named by :func:`add_run_options` (simulate and cosim)."""
    return RunSettings(
        **_base_settings(
            args,
            mode=args.mode,
            pair=args.pair,
            policy=args.policy,
            seed=args.seed,
            policy_params=parse_policy_params(args.policy_param),
            draft_model=args.draft_model,
            target_model=args.target_model,
            **extra,
        )
    )


def check_names(library, modes, pairs, policies) -> None:
    """UserError (listing the known names) on an unknown mode, pair or policy."""
    for mode in modes:
        find_mode(mode)
    for pair in pairs:
        library.pair(pair)
    for policy in policies:
        if policy not in POLICY_NAMES:
            raise UserError(f"unknown policy {policy!r} (known: {', '.join(POLICY_NAMES)})")


def check_devices(library, settings: RunSettings) -> None:
    """UserError on an unknown platform, a device of ``settings`` that is unknown or of the
    wrong kind, a bad spec override or controller parameter, or an unknown model override."""
    resolve(settings, library)
    controller_params(settings)
    for name in (settings.draft_model, settings.target_model):
        if name is not None:
            library.model(name)


def _wrote(outputs: dict[Path, bool], folder: Path) -> str:
    """``wrote DIR/a, b (unchanged: c)``: what a commit did, for the last line of output."""
    written = [p.name for p, changed in outputs.items() if changed]
    kept = [p.name for p, changed in outputs.items() if not changed]
    text = f"wrote {folder}/{', '.join(written)}" if written else f"nothing new in {folder}"
    return text + (f" (unchanged: {', '.join(kept)})" if kept else "")


def _simulate(args) -> int:
    if _wants_phone(args):
        return _simulate_phone(args)
    missing = [f"--{name}" for name in ("mode", "pair", "policy") if getattr(args, name) is None]
    if missing:
        raise UserError(f"simulate needs {', '.join(missing)} (or --platform for a phone SoC)")
    settings = run_settings(args, record_timeline=args.out is not None)
    library = load_library(settings.spec_dirs)
    check_names(library, [settings.mode], [settings.pair], [settings.policy])
    check_devices(library, settings)
    if args.out is not None:
        check_folder(args.out, option="--out", files=SIMULATE_FILES)
    result = simulate(settings, library=library)
    summary = {"schema": RUN_SCHEMA, **result.summary}
    written = {}
    if args.out is not None:
        out = args.out
        outputs = OutputSet(option="--out")
        outputs.add(out / "summary.json", report.json_text(summary))
        outputs.add(out / "summary.csv", report.csv_text([result.summary]))
        outputs.add(
            out / "queue.csv",
            report.csv_text(
                [
                    {"time_s": t, "queued_tokens": n, "queued_batches": b, "unverified_tokens": u}
                    for t, n, b, u in result.metrics.queue_samples
                ]
            ),
        )
        outputs.add(out / "chrome_trace.json", report.json_text(result.metrics.chrome_trace()))
        outputs.add(out / "run.png", report.png_bytes(report.run_figure(summary, result.metrics)))
        written = outputs.commit()
    if args.json:
        print(json.dumps(summary))
        return 0
    print(report.format_table([summary], RUN_TABLE))
    print()
    for device in summary["busy_s"]:
        busy, idle = summary["busy_s"][device], summary["idle_s"][device]
        print(f"{device:>4}: busy {busy:9.3f} s, idle {idle:9.3f} s")
    for note in summary["notes"]:
        print(f"note: {note}")
    if written:
        print(_wrote(written, args.out))
    return 0


# -- the phone-SoC scenario (``ahasd simulate --platform``) -----------------------------------


def _wants_phone(args) -> bool:
    """True with --platform naming a phone SoC; a phone-only option without one is a
    UserError."""
    spec_dirs = [str(Path(d).resolve()) for d in args.spec_dir]
    if args.platform is not None and args.platform not in load_library(spec_dirs).platforms:
        if args.platform in known_platforms(spec_dirs):
            return True
        load_library(spec_dirs).platform(args.platform)  # unknown: the error lists both kinds
    if args.no_arbiter:
        raise UserError("--no-arbiter needs --platform with a phone SoC")
    for name in _PHONE_OPTIONS:
        if getattr(args, name) is not None:
            raise UserError(f"--{name.replace('_', '-')} needs --platform with a phone SoC")
    return False


def _simulate_phone(args) -> int:
    """``ahasd simulate --platform P``: run, print a table or JSON, write figures with --out.

    One mode prints (and writes as ``summary.json``) one object; ``--mode all`` a JSON array
    of one object per mode, the shape ``sweep --json`` has for many runs.
    """
    for name in _NOT_WITH_PLATFORM:
        if getattr(args, name) is not None and getattr(args, name) != field_default(
            RunSettings, name
        ):
            raise UserError(
                f"--{name.replace('_', '-')} does not apply with --platform (the platform file "
                "names its devices; traces are the pair's synthetic preset per task)"
            )
    for name in ("spec_override", "controller_param"):
        if getattr(args, name):
            raise UserError(
                f"--{name.replace('_', '-')} applies to the NPU+PIM modes, not to a phone SoC"
            )
    check_lengths(args.tokens, args.prompt_tokens)
    modes = list(PHONE_MODES) if args.mode == "all" else [args.mode or None]
    given = {
        "pair": args.pair,
        "policy": args.policy,
        "task": args.task,
        "duration_s": args.duration,
        "dram_pj_per_bit": args.dram_pj_per_bit,
        "skin_limit_c": args.skin_limit,
        "ambient_c": args.ambient,
        "start_c": args.start_temp,
        "draft_weights": args.draft_weights,
    }
    common = {
        "platform": args.platform,
        # An option not given (or given empty) leaves the PhoneSettings default.
        **{name: value for name, value in given.items() if value is not None and value != ""},
        "tokens": args.tokens,
        "prompt_tokens": args.prompt_tokens,
        "seed": args.seed,
        "arbiter": not args.no_arbiter,
        "policy_params": parse_policy_params(args.policy_param),
        "spec_dirs": tuple(str(Path(d).resolve()) for d in args.spec_dir),
    }
    # Validate every mode's settings, the platform and --out before anything runs.
    settings = [
        PhoneSettings(**common) if mode is None else PhoneSettings(mode=mode, **common)
        for mode in modes
    ]
    find_platform(args.platform, common["spec_dirs"])
    if args.out is not None:
        check_folder(args.out, option="--out", files=PHONE_FILES)
    results = []
    for number, one in enumerate(settings):
        label = f"{args.platform} {one.mode}" + (
            f" ({number + 1}/{len(settings)})" if len(settings) > 1 else ""
        )
        bar = Progress(label, one.duration_s, "simulated s")
        results.append(simulate_phone(one, progress=bar.update))
        bar.close()
    rows = []
    for result in results:
        summary = result.summary
        summary["final_gpu_clock_mhz"] = summary["final_gpu_clock_hz"] / 1e6
        rows.append({"schema": PHONE_SCHEMA, **summary})
    document = rows if args.mode == "all" else rows[0]
    written = {}
    if args.out is not None:
        out = args.out
        outputs = OutputSet(option="--out")
        outputs.add(out / "summary.json", report.json_text(document))
        flat = [
            {k: v for k, v in r.summary.items() if not isinstance(v, list | dict)} for r in results
        ]
        outputs.add(out / "summary.csv", report.csv_text(flat))
        outputs.add(
            out / "thermal.csv",
            report.csv_text(
                [{"mode": r.summary["mode"], **sample} for r in results for sample in r.samples]
            ),
        )
        figure = phone_figure(results, title=f"{args.platform}: sustained generation")
        outputs.add(out / "phone.png", report.png_bytes(figure))
        written = outputs.commit()
    if args.json:
        print(json.dumps(document))
        return 0
    first = rows[-1]  # the last mode drafts, so it names the policy
    print(
        f"{args.platform}: {first['pair']}, policy {first['policy']}, task {first['task']}, "
        f"{first['duration_s']:g} s, DRAM {first['dram_pj_per_bit']:g} pJ/bit, skin limit "
        f"{first['skin_limit_c']:g} C"
    )
    print(report.format_table(rows, _PHONE_TABLE))
    for result in results:
        for event in result.throttle_log[:3]:
            print(
                f"{result.summary['mode']}: t={event['time_s']:.1f} s {event['reason']}: "
                f"{event['from_hz'] / 1e6:.0f} -> {event['to_hz'] / 1e6:.0f} MHz at skin "
                f"{event['skin_c']:.1f} C"
            )
        if len(result.throttle_log) > 3:
            print(
                f"{result.summary['mode']}: ... {len(result.throttle_log) - 3} more clock changes"
            )
    for note in dict.fromkeys(n for r in rows for n in r["notes"]):
        print(f"note: {note}")
    if written:
        print(_wrote(written, args.out))
    return 0


# -- sweep and report -------------------------------------------------------------------------


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
    base = _base_settings(args, trace=None)
    base.pop("platform", None)
    if args.platforms == ["all"]:
        args.platforms = sorted(load_library(tuple(args.spec_dir)).platforms)
    given = {
        "pair": args.pairs,
        "policy": args.policies,
        "mode": args.modes,
        "seed": args.seeds,
        "trace": args.trace,
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
        "seed": [0],
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
    print(_wrote(written, out))
    return 0
