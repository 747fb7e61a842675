"""Registry of the blocks that `ahasd verilog` emits and the tests build.

Each entry maps a block name (the same in ``hw/``, ``golden/`` and ``tests/``) to the
import path of its Amaranth component and of its parameter dataclass. Imports are lazy so
that one block's missing dependency does not break the others' commands.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ahasd.errors import UserError


@dataclass(frozen=True)
class Block:
    name: str
    component: str  # "module:Class"
    params: str  # "module:Class"
    summary: str
    domains: tuple[str, ...] = ("sync",)  # clock domains, which become clk/rst ports

    def _load(self, path: str) -> Any:
        module, _, attribute = path.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def params_class(self) -> type:
        return self._load(self.params)

    def build(self, params: object | None = None) -> Any:
        """The block's component for ``params`` (defaults when ``None``)."""
        params_class = self.params_class()
        if params is None:
            params = params_class()
        elif not isinstance(params, params_class):
            raise TypeError(f"{self.name} takes {params_class.__name__}, not {params!r}")
        return self._load(self.component)(params)


BLOCKS: dict[str, Block] = {
    block.name: block
    for block in [
        Block(
            "queues",
            "ahasd.hw.queues:AsyncQueues",
            "ahasd.params:QueueParams",
            "the three clock-domain-crossing queues (draft, feedback, pre-verification)",
            ("pim", "npu", "cpu"),
        ),
        Block(
            "edc",
            "ahasd.hw.edc:EDC",
            "ahasd.params:EDCParams",
            "entropy-history drafting control",
        ),
        Block(
            "tvc",
            "ahasd.hw.tvc:TVC",
            "ahasd.params:TVCParams",
            "time-aware pre-verification control",
        ),
        Block(
            "aau",
            "ahasd.hw.aau:AAU",
            "ahasd.params:AAUParams",
            "attention algorithm unit",
        ),
        Block(
            "gtsu",
            "ahasd.hw.gtsu:GTSU",
            "ahasd.params:GTSUParams",
            "gated task scheduling unit",
        ),
        Block(
            "top",
            "ahasd.hw.top:ControllerTop",
            "ahasd.params:TopParams",
            "the AHASD controller: EDC, TVC, GTSU and the queues behind one register interface",
            ("pim", "npu", "cpu"),
        ),
    ]
}


def lookup(name: str) -> Block:
    """The block called ``name``; a :class:`UserError` listing the known ones otherwise."""
    try:
        return BLOCKS[name]
    except KeyError:
        known = ", ".join(sorted(BLOCKS))
        raise UserError(f"unknown block {name!r}; known blocks: {known}") from None
