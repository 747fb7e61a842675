"""The shape of the code base (docs/architecture.md): one job per module, readable
``elaborate`` methods, testbench code where the layer table puts it, benchmarks that stand
without the test suite.

Every file is parsed with ``ast`` (nothing is imported); each test fails naming every
offender and the limit it breaks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# The installed package's folders (pyproject's package-dir).
PACKAGE_FOLDERS = ("ahasd", "hw", "golden", "sim")
# One job per module: past this many lines a module holds two (Amaranth's own largest
# library modules stay under it).
MODULE_LINES_MAX = 600
# An elaborate method is read as one piece: Amaranth's lib/fifo.py has none longer than 110.
ELABORATE_LINES_MAX = 120
# The blocks of hw/blocks.py BLOCKS plus the AXI4-Lite port, each with a folder of its tests.
BLOCK_TEST_FOLDERS = ("queues", "edc", "tvc", "aau", "gtsu", "top", "axi_lite")
# Where code shared between testbenches lives: the cocotb library is installed (co-simulation
# and the benchmarks drive the top with it), the pytest/Amaranth harness is not.
SHARED_TESTBENCH_CODE = ("hw/tb", "tests/harness")
TESTBENCH_CLASS_SUFFIXES = ("Driver", "Monitor", "Checker")


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_walk_finds_the_code():
    # The other tests are vacuous if the walk finds nothing.
    names = {_relative(p) for p in _python_files(*PACKAGE_FOLDERS)}
    assert {"hw/edc.py", "golden/edc.py", "ahasd/params.py", "sim/modes/run.py"} <= names


def test_no_module_is_over_the_line_limit():
    offenders = []
    for path in _python_files(*PACKAGE_FOLDERS):
        lines = len(path.read_text().splitlines())
        if lines > MODULE_LINES_MAX:
            offenders.append(f"{_relative(path)}: {lines} lines")
    assert not offenders, f"modules over {MODULE_LINES_MAX} lines:\n  " + "\n  ".join(offenders)


def _elaborates(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "elaborate":
                    yield node.name, item.end_lineno - item.lineno + 1


def test_every_elaborate_reads_as_one_piece():
    found, offenders = 0, []
    for path in _python_files("hw"):
        for owner, lines in _elaborates(path):
            found += 1
            if lines > ELABORATE_LINES_MAX:
                offenders.append(f"{_relative(path)}: {owner}.elaborate, {lines} lines")
    assert found >= 10, "the walk found too few elaborate methods"
    assert not offenders, f"elaborate over {ELABORATE_LINES_MAX} lines:\n  " + "\n  ".join(
        offenders
    )


def _imported_roots(path: Path) -> dict[str, int]:
    """Top-level names ``path`` imports (absolute imports only), each with a line."""
    roots = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                roots.setdefault(alias.name.partition(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.setdefault(node.module.partition(".")[0], node.lineno)
    return roots


def test_a_blocks_testbench_uses_no_other_blocks_tests():
    # A block's testbench code lives in tests/<block>/; what several share lives in
    # SHARED_TESTBENCH_CODE, never in another block's folder.
    offenders = []
    for block in BLOCK_TEST_FOLDERS:
        assert (TESTS / block).is_dir(), f"tests/{block} is missing"
        for path in sorted((TESTS / block).glob("*.py")):
            for root, line in _imported_roots(path).items():
                if root in BLOCK_TEST_FOLDERS and root != block:
                    offenders.append(f"{_relative(path)} line {line}: imports tests/{root}")
    assert not offenders, "testbench code taken from another block:\n  " + "\n  ".join(offenders)


def test_testbench_drivers_live_with_their_block_or_in_the_shared_library():
    allowed = [*(f"tests/{block}/" for block in BLOCK_TEST_FOLDERS), *SHARED_TESTBENCH_CODE]
    offenders, found = [], 0
    for path in _python_files("ahasd", "hw", "golden", "sim", "tests", "bench"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith(TESTBENCH_CLASS_SUFFIXES):
                found += 1
                if not _relative(path).startswith(tuple(allowed)):
                    offenders.append(f"{_relative(path)} line {node.lineno}: {node.name}")
    assert found >= 3, "the walk found too few testbench classes"
    assert not offenders, "testbench drivers outside their block's tests or hw/tb:\n  " + (
        "\n  ".join(offenders)
    )


@pytest.mark.parametrize("path", _python_files("bench"), ids=_relative)
def test_benchmarks_stand_without_the_test_suite(path):
    # bench/ runs from a clone with the package installed: it imports the package, the
    # libraries and its own helpers, never the test suite's modules.
    test_modules = {"tests", "conftest", "harness", *BLOCK_TEST_FOLDERS}
    taken = {root: line for root, line in _imported_roots(path).items() if root in test_modules}
    assert not taken, f"{_relative(path)} imports the test suite: {taken}"
