"""The planted-bug catalogue (tests/harness/planted.py) held whole: every documented
invariant has a bug planted against it, every bug names a check that runs it, every named
check exists, and every bug's change applies to the RTL as it is now (the checks themselves,
which must fail on each bug, live with their block's tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from harness.planted import CATALOGUE, CHECKS, INVARIANTS, page_table, table

ROOT = Path(__file__).resolve().parents[1]


def _defining_file(class_name: str) -> Path:
    """The module of hw/ that defines ``class_name``."""
    found = [
        path
        for path in sorted((ROOT / "hw").glob("*.py"))
        if any(
            isinstance(node, ast.ClassDef) and node.name == class_name
            for node in ast.parse(path.read_text()).body
        )
    ]
    assert len(found) == 1, f"class {class_name} defined in {found or 'no module of hw/'}"
    return found[0]


def test_every_documented_invariant_has_a_planted_bug():
    planted_against = {(bug.block, bug.invariant) for bug in CATALOGUE.values()}
    missing = [
        f"{block}.{key}: {text}"
        for block, invariants in INVARIANTS.items()
        for key, text in invariants.items()
        if (block, key) not in planted_against
    ]
    assert not missing, "invariants no planted bug breaks:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_the_bug_names_a_documented_invariant_and_its_checks_exist(name):
    bug = CATALOGUE[name]
    assert name.startswith(f"{bug.block}."), "a bug's name starts with its block"
    assert bug.invariant in INVARIANTS.get(bug.block, {}), f"unknown invariant {bug.invariant}"
    assert bug.caught_by, "a bug no check runs is caught by nothing"
    assert set(bug.caught_by) <= set(CHECKS), f"unknown checks {set(bug.caught_by) - set(CHECKS)}"


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_every_check_is_a_test_that_runs_its_cases(check):
    path, _, function = CHECKS[check][0].partition("::")
    tree = ast.parse((ROOT / path).read_text())
    (found,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    # The test is parametrised over the catalogue's cases for this check (in its decorators).
    decorators = "".join(ast.unparse(d) for d in found.decorator_list)
    assert f"cases('{check}')" in decorators, f"{CHECKS[check][0]} does not run cases({check!r})"


def test_the_page_shows_the_catalogue():
    assert page_table() == table(), (
        "docs/verification.md's planted-bug table differs from the catalogue: "
        ".venv/bin/python tests/harness/planted.py --write"
    )


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_the_bug_applies_to_the_rtl_as_it_is(name):
    bug = CATALOGUE[name]
    source = _defining_file(bug.component).read_text()
    assert source.count(bug.old) == 1, f"{bug.old!r} must occur once in the RTL"
    assert bug.old != bug.new
