"""The rank split: which of the PIM's ranks hold (and compute on) the draft and the target.

The paper stores the models "with varying rank sizes ... according to model size" (section
5.1; 16 ranks of 4 GB). A model's footprint is its weights at the PIM's precision plus its KV
cache at the run's full length (prompt + generated tokens); it needs
``ceil(footprint / rank bytes)`` ranks. The sentence allows two readings, both offered as a
platform option (``rank_split``), with the old fixed split as a third:

- ``target-first`` (default): the target gets the ranks its footprint needs, the draft is
  striped over all the rest. A rank computes only on the weights it holds (spec 2.5), so
  drafting, the PIM's main task, gets every rank the target does not need; the target's
  ranks are what pre-verification computes on.
- ``footprint``: each model on just the ranks its footprint needs; the other ranks hold
  nothing and compute nothing.
- ``fixed``: the PIM device file's ``draft_ranks`` (a layout chosen by hand).

A pair whose footprints do not fit the memory (or a fixed split that cannot hold a model)
is refused with the figures. A PIM without ``rank_capacity_bytes`` (the authors' HBM2-PIM,
whose file gives no capacity per unit) keeps its fixed split, with a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ahasd.errors import UserError
from ahasd.sim.library.specs import DeviceSpec, ModelSpec

__all__ = ["RankSplit", "footprint_bytes", "split_ranks"]


@dataclass(frozen=True)
class RankSplit:
    """Ranks of the draft and the target model (``draft + target <= units``)."""

    draft: int
    target: int
    reading: str
    note: str = ""


def footprint_bytes(model: ModelSpec, tokens: int) -> float:
    """Weights plus the KV cache of ``tokens`` positions (bytes)."""
    return model.weight_bytes_total + tokens * model.kv_bytes_per_token()


def _ranks(model: ModelSpec, tokens: int, rank_bytes: float) -> int:
    return max(1, math.ceil(footprint_bytes(model, tokens) / rank_bytes))


def split_ranks(
    pim: DeviceSpec, draft: ModelSpec, target: ModelSpec, tokens: int, reading: str
) -> RankSplit:
    """Divide ``pim``'s units between ``draft`` and ``target`` (both at the PIM's precision)
    for a run whose KV cache reaches ``tokens`` positions, by ``reading`` (module docstring).

    UserError when the models do not fit, naming both footprints and the memory.
    """
    units, rank_bytes = pim.units, pim.rank_capacity_bytes
    fixed = RankSplit(pim.draft_ranks, units - pim.draft_ranks, "fixed")
    if not rank_bytes:
        note = "" if reading == "fixed" else f"{pim.name} gives no rank capacity: fixed split"
        return RankSplit(fixed.draft, fixed.target, "fixed", note)
    need_draft = _ranks(draft, tokens, rank_bytes)
    need_target = _ranks(target, tokens, rank_bytes)

    def refuse(why: str) -> UserError:
        return UserError(
            f"{draft.name} ({footprint_bytes(draft, tokens) / 1e9:.1f} GB, {need_draft} ranks) "
            f"and {target.name} ({footprint_bytes(target, tokens) / 1e9:.1f} GB, {need_target} "
            f"ranks) with their KV cache at {tokens} tokens {why} ({pim.name}: {units} ranks "
            f"of {rank_bytes / 2**30:.0f} GiB)"
        )

    if need_draft + need_target > units:
        raise refuse("do not fit together")
    if reading == "fixed":
        if need_draft > fixed.draft or need_target > fixed.target:
            raise refuse(f"do not fit the fixed split of {fixed.draft} draft ranks")
        return fixed
    if reading == "footprint":
        return RankSplit(need_draft, need_target, reading)
    return RankSplit(units - need_target, need_target, reading)
