"""Testbench-side helpers for cocotb modules (imported inside the simulator process).

Streams follow Amaranth's port naming: a stream member ``x`` becomes ``x__valid``,
``x__ready`` and ``x__payload``. Payloads are packed and unpacked through the block's own
``data.StructLayout``, so a field change is one edit.

Handshake discipline: every agent drives its inputs just after the *falling* edge of its
clock, then waits for ``ReadOnly()`` in that same time step and samples: what it sees is what
the next rising edge will register (a transfer happens at that edge iff ``valid`` and
``ready`` are both high then). Sampling after the rising edge instead would see the
registers' new values, and a combinational ``ready`` that depends on them would lie.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
from collections.abc import Callable
from typing import Any

import cocotb
from amaranth.lib import data
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

PREFIX = "AHASD:"


def params_from_env(cls: type) -> Any:
    """The parameter dataclass the pytest side passed in ``AHASD_TB_PARAMS``."""
    return cls(**json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))


def rng_from_env(salt: str = "") -> random.Random:
    """A ``random.Random`` seeded from the run's seed (and ``salt``, for independent streams).

    The pytest side passes the seed as ``AHASD_TB_SEED`` (derived from ``AHASD_SEED`` when set).
    """
    seed = int(os.environ.get("AHASD_TB_SEED", "0"))
    return random.Random(f"{seed}:{salt}")


def report(dut: Any, message: str) -> None:
    """Log a measurement; the pytest side echoes these lines."""
    dut._log.info(f"{PREFIX} {message}")


def pack(layout: data.StructLayout, fields: dict[str, int]) -> int:
    """The integer whose bits hold ``fields`` in ``layout``."""
    value = 0
    for name, field in layout:
        width = field.width
        bits = int(fields[name])
        if not 0 <= bits < (1 << width):
            raise ValueError(f"field {name}={bits} does not fit {width} bits")
        value |= bits << field.offset
    return value


def unpack(layout: data.StructLayout, value: int) -> dict[str, int]:
    """The fields of ``layout`` held in the bits of ``value``."""
    return {name: (value >> field.offset) & ((1 << field.width) - 1) for name, field in layout}


async def drive_slot(clock: Any) -> None:
    """Wait for the next falling edge of ``clock``: the moment to drive inputs."""
    await FallingEdge(clock)


async def sample_slot() -> None:
    """Wait for the read-only phase of this time step: the moment to sample."""
    await ReadOnly()


async def reset(clock: Any, rst: Any, cycles: int = 3) -> None:
    """Hold ``rst`` high for ``cycles`` rising edges of ``clock``."""
    rst.value = 1
    for _ in range(cycles):
        await RisingEdge(clock)
    rst.value = 0


class StreamSource:
    """Drives ``{name}__valid/__payload`` from a queue of payload integers.

    Drives after the falling edge and samples the handshake in the same time step (see the
    module docstring). ``idle`` is the probability of an idle cycle before presenting the
    next item; once ``valid`` is raised the payload is held until the transfer (stream rule).
    """

    def __init__(self, dut: Any, name: str, clock: Any, rng: random.Random, idle: float = 0.0):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clock = clock
        self.rng = rng
        self.idle = idle
        self.items: deque[int] = deque()
        self.sent: list[int] = []
        self.presenting = False
        self.valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def send(self, payload: int) -> None:
        self.items.append(payload)

    @property
    def done(self) -> bool:
        return not self.items and not self.presenting

    async def _run(self) -> None:
        while True:
            await FallingEdge(self.clock)
            if not self.presenting:
                if self.items and self.rng.random() >= self.idle:
                    self.payload.value = self.items[0]
                    self.presenting = True
                self.valid.value = int(self.presenting)
            await ReadOnly()
            if self.presenting and int(self.ready.value):
                self.sent.append(self.items.popleft())
                self.presenting = False


class StreamSink:
    """Drives ``{name}__ready`` high with probability ``1 - stall`` and collects payloads."""

    def __init__(
        self,
        dut: Any,
        name: str,
        clock: Any,
        rng: random.Random,
        stall: float = 0.0,
        on_item: Callable[[int], None] | None = None,
    ):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clock = clock
        self.rng = rng
        self.stall = stall
        self.on_item = on_item
        self.received: list[int] = []
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await FallingEdge(self.clock)
            self.ready.value = int(self.rng.random() >= self.stall)
            await ReadOnly()
            if int(self.valid.value) and int(self.ready.value):
                item = int(self.payload.value)
                self.received.append(item)
                if self.on_item is not None:
                    self.on_item(item)
