"""Replay the cases of issue 30's audit and classify what ``ahasd`` does with each.

Not a test (pytest does not collect it): a script that runs every case as a subprocess of
the ``ahasd`` that ``--python`` imports (default: this interpreter's), in a temporary
folder, and prints per case the outcome class and whether it is what the issue asks for:

- ``ok``: exit 0 (and the case's own check, if any, found nothing wrong);
- ``user error``: exit 2 with one line on stderr, no traceback;
- ``interrupted``: exit 130 after a signal, no traceback;
- ``traceback``: a Python traceback, or any other exit status;
- ``hang``: still running at the case's time limit (killed);
- ``silent wrong``: exit 0 (or a refusal) but the check found the promise broken (a file
  written through a link, a stale row reported, a message that says something else).

Usage::

    python tests/cli/audit_cases.py [--python PATH] [--only SUBSTRING] [--with-cosim]

``--with-cosim`` adds the cases that build the Verilator model (minutes each). The exit
status is 0 if every case came out as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "sim" / "specs"
S = ["sweep", "--pairs", "llama2-7b-13b", "--tokens", "64", "--jobs", "1"]
SHORT = ["sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "gpu-only",
         "pim-async", "--tokens", "16", "--jobs", "1"]  # fmt: skip
RUN = ["simulate", "--mode", "ahasd", "--pair", "llama2-7b-13b", "--policy", "fixed",
       "--tokens", "64"]  # fmt: skip
NPU = ["simulate", "--mode", "npu-only", "--pair", "opt-1.3b-6.7b", "--policy", "fixed",
       "--tokens", "16"]  # fmt: skip
# Run ahasd as `python -c PRELUDE ARGV...`: the same entry point as the console script, with
# room for a case to hide a module (Ray) first.
ENTRY = "import sys\n{hide}from ahasd.cli import main\nsys.exit(main(sys.argv[1:]))"


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    seconds: float


@dataclass
class Case:
    """One audit case: its bullet of the issue, what to run, what the issue asks for."""

    bullet: str
    name: str
    argv: list
    expect: str  # "ok", "user error", "interrupted" or "either" (ok or user error)
    setup: object = None  # setup(work) -> None, before argv (may run ahasd itself)
    check: object = None  # check(work, outcome) -> str | None: what is wrong, if anything
    timeout: float = 60.0
    hide: tuple = ()  # modules made unimportable
    stdout_closed: bool = False
    signal_after: object = None  # (signum, seconds or a callable(work) -> bool to wait for)
    slow: bool = False  # builds the Verilator model
    notes: list = field(default_factory=list)


def ahasd(python: str, work: Path, argv: list, **options) -> Outcome:
    """``ahasd argv`` in ``work``; an Outcome (code None if it hung and was killed)."""
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in options.get("hide", ()))
    command = [python, "-c", ENTRY.format(hide=hide), *map(str, argv)]
    started = time.monotonic()
    child = subprocess.Popen(
        command,
        cwd=work,
        stdin=subprocess.DEVNULL,
        stdout=None if options.get("stdout_closed") else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=(lambda: os.close(1)) if options.get("stdout_closed") else None,
    )
    wait = options.get("signal_after")
    if wait is not None:
        signum, when = wait
        deadline = time.monotonic() + options.get("timeout", 60)
        if callable(when):
            while not when(work) and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            time.sleep(when)
        if child.poll() is None:
            os.killpg(child.pid, signum)
    try:
        out, err = child.communicate(timeout=options.get("timeout", 60))
        code = child.returncode
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # only what this script started
        out, err = child.communicate()
        code = None
    return Outcome(code, out or "", err, time.monotonic() - started)


def classify(outcome: Outcome, wrong: str | None) -> str:
    if outcome.code is None:
        return "hang"
    if "Traceback" in outcome.err:
        return "traceback"
    if wrong:
        return "silent wrong"
    if outcome.code == 0:
        return "ok"
    if outcome.code == 2 and len(outcome.err.strip().splitlines()) == 1:
        return "user error"
    if outcome.code == 2:
        return "silent wrong"  # a refusal, but its message split over lines
    if outcome.code == 130:
        return "interrupted"
    return "traceback"


# -- setups and checks ---------------------------------------------------------------------


def victim(work: Path) -> Path:
    path = work / "victim.txt"
    path.write_bytes(b"precious\n")
    return path


def victim_intact(work: Path, outcome: Outcome) -> str | None:
    if (work / "victim.txt").read_bytes() != b"precious\n":
        return "the file behind the link was written"
    return None


def out_absent(work: Path, outcome: Outcome) -> str | None:
    return "the results folder was created" if (work / "out").exists() else None


def says(*words: str):
    """A check: the error message holds every word (or the run failed to refuse)."""

    def check(work: Path, outcome: Outcome) -> str | None:
        missing = [w for w in words if w not in outcome.err]
        return f"the message does not say {missing}" if outcome.code == 2 and missing else None

    return check


def both(*checks):
    def check(work, outcome):
        for one in checks:
            problem = one(work, outcome)
            if problem:
                return problem
        return None

    return check


def run_ahasd(work: Path, *argv) -> Outcome:
    """For setups: ahasd with the audit's interpreter (set by main)."""
    outcome = ahasd(PYTHON, work, list(argv), timeout=300)
    if outcome.code != 0:
        raise RuntimeError(f"setup {argv} failed: {outcome.err[-400:]}")
    return outcome


def link_in_out(name: str):
    def setup(work):
        (work / "out").mkdir()
        (work / "out" / name).symlink_to(victim(work))

    return setup


def results(text: str):
    def setup(work):
        (work / "out").mkdir()
        (work / "out" / "results.jsonl").write_text(text)

    return setup


def grid(text: str):
    def setup(work):
        (work / "g.toml").write_text(text)

    return setup


def spec_copy(relative: str, old: str, new: str):
    def setup(work):
        path = work / "specs" / relative
        path.parent.mkdir(parents=True)
        path.write_text((SPECS / relative).read_text().replace(old, new, 1))

    return setup


def spec_special(make):
    def setup(work):
        (work / "specs" / "devices").mkdir(parents=True)
        make(work / "specs" / "devices" / "x.toml")

    return setup


def edit_and_revert(work: Path) -> None:
    power = work / "specs" / "power" / "npu-mobile.toml"
    power.parent.mkdir(parents=True)
    original = (SPECS / "power" / "npu-mobile.toml").read_text()
    sweep = [*SHORT[:6], "npu-only", "--tokens", "16", "--jobs", "1", "--spec-dir", "specs",
             "--out", "out", "--json"]  # fmt: skip
    power.write_text(original)
    first = json.loads(run_ahasd(work, *sweep).out)[0]["energy_per_token_mj"]
    power.write_text(original.replace("[static_w]\nvalue = 0.3", "[static_w]\nvalue = 0.95"))
    run_ahasd(work, *sweep)
    power.write_text(original)
    run_ahasd(work, *sweep)  # the revert's sweep: its row is the first one's identity
    (work / "first.json").write_text(json.dumps(first))


def report_shows_first(work: Path, outcome: Outcome) -> str | None:
    if outcome.code != 0:
        return None
    first = json.loads((work / "first.json").read_text())
    shown = json.loads(outcome.out)["ablation"][0]["energy_per_token_mj"]
    return None if shown == first else f"report shows {shown}, the current files give {first}"


def strip_newline(work: Path) -> None:
    run_ahasd(work, *SHORT, "--out", "out")
    path = work / "out" / "results.jsonl"
    (work / "rows").write_text(str(len(path.read_text().splitlines())))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))


def rows_kept(work: Path, outcome: Outcome) -> str | None:
    rows = len((work / "out" / "results.jsonl").read_text().splitlines())
    expected = int((work / "rows").read_text())
    if rows != expected or "0 new" not in outcome.out:
        return f"{rows} rows after resume, {expected} before; rerun: {'0 new' not in outcome.out}"
    return None


LONG = ["sweep", "--pairs", "llama2-7b-13b", "--policies", "fixed", "adaedl", "specdecpp",
        "--modes", "ahasd", "pim-async", "--tokens", "4096", "--seeds", "0", "1", "2",
        "--jobs", "2", "--out", "out"]  # fmt: skip


def terminated_sweep(work: Path) -> None:
    child = subprocess.Popen(
        [PYTHON, "-c", ENTRY.format(hide=""), *LONG],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results_file = work / "out" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        results_file.exists() and results_file.read_bytes().count(b"\n")
    ):
        time.sleep(0.1)
    child.send_signal(signal.SIGTERM)  # the sweep alone, as `kill PID` does
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=30)
    # Whatever it left running (its pool's workers, if they outlive it) stays until the
    # case's command has run: ended then by end_left_behind.
    (work / "group").write_text(str(child.pid))


def end_left_behind(work: Path, outcome: Outcome) -> str | None:
    """Kill what the terminated sweep left behind (only its own process group)."""
    with contextlib.suppress(ProcessLookupError, FileNotFoundError):
        os.killpg(int((work / "group").read_text()), signal.SIGKILL)
    return None


def jobs_two_twice(work: Path) -> None:
    sweep = ["sweep", "--pairs", "llama2-7b-13b", "opt-1.3b-6.7b", "--policies", "fixed",
             "adaedl", "--modes", "ahasd", "npu-only", "--seeds", "0", "1", "2", "--tokens",
             "32", "--jobs", "2"]  # fmt: skip
    for name in ("a", "b"):
        run_ahasd(work, *sweep, "--out", name)
    # The finishing order is the pool's: make sure the two files differ in it.
    lines = (work / "b" / "results.jsonl").read_text().splitlines(keepends=True)
    (work / "b" / "results.jsonl").write_text("".join(reversed(lines)))
    run_ahasd(work, "report", "--results", "b")


def reports_identical(work: Path, outcome: Outcome) -> str | None:
    if outcome.code != 0:
        return None
    for name in ("ablation.csv", "comparison.csv", "ablation.png"):
        if (work / "a" / name).read_bytes() != (work / "b" / name).read_bytes():
            return f"{name} differs between two sweeps of one grid"
    return None


def nan_row(work: Path) -> None:
    run_ahasd(work, *SHORT, "--out", "out")
    path = work / "out" / "results.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["tokens_per_s"] = float("nan")
    lines[0] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")


def noop_resume(work: Path) -> None:
    run_ahasd(work, *SHORT, "--out", "out")
    os.utime(work / "out" / "results.jsonl", ns=(10**18, 10**18))


def mtime_kept(work: Path, outcome: Outcome) -> str | None:
    if (work / "out" / "results.jsonl").stat().st_mtime_ns != 10**18:
        return "results.jsonl was rewritten by a sweep with nothing to run"
    return None


def trace_640(work: Path) -> None:
    run_ahasd(work, "trace", "gen", "--iid", "0.5", "--length", "8", "--seed", "1", "--out", "t")
    (work / "t").chmod(0o640)


def mode_kept(work: Path, outcome: Outcome) -> str | None:
    mode = (work / "t").stat().st_mode & 0o777
    return None if mode == 0o640 else f"the rewrite changed the mode to {oct(mode)}"


def trace_with(change):
    def setup(work):
        run_ahasd(work, "trace", "gen", "--iid", "0.5", "--length", "6", "--out", "t.jsonl")
        lines = (work / "t.jsonl").read_text().splitlines()
        (work / "t.jsonl").write_text("\n".join(change(lines)) + "\n")

    return setup


def blank_line(lines):
    return [*lines[:3], "", *lines[3:]]


def duplicate_length(lines):
    return [lines[0][:-1] + ', "length": 9}', *lines[1:]]


def nothing_in(folder: str):
    def check(work, outcome):
        path = work / folder
        return f"{folder} was written" if path.exists() and any(path.iterdir()) else None

    return check


HUGE = "9" * 5000
LONG_NAME = "x" * 300


def cases() -> list[Case]:
    return [
        # -- silent data loss (items 1-9)
        Case("1 cosim ignores --controller-param", "edc.stats_bits=48 refused before a build",
             ["cosim", *RUN[1:], "--controller-param", "edc.stats_bits=48", "--check",
              "--build-dir", "b"], "user error", timeout=400),
        Case("2 links in a results folder", ".lock linked to a file",
             [*SHORT, "--out", "out"], "user error", link_in_out(".lock"), victim_intact),
        Case("2 links in a results folder", "results.jsonl linked elsewhere",
             [*SHORT, "--out", "out"], "user error", link_in_out("results.jsonl"),
             victim_intact),
        Case("3 single-file outputs replace special files", "regmap --out a link",
             ["regmap", "--out", "link"], "user error",
             lambda w: (w / "link").symlink_to(victim(w)),
             lambda w, o: None if (w / "link").is_symlink() else "the link was replaced"),
        Case("3 single-file outputs replace special files", "regmap --out a FIFO",
             ["regmap", "--out", "fifo"], "user error", lambda w: os.mkfifo(w / "fifo"),
             lambda w, o: None if not (w / "fifo").is_file() else "the FIFO was replaced",
             timeout=30),
        Case("4 report shows a stale row", "edit a power file, run, revert, run, report",
             ["report", "--results", "out", "--json"], "ok", edit_and_revert,
             report_shows_first),
        Case("5 last row without newline deleted", "resume after an editor's save",
             [*SHORT, "--out", "out"], "ok", strip_newline, rows_kept),
        Case("6 misspelt spec fields ignored", "eta_memroy in a device file",
             [*NPU, "--spec-dir", "specs"], "user error",
             spec_copy("devices/npu-mobile.toml", "[eta_memory]", "[eta_memroy]"),
             says("eta_memroy")),
        Case("7 grid values not type-checked", 'fallback = ["no"]',
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid('[axes]\nfallback = ["no"]\n'), out_absent),
        Case("8 SIGTERM leaves the sweep locked", "a sweep after a terminated one",
             ["sweep", "--pairs", "llama2-7b-13b", "--policies", "fixed", "--modes", "ahasd",
              "--tokens", "16", "--jobs", "1", "--out", "out"], "ok", terminated_sweep,
             end_left_behind, timeout=60),
        Case("9 a billion-run grid", "three axes of 1,000 values",
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid("[axes]\n" + "".join(
                 f"{k} = [{', '.join(map(str, range(1, 1001)))}]\n"
                 for k in ("seed", "tokens", "prompt_tokens"))), out_absent, timeout=30),
        # -- tracebacks and hangs
        Case("T huge integers", "a 5000-digit --policy-param",
             [*RUN, "--policy-param", f"max_len={HUGE}"], "user error"),
        Case("T huge integers", "a 5000-digit integer in a grid file",
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid(f"[axes]\nseed = [{HUGE}]\n")),
        Case("T huge integers", "a 5000-digit integer in results.jsonl",
             ["report", "--results", "out"], "user error", results(f'{{"run_id": {HUGE}}}\n')),
        Case("T policy overflow", "specdecpp noise=300 over 256 tokens",
             ["simulate", "--mode", "ahasd", "--pair", "llama2-7b-13b", "--policy", "specdecpp",
              "--policy-param", "noise=300", "--tokens", "256"], "ok"),
        Case("T controller parameter makes a block invalid", "tvc.length_bits=4",
             [*RUN, "--controller-param", "tvc.length_bits=4"], "user error",
             check=says("tvc.length_bits")),
        Case("T wrong types in grid axes", "trace = [1]",
             [*S, "--grid", "g.toml", "--out", "out"], "user error", grid("[axes]\ntrace = [1]\n")),
        Case("T corrupt results rows", "a list run_id (sweep resumes)",
             [*S, "--policies", "fixed", "--modes", "gpu-only", "--out", "out"], "user error",
             results('{"run_id": [1], "key": "x"}\n'), says("line 1")),
        Case("T corrupt results rows", "a row with no mode (report)",
             ["report", "--results", "out"], "user error",
             results('{"run_id": "a", "key": "x", "pair": "p"}\n'), says("line 1", "mode")),
        Case("T corrupt results rows", "a row with no mode (sweep resumes)",
             [*S, "--policies", "fixed", "--modes", "gpu-only", "--out", "out"], "user error",
             results('{"run_id": "a", "key": "x", "pair": "p"}\n'), says("line 1", "mode")),
        Case("T a .lock that is a folder", ".lock a folder",
             [*SHORT, "--out", "out"], "user error", lambda w: (w / "out" / ".lock").mkdir(
                 parents=True)),
        Case("T --spec-dir scanning", "a dangling link",
             [*NPU, "--spec-dir", "specs"], "user error",
             spec_special(lambda p: p.symlink_to(p.parent / "nowhere"))),
        Case("T --spec-dir scanning", "a FIFO", [*NPU, "--spec-dir", "specs"], "user error",
             spec_special(os.mkfifo), timeout=30),
        Case("T --spec-dir scanning", "a link to /dev/zero", [*NPU, "--spec-dir", "specs"],
             "user error", spec_special(lambda p: p.symlink_to("/dev/zero")), timeout=30),
        Case("T --spec-dir scanning", "a file over 1 MiB", [*NPU, "--spec-dir", "specs"],
             "user error", spec_special(lambda p: p.write_text("# pad\n" * 200_000))),
        Case("T --spec-dir scanning", "--spec-dir /", [*NPU, "--spec-dir", "/"], "either",
             timeout=30),
        Case("T cosim --mode gpu-only builds first", "refused at once",
             ["cosim", "--mode", "gpu-only", "--pair", "llama2-7b-13b", "--policy", "fixed",
              "--tokens", "16", "--build-dir", "b"], "user error", None,
             lambda w, o: "a Verilator model was built" if (w / "b").exists() else None,
             timeout=400),
        Case("T an --out component over 255 bytes", "regmap", ["regmap", "--out", LONG_NAME],
             "user error"),
        Case("T an --out component over 255 bytes", "sweep",
             [*SHORT, "--out", f"{LONG_NAME}/x"], "user error"),
        Case("T stdout closed", "trace list >&-", ["trace", "list"], "user error",
             stdout_closed=True),
        Case("T Ctrl-C during verilog", "SIGINT to the group 3 s in",
             ["verilog", "--out", "v"], "interrupted", check=nothing_in("v"),
             signal_after=(signal.SIGINT, 3.0)),
        # -- promises not kept
        Case("P report byte-identical after --jobs 2", "two sweeps of one grid",
             ["report", "--results", "a"], "ok", jobs_two_twice, reports_identical,
             timeout=120),
        Case("P checked late", "bad policy_params in a grid",
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid('[axes]\nmode = ["ahasd"]\n"policy_params.nope" = [1]\n'), out_absent),
        Case("P checked late", "a phone run's unknown policy",
             ["simulate", "--platform", "sd8gen3", "--mode", "all", "--policy", "nope",
              "--duration", "30", "--tokens", "16"], "user error",
             check=lambda w, o: "a mode ran first" if "simulated s" in o.err else None),
        Case("P checked late", "--backend ray without Ray",
             [*SHORT, "--backend", "ray", "--out", "out"], "user error", check=out_absent,
             hide=("ray",)),
        Case("P accepted silently", "--address without --backend ray",
             [*SHORT, "--address", "127.0.0.1:1", "--out", "out"], "user error",
             check=out_absent),
        Case("P accepted silently", "a grid seed above the CLI's maximum",
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid("[axes]\nseed = [4294967296]\n"), out_absent),
        Case("P accepted silently", "two grid axes naming one field",
             [*S, "--grid", "g.toml", "--out", "out"], "user error",
             grid('[axes]\nmode = ["ahasd"]\ntvc_cycle_bits = [40]\n"tvc.cycle_bits" = [44]\n'),
             out_absent),
        Case("P accepted silently", "unicode digits as numbers",
             [*RUN[:-1], "\u0663\u0662"], "user error"),
        Case("P accepted silently", "a NaN row reused on resume", [*SHORT, "--out", "out"],
             "user error", nan_row),
        Case("P accepted silently", "a resumed no-op sweep rewrites results.jsonl",
             [*SHORT, "--out", "out"], "ok", noop_resume, mtime_kept),
        Case("P accepted silently", "a rewrite resets a file's mode",
             ["trace", "gen", "--iid", "0.5", "--length", "8", "--seed", "2", "--out", "t"],
             "ok", trace_640, mode_kept),
        Case("P accepted silently", "a rewrite replaces a symlink with a file",
             ["trace", "gen", "--iid", "0.5", "--length", "8", "--out", "link"], "user error",
             lambda w: (w / "link").symlink_to(victim(w)), victim_intact),
        Case("P accepted silently", "--out ''", ["regmap", "--out", ""], "user error"),
        # -- messages
        Case("M messages", "a mid-trace blank line", ["trace", "info", "t.jsonl"],
             "user error", trace_with(blank_line), says("blank")),
        Case("M messages", "a duplicate length key", ["trace", "info", "t.jsonl"],
             "user error", trace_with(duplicate_length), says("twice")),
        Case("M messages", "a controller-param TVC width",
             [*RUN, "--controller-param", "tvc.cycle_bits=16"], "user error",
             check=says("--controller-param tvc.cycle_bits")),
        Case("M messages", "bounds in an invalid int value", [*RUN, "--tvc-ratio-bits", "x"],
             "user error", check=says("16..48")),
        Case("M messages", "a newline in a path", ["report", "--results", "a\nb"], "user error"),
    ]  # fmt: skip


PYTHON = sys.executable


def main() -> int:
    global PYTHON
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter that has ahasd")
    parser.add_argument("--only", help="run the cases whose bullet or name holds this")
    parser.add_argument("--with-cosim", action="store_true", help="also the Verilator cases")
    options = parser.parse_args()
    PYTHON = options.python
    selected = [
        case
        for case in cases()
        if (options.with_cosim or not case.slow)
        and (options.only is None or options.only in f"{case.bullet} {case.name}")
    ]
    counts: Counter = Counter()
    failures = 0
    for case in selected:
        work = Path(tempfile.mkdtemp(prefix="ahasd-audit-"))
        try:
            if case.setup is not None:
                case.setup(work)
            outcome = ahasd(
                PYTHON,
                work,
                case.argv,
                hide=case.hide,
                stdout_closed=case.stdout_closed,
                signal_after=case.signal_after,
                timeout=case.timeout,
            )
            wrong = case.check(work, outcome) if case.check and outcome.code is not None else None
            kind = classify(outcome, wrong)
        except (RuntimeError, OSError) as error:  # a setup that could not run
            kind, wrong, outcome = "setup failed", str(error), None
        finally:
            end_left_behind(work, None)  # whatever the case's outcome
            shutil.rmtree(work, ignore_errors=True)
        expected = {"either": ("ok", "user error")}.get(case.expect, (case.expect,))
        good = kind in expected
        failures += not good
        counts[kind] += 1
        detail = wrong or (outcome.err.strip().splitlines() or [""])[-1][:110] if outcome else ""
        print(
            f"{'PASS' if good else 'FAIL'}  {kind:13s} (want {case.expect:11s}) "
            f"{case.bullet[:46]:46s} {case.name[:44]:44s} {detail}",
            flush=True,
        )
    summary = ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
    print(f"\n{len(selected)} cases: {summary}; as the issue asks: {len(selected) - failures}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
