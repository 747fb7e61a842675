"""The RTL controller: the system model's EDC, TVC and GTSU decisions taken by the Verilog.

:class:`RTLController` implements the :class:`ahasd.sim.controller.Controller` protocol on
the generated Verilog of :class:`ahasd.hw.top.ControllerTop`, inside a cocotb simulator
process (:mod:`ahasd.sim.cosim.entry`), through the testbench library's drivers of the top
(:class:`ahasd.hw.tb.top.ControllerTopDriver`, the ones the integration test uses). The
system model is synchronous Python: it runs in a greenlet of the simulator's thread
(:class:`InlineRTLController`); each protocol call switches to a cocotb coroutine that
drives the top's ports for a few PIM clock cycles, reads the answer off the RTL and switches
back with it. See ``docs/cosim.md`` for the loop, the time warp and
debugging.

Every call starts by moving to the next falling edge of ``pim_clk``, drives inputs there and
samples in ``ReadOnly`` of the same time step (:mod:`ahasd.hw.tb.clocking`); a transfer
happens at the rising edge that ends the cycle iff ``valid`` and ``ready`` were both high.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import greenlet
from cocotb.triggers import ReadOnly

from ahasd.hw.tb.build import module_registers
from ahasd.hw.tb.clocking import CycleClock
from ahasd.hw.tb.pins import Pin
from ahasd.hw.tb.streams import receive, send, take
from ahasd.hw.tb.top import TABLE_CODES, ControllerTopDriver
from ahasd.hw.tvc import Op
from ahasd.params import TopParams
from ahasd.sim.controller import Task

__all__ = [
    "CosimStats",
    "InlineRTLController",
    "RTLController",
    "module_registers",
    "register_handles",
]

#: A gap in NCR up to this many cycles is clocked; a larger one is time-warped.
WARP_THRESHOLD = 64
#: Cycles clocked before the warp's snapshot: registers that follow others one cycle behind
#: (the TVC's table sums after a table write) catch up first.
WARP_SETTLE_CYCLES = 1
#: Cycles clocked after the snapshot to show that the design is stationary.
WARP_PROOF_CYCLES = 2
#: Give up waiting for a handshake after this many cycles (a hung design, not a slow one).
HANDSHAKE_LIMIT = 1000
#: The one register allowed to change while the design waits (the TVC's NCR counter).
COUNTING_REGISTERS = frozenset({"tvc.ncr"})
#: The PIM clock (800 MHz); the CPU and NPU clocks run in phase with it.
PERIOD_PS = 1250


@dataclass
class CosimStats:
    """What the co-simulation measured (not part of the model's metrics).

    Latencies are in PIM cycles, from the cycle an event is accepted to the cycle its answer
    is valid (EDC decision, TVC answer), or from the cycle the switch is requested to the
    first ready cycle after it (GTSU, through the pre-verification queue when switching to
    PREVERIFY); ``gtsu_switch_cycles`` are the GTSU's own ``last_switch_cycles``.
    """

    simulated_cycles: int = 0  # PIM cycles the simulator clocked
    warped_cycles: int = 0  # PIM cycles skipped by time warps (NCR deposited)
    warps: int = 0
    rewinds: int = 0  # NCR set back: the model asked sooner than the RTL could count
    rewound_cycles: int = 0
    stationary_checks: int = 0  # registers compared across the proof cycles of a warp
    edc_decision_latency: dict = field(default_factory=dict)  # latency -> count
    tvc_answer_latency: dict = field(default_factory=dict)
    gtsu_switch_cycles: dict = field(default_factory=dict)
    gtsu_request_latency: dict = field(default_factory=dict)
    calls: int = 0
    orders_posted: int = 0  # pre-verification orders the CPU wrote (one per switch to it)
    polls: int = 0  # reads of PREVERIFY_QUEUE_LEVEL until an order showed (polling mode)
    interrupts: int = 0  # interrupts taken (interrupt mode)
    irq_other_causes: list = field(default_factory=list)  # causes besides preverify

    def add(self, histogram: dict, value: int) -> None:
        histogram[int(value)] = histogram.get(int(value), 0) + 1

    def as_dict(self) -> dict:
        def hist(h: dict) -> dict:
            return {str(k): v for k, v in sorted(h.items())}

        return {
            "simulated_cycles": self.simulated_cycles,
            "warped_cycles": self.warped_cycles,
            "controller_cycles": self.simulated_cycles + self.warped_cycles,
            "warps": self.warps,
            "rewinds": self.rewinds,
            "rewound_cycles": self.rewound_cycles,
            "stationary_checks": self.stationary_checks,
            "calls": self.calls,
            "orders_posted": self.orders_posted,
            "polls": self.polls,
            "interrupts": self.interrupts,
            "irq_other_causes": list(self.irq_other_causes),
            "edc_decision_latency": hist(self.edc_decision_latency),
            "tvc_answer_latency": hist(self.tvc_answer_latency),
            "gtsu_switch_cycles": hist(self.gtsu_switch_cycles),
            "gtsu_request_latency": hist(self.gtsu_request_latency),
        }


def register_handles(dut, verilog_file: Path) -> list[tuple[str, object]]:
    """cocotb handles of the design's registers (see :func:`module_registers`)."""
    handles = []
    for path, name in module_registers(Path(verilog_file).read_text()):
        scope = dut
        try:
            for part in path.split(".") if path else []:
                scope = getattr(scope, part)
            handles.append((f"{path}.{name}" if path else name, getattr(scope, name)))
        except AttributeError:
            continue  # optimised away by Verilator: no state to compare
    return handles


class RTLController:
    """The controller protocol on the RTL top, for the model running in a bridged thread.

    Parameters
    ----------
    dut : the cocotb handle of the ``top`` module.
    params : TopParams the top was built with (the model's EDC/TVC/GTSU parameters).
    tvc_presets : ``{table: ratio}`` written into every entry of each TVC table through the
        register bus before the run (as :class:`GoldenController` does).
    verilog_file : the top's Verilog (to find its registers for the warp proof).
    feedback : return the RTL-measured controller latencies as timing (see
        :meth:`gtsu_switch_async`); off for identity with the golden controller.
    irq : learn of a pending pre-verification order from the interrupt (``IRQ_STATUS``,
        cleared by writing 1) instead of by polling ``PREVERIFY_QUEUE_LEVEL``; every cause
        is enabled, and an error cause is recorded (``irq_errors``).
    """

    def __init__(
        self, dut, params: TopParams, tvc_presets: dict, verilog_file, feedback=False, irq=False
    ):
        self.dut = dut
        self.p = params
        self.presets = dict(tvc_presets)
        self.feedback = feedback
        self.irq = irq
        self.top = ControllerTopDriver(dut, params)
        self.clock = CycleClock(dut.pim_clk, PERIOD_PS)
        self.stats = CosimStats()
        self.clocked_before_run = 0  # cycles of the set-up, not part of the statistics
        self.role = Task.DRAFT
        self.switch_base = 0
        self.asks = 0
        self.preverify_orders = 0
        self.pending_latency = 0  # decision/answer cycles not yet fed back (feedback mode)
        self.npu_busy = False
        self.npu_start_cycle = 0  # model cycle of the running NPU_START
        self.ncr = dut.tvc.ncr
        self.ncr_max = (1 << params.tvc.cycle_bits) - 1
        self.registers = [
            (name, handle)
            for name, handle in register_handles(dut, verilog_file)
            if name not in COUNTING_REGISTERS
        ]
        # ~860 registers per snapshot, two snapshots per warp, compared only for equality:
        # read as the simulator gives them (through handle.value, a LogicArray each, the
        # snapshots were 70% of the run's time; as integers, wide ones parsed, 15%).
        self.register_reads = [Pin(handle).fingerprint for _, handle in self.registers]

    @property
    def cycle(self) -> int:
        """PIM cycles since the clocks started, warped ones included."""
        return self.clock.cycle

    def statistics(self) -> dict:
        """:class:`CosimStats` as a dict, the cycles clocked since the set-up included."""
        self.stats.simulated_cycles = self.clock.clocked - self.clocked_before_run
        return self.stats.as_dict()

    async def start(self) -> None:
        """Clocks, reset, TVC presets through the bus, then the GTSU to DRAFT.

        The golden controller's GTSU stand-in starts with the DLM ranks enabled; the RTL
        GTSU resets to IDLE, so the set-up switches it to DRAFT and the switch counter
        reported later is counted from there.
        """
        top = self.top
        top.start_clocks({"pim": PERIOD_PS, "npu": PERIOD_PS, "cpu": PERIOD_PS})
        top.hold_reset(1)
        top.quiet_inputs()
        top.edc.decision.accept(1)  # decisions are taken as soon as they are valid
        top.tvc.answer.accept(1)
        await self.clock.next(4)
        top.hold_reset(0)
        await self.clock.next(4)
        limit = (1 << self.p.tvc.ratio_bits) - 1
        for table, ratio in self.presets.items():
            for index in range(self.p.tvc.depth):
                register = f"TVC_{table.upper()}[{index}]"
                value = min(limit, max(0, int(ratio)))
                await top.bus.write(self.clock, register, value, HANDSHAKE_LIMIT)
        if self.irq:
            causes = top.bus.regmap.get("IRQ_ENABLE").write_mask
            await top.bus.write(self.clock, "IRQ_ENABLE", causes, HANDSHAKE_LIMIT)
        top.gtsu.request_draft(1)
        await self._await_switch(Task.DRAFT)
        await self.clock.next()  # out of the read-only phase the wait ended in
        self.switch_base = await top.bus.read(self.clock, "GTSU_SWITCHES", HANDSHAKE_LIMIT)
        self.clocked_before_run = self.clock.clocked

    # -- EDC -------------------------------------------------------------------------------

    async def edc_full_async(self) -> bool:
        """A ``DRAFT`` would be refused: ``i.ready`` low for a DRAFT head, EDC quiet."""
        edc = self.top.edc
        await self.clock.next()
        edc.event.set_payload(edc.draft_bits(0, 1))
        # i.ready is also low for one cycle while the previous event finishes: look twice.
        for _ in range(3):
            await ReadOnly()
            if edc.event.is_ready():
                return False
            await self.clock.next()
        return True

    async def edc_draft_async(self, entropy_sum: int, length: int) -> bool | None:
        edc = self.top.edc
        await self.clock.next()
        bits = edc.draft_bits(min(entropy_sum, edc.sum_max), length)
        accepted = await send(edc.event, self.clock, bits, HANDSHAKE_LIMIT)
        if length == 0:
            return None  # a protocol error: the EDC emits no decision
        payload, valid = await receive(edc.decision, self.clock, HANDSHAKE_LIMIT)
        latency = valid - accepted
        self.stats.add(self.stats.edc_decision_latency, latency)
        self.pending_latency += latency
        return bool(edc.decode_decision(payload)["keep_drafting"])

    async def edc_verify_async(self, full: bool, entropy_sum: int, accepted: int) -> None:
        edc = self.top.edc
        await self.clock.next()
        bits = edc.verify_bits(full, min(entropy_sum, edc.sum_max), accepted)
        await send(edc.event, self.clock, bits, HANDSHAKE_LIMIT)

    # -- TVC -------------------------------------------------------------------------------

    async def _tvc_idle(self) -> None:
        """Move to the next cycle in which the TVC takes commands (no LEARN or ASK running).

        ``cmd.ready`` depends only on registers and on the bus write strobe (idle here), so
        it changes only at rising edges: one wait for its rise, not one per busy cycle (a
        LEARN or an ASK keeps the TVC busy for several cycles).
        """
        if not await self.clock.next_until(self.top.tvc.command.ready, HANDSHAKE_LIMIT):
            raise AssertionError(f"cycle {self.cycle}: the TVC stays busy")

    def _snapshot(self) -> list[int | str]:
        return [read() for read in self.register_reads]

    async def _align_ncr(self, model_cycle: int) -> int:
        """Make NCR in the current cycle what the model's NCR is at ``model_cycle``.

        Called in a writable phase with the TVC idle; the command is presented in this
        same cycle, so it samples the aligned NCR (the caller checks what it sampled). A
        small gap is clocked; a large one is warped (``docs/cosim.md``); an NCR ahead of the
        model is set back (a rewind, counted in the statistics). Returns the target.
        """
        target = min(max(model_cycle - self.npu_start_cycle, 0), self.ncr_max)
        now = int(self.ncr.value)
        gap = target - now
        if gap == 0:
            return target
        if 0 < gap <= WARP_THRESHOLD:
            await self.clock.next(gap)
        elif gap > WARP_THRESHOLD:
            await self.clock.next(WARP_SETTLE_CYCLES)
            before = self._snapshot()
            await self.clock.next(WARP_PROOF_CYCLES)
            after = self._snapshot()
            counted = int(self.ncr.value)
            if before != after:
                changed = [
                    name
                    for (name, _), a, b in zip(self.registers, before, after, strict=True)
                    if a != b
                ]
                raise AssertionError(
                    f"cycle {self.cycle}: time warp refused, the design is not stationary "
                    f"(registers changed: {', '.join(changed[:10])})"
                )
            if counted != min(now + WARP_SETTLE_CYCLES + WARP_PROOF_CYCLES, self.ncr_max):
                raise AssertionError(f"cycle {self.cycle}: NCR counted {now} -> {counted}")
            skipped = target - counted
            # Counting `skipped` more cycles from `counted` gives (saturating) exactly this.
            if min(counted + skipped, self.ncr_max) != target:
                raise AssertionError("warp target is not what counting would give")
            self.ncr.value = target
            self.clock.skip(skipped)
            self.stats.warped_cycles += skipped
            self.stats.warps += 1
            self.stats.stationary_checks += len(self.registers)
        else:
            self.ncr.value = target
            self.stats.rewinds += 1
            self.stats.rewound_cycles += -gap
        return target

    async def tvc_learn_async(self, table: str, cycles: int, length: int) -> None:
        tvc = self.top.tvc
        await self._tvc_idle()
        args = {
            "table": TABLE_CODES[table],
            "cycles": min(cycles, tvc.cycles_max),
            "length": length,
        }
        await send(tvc.command, self.clock, tvc.command_bits(Op.LEARN, args), HANDSHAKE_LIMIT)

    async def tvc_npu_start_async(self, l_kv: int, cycle: int) -> None:
        tvc = self.top.tvc
        await self._tvc_idle()
        bits = tvc.command_bits(Op.NPU_START, {"l_kv": min(l_kv, tvc.length_max)})
        await send(tvc.command, self.clock, bits, HANDSHAKE_LIMIT)
        self.npu_busy = True
        self.npu_start_cycle = cycle  # the model's t0; NCR is aligned to `c - t0` at use

    async def tvc_npu_done_async(self, cycle: int) -> None:
        tvc = self.top.tvc
        await self._tvc_idle()
        target = None
        if self.npu_busy:
            target = await self._align_ncr(cycle)
        await send(tvc.command, self.clock, tvc.command_bits(Op.NPU_DONE, {}), HANDSHAKE_LIMIT)
        if target is not None and int(self.ncr.value) != target:
            raise AssertionError(
                f"cycle {self.cycle}: NCR froze at {int(self.ncr.value)}, not {target}"
            )
        self.npu_busy = False

    async def tvc_ask_async(self, available: int, cycle: int) -> int:
        tvc = self.top.tvc
        self.asks += 1
        await self._tvc_idle()
        target = None
        if self.npu_busy:
            target = await self._align_ncr(cycle)
        bits = tvc.command_bits(Op.ASK, {"p": min(available, tvc.length_max)})
        accepted = await send(tvc.command, self.clock, bits, HANDSHAKE_LIMIT)
        if target is not None and int(self.dut.tvc.ask_ncr.value) != target:
            raise AssertionError(
                f"cycle {self.cycle}: ASK sampled NCR "
                f"{int(self.dut.tvc.ask_ncr.value)}, not {target}"
            )
        payload, valid = await receive(tvc.answer, self.clock, HANDSHAKE_LIMIT)
        latency = valid - accepted
        self.stats.add(self.stats.tvc_answer_latency, latency)
        self.pending_latency += latency
        answer = tvc.decode_answer(payload)["n"]
        if answer:
            self.preverify_orders += 1
        return answer

    # -- GTSU ------------------------------------------------------------------------------

    async def _await_switch(self, task: str) -> None:
        """Wait until the GTSU has switched the ranks to ``task`` and is ready."""
        code = {Task.DRAFT: 1, Task.PREVERIFY: 2}[task]
        for _ in range(HANDSHAKE_LIMIT):
            await ReadOnly()
            if self.top.gtsu.task() == code and self.top.gtsu.ready():
                return
            await self.clock.next()
        raise AssertionError(f"cycle {self.cycle}: the RTL GTSU did not switch to {task}")

    async def _learn_order_pending(self) -> None:
        """The CPU learns that the pre-verification order it posted is pending on the PIM
        side: from the interrupt (``irq``), or by polling ``PREVERIFY_QUEUE_LEVEL``."""
        bus = self.top.bus
        if not self.irq:
            for _ in range(HANDSHAKE_LIMIT):
                self.stats.polls += 1
                if await bus.read(self.clock, "PREVERIFY_QUEUE_LEVEL", HANDSHAKE_LIMIT):
                    return
            raise AssertionError(f"cycle {self.cycle}: the order never became pending")
        for _ in range(HANDSHAKE_LIMIT):
            await ReadOnly()
            if bus.irq():
                break
            await self.clock.next()
        else:
            raise AssertionError(f"cycle {self.cycle}: no interrupt for the pending order")
        await self.clock.next()
        status = await bus.read(self.clock, "IRQ_STATUS", HANDSHAKE_LIMIT)
        await bus.write(self.clock, "IRQ_STATUS", status, HANDSHAKE_LIMIT)  # clear them all
        self.stats.interrupts += 1
        causes = self.top.bus.regmap.get("IRQ_STATUS").fields
        for cause in causes:
            if (status >> cause.lsb) & 1 and cause.name != "preverify":
                self.stats.irq_other_causes.append(cause.name)
        if not status & 1:
            raise AssertionError(f"cycle {self.cycle}: interrupt without the preverify cause")

    async def gtsu_switch_async(self, task: str) -> int:
        """Switch the ranks to ``task``; returns the switch's cycles (see the class doc).

        PREVERIFY: the CPU writes a pre-verification order, and the GTSU sees the queue
        non-empty. DRAFT: the PIM takes the order off the queue, and ``want_draft`` (held
        high) wins. With ``feedback``, returns the request-to-ready latency plus the EDC
        decision and TVC answer latencies measured since the previous call.
        """
        queues = self.top.queues
        pending, self.pending_latency = self.pending_latency, 0
        extra = pending if self.feedback else 0
        if task == Task.IDLE or task == self.role:
            return extra  # the request levels stay: the RTL keeps its task (checked below)
        await self.clock.next()
        if task == Task.PREVERIFY:
            await send(queues.preverify_w, self.clock, 0, HANDSHAKE_LIMIT)
            self.stats.orders_posted += 1
            requested = self.cycle
            await self._learn_order_pending()
        else:
            await take(queues.preverify_r, self.clock, HANDSHAKE_LIMIT)
            requested = self.cycle
        await self._await_switch(task)
        self.role = task
        cycles = int(self.dut.gtsu.last_switch_cycles.value)
        self.stats.add(self.stats.gtsu_switch_cycles, cycles)
        self.stats.add(self.stats.gtsu_request_latency, self.cycle - requested)
        return (self.cycle - requested) + extra if self.feedback else cycles

    # -- counters --------------------------------------------------------------------------

    async def counters_async(self) -> dict:
        """Event counters, read through the AXI port once the blocks are quiet."""
        await self._tvc_idle()
        await self.clock.next(2)  # the EDC updates its counters one cycle after an event
        bus, clock = self.top.bus, self.clock
        names = ("drafts", "continues", "suppressions", "verifies", "rollbacks")
        result = {}
        for name in names:
            result[f"edc_{name}"] = await bus.read(clock, f"EDC_{name.upper()}", HANDSHAKE_LIMIT)
        error = await bus.read(clock, "ERROR", HANDSHAKE_LIMIT)
        fields = {f.name: f.lsb for f in bus.regmap.get("ERROR").fields}
        switches = await bus.read(clock, "GTSU_SWITCHES", HANDSHAKE_LIMIT)
        result.update(
            edc_error=bool((error >> fields["edc"]) & 1),
            tvc_error=bool((error >> fields["tvc"]) & 1),
            tvc_asks=self.asks,
            tvc_preverify_orders=self.preverify_orders,
            gtsu_switches=switches - self.switch_base,
        )
        return result


class InlineRTLController:
    """:class:`RTLController` as the engine sees it: blocking calls, answered inline.

    The system model is synchronous Python; the RTL advances only inside cocotb coroutines.
    The model runs in a greenlet in the simulator's own thread (:meth:`run`): a call switches
    to the coroutine that started the model, which runs the call's coroutine on the RTL and
    switches back with the answer. A switch costs about a microsecond, where a hand-over
    between an OS thread and the simulator's (``cocotb.task.bridge``/``resume``) cost about
    80 us of CPU and 165 us of wall time (``docs/performance.md``), so every call goes to the
    RTL at once, in the model's order, with its arguments; a failure in a call surfaces in
    the model at that call.
    """

    def __init__(self, rtl: RTLController):
        self.rtl = rtl
        self._coroutine: greenlet.greenlet | None = None

    async def run(self, model: Callable[[], Any]) -> Any:
        """Run ``model()``, whose controller is this object; returns what it returns.

        Each call the model makes switches here with ``(name, args)``; the call runs on the
        RTL and the model resumes with its answer (or with its exception raised at the
        call). An exception of the model itself ends the run and propagates from here.
        """
        self._coroutine = greenlet.getcurrent()
        worker = greenlet.greenlet(lambda: _Finished(model()))
        request = worker.switch()
        while not isinstance(request, _Finished):
            name, args = request
            try:
                answer = await getattr(self.rtl, f"{name}_async")(*args)
            except BaseException as error:
                # Raised in the model at its call (a timeout's cancellation too), so the
                # model unwinds and the error comes back out of the switch.
                request = worker.throw(error)
            else:
                request = worker.switch(answer)
        self._coroutine = None
        return request.value

    def _call(self, name: str, *args):
        if self._coroutine is None or greenlet.getcurrent() is self._coroutine:
            raise RuntimeError(f"{name}: the RTL controller is called outside its run()")
        self.rtl.stats.calls += 1
        return self._coroutine.switch((name, args))

    def edc_full(self) -> bool:
        return self._call("edc_full")

    def edc_draft(self, entropy_sum: int, length: int) -> bool | None:
        return self._call("edc_draft", entropy_sum, length)

    def edc_verify(self, full: bool, entropy_sum: int, accepted: int) -> None:
        self._call("edc_verify", full, entropy_sum, accepted)

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        self._call("tvc_learn", table, cycles, length)

    def tvc_npu_start(self, l_kv: int, cycle: int) -> None:
        self._call("tvc_npu_start", l_kv, cycle)

    def tvc_npu_done(self, cycle: int) -> None:
        self._call("tvc_npu_done", cycle)

    def tvc_ask(self, available: int, cycle: int) -> int:
        return self._call("tvc_ask", available, cycle)

    def gtsu_switch(self, task: str) -> int:
        return self._call("gtsu_switch", task)

    def gtsu_next(self, preverify_pending: bool, draft_wanted: bool) -> str:
        # Not called by the engine; the GTSU's priority rule (spec 2.5) without a switch.
        if preverify_pending:
            return Task.PREVERIFY
        return Task.DRAFT if draft_wanted else Task.IDLE

    def counters(self) -> dict:
        return self._call("counters")


@dataclass(frozen=True)
class _Finished:
    """What the model's greenlet returned (told apart from a call's ``(name, args)``)."""

    value: Any
