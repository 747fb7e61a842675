"""The formal tier's side of a mutation campaign (used by ``harness.formal.check``).

``tests/mutation/run.py`` runs a block's formal tests under pytest with ``AHASD_MUTANT``
naming a JSON file: the fingerprint of the campaign's netlist, the ``mutate`` command of one
mutant (or none, for the unmutated sanity run), a directory for the runs, a file to record
outcomes in and the time each check may take. For every check, :class:`FormalMutant`
normalises the wrapper's design (:mod:`mutation.netlist`), finds the submodule that is the
campaign's netlist, applies the mutation there (never in the wrapper, whose properties are
the test) and lets the check run on the result. A check whose wrapper holds the block at
another parameter set does not run; the record says so.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mutation.netlist import NORMALISE_MODULE, PROC, digest, modules, quoted, retarget, yosys


@dataclass
class FormalMutant:
    """One mutant as the formal checks of one pytest process see it.

    Attributes
    ----------
    digest : fingerprint of the campaign's normalised netlist.
    command : the ``mutate`` command (on the standalone module), or None: no mutation.
    workdir : where each check's sby run goes (``workdir/<check name>``).
    record_file : JSON lines, one per check: node, check, applies, outcome, seconds.
    timeouts : seconds a check may take, by check name (``default`` otherwise).
    """

    digest: str
    command: str | None
    workdir: Path
    record_file: Path
    timeouts: dict[str, float]
    applies: bool = False
    module: str = ""
    timeout_s: float = 0.0

    @classmethod
    def from_environment(cls) -> FormalMutant:
        spec = json.loads(Path(os.environ["AHASD_MUTANT"]).read_text())
        return cls(
            digest=spec["digest"],
            command=spec["command"],
            workdir=Path(spec["workdir"]),
            record_file=Path(spec["record"]),
            timeouts=spec["timeouts"],
        )

    def prepare(self, design: Path, name: str) -> bool:
        """Rewrite ``design`` (the wrapper's RTLIL) as the mutant, if it holds the netlist.

        Returns whether it does (also kept in :attr:`applies`); when not, the check is
        recorded as not applicable and must not run.
        """
        self.timeout_s = float(self.timeouts.get(name, self.timeouts["default"]))
        workdir = design.parent
        children = [
            module
            for module in modules(design.read_text())
            if module.startswith("top.") and "." not in module[len("top.") :]
        ]
        steps = [f"read_rtlil {design.name}", "hierarchy -top top", PROC]
        steps += [NORMALISE_MODULE.format(module=quoted(child)) for child in children]
        steps += ["write_rtlil normalised.il", "write_json normalised.json"]
        yosys("; ".join(steps), workdir, log="normalise.log")
        netlist = json.loads((workdir / "normalised.json").read_text())
        matching = [child for child in children if digest(netlist, child) == self.digest]
        self.applies = bool(matching)
        if not self.applies:
            self._write(name, applies=False, outcome="not applicable")
            return False
        self.module = matching[0]
        if self.command is None:
            shutil.copyfile(workdir / "normalised.il", design)
        else:
            command = retarget(self.command, self.module)
            yosys(
                f"read_rtlil normalised.il; {command}; write_rtlil {design.name}",
                workdir,
                log="mutate.log",
            )
        return True

    def record(self, name: str, returncode: int | None, output: str, seconds: float) -> None:
        """The outcome of the check's sby run."""
        if returncode is None:
            outcome = "timeout"
        elif returncode == 0:
            outcome = "passed"
        else:
            outcome = "failed"
        failed = [line.strip() for line in output.splitlines() if "failed" in line.lower()]
        self._write(
            name,
            applies=True,
            outcome=outcome,
            seconds=round(seconds, 1),
            detail="; ".join(failed[:3])[:300],
        )

    def _write(self, name: str, **fields) -> None:
        node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        line = json.dumps({"node": node, "check": name, **fields})
        with open(self.record_file, "a") as record:
            record.write(line + "\n")
