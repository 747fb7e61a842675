"""The scenario table, platform kinds, and "a run looks itself up once" (issue 32)."""

from __future__ import annotations

import re
import sys

import pytest

from ahasd.errors import UserError
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR, load_library
from ahasd.sim.library.platforms import PLATFORM_KINDS
from ahasd.sim.modes import ENGINES, Engine, SyncRun, simulate
from ahasd.sim.modes.table import ENGINE_NAMES
from ahasd.sim.phone import PhoneSettings, known_platforms, simulate_phone
from ahasd.sim.scenarios import SCENARIOS, scenario_of
from ahasd.sim.settings import RunSettings

SHIPPED = {
    "table2": "npu-pim",
    "table2-whole-memory": "npu-pim",
    "table2-per-unit": "npu-pim",
    "artifact": "npu-pim",
    "sd8gen3": "phone",
    "m4": "phone",
}


def test_every_platform_kind_is_one_row_of_the_scenario_table():
    assert set(SCENARIOS) == set(PLATFORM_KINDS) == {"npu-pim", "phone"}
    for kind, row in SCENARIOS.items():
        assert row.kind == kind


# Settings of one run of each scenario, but the mode.
RUN_OF = {
    "npu-pim": {"pair": "opt-1.3b-6.7b", "policy": "svip"},
    "phone": {"platform": "m4"},
}


@pytest.mark.parametrize("kind", RUN_OF)
def test_a_prepared_run_carries_the_row_of_its_scenarios_mode_table(kind):
    row = SCENARIOS[kind]
    assert len(row.modes) >= 3
    for mode in row.modes:
        prepared = row.prepare(row.settings(mode=mode.name, **RUN_OF[kind]))
        assert prepared.mode is mode
        assert prepared.settings.mode == mode.name


@pytest.mark.parametrize(("platform", "kind"), SHIPPED.items())
def test_each_shipped_platform_belongs_to_the_scenario_its_file_names(platform, kind):
    row = scenario_of(platform)
    assert row.kind == kind
    assert platform in row.platforms(())
    spec = row.load_platform(BUILTIN_SPEC_DIR / "platforms" / f"{platform}.toml")
    assert spec.name == platform


def test_an_unknown_platform_lists_the_platforms_of_every_kind():
    with pytest.raises(UserError) as error:
        scenario_of("pixel9")
    message = str(error.value)
    assert message.startswith("unknown platform 'pixel9'")
    assert "npu-pim: artifact, table2, table2-per-unit, table2-whole-memory" in message
    assert "phone: m4, sd8gen3" in message


def test_each_row_runs_a_platform_of_its_kind_through_one_shape():
    system = SCENARIOS["npu-pim"]
    settings = system.settings(mode="npu-only", pair="opt-1.3b-6.7b", policy="svip", tokens=32)
    result = system.run(system.prepare(settings))
    assert result.summary["platform"] == "table2"
    assert result.summary["tokens"] == 32
    phone = SCENARIOS["phone"]
    prepared = phone.prepare(phone.settings(platform="m4", mode="gpu-ar", duration_s=2.0))
    assert phone.build_hardware(prepared).draft_device is None  # gpu-ar has no draft model
    assert phone.run(prepared, requests=1).summary["platform"] == "m4"


def _phone_file_with(tmp_path, old: str, new: str):
    text = (BUILTIN_SPEC_DIR / "platforms" / "m4.toml").read_text()
    assert old in text
    path = tmp_path / "platforms" / "mine.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace(old, new, 1).replace('name = "m4"', 'name = "mine"', 1))
    return path


@pytest.mark.parametrize(
    ("new", "given"),
    [("", "missing"), ('kind = "fone"\n', "'fone' is not a platform kind")],
    ids=["no-kind", "unknown-kind"],
)
def test_a_platform_file_without_a_known_kind_is_refused_naming_it(tmp_path, new, given):
    path = _phone_file_with(tmp_path, 'kind = "phone"\n', new)
    expected = (
        f"{path}: field 'kind': {given} (every platform file names its scenario: npu-pim, phone)"
    )
    for look_up in (
        lambda: load_library([str(tmp_path)]),
        lambda: known_platforms([str(tmp_path)]),
        lambda: scenario_of("m4", [str(tmp_path)]),
    ):
        with pytest.raises(UserError, match=re.escape(expected)):
            look_up()


def test_a_phone_file_with_a_kind_is_a_phone_platform(tmp_path):
    _phone_file_with(tmp_path, 'kind = "phone"\n', 'kind = "phone"\n')
    assert scenario_of("mine", [str(tmp_path)]).kind == "phone"


# -- one resolution per run ------------------------------------------------------------------


def _count_calls(monkeypatch, function) -> list:
    """Replace ``function`` by a counting wrapper in every loaded ``ahasd.sim`` and
    ``ahasd.cli`` module that holds it (its own and every importer's), so a lookup anywhere
    in a run is counted."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        in_scope = name.startswith(("ahasd.sim", "ahasd.cli"))
        if in_scope and getattr(module, function.__name__, None) is function:
            monkeypatch.setattr(module, function.__name__, counted)
    assert calls == []
    return calls


@pytest.mark.parametrize("mode", ["ahasd", "npu-only"])
def test_a_run_resolves_its_settings_and_finds_its_mode_once(monkeypatch, mode):
    from ahasd.sim.modes.table import find_mode
    from ahasd.sim.settings import resolve

    settings = RunSettings(mode=mode, pair="opt-1.3b-6.7b", policy="svip", tokens=32, seed=3)
    resolved = _count_calls(monkeypatch, resolve)
    found = _count_calls(monkeypatch, find_mode)
    summary = simulate(settings).summary
    assert summary["tokens"] == 32
    assert len(resolved) == 1
    assert [args[0] for args in found] == [mode]


@pytest.mark.parametrize("mode", ["ahasd", "npu-only"])
def test_simulate_on_the_command_line_looks_its_run_up_once(monkeypatch, capsys, mode):
    # From the command line to the engine: one lookup of the mode row, one resolution of
    # the settings, one derivation of the controller's parameters.
    import ahasd.cli.simulate  # the command's modules loaded before they are counted
    from ahasd.cli import main
    from ahasd.sim.modes.table import find_mode
    from ahasd.sim.settings import controller_params, resolve

    assert ahasd.cli.simulate.RUN_SCHEMA
    counted = {f.__name__: _count_calls(monkeypatch, f) for f in (find_mode, resolve)}
    counted["controller_params"] = _count_calls(monkeypatch, controller_params)
    argv = ["simulate", "--mode", mode, "--pair", "opt-1.3b-6.7b", "--policy", "svip"]
    assert main([*argv, "--tokens", "32", "--json"]) == 0
    assert '"tokens": 32' in capsys.readouterr().out
    assert {name: len(calls) for name, calls in counted.items()} == {
        "find_mode": 1,
        "resolve": 1,
        "controller_params": 1,
    }


def test_a_phone_run_finds_its_mode_platform_and_library_once(monkeypatch):
    from ahasd.sim.library.loading import load_library as load
    from ahasd.sim.phone.platform import find_platform
    from ahasd.sim.phone.settings import find_phone_mode

    settings = PhoneSettings(platform="sd8gen3", mode="npu-gpu-hetero", duration_s=2.0)
    counts = {f.__name__: _count_calls(monkeypatch, f) for f in (find_phone_mode, find_platform)}
    loaded = _count_calls(monkeypatch, load)
    assert simulate_phone(settings, requests=1).summary["mode"] == "npu-gpu-hetero"
    assert [len(calls) for calls in counts.values()] == [1, 1]
    assert len(loaded) == 1


def test_the_engine_is_the_one_the_mode_row_names(monkeypatch):
    built = []

    class Spy(SyncRun):
        def __init__(self, *args, **kwargs):
            built.append(args[0].mode)
            super().__init__(*args, **kwargs)

    assert set(ENGINES) == set(ENGINE_NAMES)
    monkeypatch.setitem(ENGINES, "sync", Engine(Spy, ENGINES["sync"].arguments, lambda run: {}))
    common = {"pair": "opt-1.3b-6.7b", "policy": "svip", "tokens": 16}
    simulate(RunSettings(mode="npu-only", **common))
    simulate(RunSettings(mode="pim-async", **common))
    assert built == ["npu-only"]  # the async mode's row names the other engine
