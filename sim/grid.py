"""Named sweep grids: which pairs, policies and modes ``ahasd sweep --grid NAME`` runs.

The paper's grid is its three model pairs (``sim/specs/pairs.toml``) x its four adaptive
drafting algorithms (:data:`ahasd.sim.policies.PAPER_POLICIES`) x every mode of the mode
table (:data:`ahasd.sim.modes.MODES`). A sweep without ``--grid`` takes each axis it is not
given from the paper's grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from ahasd.sim.modes.table import MODES
from ahasd.sim.policies import PAPER_POLICIES

__all__ = ["GRIDS", "PAPER_GRID", "PAPER_PAIRS", "Grid"]

PAPER_PAIRS = ("opt-1.3b-6.7b", "llama2-7b-13b", "palm-8b-30b")


@dataclass(frozen=True)
class Grid:
    """The axes of a sweep grid (the sweep adds seeds and traces)."""

    pairs: tuple[str, ...]
    policies: tuple[str, ...]
    modes: tuple[str, ...]

    def describe(self) -> str:
        """``"3 pairs x 4 algorithms x 7 modes"``."""
        return (
            f"{len(self.pairs)} pairs x {len(self.policies)} algorithms x {len(self.modes)} modes"
        )


PAPER_GRID = Grid(pairs=PAPER_PAIRS, policies=PAPER_POLICIES, modes=MODES)
GRIDS = {"paper": PAPER_GRID}
