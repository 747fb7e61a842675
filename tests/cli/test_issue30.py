"""The silent-data-loss items of issue 30, each a test that failed before its fix.

Nothing lost, nothing written where it should not be: cosim honours every run setting,
results folders and single-file outputs refuse what is not a regular file, the report follows
the current identity, resume keeps a complete last row, spec files and grids are checked,
a terminated sweep leaves no lock behind and a huge grid is refused. Expected values come
from a second, independent path (``ahasd simulate``, the file on disk, the issue's wording),
never from the code under test.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ahasd.hw.verilog import module_name
from ahasd.params import TopParams
from ahasd.sim.controller import GoldenController
from ahasd.sim.cosim import CosimRun, model_inputs, run_model, settings_from_dict
from ahasd.sim.library.loading import BUILTIN_SPEC_DIR

ROOT = Path(__file__).resolve().parents[2]
TEST_SPECS = ROOT / "tests" / "sim" / "specs"

# -- 1. cosim honours every run setting ------------------------------------------------------

# Non-default settings of every kind cosim takes (run, system, policy and controller
# parameters, spec overrides, an extra spec folder), on a configuration whose TVC values fit
# the top's registers (tests/cosim/test_identity.py) and where pre-verifications happen.
NON_DEFAULT = [
    "--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "adaedl",
    "--seed", "7", "--tokens", "48", "--prompt-tokens", "96", "--fallback",
    "--policy-param", "max_len=6",
    "--spec-dir", TEST_SPECS, "--pim", "lpddr5-pim-x16",
    "--draft-model", "smollm-135m", "--target-model", "qwen2.5-0.5b",
    "--draft-queue-tokens", "16", "--rank-split", "footprint", "--preverify-kv-reuse", "off",
    "--spec-override", "devices.@npu.eta_memory=0.8",
    "--spec-override", "power.@pim.static_w=0.3",
    "--controller-param", "edc.counter_bits=1",
    "--controller-param", "edc.update=current",
    "--controller-param", "gtsu.t_on=40",
]  # fmt: skip


@pytest.fixture
def fake_simulator(monkeypatch):
    """``run_cosim`` without Verilator: the job crosses JSON as it does into the simulator
    process, and the controller is the golden one built from the job's top parameters (what
    the RTL would be built with). Returns the list of jobs run."""
    jobs = []

    def run_cosim(job, params, *, run_name, build_root, waves=False):
        job = json.loads(json.dumps({**job, "top_params": params.as_dict()}))
        jobs.append(job)
        settings = settings_from_dict(job["settings"])
        top = TopParams.from_dict(job["top_params"])
        presets = model_inputs(settings)[2]
        controller = GoldenController(top.edc, top.tvc, top.gtsu, tvc_presets=presets)
        summary, log = run_model(settings, controller)
        run_dir = Path(build_root) / run_name
        run_dir.mkdir(parents=True)
        result = run_dir / "result.json"
        stats = {"calls": len(log), "identical": None, "irq": False}
        result.write_text(json.dumps({"summary": summary, "log": log, "cosim": stats}))
        return CosimRun(run_dir, result, run_dir / "log", None)

    monkeypatch.setattr("ahasd.sim.cosim.run_cosim", run_cosim)
    return jobs


def test_cosim_runs_both_sides_on_every_setting_as_simulate_does(ahasd, fake_simulator, tmp_path):
    simulated = json.loads(ahasd("simulate", *NON_DEFAULT, "--json").out)
    cosim = ahasd("cosim", *NON_DEFAULT, "--check", "--json", "--build-dir", tmp_path)
    assert cosim.code == 0, cosim.err
    result = json.loads(cosim.out)
    # The golden side agreed with the "RTL" side, and both with simulate.
    assert result["cosim"]["identical"] is True
    for key in ("tokens_per_s", "energy_per_token_mj", "drafted", "accepted", "controller"):
        assert result[key] == simulated[key], key
    (job,) = fake_simulator
    # The top is built with what was asked for, not the defaults.
    assert job["top_params"]["edc"]["counter_bits"] == 1
    assert job["top_params"]["edc"]["update"] == "current"
    assert job["top_params"]["gtsu"]["t_on"] == 40


def test_cosim_changes_with_a_controller_parameter(ahasd, fake_simulator, tmp_path):
    # The check above would pass if every setting were ignored on both sides alike: the
    # controller parameter must change the figures too.
    base = [a for a in NON_DEFAULT if not str(a).startswith(("edc.", "gtsu."))]
    base = [a for a in base if a != "--controller-param"]
    plain = json.loads(ahasd("cosim", *base, "--json", "--build-dir", tmp_path / "a").out)
    tuned = json.loads(ahasd("cosim", *NON_DEFAULT, "--json", "--build-dir", tmp_path / "b").out)
    assert plain["controller"] != tuned["controller"]


def test_cosim_refuses_a_controller_parameter_the_top_cannot_hold(ahasd, tmp_path):
    # The golden model takes 48-bit EDC statistics; the top's registers are 32 bits wide.
    line = ahasd(
        "cosim", "--mode", "ahasd", "--pair", "opt-1.3b-6.7b", "--policy", "fixed",
        "--controller-param", "edc.stats_bits=48", "--check", "--build-dir", tmp_path,
    ).one_line_error()  # fmt: skip
    assert "edc.stats_bits=48" in line
    assert not any(tmp_path.iterdir())  # nothing was built


# -- 2. a results folder's links are not followed ------------------------------------------

SWEEP = [
    "sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "gpu-only",
    "pim-async", "--tokens", "16", "--jobs", "1",
]  # fmt: skip


@pytest.fixture
def victim(tmp_path):
    """A file nobody asked ``ahasd`` to write, and its bytes."""
    path = tmp_path / "victim.txt"
    path.write_bytes(b"precious\n")
    return path


@pytest.mark.parametrize("name", [".lock", "results.jsonl"])
def test_sweep_refuses_a_link_in_its_results_folder(ahasd, tmp_path, victim, name):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / name).symlink_to(victim)
    line = ahasd(*SWEEP, "--out", out).one_line_error()
    assert str(out / name) in line
    assert "symbolic link" in line
    assert victim.read_bytes() == b"precious\n"
    assert (out / name).is_symlink()


def test_sweep_refuses_a_dangling_link_as_its_lock(ahasd, tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".lock").symlink_to(tmp_path / "elsewhere")
    line = ahasd(*SWEEP, "--out", out).one_line_error()
    assert str(out / ".lock") in line
    assert not (tmp_path / "elsewhere").exists()


def test_a_results_link_planted_after_the_check_is_not_followed(tmp_path, victim):
    # The results file is opened without following links, not only checked beforehand.
    from ahasd.errors import UserError
    from ahasd.output import Journal, open_regular

    link = tmp_path / "results.jsonl"
    link.symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        open_regular(link, os.O_WRONLY | os.O_APPEND)
    with pytest.raises(UserError, match="symbolic link"):
        Journal(link, valid_bytes=0)
    assert victim.read_bytes() == b"precious\n"


def test_report_refuses_a_link_among_its_files(ahasd, tmp_path, victim):
    out = tmp_path / "sweep"
    assert ahasd(*SWEEP, "--out", out).code == 0
    (out / "ablation.csv").unlink(missing_ok=True)
    (out / "ablation.csv").symlink_to(victim)
    line = ahasd("report", "--results", out).one_line_error()
    assert str(out / "ablation.csv") in line
    assert victim.read_bytes() == b"precious\n"
    assert (out / "ablation.csv").is_symlink()


# -- 3. single-file outputs never replace what is not a regular file -------------------------


def _special(tmp_path: Path, kind: str, victim: Path) -> Path:
    path = tmp_path / f"target-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        path.symlink_to(victim)
    elif kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        path.symlink_to(tmp_path / "fifo")
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # what /dev/full is
    return path


def _kind_of(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


@pytest.mark.parametrize("kind", ["fifo", "link", "link-to-fifo", "device"])
@pytest.mark.parametrize(
    "command",
    [
        ["regmap"],
        ["trace", "gen", "--iid", "0.5", "--length", "8"],
    ],
    ids=["regmap", "trace-gen"],
)
def test_single_file_out_refuses_a_special_target(ahasd, tmp_path, victim, kind, command):
    target = _special(tmp_path, kind, victim)
    before = _kind_of(target)
    line = ahasd(*command, "--out", target).one_line_error()
    assert line.startswith(f"ahasd: error: --out {target}: is ")
    assert _kind_of(target) == before  # still the FIFO, link or device it was
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_verilog_refuses_a_special_file_among_its_outputs(ahasd, tmp_path, victim, kind):
    out = tmp_path / "verilog"
    out.mkdir()
    target = _special(tmp_path, kind, victim)
    named = out / f"{module_name('queues')}.v"  # the file `ahasd verilog queues` writes
    target.rename(named)
    line = ahasd("verilog", "queues", "--out", out).one_line_error()
    assert str(named) in line
    assert _kind_of(named) != stat.S_IFREG
    assert victim.read_bytes() == b"precious\n"


# -- 4. the report follows the current identity ----------------------------------------------


def test_report_shows_the_current_identity_after_an_edit_and_its_revert(ahasd, tmp_path):
    specs = tmp_path / "specs"
    (specs / "power").mkdir(parents=True)
    power = specs / "power" / "npu-mobile.toml"
    original = (BUILTIN_SPEC_DIR / "power" / "npu-mobile.toml").read_text()
    power.write_text(original)
    out = tmp_path / "sweep"
    sweep = [
        "sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--modes", "npu-only",
        "--tokens", "16", "--jobs", "1", "--spec-dir", specs, "--out", out, "--json",
    ]  # fmt: skip

    def energy() -> float:
        (row,) = json.loads(ahasd(*sweep).out)
        return row["energy_per_token_mj"]

    first = energy()
    edited_text = original.replace("[static_w]\nvalue = 0.3", "[static_w]\nvalue = 0.95")
    assert edited_text != original
    power.write_text(edited_text)
    edited = energy()
    assert edited != first  # the edit mattered
    power.write_text(original)
    assert energy() == first  # the sweep resumes the first row
    (reported,) = json.loads(ahasd("report", "--results", out, "--json").out)["ablation"]
    assert reported["energy_per_token_mj"] == first


# -- 5. a last row without its newline is kept ------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_keeps_a_last_row_saved_without_its_newline(ahasd, tmp_path):
    out = tmp_path / "sweep"
    assert ahasd(*SWEEP, "--out", out).code == 0
    results = out / "results.jsonl"
    rows = _lines(results)
    results.write_bytes(results.read_bytes().rstrip(b"\n"))  # an editor's save
    again = ahasd(*SWEEP, "--out", out)
    assert again.code == 0, again.err
    assert f"{len(rows)} runs (0 new" in again.out  # nothing was rerun
    assert _lines(results) == rows
    assert results.read_bytes().endswith(b"}\n")


def test_resume_drops_a_half_written_last_line_and_says_so(ahasd, tmp_path):
    out = tmp_path / "sweep"
    assert ahasd(*SWEEP, "--out", out).code == 0
    results = out / "results.jsonl"
    rows = _lines(results)
    text = results.read_bytes()
    results.write_bytes(text[: len(text) - 20])  # the last row cut mid-write
    again = ahasd(*SWEEP, "--out", out)
    assert again.code == 0, again.err
    assert "incomplete" in again.err
    assert str(results) in again.err
    assert "1 new" in again.out  # the cut run ran again
    assert [r["run_id"] for r in _lines(results)] == [r["run_id"] for r in rows]


# -- 6. unknown keys in spec files ----------------------------------------------------------


def _spec_copy(tmp_path: Path, relative: str, old: str, new: str) -> tuple[Path, Path]:
    """A spec folder holding the built-in ``relative`` with ``old`` replaced by ``new``."""
    folder = tmp_path / "specs"
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (BUILTIN_SPEC_DIR / relative).read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return folder, path


NPU_RUN = ["simulate", "--mode", "npu-only", "--pair", "opt-1.3b-6.7b", "--policy", "fixed"]


@pytest.mark.parametrize(
    ("relative", "old", "new", "nearest"),
    [
        ("devices/npu-mobile.toml", "[eta_memory]", "[eta_memroy]", "eta_memory"),
        ("power/npu-mobile.toml", "[static_w]", "[static_watts]", "static_w"),
        ("models/opt-1.3b.toml", "nominal_params =", "nominal_param =", "nominal_params"),
        ("pairs.toml", 'source = "AHASD paper Table 1, small', 'sorce = "x', "source"),
        ("platforms/table2.toml", "[rank_split]", "[rank_splitt]", "rank_split"),
        ("platforms/table2.toml", "[preverify_kv_reuse]", "[preverify_kv_use]", "preverify"),
        ("devices/npu-mobile.toml", 'confidence = "medium: sw', 'confidnce = "medium: sw', "confi"),
    ],
    ids=["device", "power", "model", "pair", "platform", "platform-reuse", "field-table"],
)
def test_an_unknown_spec_key_names_the_file_the_key_and_the_nearest(
    ahasd, tmp_path, relative, old, new, nearest
):
    folder, path = _spec_copy(tmp_path, relative, old, new)
    misspelt = new.strip("[").split("]")[0].split(" =")[0].split(" ")[0]
    line = ahasd(*NPU_RUN, "--tokens", "16", "--spec-dir", folder).one_line_error()
    assert str(path) in line
    assert f"{misspelt}'" in line
    tail = line.split(misspelt, 1)[1]
    assert f"'{nearest}" in tail  # the nearest known key, after the unknown one


def test_an_unknown_key_in_a_phone_platform_is_refused(ahasd, tmp_path):
    folder, path = _spec_copy(tmp_path, "platforms/m4.toml", "[soc_base_w]", "[soc_base_watt]")
    line = ahasd(*PHONE_M4, "--spec-dir", folder).one_line_error()
    assert str(path) in line
    assert "'soc_base_watt'" in line
    assert "'soc_base_w'" in line


PHONE_M4 = ["simulate", "--platform", "m4", "--duration", "2", "--tokens", "16"]


def test_every_shipped_spec_file_still_loads():
    from ahasd.sim.library.loading import load_library
    from ahasd.sim.phone.platform import known_platforms, load_platform

    library = load_library([str(TEST_SPECS)])
    on_disk = {p.stem for p in (BUILTIN_SPEC_DIR / "devices").glob("*.toml")}
    on_disk |= {p.stem for p in (TEST_SPECS / "devices").glob("*.toml")}
    assert set(library.devices) == on_disk
    assert set(library.models) == {p.stem for p in (BUILTIN_SPEC_DIR / "models").glob("*.toml")}
    assert library.pairs
    platforms = {p.stem for p in (BUILTIN_SPEC_DIR / "platforms").glob("*.toml")}
    phones = known_platforms()
    assert set(library.platforms) | set(phones) == platforms
    for path in phones.values():
        load_platform(path)


# -- 7. grid values are type-checked ------------------------------------------------------

GRID_SWEEP = ["sweep", "--pairs", "opt-1.3b-6.7b", "--policies", "fixed", "--tokens", "16"]


@pytest.mark.parametrize(
    ("axis", "value", "expected"),
    [
        ("fallback", '["no"]', "true or false"),
        ("tokens", "[true]", "an integer"),
        ("tokens", "[16.0]", "an integer"),
        ("trace", "[1]", "a string"),
        ("mode", "[3]", "a string"),
        ("preverify_kv_reuse", '["off"]', "true or false"),
        ('"edc.llr_bits"', "[2.5]", "an integer"),
        ('"devices.@npu.memory_bandwidth"', '["fast"]', "a number"),
        ('"devices.@pim.draft_ranks"', "[false]", "an integer"),
    ],
)
def test_a_grid_value_of_the_wrong_type_names_file_axis_and_value(
    ahasd, tmp_path, axis, value, expected
):
    grid = tmp_path / "grid.toml"
    modes = "" if axis == "mode" else 'mode = ["npu-only"]\n'
    grid.write_text(f"[axes]\n{modes}{axis} = {value}\n")
    out = tmp_path / "sweep"
    line = ahasd(*GRID_SWEEP, "--grid", grid, "--out", out).one_line_error()
    assert str(grid) in line
    assert f"'{axis.strip(chr(34))}'" in line
    assert value.strip("[]") in line.replace("'", '"').replace("True", "true").replace(
        "False", "false"
    )
    assert expected in line
    assert not out.exists()


def test_a_grid_of_true_and_false_runs_and_labels_them(ahasd, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[axes]\nmode = ["npu-only"]\nfallback = [true, false]\n')
    rows = json.loads(ahasd(*GRID_SWEEP, "--grid", grid, "--out", tmp_path / "s", "--json").out)
    assert ["fallback=True" in r["scenario"] for r in rows] == [True, False]


# -- 8. SIGTERM ends the workers and frees the lock ---------------------------------------

LONG_SWEEP = [
    "sweep", "--pairs", "llama2-7b-13b", "--policies", "fixed", "adaedl", "specdecpp", "svip",
    "--modes", "ahasd", "pim-async", "--tokens", "4096", "--seeds", "0", "1", "2", "3",
    "--jobs", "2",
]  # fmt: skip


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_sigterm_ends_the_pool_workers_and_releases_the_lock(ahasd, tmp_path):
    out = tmp_path / "sweep"
    results = out / "results.jsonl"
    command = [sys.executable, "-m", "ahasd.cli", *LONG_SWEEP, "--out", str(out)]
    sweep = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        started = _wait_for(lambda: results.exists() and results.read_bytes().count(b"\n"), 60)
        assert started, "the sweep finished no run in 60 s"
        sweep.send_signal(signal.SIGTERM)
        sweep.wait(timeout=30)
        # Its workers die with it (the session holds the sweep and everything it started).
        assert _wait_for(lambda: not _group_alive(sweep.pid), 10), "workers outlived the sweep"
        with (out / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: raises if held
            fcntl.flock(lock, fcntl.LOCK_UN)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweep.pid, signal.SIGKILL)  # only what this test started
        sweep.wait()
        sweep.stderr.close()
    short = ["sweep", "--pairs", "llama2-7b-13b", "--policies", "fixed", "--modes", "ahasd"]
    again = ahasd(*short, "--tokens", "16", "--jobs", "1", "--out", out)
    assert again.code == 0, again.err


def test_a_stale_lock_of_a_dead_pid_is_taken_and_said(ahasd, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no process
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".lock").write_text(f"pid {dead.pid}, started 2026-01-01T00:00:00\n")
    outcome = ahasd(*SWEEP, "--out", out)
    assert outcome.code == 0, outcome.err
    assert f"pid {dead.pid}" in outcome.err
    assert "no longer running" in outcome.err
    assert (out / ".lock").read_text() == ""  # a finished sweep leaves no claim behind


# -- 9. a grid over the run limit is refused before any work ---------------------------------


def test_a_billion_run_grid_is_refused_at_once_naming_count_and_limit(ahasd, tmp_path):
    grid = tmp_path / "grid.toml"
    values = ", ".join(str(n) for n in range(1, 1001))
    axes = f"seed = [{values}]\ntokens = [{values}]\nprompt_tokens = [{values}]\n"
    grid.write_text(f"[axes]\nmode = ['npu-only']\n{axes}")
    out = tmp_path / "sweep"
    started = time.monotonic()
    line = ahasd(*GRID_SWEEP[:-2], "--grid", grid, "--out", out).one_line_error()
    assert time.monotonic() - started < 10
    assert "1,000,000,000 runs" in line  # 1000 x 1000 x 1000, one pair, policy and mode
    assert "100,000" in line  # the limit the issue asks for
    assert not out.exists()


def test_a_grid_one_run_over_the_limit_is_refused(ahasd, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f"[axes]\nmode = ['npu-only']\nseed = [{', '.join(map(str, range(100_001)))}]\n"
    )
    line = ahasd(*GRID_SWEEP, "--grid", grid, "--out", tmp_path / "sweep").one_line_error()
    assert "100,001 runs" in line


# -- beyond the nine: huge integers, special spec files, a folder as the lock --------------

HUGE = "9" * 5000  # past Python's 4300-digit limit of int(str)


@pytest.mark.parametrize(
    "option",
    [
        ["--policy-param", f"max_len={HUGE}"],
        ["--spec-override", f"devices.@npu.clock_hz={HUGE}"],
        ["--controller-param", f"edc.llr_bits={HUGE}"],
    ],
    ids=["policy-param", "spec-override", "controller-param"],
)
def test_a_huge_integer_option_is_one_line(ahasd, option):
    line = ahasd(*NPU_RUN, "--tokens", "16", *option).one_line_error()
    assert option[1].split("=")[0] in line


def test_a_huge_integer_in_a_spec_file_is_one_line(ahasd, tmp_path):
    folder, path = _spec_copy(
        tmp_path, "models/opt-1.3b.toml", "nominal_params = { value = 1.3e9", "nominal_params = "
        f"{{ value = {HUGE}"
    )  # fmt: skip
    line = ahasd(*NPU_RUN, "--tokens", "16", "--spec-dir", folder).one_line_error()
    assert str(path) in line


def test_a_huge_integer_in_a_grid_file_is_one_line(ahasd, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(f"[axes]\nseed = [{HUGE}]\n")
    line = ahasd(*GRID_SWEEP, "--grid", grid, "--out", tmp_path / "s").one_line_error()
    assert str(grid) in line


def test_a_huge_integer_in_a_trace_is_one_line(ahasd, tmp_path):
    from ahasd.sim.traces.format import builtin_trace_paths

    lines = builtin_trace_paths()[0].read_text().splitlines()
    lines[1] = lines[1].replace(",1,", f",{HUGE},", 1)
    assert HUGE in lines[1]
    trace = tmp_path / "huge.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    line = ahasd(*NPU_RUN, "--tokens", "16", "--trace", trace).one_line_error()
    assert str(trace) in line


def test_a_huge_integer_in_results_is_one_line(ahasd, tmp_path):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "results.jsonl").write_text(f'{{"run_id": {HUGE}}}\n')
    line = ahasd("report", "--results", out).one_line_error()
    assert "results.jsonl" in line


def _spec_dir_with(tmp_path: Path, name: str, make) -> Path:
    folder = tmp_path / "specs"
    (folder / "devices").mkdir(parents=True)
    make(folder / "devices" / name)
    return folder


@pytest.mark.parametrize(
    ("name", "make", "said"),
    [
        ("fifo.toml", os.mkfifo, "FIFO"),
        ("zero.toml", lambda p: p.symlink_to("/dev/zero"), "character device"),
        ("gone.toml", lambda p: p.symlink_to(p.parent / "nowhere"), "dangling"),
        ("big.toml", lambda p: p.write_text("# padding\n" * 110_000), "1,048,576"),
    ],
    ids=["fifo", "link-to-dev-zero", "dangling-link", "over-1-MiB"],
)
def test_spec_dir_refuses_special_and_huge_files_naming_them(ahasd, tmp_path, name, make, said):
    folder = _spec_dir_with(tmp_path, name, make)
    line = ahasd(*NPU_RUN, "--tokens", "16", "--spec-dir", folder).one_line_error()
    assert str(folder / "devices" / name) in line
    assert said in line


def test_spec_dir_skips_an_editors_hidden_lock_link(ahasd, tmp_path):
    folder = _spec_dir_with(
        tmp_path, ".#npu-mobile.toml", lambda p: p.symlink_to("user@host.1234:1700000000")
    )
    assert ahasd(*NPU_RUN, "--tokens", "16", "--spec-dir", folder).code == 0


def test_a_folder_as_the_lock_is_one_line(ahasd, tmp_path):
    out = tmp_path / "sweep"
    (out / ".lock").mkdir(parents=True)
    line = ahasd(*SWEEP, "--out", out).one_line_error()
    assert str(out / ".lock") in line
    assert "folder" in line
