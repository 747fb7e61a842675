"""``ahasd simulate``: one configuration of the system model.

It runs one configuration and prints a table (or one JSON object with ``--json``);
``--out DIR`` also writes the summary (JSON, CSV), the queue occupancy (CSV), a Chrome trace
of device activity and a PNG, as one output set. With ``--platform`` naming a phone SoC it
runs the phone-SoC scenario instead (:mod:`ahasd.sim.phone`): one phone mode or all of them,
a table or JSON, and with ``--out`` the summary, the thermal samples and a figure.

Every name, number and output path is checked before anything runs or is written; a bad
one is a UserError (exit 2). The options are built from the settings dataclasses
(:mod:`ahasd.cli.options`), mode names come from the mode table. The JSON objects
(``--json``, ``summary.json``) carry a ``schema`` field and are documented in
``docs/json.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ahasd.cli.args import path_arg
from ahasd.cli.options import (
    PHONE_VALUE_OPTIONS,
    add_phone_options,
    add_run_options,
    add_system_options,
    check_lengths,
    check_names,
    check_prepared,
    parse_policy_params,
    run_settings,
    wrote,
)
from ahasd.cli.progress import Progress
from ahasd.errors import UserError
from ahasd.output import OutputSet, check_folder
from ahasd.sim import report
from ahasd.sim.library.loading import load_library
from ahasd.sim.library.platforms import DEVICE_SETTINGS, PLATFORM_KIND
from ahasd.sim.modes import MODE_TABLE, find_mode
from ahasd.sim.phone import PHONE_MODE_TABLE, PHONE_MODES, PhoneSettings
from ahasd.sim.phone.figures import phone_figure
from ahasd.sim.phone.platform import PHONE_KIND
from ahasd.sim.scenarios import SCENARIOS, Scenario, scenario_of
from ahasd.sim.settings import RunSettings, field_default

__all__ = [
    "PHONE_FILES",
    "PHONE_SCHEMA",
    "RUN_SCHEMA",
    "RUN_TABLE",
    "SIMULATE_FILES",
    "register",
]

# The files each command writes into its --out folder, checked before it starts.
SIMULATE_FILES = ("summary.json", "summary.csv", "queue.csv", "chrome_trace.json", "run.png")
PHONE_FILES = ("summary.json", "summary.csv", "thermal.csv", "phone.png")
# The `schema` of every JSON object the command prints or writes (docs/json.md): the kind of
# object and the version of its keys; a consumer checks it before reading anything else.
RUN_SCHEMA = "ahasd-run/1"
PHONE_SCHEMA = "ahasd-phone-run/1"

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
# System-model options a platform file fixes: its devices, and the traces (each task's
# synthetic preset); given with --platform they are a UserError.
_NOT_WITH_PLATFORM = (*DEVICE_SETTINGS, "memory_sharing", "trace", "draft_model", "target_model")


def _mode_list() -> str:
    """The epilog of ``ahasd simulate --help``: every mode with its one line."""
    modes = "; ".join(f"{mode.name}: {mode.summary}" for mode in MODE_TABLE)
    phone = "; ".join(f"{mode.name}: {mode.summary}" for mode in PHONE_MODE_TABLE)
    return f"Modes: {modes}. Phone modes (with --platform): {phone}."


def register(subparsers) -> None:
    """Add ``ahasd simulate``."""
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
    add_phone_options(sim)
    sim.set_defaults(func=_simulate)


def _simulate(args) -> int:
    scenario = _scenario(args)
    if scenario.kind == PHONE_KIND:
        return _simulate_phone(args, scenario)
    missing = [f"--{name}" for name in ("mode", "pair", "policy") if getattr(args, name) is None]
    if missing:
        raise UserError(f"simulate needs {', '.join(missing)} (or --platform for a phone SoC)")
    settings = run_settings(args, record_timeline=args.out is not None)
    library = load_library(settings.spec_dirs)
    # The run's one lookup of its mode and one resolution of its settings: the prepared run
    # carries both to the hardware and the engine.
    mode = find_mode(settings.mode)
    check_names(library, [], [settings.pair], [settings.policy])
    prepared = scenario.prepare(settings, library, mode=mode)
    check_prepared(prepared)
    if args.out is not None:
        check_folder(args.out, option="--out", files=SIMULATE_FILES)
    result = scenario.run(prepared)
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
        print(wrote(written, args.out))
    return 0


# -- the phone-SoC scenario (``ahasd simulate --platform``) -----------------------------------


def _scenario(args) -> Scenario:
    """The scenario of --platform (the NPU+PIM one without it); a phone-only option outside
    the phone scenario is a UserError."""
    spec_dirs = tuple(str(Path(d).resolve()) for d in args.spec_dir)
    if args.platform is not None:
        scenario = scenario_of(args.platform, spec_dirs)
        if scenario.kind == PHONE_KIND:
            return scenario
    if args.no_arbiter:
        raise UserError("--no-arbiter needs --platform with a phone SoC")
    for name in PHONE_VALUE_OPTIONS:
        if getattr(args, name) is not None:
            raise UserError(f"--{name.replace('_', '-')} needs --platform with a phone SoC")
    return SCENARIOS[PLATFORM_KIND]


def _simulate_phone(args, scenario: Scenario) -> int:
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
    prepared = [scenario.prepare(one) for one in settings]
    if args.out is not None:
        check_folder(args.out, option="--out", files=PHONE_FILES)
    results = []
    for number, (one, run) in enumerate(zip(settings, prepared, strict=True)):
        label = f"{args.platform} {one.mode}" + (
            f" ({number + 1}/{len(settings)})" if len(settings) > 1 else ""
        )
        bar = Progress(label, one.duration_s, "simulated s")
        results.append(scenario.run(run, progress=bar.update))
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
        print(wrote(written, args.out))
    return 0
