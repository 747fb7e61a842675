"""The import structure of the installed ``ahasd`` package.

Every module is parsed with ``ast`` (nothing is imported), imports inside functions
included, into a graph of in-package modules. The tests fail, naming the offender, on an
import cycle, on a use of another module's private (underscore) name, on an import a layer
rule forbids (:data:`LAYER_RULES`, directly or through other modules of the package), and on
a package missing from pyproject's list (a regular install would leave it out).
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest

ROOT_PACKAGE = "ahasd"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# The command-line layer.
CLI_LAYER = ("ahasd.cli",)


@dataclass(frozen=True)
class LayerRule:
    """Modules matching ``scope`` (and not ``exempt``) must not import ``forbidden``.

    A pattern matches a module equal to it or below it (``ahasd.sim`` matches
    ``ahasd.sim.modes.run``); a pattern ending in ``*`` matches by prefix
    (``ahasd.sim.cosim*`` matches ``ahasd.sim.cosim_extra``). In-package imports count
    transitively: importing a module that imports a forbidden one is forbidden too.
    """

    reason: str
    scope: tuple[str, ...]
    forbidden: tuple[str, ...]
    exempt: tuple[str, ...] = ()


# The base layer: the parameter dataclasses, the errors, the register map and the output
# writer, which every other layer may use.
BASE_LAYER = ("ahasd.params", "ahasd.errors", "ahasd.regmap", "ahasd.output")

# One rule per row of the layer table in docs/architecture.md (tests/ is not installed; its
# own rules are in tests/test_structure.py, with bench/'s).
LAYER_RULES = (
    LayerRule(
        "parameters, errors, register map and output writer use no other layer",
        scope=BASE_LAYER,
        forbidden=(
            "amaranth",
            "cocotb",
            "cocotb_tools",
            "ahasd.golden",
            "ahasd.hw",
            "ahasd.sim",
            "ahasd.cli",
        ),
    ),
    LayerRule(
        "golden models are plain NumPy, read from the spec independently of the RTL",
        scope=("ahasd.golden",),
        forbidden=("amaranth", "cocotb", "cocotb_tools", "ahasd.hw", "ahasd.sim"),
    ),
    LayerRule(
        "the RTL is plain Amaranth, an independent reading of the spec: neither the golden "
        "models nor the cocotb testbench library (which sits beside it, not in it)",
        scope=("ahasd.hw",),
        exempt=("ahasd.hw.tb",),
        forbidden=("cocotb", "cocotb_tools", "ahasd.hw.tb", "ahasd.golden", "ahasd.sim"),
    ),
    LayerRule(
        "the testbench library drives the RTL and checks it against the golden models, "
        "without the system model",
        scope=("ahasd.hw.tb",),
        forbidden=("ahasd.sim",),
    ),
    LayerRule(
        "the system model runs without the RTL (co-simulation excepted)",
        scope=("ahasd.sim",),
        exempt=("ahasd.sim.cosim",),
        forbidden=("ahasd.hw", "amaranth", "cocotb", "cocotb_tools"),
    ),
    LayerRule(
        "nothing below the command line imports it",
        scope=(ROOT_PACKAGE,),
        exempt=CLI_LAYER,
        forbidden=("ahasd.cli",),
    ),
)


def _matches(module: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return module.startswith(pattern[:-1])
    return module == pattern or module.startswith(pattern + ".")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: dict[str, int] = field(default_factory=dict)  # imported module -> a line
    private_uses: list[str] = field(default_factory=list)  # "line N: what"


def _package_dirs() -> dict[str, Path]:
    """Installed location of every package: pyproject's list, plus every directory with an
    ``__init__.py`` below them (the latter must be in the list, see the last test)."""
    declared = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"]
    found = {}
    for name in declared:
        spec = importlib.util.find_spec(name)
        assert spec is not None, f"{name} is not installed"
        assert spec.submodule_search_locations, f"{name} is not a package"
        found[name] = Path(next(iter(spec.submodule_search_locations)))
    pending = list(found.items())
    while pending:
        name, directory = pending.pop()
        for child in sorted(directory.iterdir()):
            if (child / "__init__.py").is_file() and f"{name}.{child.name}" not in found:
                found[f"{name}.{child.name}"] = child
                pending.append((f"{name}.{child.name}", child))
    return found


def _collect() -> dict[str, Module]:
    modules = {}
    for package, directory in _package_dirs().items():
        for path in sorted(directory.glob("*.py")):
            if path.name == "__init__.py":
                modules[package] = Module(package, path, True)
            else:
                name = f"{package}.{path.stem}"
                modules[name] = Module(name, path, False)
    for module in modules.values():
        _scan(module, modules)
    return modules


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _scan(module: Module, modules: dict[str, Module]) -> None:
    """Fill ``module.imports`` and ``module.private_uses`` from its source."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    bound: dict[str, str] = {}  # local name -> in-package module it is bound to

    def imported(target: str, line: int) -> None:
        module.imports.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(alias.name, node.lineno)
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    root = alias.name.partition(".")[0]
                    bound[root] = root
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if target in modules:  # `from package import module`
                    imported(target, node.lineno)
                    bound[alias.asname or alias.name] = target
                else:
                    imported(source, node.lineno)
                if _private(alias.name) and source.startswith(ROOT_PACKAGE):
                    module.private_uses.append(
                        f"line {node.lineno}: from {source} import {alias.name}"
                    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = _dotted(node.value, bound)
            if owner in modules and owner != module.name:
                module.private_uses.append(f"line {node.lineno}: {owner}.{node.attr}")


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """``a.b.c`` with the root name replaced by the module it is bound to, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id], *reversed(parts)])


MODULES = _collect()


def _edges(name: str) -> list[str]:
    """In-package modules ``name`` imports (a package import is an edge to its __init__)."""
    return [target for target in MODULES[name].imports if target in MODULES]


def test_the_package_is_found_and_parsed():
    # The other tests are vacuous if the walk finds nothing; these modules must be there.
    for name in ("ahasd.cli", "ahasd.sim.modes.table", "ahasd.sim.phone.run", "ahasd.hw.edc"):
        assert name in MODULES
    assert "ahasd.sim.modes.sync" in MODULES["ahasd.sim.phone.run"].imports


def test_no_import_cycle():
    state: dict[str, str] = {}  # name -> "open" | "done"
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = "open"
        stack.append(name)
        for target in _edges(name):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[name] = "done"
        return None

    for name in sorted(MODULES):
        if name not in state and (cycle := visit(name)):
            lines = [f"{a} (line {MODULES[a].imports[b]}) -> {b}" for a, b in pairwise(cycle)]
            pytest.fail("import cycle:\n  " + "\n  ".join(lines))


def test_no_use_of_another_modules_private_names():
    offenders = [
        f"{name}: {use}" for name, module in sorted(MODULES.items()) for use in module.private_uses
    ]
    if offenders:
        pytest.fail("private names of other modules used:\n  " + "\n  ".join(offenders))


def _forbidden_path(name: str, rule: LayerRule) -> list[str] | None:
    """Shortest import path from ``name`` to a forbidden module, or None."""
    paths = {name: [name]}
    queue = [name]
    while queue:
        current = queue.pop(0)
        for target in MODULES[current].imports:
            if any(_matches(target, pattern) for pattern in rule.forbidden):
                return [*paths[current], target]
            if target in MODULES and target not in paths:
                paths[target] = [*paths[current], target]
                queue.append(target)
    return None


@pytest.mark.parametrize("rule", LAYER_RULES, ids=lambda rule: rule.reason)
def test_layer_rule(rule):
    offenders = []
    for name in sorted(MODULES):
        in_scope = any(_matches(name, pattern) for pattern in rule.scope)
        if not in_scope or any(_matches(name, pattern) for pattern in rule.exempt):
            continue
        if path := _forbidden_path(name, rule):
            offenders.append(" -> ".join(path))
    if offenders:
        pytest.fail(f"{rule.reason}; forbidden imports:\n  " + "\n  ".join(offenders))


def test_every_package_is_declared_in_pyproject():
    declared = set(tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"])
    missing = sorted({name for name, module in MODULES.items() if module.is_package} - declared)
    assert not missing, f"packages missing from pyproject's [tool.setuptools] packages: {missing}"
