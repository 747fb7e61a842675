"""The RTL controller: the system model's EDC, TVC and GTSU decisions taken by the Verilog.

:class:`RTLController` implements the :class:`ahasd.sim.controller.Controller` protocol on
the generated Verilog of :class:`ahasd.hw.top.ControllerTop`, inside a cocotb simulator
process (:mod:`ahasd.sim.cosim_tb`). The system model is synchronous Python: it runs in a
thread started with ``cocotb.bridge``; each protocol call becomes a short coroutine, run with
``cocotb.resume``, that drives the top's event ports for a few PIM clock cycles and reads the
answer off the RTL. See ``docs/cosim.md`` for the loop, the time warp and debugging.

:class:`RecordingController` wraps any controller and records the decision sequence (one
``(cycle, event, inputs, answer)`` per call) so that a golden run and a co-simulation can be
compared call by call (:func:`first_divergence`).

Conventions of the coroutines (``tests/harness/tb.py``'s discipline): every call starts by
moving to the next falling edge of ``pim_clk`` (``_next``), drives inputs there, samples in
``ReadOnly`` of the same time step; a transfer happens at the rising edge that ends the cycle
iff ``valid`` and ``ready`` were both high.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ahasd.params import TopParams
from ahasd.sim.controller import Task

__all__ = [
    "CosimStats",
    "RTLController",
    "RecordingController",
    "first_divergence",
    "register_handles",
]

#: A gap in NCR up to this many cycles is clocked; a larger one is time-warped.
WARP_THRESHOLD = 64
#: Cycles clocked before a warp to show that the design is stationary.
WARP_PROOF_CYCLES = 2
#: Give up waiting for a handshake after this many cycles (a hung design, not a slow one).
HANDSHAKE_LIMIT = 1000
#: The one register allowed to change while the design waits (the TVC's NCR counter).
_COUNTING = {"tvc.ncr"}


# -- decision recording --------------------------------------------------------------------


class RecordingController:
    """A controller that forwards every call to ``inner`` and records it.

    Attributes
    ----------
    log : list of ``[cycle, event, inputs, answer]``; ``cycle`` is the last PIM cycle the
        engine passed (the TVC calls carry it; the other calls happen "now").
    """

    def __init__(self, inner) -> None:
        self.inner = inner
        self.log: list[list] = []
        self.cycle = 0

    def _record(self, event: str, inputs: list, answer):
        self.log.append([self.cycle, event, inputs, answer])
        return answer

    def edc_full(self) -> bool:
        return self._record("edc_full", [], bool(self.inner.edc_full()))

    def edc_draft(self, entropy_sum: int, length: int) -> bool | None:
        answer = self.inner.edc_draft(entropy_sum, length)
        return self._record(
            "edc_draft", [entropy_sum, length], None if answer is None else bool(answer)
        )

    def edc_verify(self, full: bool, entropy_sum: int, accepted: int) -> None:
        self.inner.edc_verify(full, entropy_sum, accepted)
        self._record("edc_verify", [bool(full), entropy_sum, accepted], None)

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        self.inner.tvc_learn(table, cycles, length)
        self._record("tvc_learn", [table, cycles, length], None)

    def tvc_npu_start(self, l_kv: int, cycle: int) -> None:
        self.cycle = cycle
        self.inner.tvc_npu_start(l_kv, cycle)
        self._record("tvc_npu_start", [l_kv], None)

    def tvc_npu_done(self, cycle: int) -> None:
        self.cycle = cycle
        self.inner.tvc_npu_done(cycle)
        self._record("tvc_npu_done", [], None)

    def tvc_ask(self, available: int, cycle: int) -> int:
        self.cycle = cycle
        return self._record("tvc_ask", [available], int(self.inner.tvc_ask(available, cycle)))

    def gtsu_switch(self, task: str) -> int:
        return self._record("gtsu_switch", [task], int(self.inner.gtsu_switch(task)))

    def gtsu_next(self, preverify_pending: bool, draft_wanted: bool) -> str:
        answer = self.inner.gtsu_next(preverify_pending, draft_wanted)
        return self._record("gtsu_next", [bool(preverify_pending), bool(draft_wanted)], answer)

    def counters(self) -> dict:
        return self.inner.counters()


def first_divergence(golden: list, cosim: list) -> dict | None:
    """The first call at which two decision logs differ, or ``None`` when they are equal.

    Returns ``{"index", "cycle", "event", "golden", "cosim"}`` (``golden``/``cosim`` are the
    two ``[cycle, event, inputs, answer]`` entries; one is ``None`` if a log is shorter).
    """
    for index in range(max(len(golden), len(cosim))):
        a = list(golden[index]) if index < len(golden) else None
        b = list(cosim[index]) if index < len(cosim) else None
        if a != b:
            where = a or b
            return {
                "index": index,
                "cycle": where[0],
                "event": where[1],
                "golden": a,
                "cosim": b,
            }
    return None


# -- the RTL controller --------------------------------------------------------------------


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
            "edc_decision_latency": hist(self.edc_decision_latency),
            "tvc_answer_latency": hist(self.tvc_answer_latency),
            "gtsu_switch_cycles": hist(self.gtsu_switch_cycles),
            "gtsu_request_latency": hist(self.gtsu_request_latency),
        }


def _module_registers(verilog: str) -> list[tuple[str, str]]:
    """``(instance path below the top, name)`` of every plain ``reg`` of the Verilog text.

    Amaranth names a submodule ``\\top.edc`` and declares each register (and each
    combinational ``always`` target) as ``reg``; escaped names (``\\$12``) are internal
    temporaries, memories (``reg [..] x [..]``) are left out (they change only through a
    write enable, itself a function of the registers kept).
    """
    found = []
    module = None
    for line in verilog.splitlines():
        if line.startswith("module "):
            name = line.split()[1].split("(")[0]
            module = name.lstrip("\\")
            continue
        match = re.match(r"\s+reg (?:\[\d+:\d+\] )?([A-Za-z_][A-Za-z0-9_]*)( \[|\s*=|;)", line)
        if module is None or not match or match.group(2) == " [":
            continue
        path = module.split(".")[1:]  # drop the top's own name
        found.append((".".join(path), match.group(1)))
    return found


def register_handles(dut, verilog_file: Path) -> list[tuple[str, object]]:
    """cocotb handles of the design's registers (see :func:`_module_registers`)."""
    handles = []
    for path, name in _module_registers(Path(verilog_file).read_text()):
        scope = dut
        try:
            for part in path.split(".") if path else []:
                scope = getattr(scope, part)
            handles.append((f"{path}.{name}" if path else name, getattr(scope, name)))
        except AttributeError:
            continue  # optimised away by Verilator: no state to compare
    return handles


def _encode(layout, value) -> int:
    """Bits of a nested dict ``value`` in an Amaranth ``data`` layout (enums by value)."""
    from amaranth.lib import data

    if isinstance(layout, data.Layout):
        bits = 0
        for name, field_value in value.items():
            member = layout[name]
            bits |= _encode(member.shape, field_value) << member.offset
        return bits
    return int(getattr(value, "value", value))


class _Port:
    """Handles of one stream port (``name__valid/ready/payload``)."""

    def __init__(self, dut, name: str):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")


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
        :meth:`gtsu_switch`); off for identity with the golden controller.
    """

    PERIOD_PS = 1250  # 800 MHz PIM clock; the CPU and NPU clocks run in phase with it

    def __init__(self, dut, params: TopParams, tvc_presets: dict, verilog_file, feedback=False):
        from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
        from ahasd.hw.tvc import Op, Table, answer_layout, command_layout

        self.dut = dut
        self.p = params
        self.presets = dict(tvc_presets)
        self.feedback = feedback
        self.stats = CosimStats()
        self.cycle = 0  # PIM cycles since reset, warped ones included
        self.role = Task.DRAFT
        self.switch_base = 0
        self.asks = 0
        self.preverify_orders = 0
        self.pending_latency = 0  # decision/answer cycles not yet fed back (feedback mode)
        self.npu_busy = False
        self.npu_start_cycle = 0  # model cycle of the running NPU_START
        self._encode_draft = lambda s, n: encode_draft(params.edc, s, n)
        self._encode_verify = lambda f, s, n: encode_verify(params.edc, f, s, n)
        self._decode_decision = lambda bits: decode_decision(params.edc, bits)
        self._op, self._table = Op, Table
        self._command = command_layout(params.tvc)
        self._answer = answer_layout(params.tvc)
        self.edc_in = _Port(dut, "edc_event")
        self.edc_out = _Port(dut, "edc_decision")
        self.tvc_in = _Port(dut, "tvc_cmd")
        self.tvc_out = _Port(dut, "tvc_ans")
        self.pre_w = _Port(dut, "preverify_w")
        self.pre_r = _Port(dut, "preverify_r")
        self.ncr = dut.tvc.ncr
        self.ncr_max = (1 << params.tvc.cycle_bits) - 1
        self.registers = [
            (name, handle)
            for name, handle in register_handles(dut, verilog_file)
            if name not in _COUNTING
        ]
        self._sum_max = (1 << params.edc.sum_bits) - 1
        self._length_max = (1 << params.tvc.length_bits) - 1
        self._cycles_max = (1 << params.tvc.cycle_bits) - 1

    # -- clocking --------------------------------------------------------------------------

    async def _next(self, cycles: int = 1) -> None:
        """Move to the falling edge ``cycles`` PIM cycles on (a writable phase)."""
        from cocotb.triggers import ClockCycles, FallingEdge

        if cycles == 1:
            await FallingEdge(self.dut.pim_clk)
        else:
            await ClockCycles(self.dut.pim_clk, cycles, rising=False)
        self.cycle += cycles
        self.stats.simulated_cycles += cycles

    async def start(self) -> None:
        """Clocks, reset, TVC presets through the bus, then the GTSU to DRAFT.

        The golden controller's GTSU stand-in starts with the DLM ranks enabled; the RTL
        GTSU resets to IDLE, so the set-up switches it to DRAFT and the switch counter
        reported later is counted from there.
        """
        from cocotb.clock import Clock
        from cocotb.triggers import ReadOnly

        dut = self.dut
        for name in ("pim", "npu", "cpu"):
            Clock(getattr(dut, f"{name}_clk"), self.PERIOD_PS, unit="ps").start(start_high=False)
            getattr(dut, f"{name}_rst").value = 1
        for handle in (dut.bus__we, dut.bus__re, dut.bus__addr, dut.bus__wdata, dut.want_draft):
            handle.value = 0
        dut.draft_r_epoch.value = 0
        for port in ("edc_event", "tvc_cmd", "draft_w", "feedback_w", "preverify_w"):
            getattr(dut, f"{port}__valid").value = 0
            getattr(dut, f"{port}__payload").value = 0
        for port in ("draft_r", "feedback_r", "preverify_r"):
            getattr(dut, f"{port}__ready").value = 0
        self.edc_out.ready.value = 1  # decisions are taken as soon as they are valid
        self.tvc_out.ready.value = 1
        await self._next(4)
        for name in ("pim", "npu", "cpu"):
            getattr(dut, f"{name}_rst").value = 0
        await self._next(4)
        # TVC presets through the register bus (a write waits while bus.ready is low).
        from ahasd.regmap import TABLE_BASES

        limit = (1 << self.p.tvc.ratio_bits) - 1
        for table, ratio in self.presets.items():
            for index in range(self.p.tvc.depth):
                dut.bus__addr.value = TABLE_BASES[table] + index
                dut.bus__wdata.value = min(limit, max(0, int(ratio)))
                dut.bus__we.value = 1
                for _ in range(HANDSHAKE_LIMIT):
                    await ReadOnly()
                    taken = int(dut.bus__ready.value)
                    await self._next()
                    if taken:
                        break
                dut.bus__we.value = 0
        dut.want_draft.value = 1
        await self._await_switch()
        if int(dut.gtsu_task.value) != 1:
            raise AssertionError("the RTL GTSU did not switch to DRAFT at set-up")
        self.switch_base = int(dut.gtsu.switches.value)
        self.stats = CosimStats()  # set-up cycles are not part of the run

    # -- streams ---------------------------------------------------------------------------

    async def _send(self, port: _Port, bits: int) -> int:
        """Present ``bits`` on ``port`` until taken; returns the acceptance cycle."""
        from cocotb.triggers import ReadOnly

        port.payload.value = bits
        port.valid.value = 1
        for _ in range(HANDSHAKE_LIMIT):
            await ReadOnly()
            if int(port.ready.value):
                accepted = self.cycle
                await self._next()
                port.valid.value = 0
                return accepted
            await self._next()
        raise AssertionError(f"cycle {self.cycle}: {port.valid._path} never taken")

    async def _receive(self, port: _Port) -> tuple[int, int]:
        """Wait for ``port.valid`` (ready is held high); returns ``(payload, cycle)``."""
        from cocotb.triggers import ReadOnly

        for _ in range(HANDSHAKE_LIMIT):
            await ReadOnly()
            if int(port.valid.value):
                value = int(port.payload.value)
                return value, self.cycle
            await self._next()
        raise AssertionError(f"cycle {self.cycle}: no answer on {port.valid._path}")

    # -- EDC -------------------------------------------------------------------------------

    async def edc_full_async(self) -> bool:
        """A ``DRAFT`` would be refused: ``i.ready`` low for a DRAFT head, EDC quiet."""
        from cocotb.triggers import ReadOnly

        await self._next()
        self.edc_in.payload.value = self._encode_draft(0, 1)
        # i.ready is also low for one cycle while the previous event finishes: look twice.
        for _ in range(3):
            await ReadOnly()
            if int(self.edc_in.ready.value):
                return False
            await self._next()
        return True

    async def edc_draft_async(self, entropy_sum: int, length: int) -> bool | None:
        await self._next()
        bits = self._encode_draft(min(entropy_sum, self._sum_max), length)
        accepted = await self._send(self.edc_in, bits)
        if length == 0:
            return None  # a protocol error: the EDC emits no decision
        payload, valid = await self._receive(self.edc_out)
        latency = valid - accepted
        self.stats.add(self.stats.edc_decision_latency, latency)
        self.pending_latency += latency
        return bool(self._decode_decision(payload)["keep_drafting"])

    async def edc_verify_async(self, full: bool, entropy_sum: int, accepted: int) -> None:
        await self._next()
        bits = self._encode_verify(full, min(entropy_sum, self._sum_max), accepted)
        await self._send(self.edc_in, bits)

    # -- TVC -------------------------------------------------------------------------------

    def _command_bits(self, op, args: dict) -> int:
        key = {"LEARN": "learn", "NPU_START": "npu_start", "ASK": "ask"}.get(op.name)
        value = {"op": op}
        if key is not None:
            value["args"] = {key: args}
        return _encode(self._command, value)

    async def _tvc_idle(self) -> None:
        """Move to the next cycle in which the TVC takes commands (no LEARN or ASK running).

        Read right after the falling edge: ``cmd.ready`` depends only on registers and on
        the bus write strobe, none of which changed since the last evaluation.
        """
        for _ in range(HANDSHAKE_LIMIT):
            await self._next()
            if int(self.tvc_in.ready.value):
                return
        raise AssertionError(f"cycle {self.cycle}: the TVC stays busy")

    def _snapshot(self) -> list[int]:
        return [int(handle.value) for _, handle in self.registers]

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
            await self._next(gap)
        elif gap > WARP_THRESHOLD:
            before = self._snapshot()
            await self._next(WARP_PROOF_CYCLES)
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
            if counted != min(now + WARP_PROOF_CYCLES, self.ncr_max):
                raise AssertionError(f"cycle {self.cycle}: NCR counted {now} -> {counted}")
            skipped = target - counted
            # Counting `skipped` more cycles from `counted` gives (saturating) exactly this.
            if min(counted + skipped, self.ncr_max) != target:
                raise AssertionError("warp target is not what counting would give")
            self.ncr.value = target
            self.cycle += skipped
            self.stats.warped_cycles += skipped
            self.stats.warps += 1
            self.stats.stationary_checks += len(self.registers)
        else:
            self.ncr.value = target
            self.stats.rewinds += 1
            self.stats.rewound_cycles += -gap
        return target

    async def tvc_learn_async(self, table: str, cycles: int, length: int) -> None:
        await self._tvc_idle()
        code = {"nvct": self._table.NVCT, "pdct": self._table.PDCT, "pvct": self._table.PVCT}
        bits = self._command_bits(
            self._op.LEARN,
            {"table": code[table], "cycles": min(cycles, self._cycles_max), "length": length},
        )
        await self._send(self.tvc_in, bits)

    async def tvc_npu_start_async(self, l_kv: int, cycle: int) -> None:
        await self._tvc_idle()
        bits = self._command_bits(self._op.NPU_START, {"l_kv": min(l_kv, self._length_max)})
        await self._send(self.tvc_in, bits)
        self.npu_busy = True
        self.npu_start_cycle = cycle  # the model's t0; NCR is aligned to `c - t0` at use

    async def tvc_npu_done_async(self, cycle: int) -> None:
        await self._tvc_idle()
        target = None
        if self.npu_busy:
            target = await self._align_ncr(cycle)
        await self._send(self.tvc_in, self._command_bits(self._op.NPU_DONE, {}))
        if target is not None and int(self.ncr.value) != target:
            raise AssertionError(
                f"cycle {self.cycle}: NCR froze at {int(self.ncr.value)}, not {target}"
            )
        self.npu_busy = False

    async def tvc_ask_async(self, available: int, cycle: int) -> int:
        self.asks += 1
        await self._tvc_idle()
        target = None
        if self.npu_busy:
            target = await self._align_ncr(cycle)
        bits = self._command_bits(self._op.ASK, {"p": min(available, self._length_max)})
        accepted = await self._send(self.tvc_in, bits)
        if target is not None and int(self.dut.tvc.ask_ncr.value) != target:
            raise AssertionError(
                f"cycle {self.cycle}: ASK sampled NCR "
                f"{int(self.dut.tvc.ask_ncr.value)}, not {target}"
            )
        payload, valid = await self._receive(self.tvc_out)
        latency = valid - accepted
        self.stats.add(self.stats.tvc_answer_latency, latency)
        self.pending_latency += latency
        n_field = self._answer["n"]
        answer = (payload >> n_field.offset) & ((1 << n_field.width) - 1)
        if answer:
            self.preverify_orders += 1
        return answer

    # -- GTSU ------------------------------------------------------------------------------

    async def _await_switch(self) -> int:
        """Wait for the GTSU to leave and regain ``ready``; returns the cycles it took from
        the current cycle (0 when it does not switch within a few cycles)."""
        from cocotb.triggers import ReadOnly

        start = self.cycle
        switching = False
        for _ in range(HANDSHAKE_LIMIT):
            await ReadOnly()
            ready = int(self.dut.gtsu_ready.value)
            if not ready:
                switching = True
            elif switching:
                return self.cycle - start
            elif self.cycle - start > 16:
                return 0
            await self._next()
        raise AssertionError(f"cycle {self.cycle}: the GTSU switch does not end")

    async def gtsu_switch_async(self, task: str) -> int:
        from cocotb.triggers import ReadOnly

        pending, self.pending_latency = self.pending_latency, 0
        extra = pending if self.feedback else 0
        if task == Task.IDLE or task == self.role:
            return extra  # the request levels stay: the RTL keeps its task (checked below)
        await self._next()
        if task == Task.PREVERIFY:
            # The CPU writes a pre-verification order; the GTSU sees the queue non-empty.
            await self._send(self.pre_w, 0)
        else:
            # The PIM takes the order: the queue empties, want_draft (held high) wins.
            self.pre_r.ready.value = 1
            for _ in range(HANDSHAKE_LIMIT):
                await ReadOnly()
                taken = int(self.pre_r.valid.value)
                await self._next()
                if taken:
                    break
            self.pre_r.ready.value = 0
        requested = self.cycle
        await self._await_switch()
        code = {Task.DRAFT: 1, Task.PREVERIFY: 2}[task]
        if int(self.dut.gtsu_task.value) != code:
            raise AssertionError(f"cycle {self.cycle}: the RTL GTSU did not switch to {task}")
        self.role = task
        cycles = int(self.dut.gtsu.last_switch_cycles.value)
        self.stats.add(self.stats.gtsu_switch_cycles, cycles)
        self.stats.add(self.stats.gtsu_request_latency, self.cycle - requested)
        return (self.cycle - requested) + extra if self.feedback else cycles

    # -- counters --------------------------------------------------------------------------

    async def counters_async(self) -> dict:
        """Event counters, read off the RTL's registers once the blocks are quiet."""
        await self._tvc_idle()
        await self._next(2)  # the EDC updates its counters one cycle after an event
        return self.counters()

    def counters(self) -> dict:
        """Event counters, read off the RTL's registers (same keys as the golden's)."""
        edc = self.dut.edc
        names = ("drafts", "continues", "suppressions", "verifies", "rollbacks")
        result = {f"edc_{name}": int(getattr(edc, name).value) for name in names}
        result.update(
            edc_error=bool(int(self.dut.edc.error.value)),
            tvc_error=bool(int(self.dut.tvc.error.value)),
            tvc_asks=self.asks,
            tvc_preverify_orders=self.preverify_orders,
            gtsu_switches=int(self.dut.gtsu.switches.value) - self.switch_base,
        )
        return result


class BlockingRTLController:
    """:class:`RTLController` as the engine sees it: blocking calls from a bridged thread."""

    def __init__(self, rtl: RTLController):
        from cocotb.task import resume

        self.rtl = rtl
        self._resume = resume
        self._calls = {}

    def _call(self, name: str, *args):
        self.rtl.stats.calls += 1
        method = self._calls.get(name)
        if method is None:
            method = self._calls[name] = self._resume(getattr(self.rtl, f"{name}_async"))
        return method(*args)

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


# -- running the model on either controller ------------------------------------------------


def settings_to_dict(settings) -> dict:
    """A :class:`~ahasd.sim.config.RunSettings` as JSON-able fields."""
    from dataclasses import asdict

    return asdict(settings)


def settings_from_dict(fields: dict):
    """Inverse of :func:`settings_to_dict` (lists back to the tuples the dataclass holds)."""
    from ahasd.sim.config import RunSettings

    fields = dict(fields)
    fields["policy_params"] = tuple(
        (key, tuple(value) if isinstance(value, list) else value)
        for key, value in fields.get("policy_params", ())
    )
    fields["spec_dirs"] = tuple(fields.get("spec_dirs", ()))
    return RunSettings(**fields)


def model_top_params(settings) -> TopParams:
    """The controller top's parameters matching the model's controller for ``settings``
    (``ahasd.sim.modes.simulate`` builds its golden controller with these)."""
    from ahasd.params import EDCParams, GTSUParams, TVCParams

    return TopParams(
        edc=EDCParams(),
        tvc=TVCParams(ratio_bits=settings.tvc_ratio_bits, cycle_bits=settings.tvc_cycle_bits),
        gtsu=GTSUParams(),
    )


def model_inputs(settings):
    """``(library, hardware, tvc_presets)`` of a run, as ``simulate`` computes them."""
    from ahasd.sim.config import load_library
    from ahasd.sim.modes import build_hardware, tvc_presets

    library = load_library(settings.spec_dirs)
    hardware = build_hardware(settings, library)
    return library, hardware, tvc_presets(hardware, settings.prompt_tokens)


def run_model(settings, controller=None) -> tuple[dict, list]:
    """Run the system model; returns ``(summary, decision log)``.

    ``controller`` is a :class:`~ahasd.sim.controller.Controller` or ``None`` for the golden
    controller (built exactly as ``simulate`` builds its default). The summary is passed
    through JSON so that a golden run and a co-simulation compare as the CLI prints them.
    """
    import json

    from ahasd.sim.controller import GoldenController
    from ahasd.sim.modes import simulate

    library, hardware, presets = model_inputs(settings)
    if controller is None:
        p = model_top_params(settings)
        controller = GoldenController(p.edc, p.tvc, p.gtsu, tvc_presets=presets)
    recorder = RecordingController(controller)
    result = simulate(settings, library=library, hardware=hardware, controller=recorder)
    return json.loads(json.dumps(result.summary)), recorder.log
