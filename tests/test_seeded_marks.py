"""Every test of a block's fast tiers whose stimulus depends on ``AHASD_SEED`` is marked
``seeded``: ``regress.py --tier fast`` (and so ``make test``'s two extra seeds) reruns only
those, since a directed test does the same on every seed. A test draws a seed when it calls
``choose_seed`` (under any name it is imported as, or as ``seeds.choose_seed``), a helper of
its module that does, or reads ``AHASD_SEED`` itself; a module that draws one at import
makes every test in it seeded."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from harness.regress import BLOCKS

TESTS = Path(__file__).parent


def _seed_names(tree: ast.Module) -> set[str]:
    """``choose_seed`` and the names it is imported under."""
    names = {"choose_seed"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name == "choose_seed"}
    return names


def _draws(node: ast.AST, names: set[str]) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            func = inner.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called in names:
                return True
        if isinstance(inner, ast.Constant) and inner.value == "AHASD_SEED":
            return True
    return False


def seeded_tests(path: Path) -> dict[str, bool]:
    """``{test name: marked seeded}`` of the tests in ``path`` that draw a seed."""
    tree = ast.parse(path.read_text())
    functions = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    names = _seed_names(tree)
    changed = True
    while changed:  # helpers that call helpers
        changed = False
        for name, function in functions.items():
            if not name.startswith("test_") and name not in names and _draws(function, names):
                names.add(name)
                changed = True
    at_import = any(
        _draws(node, names)
        for node in tree.body
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )
    found = {}
    for name, function in functions.items():
        if name.startswith("test_") and (at_import or _draws(function, names)):
            found[name] = any("seeded" in ast.unparse(d) for d in function.decorator_list)
    return found


FILES = sorted(
    path
    for block in BLOCKS
    for path in (TESTS / block).glob("test_*.py")
    if path.name not in ("test_cocotb.py", "test_formal.py")
)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(TESTS)) for p in FILES])
def test_every_test_that_draws_a_seed_is_marked_seeded(path):
    unmarked = [name for name, marked in seeded_tests(path).items() if not marked]
    assert not unmarked, f"{path.name}: draw a seed but are not marked seeded: {unmarked}"


def test_the_check_sees_a_seeded_test(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "from harness.seeds import choose_seed as pick\n"
        "def helper():\n    return pick(3)\n"
        "def test_a():\n    helper()\n"
        "@pytest.mark.seeded\ndef test_b():\n    pick()\n"
        "def test_c():\n    pass\n"
    )
    assert seeded_tests(sample) == {"test_a": False, "test_b": True}
