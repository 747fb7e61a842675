"""``--help`` shows every default and each policy's parameters; ``--help`` exits 0."""

from __future__ import annotations

import argparse
import inspect
import json

import pytest

from ahasd.cli import build_parser
from ahasd.sim import policies
from ahasd.sim.policies import POLICY_NAMES


def _leaf_parsers(parser: argparse.ArgumentParser, prefix: str = "ahasd"):
    """(command, parser) for every command that runs something."""
    subactions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subactions:
        yield prefix, parser
        return
    for name, sub in subactions[0].choices.items():
        yield from _leaf_parsers(sub, f"{prefix} {name}")


LEAVES = dict(_leaf_parsers(build_parser()))


def _shown(default) -> list[str]:
    """Ways a default may be written in a help text."""
    if isinstance(default, float):
        return [f"{default:g}", str(default)]
    return [str(default)]


@pytest.mark.parametrize("command", sorted(LEAVES))
def test_every_option_with_a_default_shows_it(command):
    parser = LEAVES[command]
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS) or not action.option_strings:
            continue
        default = action.default
        if default in (None, False, [], argparse.SUPPRESS):
            continue
        if isinstance(default, list):  # --seeds [0]
            default = " ".join(map(str, default))
        text = action.help
        assert any(shown in text for shown in _shown(default)), (
            f"{command} {action.option_strings[0]}: default {default!r} not in {text!r}"
        )


@pytest.mark.parametrize(
    ("command", "option", "default"),
    [
        ("ahasd sweep", "--out", "ahasd-sweep"),
        ("ahasd sweep", "--jobs", None),
        ("ahasd report", "--results", "ahasd-sweep"),
        ("ahasd report", "--out", "the folder of the results file"),
        ("ahasd simulate", "--out", "none, print only"),
        ("ahasd simulate", "--draft-queue-tokens", "64"),
        ("ahasd simulate", "--specpim-planned-draft", "4"),
        ("ahasd verilog", "--out", "build/verilog"),
    ],
)
def test_the_defaults_the_issue_named_are_in_the_help(command, option, default):
    action = next(a for a in LEAVES[command]._actions if option in a.option_strings)
    if default is None:
        default = str(action.default)
    assert f"(default: {default})" in action.help


def test_policy_param_help_lists_every_parameter_of_every_policy_class():
    help_text = next(
        a.help for a in LEAVES["ahasd simulate"]._actions if "--policy-param" in a.option_strings
    )
    for name in POLICY_NAMES:
        assert f"{name}:" in help_text
    for item in vars(policies).values():
        if not (isinstance(item, type) and getattr(item, "name", None) in POLICY_NAMES):
            continue
        for parameter in inspect.signature(item.__init__).parameters.values():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                value = parameter.default
                value = list(value) if isinstance(value, tuple) else value
                written = json.dumps(value, separators=(",", ":"))
                assert f"{parameter.name}={written}" in help_text, parameter.name
    assert "fallback_window=32" in help_text


def test_help_prints_and_exits_0(ahasd):
    outcome = ahasd("simulate", "--help")
    assert outcome.code == 0
    assert "--policy-param" in outcome.out
    assert outcome.err == ""
