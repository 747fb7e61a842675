"""The long checks' sample (tests/conftest.py): ``AHASD_LONG_SAMPLE=N`` runs N of the long
items, the same N for the same seed, and leaves every other item alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
ITEMS = """
import pytest

@pytest.mark.long
@pytest.mark.parametrize("n", range(5))
def test_long(n):
    print(f"ran long {n}")

def test_short():
    pass
"""


def _run(pytester, monkeypatch, **env):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    long: a long check\n")
    pytester.makepyfile(test_items=ITEMS)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return pytester.runpytest_subprocess("-s", "-ra")


def _ran(result) -> set[str]:
    return set(re.findall(r"ran long (\d)", result.stdout.str()))


def test_without_a_sample_every_long_item_runs(pytester, monkeypatch):
    monkeypatch.delenv("AHASD_LONG_SAMPLE", raising=False)
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(passed=6)
    assert _ran(result) == {"0", "1", "2", "3", "4"}


def test_a_sample_runs_that_many_and_a_seed_replays_it(pytester, monkeypatch):
    first = _run(pytester, monkeypatch, AHASD_LONG_SAMPLE="2", AHASD_LONG_SEED="7")
    first.assert_outcomes(passed=3, skipped=3)
    assert len(_ran(first)) == 2
    first.stdout.fnmatch_lines(["*a sample of 2 runs (seed 7*", "*AHASD_LONG_SEED=7*make long*"])
    again = _run(pytester, monkeypatch, AHASD_LONG_SAMPLE="2", AHASD_LONG_SEED="7")
    assert _ran(again) == _ran(first)
    others = {
        seed: frozenset(_ran(_run(pytester, monkeypatch, AHASD_LONG_SEED=str(seed))))
        for seed in range(3)
    }
    assert len(set(others.values())) > 1, "every seed chose the same sample"


def test_a_bad_sample_size_is_a_usage_error(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, AHASD_LONG_SAMPLE="many")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*AHASD_LONG_SAMPLE must be a whole number, not 'many'*"])
