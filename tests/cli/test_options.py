"""Every run setting is a flag of ``ahasd simulate``, built from its field: the flag's help is
the field's help text, a flag left out gives the field's default, a flag given reaches the
field. A new field of :class:`RunSettings` or :class:`PhoneSettings` without a flag (or a
reason in ``NOT_FLAGS``) fails here."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from ahasd.cli import build_parser
from ahasd.cli.options import NOT_FLAGS, PHONE_OPTIONS, SYSTEM_OPTIONS, run_settings
from ahasd.sim.phone import PhoneSettings
from ahasd.sim.settings import RunSettings

NAMING = ["--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "fixed"]
PHONE_GROUP = "phone SoC (spec section 5)"


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices


COMMANDS = _commands()


def _flag(item: dataclasses.Field) -> str:
    return item.metadata.get("flag", "--" + item.name.replace("_", "-"))


def _action(command: str, flag: str) -> argparse.Action | None:
    return next((a for a in COMMANDS[command]._actions if flag in a.option_strings), None)


def _group_of(command: str, action: argparse.Action) -> str:
    parser = COMMANDS[command]
    return next(g.title for g in parser._action_groups if action in g._group_actions)


def _settings(*argv: str) -> RunSettings:
    return run_settings(build_parser().parse_args(["simulate", *NAMING, *argv]))


# A value other than the default for each setting, and the value the field then holds,
# written out here rather than derived from the metadata under test.
GIVEN = {
    "mode": (["--mode", "pim-async"], "pim-async"),
    "pair": (["--pair", "palm-8b-30b"], "palm-8b-30b"),
    "policy": (["--policy", "svip"], "svip"),
    "tokens": (["--tokens", "700"], 700),
    "seed": (["--seed", "4294967295"], 4294967295),
    "prompt_tokens": (["--prompt-tokens", "33"], 33),
    "trace": (["--trace", "iid:0.5"], "iid:0.5"),
    "policy_params": (
        ["--policy-param", "k=3", "--policy-param", "a=[1,2]"],
        (("k", 3), ("a", (1, 2))),
    ),
    "fallback": (["--fallback"], True),
    "platform": (["--platform", "artifact"], "artifact"),
    "npu": (["--npu", "an-npu"], "an-npu"),
    "pim": (["--pim", "a-pim"], "a-pim"),
    "cpu": (["--cpu", "a-cpu"], "a-cpu"),
    "gpu": (["--gpu", "a-gpu"], "a-gpu"),
    "specpim_pim": (["--specpim-pim", "aim"], "aim"),
    "memory_sharing": (["--memory-sharing", "separate"], "separate"),
    "rank_split": (["--rank-split", "footprint"], "footprint"),
    "preverify_kv_reuse": (["--preverify-kv-reuse", "off"], False),
    "draft_model": (["--draft-model", "opt-125m"], "opt-125m"),
    "target_model": (["--target-model", "opt-6.7b"], "opt-6.7b"),
    "specpim_planned_draft": (["--specpim-planned-draft", "7"], 7),
    "draft_queue_tokens": (["--draft-queue-tokens", "9"], 9),
    "tvc_ratio_bits": (["--tvc-ratio-bits", "16"], 16),
    "tvc_cycle_bits": (["--tvc-cycle-bits", "48"], 48),
    "nonlinear_without_aau": (["--nonlinear-without-aau", "host"], "host"),
    "spec_overrides": (
        ["--spec-override", "devices.@npu.memory_bandwidth=1e11"],
        (("devices.@npu.memory_bandwidth", 1e11),),
    ),
    "controller_params": (["--controller-param", "edc.llr_bits=2"], (("edc.llr_bits", 2),)),
    "spec_dirs": (["--spec-dir", "some/specs"], (str(Path("some/specs").resolve()),)),
}


@pytest.mark.parametrize("item", dataclasses.fields(RunSettings), ids=lambda item: item.name)
def test_every_run_setting_is_a_flag_of_simulate_with_its_help_and_default(item):
    if (RunSettings, item.name) in NOT_FLAGS:
        assert NOT_FLAGS[RunSettings, item.name]
        assert _action("simulate", _flag(item)) is None
        return
    action = _action("simulate", _flag(item))
    assert action is not None, f"RunSettings.{item.name} has no flag {_flag(item)}"
    assert action.help.startswith(item.metadata["help"])
    if isinstance(item.default, int | float | str) and not isinstance(item.default, bool):
        assert str(item.default) in action.help
    if item.name not in ("mode", "pair", "policy"):
        assert getattr(_settings(), item.name) == item.default
    argv, value = GIVEN[item.name]
    settings = _settings(*argv)
    assert getattr(settings, item.name) == value
    assert value != item.default


@pytest.mark.parametrize("item", dataclasses.fields(PhoneSettings), ids=lambda item: item.name)
def test_every_phone_setting_is_a_flag_of_simulate(item):
    if (PhoneSettings, item.name) in NOT_FLAGS:
        assert NOT_FLAGS[PhoneSettings, item.name]
        return
    if item.name in PHONE_OPTIONS:
        action = _action("simulate", _flag(item))
        assert action is not None, f"PhoneSettings.{item.name} has no flag {_flag(item)}"
        assert _group_of("simulate", action) == PHONE_GROUP
        assert action.help.startswith(item.metadata["help"])
        # Left out, the option is None, and the phone run keeps the field's default.
        assert action.default in (None, False)
        if isinstance(item.default, int | float | str) and not isinstance(item.default, bool):
            shown = f"{item.default:g}" if isinstance(item.default, float) else item.default
            assert f"default: {shown})" in action.help
        return
    # Shared with the NPU+PIM modes: the RunSettings field's flag. The phone run takes its
    # value as it is unless it defaults to None, so a default of the flag's own must be the
    # phone's too; a phone default the flag does not have is named in the group's text.
    shared = {f.name: f for f in dataclasses.fields(RunSettings)}.get(item.name)
    assert shared is not None, f"PhoneSettings.{item.name}: no flag, no RunSettings field"
    action = _action("simulate", _flag(shared))
    assert action is not None
    if action.default is not None:
        assert action.default == item.default or action.default == [] == list(item.default)
    elif item.default not in (None, dataclasses.MISSING):
        groups = COMMANDS["simulate"]._action_groups
        description = next(g.description for g in groups if g.title == PHONE_GROUP)
        assert re.search(rf"{_flag(shared)} (defaults )?to {item.default}\b", description)


@pytest.mark.parametrize("command", ["sweep", "cosim"])
def test_sweep_and_cosim_have_every_system_option(command):
    fields = {item.name: item for item in dataclasses.fields(RunSettings)}
    for name in SYSTEM_OPTIONS:
        flag = _flag(fields[name])
        action = _action(command, flag)
        assert action is not None, f"{command} lacks {flag}"
        if not (command == "sweep" and name == "trace"):  # a list of traces: an axis
            assert action.help.startswith(fields[name].metadata["help"])


def test_a_sweep_takes_many_traces_as_an_axis_not_a_setting():
    args = build_parser().parse_args(["sweep", "--trace", "iid:0.5", "iid:0.7"])
    assert args.traces == ["iid:0.5", "iid:0.7"]
    assert not hasattr(args, "trace")


def test_a_phone_option_left_out_is_none():
    args = build_parser().parse_args(["simulate"])
    for name in PHONE_OPTIONS:
        item = next(f for f in dataclasses.fields(PhoneSettings) if f.name == name)
        assert getattr(args, _flag(item).removeprefix("--").replace("-", "_")) in (None, False)
