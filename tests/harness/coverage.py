"""Functional coverage that can fail: named bins, each with a required count.

A thin layer over ``cocotb-coverage`` (its ``CoverPoint``s and ``coverage_db``), used inside
the cocotb testbenches. Each bin is one cover point ``<group>.<bin>`` with ``at_least`` set to
its required count; a testbench samples a bin by name when the situation occurs, and at the
end :meth:`Coverage.check` fails naming every bin below its count. The database is also
written as XML beside the run's log (``coverage.xml``) for a closer look.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cocotb_coverage.coverage import CoverPoint, coverage_db


class Coverage:
    """The bins of one testbench run.

    Parameters
    ----------
    group : the name prefix (one per cocotb test, e.g. ``"tvc.random"``).
    bins : ``{bin name: required count}``.
    """

    def __init__(self, group: str, bins: dict[str, int]):
        if not bins:
            raise ValueError("a coverage group needs at least one bin")
        self.group = group
        self.required = dict(bins)
        self._samplers = {}
        for name, count in bins.items():
            if count < 1:
                raise ValueError(f"bin {name!r} needs a required count of at least 1")

            @CoverPoint(f"{group}.{name}", xf=lambda hit: hit, bins=[True], at_least=count)
            def sampler(hit):
                return hit

            self._samplers[name] = sampler

    def sample(self, *names: str) -> None:
        """Count one hit of each named bin."""
        for name in names:
            try:
                self._samplers[name](True)
            except KeyError:
                raise KeyError(f"{self.group} has no bin {name!r}") from None

    def sample_if(self, pairs: Iterable[tuple[str, bool]]) -> None:
        """Count the bins whose condition holds."""
        self.sample(*(name for name, hit in pairs if hit))

    def hits(self, name: str) -> int:
        return coverage_db[f"{self.group}.{name}"].detailed_coverage[True]

    def missing(self) -> dict[str, tuple[int, int]]:
        """``{bin: (hits, required)}`` of the bins below their required count."""
        return {
            name: (self.hits(name), count)
            for name, count in self.required.items()
            if self.hits(name) < count
        }

    def summary(self) -> str:
        covered = len(self.required) - len(self.missing())
        return f"{self.group}: {covered} of {len(self.required)} bins covered"

    def write(self, directory: Path | str = ".") -> None:
        """The whole database as ``coverage.xml`` in ``directory`` (the run's directory)."""
        coverage_db.export_to_xml(filename=str(Path(directory) / "coverage.xml"))

    def check(self) -> None:
        """Fail naming every bin below its required count."""
        missing = self.missing()
        if missing:
            listed = ", ".join(f"{name} ({hit} of {need})" for name, (hit, need) in missing.items())
            raise AssertionError(f"coverage holes in {self.group}: {listed}")
