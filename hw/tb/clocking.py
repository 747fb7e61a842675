"""The clocking discipline every agent follows, and the helpers that implement it.

Every agent drives its inputs just after the *falling* edge of its clock, then waits for
``ReadOnly()`` in that same time step and samples: what it sees is what the next rising
edge will register (a transfer happens at that edge iff ``valid`` and ``ready`` are both
high then). Sampling after the rising edge instead would see the registers' new values, and
a combinational ``ready`` that depends on them would lie. Clocks start low, so the first
falling edge comes half a period after the first rising one.

:class:`CycleClock` is for agents that count cycles of one clock (the co-simulation, the
integration testbench's PIM domain): ``await clock.next()`` moves to the next writable
phase and counts it.

:class:`DomainLoop` runs every agent of one clock domain in one coroutine: each wake-up of a
coroutine costs cocotb's scheduler about as much as the simulator spends on a cycle of a
small design, so a domain whose five drivers and monitors each awaited the edge and the
read-only phase paid that five times per cycle (``docs/performance.md``).
"""

from __future__ import annotations

from typing import Any, Protocol

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

__all__ = ["Agent", "CycleClock", "DomainLoop", "drive_slot", "reset", "sample_slot", "start_clock"]


def start_clock(clock: Any, period_ps: int) -> None:
    """Start a free-running clock of ``period_ps`` on the handle ``clock``, low first."""
    Clock(clock, period_ps, unit="ps").start(start_high=False)


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


class CycleClock:
    """Moves an agent between the writable phases of one clock and counts them.

    Parameters
    ----------
    clock : the clock's handle.

    Attributes
    ----------
    cycle : int
        Cycles since the agent started, skipped ones (:meth:`skip`) included.
    clocked : int
        Cycles the simulator actually ran.
    """

    def __init__(self, clock: Any, period_ps: int | None = None) -> None:
        self.clock = clock
        self.period_ps = period_ps
        self.cycle = 0
        self.clocked = 0

    async def next(self, cycles: int = 1) -> None:
        """Move to the falling edge ``cycles`` cycles on (a writable phase)."""
        if cycles == 1:
            await FallingEdge(self.clock)
        else:
            await ClockCycles(self.clock, cycles, rising=False)
        self._clocked(cycles)

    async def next_until(self, flag: Any, limit: int) -> bool:
        """Move to the first writable phase from the next one on in which ``flag`` is high.

        ``flag`` is a one-bit handle that changes only at rising edges of this clock (a
        function of registers alone, while nothing is driven). Instead of one wake-up per
        cycle, waits for ``flag``'s rise and then the falling edge after it, and counts the
        cycles from the simulation time (the clock's ``period_ps`` must be given). Returns
        False, after ``limit`` cycles, if ``flag`` stayed low.
        """
        await self.next()
        if flag.value:
            return True
        started = get_sim_time("ps")
        rose = RisingEdge(flag)
        timeout = Timer((limit - 1) * self.period_ps, "ps")
        if await First(rose, timeout) is not rose:
            self._clocked(limit - 1)
            return False
        await FallingEdge(self.clock)
        self._clocked(round((get_sim_time("ps") - started) / self.period_ps))
        return True

    def _clocked(self, cycles: int) -> None:
        """Count ``cycles`` cycles that the simulator ran."""
        self.cycle += cycles
        self.clocked += cycles

    def skip(self, cycles: int) -> None:
        """Count ``cycles`` cycles that the simulator did not run (a time warp)."""
        self.cycle += cycles


class Agent(Protocol):
    """What a :class:`DomainLoop` runs once per cycle of its clock."""

    def drive(self) -> None:
        """Drive this cycle's inputs (writable phase after the falling edge)."""

    def sample(self) -> None:
        """Sample what happens at the coming rising edge (``ReadOnly``)."""


class DomainLoop:
    """All agents of one clock domain, driven and sampled by one coroutine.

    Once per cycle: after the falling edge, every agent's ``drive()`` in the order they were
    added; then in ``ReadOnly``, every agent's ``sample()`` in the same order. The loop
    starts at :meth:`start` and runs until the test ends.

    Parameters
    ----------
    clock : the clock's handle.

    Attributes
    ----------
    cycle : int
        Cycles run since :meth:`start` (the one being driven or sampled).
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.agents: list[Agent] = []
        self.cycle = 0
        self._task = None

    def add(self, agent: Agent) -> Agent:
        """Run ``agent`` from the next cycle on; returns it."""
        self.agents.append(agent)
        return agent

    def start(self) -> DomainLoop:
        if self._task is None:
            self._task = cocotb.start_soon(self._run())
        return self

    async def _run(self) -> None:
        falling = FallingEdge(self.clock)
        read_only = ReadOnly()
        while True:
            await falling
            self.cycle += 1
            agents = tuple(self.agents)  # an agent added during a cycle starts with the next
            for agent in agents:
                agent.drive()
            await read_only
            for agent in agents:
                agent.sample()
