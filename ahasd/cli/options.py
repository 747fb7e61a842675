"""The options of the system-model commands, built from the settings dataclasses.

A run setting's flag is read off its field (:class:`~ahasd.sim.settings.RunSettings`,
:class:`~ahasd.sim.phone.PhoneSettings`): ``--field-name`` (or the metadata's ``flag``),
the help text (``help``) followed by the default as ``default_help`` words it (``{}`` is the
field's default; without it, ``(default: X)`` for a number or a word, nothing otherwise),
``bounds`` (:func:`~ahasd.cli.args.integer` for integers, :func:`~ahasd.cli.args.real` for
numbers, ``low_open``), ``choices`` (a mapping turns the word into the value), ``metavar``,
and ``repeat`` for a repeatable option. A boolean field is a switch that gives the opposite
of its default. What this module holds by hand is the layout (which settings each command
shows, in the order ``--help`` lists them) and the names only known above the settings.

:func:`run_settings` turns the parsed options back into :class:`RunSettings`. The options
that are not settings stay explicit: ``--json``, the list options of ``sweep`` and
``reproduce`` (:func:`add_list_options`), the backend (:func:`add_backend_options`).
Shared by ``simulate``, ``sweep``, ``cosim`` and ``reproduce``, as are the checks of names
and devices every one of them makes before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
from pathlib import Path

from ahasd.cli.args import JOBS_MAX, UniqueList, integer, real
from ahasd.errors import UserError
from ahasd.params import TVCParams
from ahasd.sim import policies
from ahasd.sim.grid import PAPER_GRID
from ahasd.sim.library.platforms import DEVICE_SETTINGS
from ahasd.sim.modes import MODES, find_mode
from ahasd.sim.modes.prepare import PreparedRun, prepare_run
from ahasd.sim.phone import PHONE_MODES, PhoneSettings
from ahasd.sim.policies import POLICY_NAMES
from ahasd.sim.settings import (
    KV_LENGTH_MAX,
    RunSettings,
    field_default,
)
from ahasd.sim.sweep import BACKENDS

__all__ = [
    "DEFAULT_JOBS",
    "NOT_FLAGS",
    "PHONE_OPTIONS",
    "PHONE_VALUE_OPTIONS",
    "RUN_OPTIONS",
    "SYSTEM_OPTIONS",
    "add_backend_options",
    "add_list_options",
    "add_phone_options",
    "add_run_options",
    "add_setting",
    "add_system_options",
    "check_backend",
    "check_devices",
    "check_lengths",
    "check_names",
    "check_prepared",
    "parse_assignments",
    "parse_policy_params",
    "policy_parameters",
    "run_settings",
    "settings_values",
    "system_settings",
    "wrote",
]

# -- the layout: which settings each command shows, in --help's order --------------------------

# The RunSettings naming one run (simulate, cosim).
RUN_OPTIONS = ("mode", "pair", "policy", "seed", "policy_params", "draft_model", "target_model")
# The RunSettings of every run of simulate, sweep and cosim: trace, lengths, devices, widths.
SYSTEM_OPTIONS = (
    "trace",
    "tokens",
    "prompt_tokens",
    "fallback",
    "spec_dirs",
    *DEVICE_SETTINGS,
    "memory_sharing",
    "rank_split",
    "preverify_kv_reuse",
    "spec_overrides",
    "controller_params",
    "draft_queue_tokens",
    "specpim_planned_draft",
    "tvc_ratio_bits",
    "tvc_cycle_bits",
    "nonlinear_without_aau",
)
# The PhoneSettings only a phone run has (simulate's phone group, after RunSettings.platform).
PHONE_OPTIONS = (
    "duration_s",
    "task",
    "dram_pj_per_bit",
    "skin_limit_c",
    "ambient_c",
    "start_c",
    "arbiter",
    "draft_weights",
)
# Fields no flag sets, and why. Every other field of either class is a flag of simulate:
# a PhoneSettings field not in PHONE_OPTIONS is the RunSettings flag of the same name.
NOT_FLAGS = {
    (RunSettings, "record_timeline"): "set by simulate --out, which writes the Chrome trace",
    (PhoneSettings, "fallback"): "a phone run always drafts with the fallback; --fallback is "
    "the NPU+PIM modes'",
}

_FIELDS = {
    settings_class: {item.name: item for item in dataclasses.fields(settings_class)}
    for settings_class in (RunSettings, PhoneSettings)
}
_RUN_FIELDS = _FIELDS[RunSettings]
_PHONE_FIELDS = _FIELDS[PhoneSettings]


def _flag(item: dataclasses.Field) -> str:
    return item.metadata.get("flag", "--" + item.name.replace("_", "-"))


def _dest(item: dataclasses.Field) -> str:
    """Where argparse keeps the option: its flag's words, as argparse names it."""
    return _flag(item).removeprefix("--").replace("-", "_")


# Destinations of the phone options taking a value, in order; --no-arbiter is a switch.
PHONE_VALUE_OPTIONS = tuple(
    _dest(_PHONE_FIELDS[name])
    for name in PHONE_OPTIONS
    if not isinstance(_PHONE_FIELDS[name].default, bool)
)


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


# What follows a field's help text where the names come from above the settings (the mode
# table, the paper grid, the policy table), which the settings module cannot import.
_LISTINGS = {
    "mode": lambda: ": " + ", ".join(MODES),
    "pair": lambda: ": " + ", ".join(PAPER_GRID.pairs),
    "policy": lambda: ": " + ", ".join(POLICY_NAMES),
    "policy_params": lambda: " " + policy_parameters(),
}


def _shown(default) -> str:
    return f"{default:g}" if isinstance(default, float) else str(default)


def _help(item: dataclasses.Field, note: str = "") -> str:
    """The help text of a setting's flag: its field's, the listing, ``note``, the default."""
    default = item.default
    worded = item.metadata.get("default_help")
    if worded is None:
        plain = isinstance(default, int | float | str) and not isinstance(default, bool)
        worded = "(default: {})" if plain else ""
    text = item.metadata["help"] + _LISTINGS.get(item.name, lambda: "")() + note
    return f"{text} {worded.format(_shown(default))}" if worded else text


def _type(item: dataclasses.Field):
    """The argument type of a bounded setting, or None (a string)."""
    bounds = item.metadata.get("bounds")
    if bounds is None:
        return None
    if isinstance(bounds[0], int):
        return integer(*bounds)
    return real(*bounds, low_open=item.metadata.get("low_open", False))


def add_setting(
    container,
    settings_class: type,
    name: str,
    *,
    given_only: bool = False,
    required: bool = False,
    note: str = "",
) -> None:
    """Add the flag of field ``name`` of ``settings_class`` (:class:`RunSettings`,
    :class:`PhoneSettings`) to a parser or an argument group.

    ``given_only``: the option defaults to None, not to the field's default, so that the
    command can tell an option given from one left out (the phone options); ``note`` is
    added to the help text before the default.
    """
    item = _FIELDS[settings_class][name]
    meta = item.metadata
    options = {"help": _help(item, note)}
    if isinstance(item.default, bool):
        options["action"] = "store_true"
    elif meta.get("repeat"):
        options.update(action="append", default=[])
    else:
        options["default"] = None if given_only else item.default
        if (kind := _type(item)) is not None:
            options["type"] = kind
        if "choices" in meta:
            options["choices"] = tuple(meta["choices"])
    if "metavar" in meta:
        options["metavar"] = meta["metavar"]
    if required:
        options["required"] = True
    container.add_argument(_flag(item), **options)


def add_run_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The options naming one run (:data:`RUN_OPTIONS`) and ``--json``: ``simulate`` (whose
    phone runs need no mode, pair or policy) and ``cosim``."""
    for name in RUN_OPTIONS:
        named = name in ("mode", "pair", "policy")
        add_setting(
            parser,
            RunSettings,
            name,
            required=required and named,
            note=" (required)" if named and not required else "",
        )
    parser.add_argument("--json", action="store_true", help="print one JSON object (docs/json.md)")


def add_system_options(parser: argparse.ArgumentParser, *, many_traces: bool = False) -> None:
    """Trace, lengths, devices and controller widths (:data:`SYSTEM_OPTIONS`): ``simulate``,
    ``sweep`` and ``cosim``. With ``many_traces`` (a sweep), ``--trace`` takes a list, kept
    as ``args.traces``: an axis of the grid rather than a setting."""
    for name in SYSTEM_OPTIONS:
        if name == "trace" and many_traces:
            parser.add_argument(
                "--trace",
                nargs="+",
                action=UniqueList,
                dest="traces",
                metavar="TRACE",
                help="traces to run every configuration on: files, built-in trace names, "
                "synthetic presets, iid:<acceptance>, or 'builtin' for every built-in trace "
                "(default: each pair's synthetic preset)",
            )
        else:
            add_setting(parser, RunSettings, name)


def add_phone_options(parser: argparse.ArgumentParser) -> None:
    """The phone-SoC group of ``simulate``: ``--platform`` and :data:`PHONE_OPTIONS`. None
    defaults to anything: an option left out leaves the :class:`PhoneSettings` default, and
    a phone option given without a phone SoC is refused."""

    def default(name: str):
        return field_default(PhoneSettings, name)

    group = parser.add_argument_group(
        "phone SoC (spec section 5)",
        "With --platform naming a phone SoC, simulate sustained generation on it: modes "
        f"{', '.join(PHONE_MODES)} (or 'all'); --mode defaults to {default('mode')}, "
        f"--policy to {default('policy')} (with the autoregression fallback), --pair to the "
        "platform's; --tokens is the length of each back-to-back request.",
    )
    add_setting(group, RunSettings, "platform", given_only=True)
    for name in PHONE_OPTIONS:
        add_setting(group, PhoneSettings, name, given_only=True)


def add_list_options(parser: argparse.ArgumentParser, **helps: str) -> None:
    """The list options of ``sweep`` and ``reproduce`` named in ``helps`` (``platforms``,
    ``gpus``, ``pairs``, ``policies``, ``modes``; each with its help text), in that order,
    then ``--seeds``. A value given twice runs once."""
    for name in ("platforms", "gpus", "pairs", "policies", "modes"):
        if name in helps:
            parser.add_argument(f"--{name}", nargs="+", action=UniqueList, help=helps.pop(name))
    if helps:
        raise TypeError(f"no list option {', '.join(helps)}")
    seed = _RUN_FIELDS["seed"]
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=_type(seed),
        action=UniqueList,
        help=f"seeds (default: {seed.default})",
    )


# -- the backend of sweep and reproduce ----------------------------------------------------------

DEFAULT_JOBS = min(2, os.cpu_count() or 1)


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


def check_backend(args: argparse.Namespace) -> None:
    """UserError, before any work, on ``--address`` without ``--backend ray`` (it would be
    ignored) and on ``--backend ray`` where Ray is not installed."""
    if args.address is not None and args.backend != "ray":
        raise UserError(f"--address needs --backend ray (the {args.backend} backend has none)")
    if args.backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise UserError("--backend ray needs Ray: pip install 'ahasd[ray]'")


# -- from the parsed options back to settings ----------------------------------------------------

# What json.loads's ValueError for an integer past sys.get_int_max_str_digits() says.
_TOO_MANY_DIGITS = "the value is an integer of more digits than any parameter takes"
# A policy parameter nested past Python's recursion limit.
_TOO_DEEP = (
    "the value nests too deeply (a parameter is a number, a string, a boolean or a flat list)"
)


def _assignments(items: list[str], option: str, shape: str, too_deep: str | None) -> tuple:
    """``KEY=VALUE`` items of ``option`` as ``((key, value), ...)``; VALUE is JSON if it
    parses, else the string. A value nested past Python's recursion limit is the string,
    or with ``too_deep`` a UserError saying it."""
    parsed = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UserError(f"{option} {item!r}: expected {shape}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        except RecursionError:
            if too_deep is not None:
                raise UserError(f"{option} {key}: {too_deep}") from None
            value = text
        except ValueError:  # an integer past Python's digit limit
            raise UserError(f"{option} {key}: {_TOO_MANY_DIGITS}") from None
        parsed.append((key, value))
    return tuple(parsed)


def parse_assignments(items: list[str], option: str) -> tuple:
    """``PATH=VALUE`` items of ``option`` as ``((path, value), ...)``; VALUE is JSON (a
    number for a spec override, an integer or string for a controller parameter)."""
    return _assignments(items, option, "PATH=VALUE", None)


def parse_policy_params(items: list[str]) -> tuple:
    """``--policy-param KEY=VALUE`` items as ``((key, value), ...)``; VALUE is JSON if it
    parses (a list becomes a tuple), else the string."""
    return tuple(
        (key, tuple(value) if isinstance(value, list) else value)
        for key, value in _assignments(items, "--policy-param", "KEY=VALUE", _TOO_DEEP)
    )


def _spec_dirs(items: list[str], option: str) -> tuple[str, ...]:
    # Absolute: a sweep's workers and the cosim simulator run in other directories.
    return tuple(str(Path(d).resolve()) for d in items)


# How a repeatable setting's items become its value.
_READERS = {
    "policy_params": lambda items, option: parse_policy_params(items),
    "spec_overrides": parse_assignments,
    "controller_params": parse_assignments,
    "spec_dirs": _spec_dirs,
}


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


def settings_values(args: argparse.Namespace, names) -> dict:
    """The :class:`RunSettings` keyword arguments ``names`` as the parsed options give them.

    An option this command does not have, or one left out whose field's default is not
    None, is left out (the field's default applies); a switch gives the opposite of its
    field's default; a repeatable option is parsed (``--spec-override`` items, ...).
    """
    values = {}
    for name in names:
        item = _RUN_FIELDS[name]
        given = getattr(args, _dest(item), None)
        if given is None and item.default is not None:
            continue
        if isinstance(item.default, bool):
            values[name] = not item.default if given else item.default
        elif item.metadata.get("repeat"):
            values[name] = _READERS[name](given, _flag(item))
        elif isinstance(item.metadata.get("choices"), dict) and given is not None:
            values[name] = item.metadata["choices"][given]
        else:
            values[name] = given
    return values


def system_settings(args: argparse.Namespace) -> dict:
    """The keyword arguments of :data:`SYSTEM_OPTIONS` and ``--platform`` (where the
    command has it), lengths checked first."""
    check_lengths(args.tokens, args.prompt_tokens)
    return settings_values(args, (*SYSTEM_OPTIONS, "platform"))


def run_settings(args: argparse.Namespace, **extra: object) -> RunSettings:
    """The settings of the one run :func:`add_run_options` and :func:`add_system_options`
    name (``simulate`` and ``cosim``), with ``extra`` fields."""
    return RunSettings(**settings_values(args, RUN_OPTIONS), **system_settings(args), **extra)


# -- checks before anything runs -----------------------------------------------------------------


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
    check_prepared(prepare_run(settings, library))


def check_prepared(prepared: PreparedRun) -> None:
    """UserError on an unknown model override of a prepared run (its platform, devices, spec
    overrides and controller parameters were checked when it was prepared)."""
    for name in (prepared.settings.draft_model, prepared.settings.target_model):
        if name is not None:
            prepared.library.model(name)


def wrote(outputs: dict[Path, bool], folder: Path) -> str:
    """``wrote DIR/a, b (unchanged: c)``: what a commit did, for the last line of output."""
    written = [p.name for p, changed in outputs.items() if changed]
    kept = [p.name for p, changed in outputs.items() if not changed]
    text = f"wrote {folder}/{', '.join(written)}" if written else f"nothing new in {folder}"
    return text + (f" (unchanged: {', '.join(kept)})" if kept else "")
