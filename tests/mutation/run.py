"""Mutation testing of the RTL: how many injected bugs do the cocotb and formal tiers catch?

The method of YosysHQ's MCY, with the tools the project already installs. For each block:

1. The netlist: the block at its reduced parameter set (``harness/small_params.py``, the set
   its formal tier proves at), elaborated as the formal tier elaborates it and normalised by
   yosys (``mutation/netlist.py``: processes lowered, submodules flattened into the block's
   module, canonical names), so that a ``mutate`` command names the same cell in the
   block alone and in a formal wrapper around it.
2. ``mutate -list N -seed S`` picks N mutations evenly over the block's logic (a cell
   output or input bit stuck at 0 or 1, inverted, tied to a neighbouring bit, ...), never
   over the initial-state assumption the library's ``AsyncFIFO`` adds for formal tools.
3. The cocotb tier: all N mutations applied at once, each behind ``mutsel == k``, the
   formal-only cells removed, written as Verilog in which ``mutsel`` is a register set from
   the ``+mutsel=k`` plusarg: one Verilator build serves every mutant. The block's cocotb
   testbench runs at the same parameter set, shortened, once per mutant; a failing or hung
   run kills the mutant.
4. The formal tier: the block's ``test_formal.py`` under pytest with ``AHASD_MUTANT`` set
   (``harness.formal.check`` then applies the mutation to the block's module of each
   wrapper built at this parameter set, ``mutation/formal_tier.py``); a property that fails
   kills the mutant. A check that does not finish in three times its usual time (at least
   60 s) kills nothing: a solver's time is no behaviour of the design, so the mutant's
   other checks still run, and if none fails it stays a survivor (its line in the report
   says which checks timed out) until a test kills it.
   Checks at other parameter sets cannot run the mutant and are not counted; a block none
   of whose formal checks holds the netlist gets the cocotb tier only (every block has one
   now: the top's is its read-mux proof, around ``ControllerTop(TopParams())``).

The unmutated netlist (mutant 0) runs first through both tiers and must pass, which also
finds which formal checks apply (with ``--first-kill`` the formal tier's unmutated run waits
until a mutant survives the cocotb tier). Survivors are compared with ``equivalent.toml``: a
mutant listed there, with the argument why no test can observe it, counts as equivalent; any
other survivor is a hole in the tests. The Amaranth-simulator tier simulates the Python
description, not a netlist, so it cannot run a Yosys mutant.

A full campaign keeps its outcome in ``record.json`` (per block: the netlist's fingerprint,
the list's seed and length, and for each mutant the tier and the formal checks that killed
it); commit it with the change that made it. ``--sample K`` (what ``make test`` runs) draws
K of the mutants that record says were killed and runs each through only what killed it:
the cocotb testbench, or the formal checks that failed; one that survives now fails the
sample, naming the check that no longer catches it. The unmutated netlist still runs the
testbench first (a testbench failing on every netlist would kill every mutant); the
unmutated formal checks are the suite's formal tier. A sample of a netlist the record does
not hold (the RTL changed since) is evaluated as a campaign, and says so.

Usage (from the repository root; ``make mutate`` runs the full campaign)::

    .venv/bin/python tests/mutation/run.py [--blocks edc tvc] [--count 20] [--seed 1]
        [--sample K [--sample-seed S] | --mutants N [N ...]] [--first-kill] [--jobs 2]
        [--report build/mutation/report.md]

``--sample-seed`` is fresh and printed when omitted; ``--mutants`` re-evaluates the listed
mutants of one block and updates their entries in the record (after a test was added to kill
a survivor); ``--first-kill`` stops a mutant's evaluation at the first tier that kills it.
Exit status 1 if a non-equivalent mutant survives (or the unmutated netlist fails).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import re
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
BUILD = ROOT / "build" / "mutation"
EQUIVALENT = Path(__file__).with_name("equivalent.toml")
# The outcome of the last full campaign of each block (what `--sample` checks against).
RECORD = Path(__file__).with_name("record.json")
MUTSEL_BITS = 10  # up to 1023 mutants per block
TIERS = ("cocotb", "formal")

# The harness and this folder's modules are imported as the tests import them (``tests/``
# on the path), also when this file runs as a script.
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
netlist = importlib.import_module("mutation.netlist")
small_params = importlib.import_module("harness.small_params")
processes = importlib.import_module("harness.processes")


@dataclass(frozen=True)
class CocotbRun:
    """One cocotb testbench run of a mutant: the module, the test in it, its environment."""

    module: str
    testcase: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """A block under mutation.

    Attributes
    ----------
    folder : its tests, ``tests/<folder>`` (``test_formal.py`` there is the formal tier).
    component : builds the block at the mutation parameter set.
    params : that parameter set (passed to the testbench as ``AHASD_TB_PARAMS``).
    domains : its clock domains.
    cocotb : the testbench runs every mutant gets (shortened).
    timeout_s : wall-clock limit of the cocotb runs of one mutant.
    select : a yosys selection within the block's module that mutations are drawn from
        (the top: its own logic, not the blocks it holds).
    """

    folder: str
    component: Callable[[], object]
    params: object
    domains: tuple[str, ...]
    cocotb: tuple[CocotbRun, ...]
    timeout_s: int
    select: str = ""


def _top_own_logic() -> str:
    """The top target's selection: every cell from ``hw/registers.py`` or
    ``hw/axi_lite.py``, and from any line of ``hw/top.py`` but those that add the EDC, TVC,
    GTSU and queues as submodules. ``DomainRenamer``/``ResetInserter`` put that line into
    the ``src`` of every cell of the block they wrap, so a plain ``*hw/top.py*`` drew most
    mutants from the blocks (in the first list of 20, 13 of them)."""
    lines = (ROOT / "hw" / "top.py").read_text().splitlines()
    blocks = re.compile(r"m\.submodules\.(edc|tvc|gtsu|queues) =")
    own = [n for n, line in enumerate(lines, start=1) if not blocks.search(line)]
    # src reads "<path>/hw/top.py:<line>.<column>-...", several places joined by "|"
    patterns = [f"a:src=*hw/top.py:{n}.*" for n in own]
    return " ".join(
        ["a:src=*hw/registers.py*", "a:src=*hw/axi_lite.py* %u"] + [f"{p} %u" for p in patterns]
    )


def _targets() -> dict[str, Target]:
    from ahasd.hw.aau import AAU
    from ahasd.hw.edc import EDC
    from ahasd.hw.gtsu import GTSU
    from ahasd.hw.queues import AsyncQueues
    from ahasd.hw.top import ControllerTop
    from ahasd.hw.tvc import TVC
    from ahasd.params import TopParams

    sp = small_params
    return {
        "edc": Target(
            "edc",
            lambda: EDC(sp.EDC),
            sp.EDC,
            ("sync",),
            (CocotbRun("tb_edc", env={"AHASD_EVENTS": "30000", "AHASD_STALL_EVENTS": "6000"}),),
            180,
        ),
        "tvc": Target(
            "tvc",
            lambda: TVC(sp.TVC),
            sp.TVC,
            ("sync",),
            (CocotbRun("tb_tvc", env={"AHASD_COMMANDS": "8000"}),),
            180,
        ),
        "gtsu": Target(
            "gtsu",
            lambda: GTSU(sp.GTSU, counter_bits=sp.GTSU_COUNTER_BITS),
            sp.GTSU,
            ("sync",),
            (
                CocotbRun(
                    "tb_gtsu",
                    env={
                        "AHASD_CYCLES": "12000",
                        "AHASD_COUNTER_BITS": str(sp.GTSU_COUNTER_BITS),
                    },
                ),
            ),
            180,
        ),
        "queues": Target(
            "queues",
            lambda: AsyncQueues(sp.QUEUES),
            sp.QUEUES,
            ("cpu", "npu", "pim"),
            tuple(
                CocotbRun("tb_queues", env={"AHASD_ENTRIES": "1500", "AHASD_CLOCKS": clocks})
                for clocks in ("1250:1000:1500", "3000:7000:2000")
            ),
            240,
        ),
        "aau": Target(
            "aau",
            lambda: AAU(sp.AAU),
            sp.AAU,
            ("sync",),
            (CocotbRun("tb_aau", "random_vectors_bit_exact", env={"AHASD_VECTORS": "150"}),),
            240,
        ),
        "top": Target(
            "top",
            lambda: ControllerTop(TopParams()),
            TopParams(),
            ("cpu", "npu", "pim"),
            # The register walk (quick: it kills most register-file mutants first), then
            # the integration test at full length (its traffic minimums need the 20,000
            # events; about 5 s): its monitor reads the top's ports alone, the register
            # accesses rebuilt from the AXI handshakes, so it runs on the flattened netlist.
            (CocotbRun("tb_registers"), CocotbRun("tb_top", "integration")),
            600,
            # The top's own logic: the register file, the AXI4-Lite port, the interrupt
            # and the wiring (the blocks it holds have campaigns of their own).
            select=_top_own_logic(),
        ),
    }


@dataclass
class Mutant:
    number: int
    command: str  # the yosys ``mutate`` line (standalone netlist)
    where: str = ""  # source location(s) of the mutated cell
    cocotb: str = "not run"  # killed, hung, survived, not run
    formal: str = "not run"  # killed, survived, not run
    formal_detail: str = ""
    # The failing checks: ``{"node", "check", "seconds"}``, seconds the unmutated run's.
    formal_kills: list[dict] = field(default_factory=list)
    outcome: str = "not run"  # killed, survived, equivalent
    reason: str = ""
    seconds: float = 0.0

    @property
    def key(self) -> str:
        """The mutation itself, without the options ``mutate`` ignores (``-src``,
        ``-wire``): how ``equivalent.toml`` names it."""
        return " ".join(re.sub(r" -(src|wire|wirebit) \S+", "", self.command).split())

    @property
    def killed_by(self) -> str:
        tiers = [t for t in TIERS if getattr(self, t) in ("killed", "hung")]
        return "+".join(tiers) if tiers else "-"


# -- the netlist and its mutants -----------------------------------------------------------


def prepare(block: str, target: Target, count: int, seed: int, workdir: Path):
    """Normalise the block, list ``count`` mutants; returns ``(digest, mutants)``."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "block.il").write_text(netlist.block_rtlil(target.component(), target.domains))
    module = netlist.ROOT
    netlist.yosys(
        f"read_rtlil block.il; hierarchy -top {module}; {netlist.PROC}; "
        f"{netlist.NORMALISE_MODULE.format(module=module)}; hierarchy -top {module}; "
        "write_rtlil normalised.il; write_json normalised.json",
        workdir,
    )
    fingerprint = netlist.digest(json.loads((workdir / "normalised.json").read_text()), module)
    selection = _selection(module, target.select) if target.select else f"{module}/*"
    # A memory's initialisation cell is its power-up contents (Amaranth: all zero, the
    # FIFOs' `init=[]`), not logic; Verilog cannot even express a mutated one.
    selection += f" {module}/t:$meminit* %d"
    netlist.yosys(
        f"read_rtlil normalised.il; {netlist.STRIP_FORMAL}; "
        f"mutate -list {count} -seed {seed} -o mutations.ys {selection}",
        workdir,
    )
    commands = [line for line in (workdir / "mutations.ys").read_text().splitlines() if line]
    found = json.loads((workdir / "normalised.json").read_text())["modules"][module]
    mutants = [
        Mutant(number, command, where=_where(command, found))
        for number, command in enumerate(commands, start=1)
    ]
    return fingerprint, mutants


def _selection(module: str, select: str) -> str:
    """``select`` (patterns joined by ``%u``) restricted to ``module``."""
    parts = [part for part in select.split() if part != "%u"]
    return " ".join([f"{module}/{parts[0]}", *(f"{module}/{p} %u" for p in parts[1:])])


def _where(command: str, module: dict) -> str:
    """Where the mutated cell is: its source lines (repository-relative) or, for a
    multiplexer yosys made from a process (no source line), the registers it feeds."""
    cell = re.search(r"-cell (\S+)", command).group(1)
    places = []
    for place in module["cells"].get(cell, {}).get("attributes", {}).get("src", "").split("|"):
        place = place.replace(str(ROOT) + "/", "")
        if place and place not in places and "site-packages" not in place:
            places.append(place)
    if places:
        return ", ".join(places[:3])
    fed = _registers_fed(module, cell)
    return f"feeds {', '.join(fed[:3])}" if fed else "no source line"


def _registers_fed(module: dict, start: str, depth: int = 8) -> list[str]:
    """The public names of the registers that cell ``start``'s outputs reach through at
    most ``depth`` cells of logic."""
    cells = module["cells"]
    readers: dict[int, list[str]] = {}
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) == "input":
                for bit in bits:
                    if isinstance(bit, int):
                        readers.setdefault(bit, []).append(name)
    names: dict[int, str] = {}
    for name, net in module["netnames"].items():
        if not net.get("hide_name"):
            for bit in net["bits"]:
                if isinstance(bit, int):
                    names.setdefault(bit, name)
    found, frontier, seen = [], [start], {start}
    for _ in range(depth):
        following = []
        for name in frontier:
            cell = cells[name]
            for port, bits in cell["connections"].items():
                if cell.get("port_directions", {}).get(port) != "output":
                    continue
                for bit in bits:
                    if not isinstance(bit, int):
                        continue
                    if "dff" in cell["type"] and bit in names:
                        if names[bit] not in found:
                            found.append(names[bit])
                        continue
                    for reader in readers.get(bit, []):
                        if reader not in seen:
                            seen.add(reader)
                            following.append(reader)
        frontier = following
    return found


def cocotb_verilog(block: str, mutants: list[Mutant], workdir: Path) -> Path:
    """``workdir/<block>.v``: every mutant behind ``mutsel == k``, ``mutsel`` a plusarg."""
    lines = [f"{m.command} -ctrl mutsel {MUTSEL_BITS} {m.number}" for m in mutants]
    (workdir / "mutants.ys").write_text("\n".join(lines) + "\n")
    netlist.yosys(
        f"read_rtlil normalised.il; hierarchy -top {netlist.ROOT}; script mutants.ys; "
        f"{netlist.STRIP_FORMAL}; rename {netlist.ROOT} {block}; write_verilog -noattr mutants.v",
        workdir,
    )
    text = (workdir / "mutants.v").read_text()
    declaration = re.search(rf"^  input \[{MUTSEL_BITS - 1}:0\] mutsel;\n", text, re.MULTILINE)
    if declaration is None:
        raise RuntimeError("yosys wrote the mutsel port in an unexpected form")
    text = re.sub(r"(module \S+\()(.*?)\);", _drop_port("mutsel"), text, count=1, flags=re.S)
    text = text.replace(
        declaration.group(0),
        f"  reg [{MUTSEL_BITS - 1}:0] mutsel;\n"
        f'  initial if (!$value$plusargs("mutsel=%d", mutsel)) mutsel = 0;\n',
    )
    text = text.replace(f"  wire [{MUTSEL_BITS - 1}:0] mutsel;\n", "")
    path = workdir / f"{block}.v"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def _drop_port(name: str):
    def drop(match: re.Match) -> str:
        ports = [p.strip() for p in match.group(2).split(",") if p.strip() != name]
        return f"{match.group(1)}{', '.join(ports)});"

    return drop


def build(block: str, workdir: Path):
    """Build the mutated Verilog with Verilator (make is incremental); the cocotb runner."""
    from cocotb_tools.runner import get_runner

    from ahasd.hw.tb.build import prepare_verilator_environment

    prepare_verilator_environment()
    runner = get_runner("verilator")
    runner.build(
        sources=[workdir / f"{block}.v"],
        hdl_toplevel=block,
        build_dir=workdir / "sim",
        timescale=("1ns", "1ps"),
        # -fno-dfg: Verilator's DFG optimiser aborts on some mutated netlists ("Operation
        # vertex should have sinks", seen on the EDC).
        build_args=["-Wno-fatal", "-fno-dfg"],
        log_file=workdir / "build.log",
    )
    return runner


# -- the cocotb tier -----------------------------------------------------------------------


def run_cocotb_worker(block: str, number: int, seed: int, workdir: Path) -> int:
    """Worker process: every cocotb run of ``block``'s target on mutant ``number``; 0 when
    all pass."""
    from cocotb_tools.check_results import get_results

    target = _targets()[block]
    runner = build(block, workdir)  # up to date: make only checks
    for folder in (str(TESTS), str(TESTS / target.folder)):
        if folder not in sys.path:
            sys.path.append(folder)
    params = json.dumps(target.params.as_dict())
    for index, run in enumerate(target.cocotb):
        run_dir = workdir / "cocotb" / f"{number}-{index}"
        run_dir.mkdir(parents=True, exist_ok=True)
        results = run_dir / "results.xml"
        results.unlink(missing_ok=True)
        env = {**run.env, "AHASD_TB_PARAMS": params, "AHASD_TB_SEED": str(seed)}
        # A failing run raises; the results file says what happened either way.
        with contextlib.suppress(SystemExit, RuntimeError):
            runner.test(
                test_module=run.module,
                hdl_toplevel=block,
                build_dir=workdir / "sim",
                test_dir=run_dir,
                testcase=run.testcase,
                seed=seed,
                extra_env=env,
                plusargs=[f"+mutsel={number}"],
                timescale=("1ns", "1ps"),
                results_xml=str(results),
                log_file=run_dir / "cocotb.log",
            )
        try:
            tests, failed = get_results(results)
        except RuntimeError:
            tests, failed = 0, 1
        if failed or not tests:
            return 1
    return 0


def run_cocotb(block: str, target: Target, mutant: Mutant, seed: int) -> str:
    """``killed``, ``hung`` or ``survived``: the cocotb tier on one mutant."""
    command = [sys.executable, __file__, "--worker", block, str(mutant.number), "--seed", str(seed)]
    returncode, _ = processes.run_in_own_group(
        command, cwd=ROOT, env=dict(os.environ), timeout_s=target.timeout_s, capture=False
    )
    if returncode is None:
        return "hung"
    return "survived" if returncode == 0 else "killed"


# -- the formal tier -----------------------------------------------------------------------


@dataclass
class FormalPlan:
    """What the unmutated run found: the pytest nodes whose checks hold the netlist and
    each check's time (a mutant's check may take three times as long, at least 60 s)."""

    nodes: list[str]
    seconds: dict[str, float]

    def timeouts(self) -> dict[str, float]:
        return {"default": 600.0} | {n: max(60.0, 3 * s) for n, s in self.seconds.items()}


def run_formal(
    block: str, target: Target, fingerprint: str, mutant: Mutant | None, plan: FormalPlan | None
) -> list[dict]:
    """The formal tier on ``mutant`` (None: unmutated); the records of its checks."""
    number = 0 if mutant is None else mutant.number
    workdir = BUILD / block / "formal" / str(number)
    workdir.mkdir(parents=True, exist_ok=True)
    record = workdir / "record.jsonl"
    record.unlink(missing_ok=True)
    spec = {
        "digest": fingerprint,
        "command": None if mutant is None else mutant.command,
        "workdir": str(workdir),
        "record": str(record),
        "timeouts": {"default": 1800.0} if plan is None else plan.timeouts(),
    }
    (workdir / "mutant.json").write_text(json.dumps(spec))
    nodes = [f"tests/{target.folder}/test_formal.py"] if plan is None else plan.nodes
    command = [
        str(Path(sys.executable).parent / "pytest"),
        *nodes,
        "-q",
        "-m",
        "formal",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        # A planted-bug test runs a check on its own copy of the RTL and expects it to fail:
        # it is no check of the campaign's netlist (and a planted copy may even share its
        # fingerprint: the fingerprint covers cells, not how the block's ports are driven).
        "-k",
        "not planted",
    ]
    if plan is not None:
        command.append("--maxfail=1")  # one failing property kills the mutant
    env = {**os.environ, "AHASD_MUTANT": str(workdir / "mutant.json")}
    env.pop("PYTEST_ADDOPTS", None)
    limit = 4 * 3600 if plan is None else sum(plan.timeouts().values()) + 120
    processes.run_in_own_group(command, cwd=ROOT, env=env, timeout_s=limit, capture=False)
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line]


def formal_plan(records: list[dict], block: str) -> FormalPlan | None:
    """The plan of the formal tier, or None when no formal check holds the netlist (no
    wrapper around the whole block at harness/small_params.py's set): the tier then runs
    no mutant of the block and the report says so."""
    applied = [r for r in records if r["applies"]]
    if not applied:
        return None
    failing = [r for r in applied if r["outcome"] != "passed"]
    if failing:
        raise RuntimeError(f"{block}: the unmutated netlist fails formal checks: {failing}")
    nodes = sorted({r["node"] for r in applied})
    return FormalPlan(nodes, {r["check"]: r.get("seconds", 60.0) for r in applied})


# -- a campaign ----------------------------------------------------------------------------


def load_equivalent(block: str) -> dict[str, str]:
    """``{mutation key: why it cannot be observed}`` for ``block``."""
    if not EQUIVALENT.exists():
        return {}
    entries = tomllib.loads(EQUIVALENT.read_text()).get(block, [])
    return {" ".join(entry["mutation"].split()): entry["reason"] for entry in entries}


def recorded(block: str, fingerprint: str, count: int, seed: int) -> dict[str, dict] | None:
    """``{mutation key: its record}`` from the last full campaign of ``block`` (RECORD), if
    that campaign mutated this very netlist with the same list; None otherwise."""
    if not RECORD.exists():
        return None
    entry = json.loads(RECORD.read_text()).get("blocks", {}).get(block)
    if entry is None or (entry["netlist"], entry["count"], entry["seed"]) != (
        fingerprint,
        count,
        seed,
    ):
        return None
    return {mutant["mutation"]: mutant for mutant in entry["mutants"]}


def write_record(
    block: str, fingerprint: str, count: int, seed: int, tiers: tuple[str, ...], mutants
) -> None:
    """Keep the outcome of a full campaign of ``block`` in RECORD (other blocks' entries
    stay): which tier killed each mutant and, for the formal tier, which checks."""
    found = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    blocks = found.get("blocks", {})
    blocks[block] = {
        "netlist": fingerprint,
        "count": count,
        "seed": seed,
        "tiers": list(tiers),
        "mutants": [
            {
                "number": m.number,
                "mutation": m.key,
                "outcome": m.outcome,
                "killed_by": m.killed_by,
                "formal_kills": m.formal_kills,
            }
            for m in mutants
        ],
    }
    text = json.dumps({"schema": "ahasd-mutation-record/1", "blocks": blocks}, indent=1)
    RECORD.write_text(text + "\n")


def update_record(block: str, mutants: list[Mutant]) -> None:
    """Replace the entries of ``mutants`` in RECORD's campaign of ``block``."""
    found = json.loads(RECORD.read_text())
    entries = {m["number"]: m for m in found["blocks"][block]["mutants"]}
    for m in mutants:
        entries[m.number].update(
            outcome=m.outcome, killed_by=m.killed_by, formal_kills=m.formal_kills
        )
    RECORD.write_text(json.dumps(found, indent=1) + "\n")


def campaign(
    block: str,
    count: int,
    seed: int,
    sample: int | None,
    sample_seed: int,
    tiers: tuple[str, ...],
    first_kill: bool,
    jobs: int,
    only: tuple[int, ...] = (),
) -> list[Mutant]:
    """Evaluate ``block``'s mutants (all of them, a sample, or the numbers in ``only``) and
    return them.

    A sample of a netlist that RECORD holds a full campaign of is drawn from the mutants
    that campaign killed, and each runs only the tier, and of the formal tier only the
    checks, that killed it then: a mutant that survives them now shows a check that has
    lost its teeth. Any other sample is evaluated as a campaign would evaluate it.

    ``only`` re-evaluates those mutants of the list as a campaign would (after a test was
    added to kill a survivor, say) and replaces their entries in RECORD, which must hold a
    full campaign of this netlist and list.
    """
    target = _targets()[block]
    workdir = BUILD / block
    fingerprint, mutants = prepare(block, target, count, seed, workdir)
    history = recorded(block, fingerprint, count, seed) if sample is not None else None
    chosen = mutants
    if only:
        if recorded(block, fingerprint, count, seed) is None:
            raise SystemExit(
                f"{block}: {RECORD.name} holds no campaign of this netlist (list seed {seed}, "
                f"{count} mutants) to update: run the full campaign"
            )
        unknown = sorted(set(only) - {m.number for m in mutants})
        if unknown:
            raise SystemExit(f"{block}: the list has no mutant {unknown} (1..{len(mutants)})")
        chosen = [m for m in mutants if m.number in only]
    if sample is not None:
        pool = mutants
        if history is not None:
            pool = [m for m in mutants if history.get(m.key, {}).get("outcome") == "killed"]
        else:
            print(
                f"{block}: {RECORD.name} holds no campaign of this netlist (list seed {seed}, "
                f"{count} mutants): the sample is evaluated as a campaign",
                flush=True,
            )
        picked = random.Random(f"{sample_seed}:{block}").sample(pool, min(sample, len(pool)))
        chosen = sorted(picked, key=lambda mutant: mutant.number)
    print(
        f"{block}: netlist {fingerprint}, {len(mutants)} mutants listed, running "
        f"{', '.join(str(m.number) for m in chosen)}",
        flush=True,
    )
    if "cocotb" in tiers:
        cocotb_verilog(block, mutants, workdir)
        build(block, workdir)
        # Also what makes a kill mean something: a testbench that failed on every netlist
        # would kill every mutant.
        if run_cocotb(block, target, Mutant(0, "none"), seed) != "survived":
            raise RuntimeError(
                f"{block}: the unmutated netlist fails its shortened testbench; see "
                f"{workdir / 'cocotb'}"
            )
    plan = LazyPlan(block, target, fingerprint, "formal" in tiers and history is None)
    if not first_kill:
        plan.get()
    equivalent = load_equivalent(block)

    def evaluate(mutant: Mutant) -> Mutant:
        started = time.monotonic()
        if history is not None:
            then = history[mutant.key]
            if "cocotb" in then["killed_by"]:
                mutant.cocotb = run_cocotb(block, target, mutant, seed)
            else:
                kills = then["formal_kills"]
                guided = FormalPlan(
                    sorted({k["node"] for k in kills}), {k["check"]: k["seconds"] for k in kills}
                )
                formal_tier(mutant, block, target, fingerprint, guided)
            if mutant.killed_by == "-":
                # The recorded tier misses it now (a testbench edit changed the shortened
                # run's traffic, say): the mutant is still killed if the other tier kills it
                # (the block's every formal check, 600 s each), and the report says which.
                if "cocotb" in then["killed_by"] and "formal" in tiers:
                    every_check = FormalPlan([f"tests/{target.folder}/test_formal.py"], {})
                    formal_tier(mutant, block, target, fingerprint, every_check)
                elif "cocotb" in tiers and mutant.cocotb == "not run":
                    mutant.cocotb = run_cocotb(block, target, mutant, seed)
                if mutant.killed_by != "-":
                    mutant.reason = (
                        f"{RECORD.name} has it killed by the {then['killed_by']} tier, which "
                        f"misses it now; killed by the {mutant.killed_by} tier"
                    )
        else:
            if "cocotb" in tiers:
                mutant.cocotb = run_cocotb(block, target, mutant, seed)
            if not (first_kill and mutant.cocotb in ("killed", "hung")) and plan.get():
                formal_tier(mutant, block, target, fingerprint, plan.get())
        mutant.seconds = time.monotonic() - started
        if mutant.killed_by != "-":
            mutant.outcome = "killed"
        elif history is not None:
            mutant.outcome = "survived"
            mutant.reason = (
                f"{RECORD.name} has it killed by the {history[mutant.key]['killed_by']} tier; "
                "it survives that tier now"
            )
        elif mutant.key in equivalent:
            mutant.outcome, mutant.reason = "equivalent", equivalent[mutant.key]
        else:
            mutant.outcome = "survived"
        print(
            f"{block} mutant {mutant.number}: {mutant.outcome} (cocotb {mutant.cocotb}, "
            f"formal {mutant.formal}{': ' + mutant.formal_detail if mutant.formal_detail else ''}"
            f"; {mutant.seconds:.0f} s) {mutant.where}"
            + (f"; {mutant.reason}" if mutant.outcome != "equivalent" and mutant.reason else ""),
            flush=True,
        )
        return mutant

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool_of_workers:
        list(pool_of_workers.map(evaluate, chosen))
    stale = set(equivalent) - {m.key for m in mutants}
    for key in sorted(stale):
        print(f"{block}: equivalent.toml lists a mutant this netlist does not have: {key}")
    if only:
        update_record(block, chosen)
    elif sample is None:
        write_record(block, fingerprint, count, seed, plan.tiers(tiers), chosen)
    return chosen


def formal_tier(
    mutant: Mutant, block: str, target: Target, fingerprint: str, plan: FormalPlan
) -> None:
    """Run ``plan``'s checks on ``mutant``; its formal verdict and the checks that failed."""
    records = run_formal(block, target, fingerprint, mutant, plan)
    failed = [r for r in records if r["applies"] and r["outcome"] == "failed"]
    undecided = [r for r in records if r["applies"] and r["outcome"] not in ("passed", "failed")]
    mutant.formal = "killed" if failed else "survived"
    mutant.formal_detail = "; ".join(f"{r['check']}: {r['outcome']}" for r in [*failed, *undecided])
    mutant.formal_kills = [
        {"node": r["node"], "check": r["check"], "seconds": plan.seconds.get(r["check"], 60.0)}
        for r in failed
    ]


class LazyPlan:
    """The formal plan (the unmutated netlist through every formal check of the block),
    made the first time a mutant needs it: with ``--first-kill`` a campaign whose mutants
    all fall to the cocotb tier never pays for it."""

    def __init__(self, block: str, target: Target, fingerprint: str, wanted: bool) -> None:
        self.block, self.target, self.fingerprint = block, target, fingerprint
        self.wanted = wanted
        self.made = False
        self.plan: FormalPlan | None = None
        self.lock = threading.Lock()

    def get(self) -> FormalPlan | None:
        if not self.wanted:
            return None
        with self.lock:
            if not self.made:
                records = run_formal(self.block, self.target, self.fingerprint, None, None)
                self.plan = formal_plan(records, self.block)
                self.made = True
                if self.plan is None:
                    print(f"{self.block}: no formal check holds this netlist; cocotb tier only")
                else:
                    nodes = ", ".join(self.plan.nodes)
                    print(f"{self.block}: formal checks on this netlist: {nodes}", flush=True)
            return self.plan

    def tiers(self, tiers: tuple[str, ...]) -> tuple[str, ...]:
        """The tiers that ran: the formal tier only if some check holds the netlist."""
        if self.made and self.plan is None:
            return tuple(tier for tier in tiers if tier != "formal")
        return tiers


def report(results: dict[str, list[Mutant]], path: Path, seed: int, count: int) -> str:
    lines = [
        f"# Mutation report (list seed {seed}, {count} mutants listed per block)",
        "",
        "| block | run | killed by cocotb only | by formal only | by both | survived "
        "| equivalent |",
        "|---|---|---|---|---|---|---|",
    ]
    for block, mutants in results.items():
        tally = {
            "cocotb": sum(m.killed_by == "cocotb" for m in mutants),
            "formal": sum(m.killed_by == "formal" for m in mutants),
            "both": sum(m.killed_by == "cocotb+formal" for m in mutants),
            "survived": sum(m.outcome == "survived" for m in mutants),
            "equivalent": sum(m.outcome == "equivalent" for m in mutants),
        }
        lines.append(
            f"| {block} | {len(mutants)} | {tally['cocotb']} | {tally['formal']} | "
            f"{tally['both']} | {tally['survived']} | {tally['equivalent']} |"
        )
    for block, mutants in results.items():
        lines += ["", f"## {block}", ""]
        for m in mutants:
            formal = m.formal + (f" ({m.formal_detail})" if m.formal_detail else "")
            lines.append(
                f"- #{m.number} {m.outcome}: cocotb {m.cocotb}, formal {formal}; `{m.key}`"
                f" ({m.where})"
            )
            if m.reason:
                lines.append(
                    f"  - {'equivalent' if m.outcome == 'equivalent' else 'note'}: {m.reason}"
                )
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    targets = sorted(_targets())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", nargs="+", default=targets, choices=targets)
    parser.add_argument("--count", type=int, default=40, help="mutants listed per block")
    parser.add_argument("--seed", type=int, default=1, help="mutation list and testbench seed")
    parser.add_argument("--sample", type=int, help="run only this many mutants per block")
    parser.add_argument("--sample-seed", type=int, help="which ones (fresh and printed if unset)")
    parser.add_argument(
        "--mutants",
        type=int,
        nargs="+",
        default=[],
        help="re-evaluate only these mutants of the list and update their record entries",
    )
    parser.add_argument("--tiers", nargs="+", default=list(TIERS), choices=TIERS)
    parser.add_argument("--first-kill", action="store_true", help="stop at the first kill")
    parser.add_argument("--jobs", type=int, default=2, help="mutants evaluated at once")
    parser.add_argument("--report", type=Path, default=BUILD / "report.md")
    parser.add_argument("--worker", nargs=2, metavar=("BLOCK", "MUTANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        block, number = args.worker[0], int(args.worker[1])
        return run_cocotb_worker(block, number, args.seed, BUILD / block)
    if not 1 <= args.count < (1 << MUTSEL_BITS):
        parser.error(f"--count must be between 1 and {(1 << MUTSEL_BITS) - 1}, not {args.count}")
    sample_seed = args.sample_seed
    if args.mutants and args.sample is not None:
        parser.error("--mutants and --sample exclude each other")
    if args.mutants and len(args.blocks) != 1:
        parser.error("--mutants needs exactly one of --blocks")
    if args.sample is not None and sample_seed is None:
        sample_seed = random.SystemRandom().randrange(1 << 31)
    if args.sample is not None:
        print(f"mutant sample seed: {sample_seed} (replay with --sample-seed {sample_seed})")
    results = {
        block: campaign(
            block,
            args.count,
            args.seed,
            args.sample,
            sample_seed or 0,
            tuple(args.tiers),
            args.first_kill,
            args.jobs,
            tuple(args.mutants),
        )
        for block in args.blocks
    }
    print(report(results, args.report, args.seed, args.count))
    survivors = [m for mutants in results.values() for m in mutants if m.outcome == "survived"]
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
