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

:class:`EdgeLoop` does a domain's work from the simulator's own callbacks, without a cocotb
task: a wake-up through cocotb's scheduler costs about four times what the callback itself
costs (``docs/performance.md``); tasks that wait for such loops poll them (:func:`wait_until`).
:class:`LoopTask` runs a coroutine written against a clock (``await clock.next(n)``, ``await
clock.sample()``) inside such a loop instead: the loop steps it in its own phases, so the
coroutine costs no wake-up of its own (the integration testbench's CPU on the register bus).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import cocotb
from cocotb import simulator
from cocotb.clock import Clock
from cocotb.handle import Immediate
from cocotb.triggers import ClockCycles, FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_steps, get_sim_time

from ahasd.hw.tb.pins import writes_scheduled

__all__ = [
    "Agent",
    "CycleClock",
    "DomainLoop",
    "EdgeLoop",
    "LoopClock",
    "LoopTask",
    "drive_slot",
    "reset",
    "sample_slot",
    "start_clock",
    "wait_until",
]


def start_clock(clock: Any, period_ps: int) -> None:
    """Start a free-running clock of ``period_ps`` on the handle ``clock``, low first.

    The toggles are written at once (``Immediate``), not inertially: under Verilator an
    inertial toggle is applied only after the time step's first evaluation of the model,
    which then evaluates nothing new, so every edge cost two evaluations of the whole model
    instead of one. The edge's callbacks still run before the model evaluates the edge, as
    they did.
    """
    Clock(clock, period_ps, unit="ps", set_action=Immediate).start(start_high=False)


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

    def sample(self) -> ReadOnly:
        """Await it to move to the read-only phase of this time step (to sample)."""
        return ReadOnly()

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


class _Resume:
    """What a coroutine stepped by a :class:`LoopTask` yields: where it resumes.

    ``cycles`` 0: in the read-only phase of the current cycle; ``n`` > 0: in the writable
    phase ``n`` cycles on. With a ``condition``: in the first writable phase from the next
    one on in which ``condition()`` holds, at most ``cycles`` cycles on (the await's value
    says whether it held).
    """

    __slots__ = ("condition", "cycles")

    def __init__(self, cycles: int, condition: Callable[[], bool] | None = None) -> None:
        self.cycles = cycles
        self.condition = condition

    def __await__(self):
        return (yield self)


_SAMPLE = _Resume(0)
_NEXT = _Resume(1)


class LoopClock:
    """:class:`CycleClock`'s interface for a coroutine that a :class:`LoopTask` steps.

    Attributes
    ----------
    cycle, clocked : int
        Cycles the coroutine moved on (the same count here: a stepped clock never skips).
    """

    def __init__(self) -> None:
        self.cycle = 0
        self.clocked = 0

    def next(self, cycles: int = 1) -> _Resume:
        """Await it to move to the writable phase ``cycles`` cycles on."""
        if cycles < 1:
            raise ValueError(f"cycles must be at least 1, not {cycles}")
        self.cycle += cycles
        self.clocked += cycles
        return _NEXT if cycles == 1 else _Resume(cycles)

    def sample(self) -> _Resume:
        """Await it to move to the read-only phase of this cycle."""
        return _SAMPLE

    def until(self, condition: Callable[[], bool], limit: int) -> _Resume:
        """Await it to move to the first writable phase from the next one on in which
        ``condition()`` holds; True then, False after ``limit`` cycles without.

        The loop evaluates ``condition`` in each writable phase itself: the coroutine (and
        the coroutines awaiting it) is not resumed for the cycles in between.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        return _Resume(limit, condition)


class LoopTask:
    """Runs coroutines inside a domain loop's cycle, without scheduler wake-ups of their own.

    Each ``await`` of a cocotb trigger is a wake-up of cocotb's scheduler, which costs about as
    much as a cycle of Verilator's model (``docs/performance.md``); a coroutine that waits for
    the falling edge, then ``ReadOnly``, in every cycle its clock runs pays two per cycle
    beside the domain's own loop, which waits for the same two moments anyway. A coroutine
    written against :attr:`clock` (``await clock.next(n)``, ``await clock.sample()``, the
    calls :class:`CycleClock` has too, and ``await clock.until(condition, limit)``, a wait the
    loop evaluates without resuming the coroutine) is stepped by that loop instead: it calls
    :meth:`drive` once per cycle in the writable phase after the falling edge and
    :meth:`sample` once in ``ReadOnly``, and the coroutine runs on from its ``await`` in the
    phase it waits for, in the loop's own task. Awaiting anything else raises ``TypeError``.

    One coroutine at a time: :meth:`start` it; :attr:`done` tells when it has returned (and
    :attr:`result` what); its exception propagates out of the loop's step, failing the loop
    (the loop's task, or an :class:`EdgeLoop`'s :func:`wait_until`) and with it the test.
    Timing is the loop's: a started coroutine takes its first step in the loop's next
    writable phase; within a phase it runs where the loop calls :meth:`drive` or
    :meth:`sample`, so the loop decides whether it goes before or after the loop's other
    agents.

    Attributes
    ----------
    clock : LoopClock
        What the coroutine awaits.
    done : bool
        The last coroutine started has returned.
    result
        What it returned.
    """

    def __init__(self) -> None:
        self.clock = LoopClock()
        self._coroutine = None
        self._cycle = 0  # writable phases seen
        self._resume_at = 0  # the writable phase to resume in (0: none)
        self._sampling = False  # resume in this cycle's read-only phase
        self._condition: Callable[[], bool] | None = None  # resume once it holds
        self._condition_from = 0  # the cycle the wait for it began in
        self.done = False
        self.result: Any = None

    @property
    def running(self) -> bool:
        return self._coroutine is not None

    def start(self, coroutine) -> None:
        """Run ``coroutine`` from the loop's next writable phase on."""
        if self._coroutine is not None:
            raise RuntimeError("a LoopTask runs one coroutine at a time")
        self._coroutine = coroutine
        self._resume_at = self._cycle + 1
        self._sampling = False
        self.done = False

    def drive(self) -> None:
        """The loop's writable phase of a new cycle (after the falling edge)."""
        self._cycle += 1
        condition = self._condition
        if condition is not None:
            held = condition()
            if held or self._resume_at == self._cycle:
                self._condition = None
                waited = self._cycle - self._condition_from  # the cycles the clock moved on
                self.clock.cycle += waited
                self.clock.clocked += waited
                self._step(in_sample=False, value=held)
            return
        if self._resume_at == self._cycle:
            self._step(in_sample=False)

    def sample(self) -> None:
        """The loop's read-only phase of the current cycle."""
        if self._sampling:
            self._sampling = False
            self._step(in_sample=True)

    def _step(self, in_sample: bool, value: Any = None) -> None:
        try:
            where = self._coroutine.send(value)
        except StopIteration as stop:
            self._coroutine = None
            self._resume_at = 0
            self.result = stop.value
            self.done = True
            return
        except BaseException:
            self._coroutine = None
            raise
        if type(where) is not _Resume:
            raise TypeError(
                f"a coroutine run by a LoopTask awaited {where!r}; only its clock's next() "
                "and sample() can be awaited there"
            )
        if where.cycles == 0:
            if in_sample:
                raise RuntimeError("sample() awaited in the read-only phase it resumed in")
            self._sampling = True
            self._resume_at = 0
        else:
            self._resume_at = self._cycle + where.cycles
            self._condition = where.condition
            self._condition_from = self._cycle


class EdgeLoop:
    """One clock domain's work, once per cycle, run by the simulator's callbacks directly.

    After every falling edge of ``clock``, ``drive()``; when it returns True, ``sample()`` in
    ``ReadOnly`` of the same time step (:mod:`ahasd.hw.tb.clocking`'s discipline). The calls
    come straight from the simulator's value-change and read-only callbacks, with no cocotb
    task, trigger object or event-loop pass between: on a bare counter a falling edge and a
    read-only phase cost 1.6 us this way and 6.8 us through ``await FallingEdge`` and ``await
    ReadOnly()`` (``docs/performance.md``). The callbacks are cocotb's simulator interface
    (``cocotb.simulator``, not public API; ``cocotb~=2.1`` is pinned and
    ``tests/harness/test_pins.py`` runs a loop on a simulator).

    ``drive`` may call :meth:`sleep` to be called next only some cycles later (one timer
    instead of a callback per edge). An exception in ``drive`` or ``sample`` stops the loop and
    is kept in :attr:`error`; since no task runs the loop, a task that waits for its work
    polls it with :func:`wait_until`, which raises the error. Cocotb's own triggers keep
    working beside it.

    Where Pin writes go through cocotb's scheduled writes (Icarus,
    :func:`ahasd.hw.tb.pins.writes_scheduled`), which only its scheduler applies, the same
    calls come from a cocotb task awaiting ``FallingEdge`` and ``ReadOnly`` instead.

    Parameters
    ----------
    clock : the clock's handle.
    period_ps : the clock's period (for :meth:`sleep`).
    drive : () -> bool
        The writable phase after the falling edge; True asks for ``sample`` in this cycle.
    sample : () -> None
        The read-only phase (only in cycles whose ``drive`` returned True).

    Attributes
    ----------
    error : BaseException | None
        What stopped the loop, if anything did.
    """

    def __init__(
        self,
        clock: Any,
        period_ps: int,
        drive: Callable[[], bool],
        sample: Callable[[], None] | None = None,
    ) -> None:
        self._handle = clock
        self._clock = clock._handle  # the simulator object behind the handle
        self._period_steps = get_sim_steps(period_ps, "ps")
        self._drive = drive
        self._sample = sample
        self._callback = None
        self._sleep = 0
        self._running = False
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        """Started, and neither stopped nor stopped by an error."""
        return self._running

    def start(self) -> EdgeLoop:
        """Call ``drive`` from the next falling edge on."""
        if not self._running:
            self._running = True
            if writes_scheduled():
                cocotb.start_soon(self._run_awaiting())
            else:
                self._arm()
        return self

    def stop(self) -> None:
        """No more calls (the pending callback is withdrawn)."""
        self._running = False
        if self._callback is not None:
            self._callback.deregister()
            self._callback = None

    async def _run_awaiting(self) -> None:
        """The loop as a cocotb task, for simulators whose writes cocotb schedules."""
        falling, read_only = FallingEdge(self._handle), ReadOnly()
        while True:
            await falling
            if not self._running:
                return
            try:
                sample = self._drive()
            except Exception as error:
                self._fail(error)
                return
            if sample and self._running:
                await read_only
                try:
                    self._sample()
                except Exception as error:
                    self._fail(error)
                    return
            cycles, self._sleep = self._sleep, 0
            if cycles > 1:
                await Timer((cycles - 1) * self._period_steps + 1, unit="step")

    def sleep(self, cycles: int) -> None:
        """From ``drive``: call ``drive`` next in the cycle ``cycles`` cycles on (at least 1)."""
        if cycles < 1:
            raise ValueError(f"cycles must be at least 1, not {cycles}")
        self._sleep = cycles

    def check(self) -> None:
        """Raise what stopped the loop, if anything did."""
        if self.error is not None:
            raise self.error

    def _arm(self) -> None:
        self._callback = simulator.register_value_change_callback(
            self._clock, self._on_falling, simulator.FALLING
        )

    def _on_falling(self) -> None:
        self._callback = None
        if not self._running:
            return
        try:
            sample = self._drive()
        except BaseException as error:
            self._fail(error)
            return
        if sample:
            self._callback = simulator.register_readonly_callback(self._on_sample)
        else:
            self._next()

    def _on_sample(self) -> None:
        self._callback = None
        if not self._running:
            return
        try:
            self._sample()
        except BaseException as error:
            self._fail(error)
            return
        self._next()

    def _next(self) -> None:
        cycles, self._sleep = self._sleep, 0
        if cycles > 1:
            # To just past the falling edge before the one wanted, then that edge.
            steps = (cycles - 1) * self._period_steps + 1
            self._callback = simulator.register_timed_callback(steps, self._arm)
        else:
            self._arm()

    def _fail(self, error: BaseException) -> None:
        self.error = error
        self._running = False


async def wait_until(condition: Callable[[], bool], loops, poll: Timer) -> None:
    """Wait until ``condition()`` holds, polling at each ``poll``; raise the error of any of
    ``loops`` (:class:`EdgeLoop` s) that stopped on one."""
    while True:
        for loop in loops:
            loop.check()
        if condition():
            return
        await poll
