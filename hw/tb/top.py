"""Drivers and monitors of the controller top (:class:`ahasd.hw.top.ControllerTop`).

The top's ports, grouped by block, each group a small driver: the CPU's register bus
(:class:`RegisterBus`), the EDC's event and decision streams (:class:`EDCPorts`), the TVC's
command and answer streams (:class:`TVCPorts`), the GTSU's request level and outputs
(:class:`GTSUPorts`) and the three queues' ports in their three clock domains
(:class:`QueuePorts`). :class:`ControllerTopDriver` holds one of each and starts the
clocks and the reset; :class:`ControllerTopMonitor` samples every port of one clock
domain in one cycle (:class:`PimCycle`, :class:`NpuCycle`, :class:`CpuCycle`).

Every method that drives is for the writable phase after the falling edge of the port's
clock; every method that samples is for ``ReadOnly`` (:mod:`ahasd.hw.tb.clocking`). The
``async`` methods run whole accesses on a :class:`~ahasd.hw.tb.clocking.CycleClock` of the
``pim`` clock. Payload bits are packed through the blocks' own layouts
(:func:`ahasd.hw.edc.encode_draft`, :func:`ahasd.hw.tvc.command_layout`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cocotb.triggers import ReadOnly

from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
from ahasd.hw.tb.clocking import CycleClock, start_clock
from ahasd.hw.tb.streams import StreamPort, decode, encode
from ahasd.hw.tvc import Op, Table, answer_layout, command_layout
from ahasd.params import EDCParams, TopParams, TVCParams
from ahasd.regmap import RegisterMap, register_map

__all__ = [
    "CLOCK_DOMAINS",
    "TABLE_CODES",
    "ControllerTopDriver",
    "ControllerTopMonitor",
    "CpuCycle",
    "EDCPorts",
    "GTSUPorts",
    "NpuCycle",
    "PimCycle",
    "QueuePorts",
    "RegisterBus",
    "TVCPorts",
]

#: The top's clock domains (ports ``<domain>_clk``/``<domain>_rst``).
CLOCK_DOMAINS = ("cpu", "npu", "pim")
#: The TVC tables by the names the golden models and the register map use.
TABLE_CODES = {"nvct": Table.NVCT, "pdct": Table.PDCT, "pvct": Table.PVCT}
#: The ``args`` member of the TVC command that each operation fills (``NPU_DONE`` has none).
_COMMAND_MEMBERS = {Op.LEARN: "learn", Op.NPU_START: "npu_start", Op.ASK: "ask"}


class RegisterBus:
    """The CPU's side of the top's register bus (``bus__*``).

    An access presented in a cycle is taken at the edge that ends it if ``ready`` is high
    in that cycle, else the CPU holds it; a read's data comes with ``rvalid`` one cycle
    later. Registers are named as in ``regmap`` (an address works too).
    """

    def __init__(self, dut: Any, regmap: RegisterMap) -> None:
        self.regmap = regmap
        self.we = dut.bus__we
        self.re = dut.bus__re
        self.addr = dut.bus__addr
        self.wdata = dut.bus__wdata
        self.ready_ = dut.bus__ready
        self.rvalid = dut.bus__rvalid
        self.rdata = dut.bus__rdata

    def address(self, key: str | int) -> int:
        return self.regmap.get(key).address

    def quiet(self) -> None:
        """No access, address and data zero (the state before reset ends)."""
        for handle in (self.we, self.re, self.addr, self.wdata):
            handle.value = 0

    def idle(self) -> None:
        self.we.value = 0
        self.re.value = 0

    def drive_write(self, key: str | int, value: int) -> None:
        self.addr.value = self.address(key)
        self.wdata.value = value
        self.we.value = 1
        self.re.value = 0

    def drive_read(self, key: str | int) -> None:
        self.addr.value = self.address(key)
        self.we.value = 0
        self.re.value = 1

    def ready(self) -> bool:
        """The access presented in this cycle is taken at the coming edge."""
        return bool(int(self.ready_.value))

    def read_data(self) -> int | None:
        """``rdata`` when ``rvalid`` is high (the read taken in the previous cycle), else None."""
        return int(self.rdata.value) if int(self.rvalid.value) else None

    async def write(self, clock: CycleClock, key: str | int, value: int, limit: int) -> None:
        """Write ``value`` into ``key``, holding the access until the bus takes it."""
        self.drive_write(key, value)
        for _ in range(limit):
            await ReadOnly()
            taken = self.ready()
            await clock.next()
            if taken:
                self.we.value = 0
                return
        raise AssertionError(f"cycle {clock.cycle}: the bus never took the write of {key}")


class EDCPorts:
    """The EDC's ``edc_event`` (in) and ``edc_decision`` (out) streams."""

    def __init__(self, dut: Any, params: EDCParams) -> None:
        self.params = params
        self.event = StreamPort(dut, "edc_event")
        self.decision = StreamPort(dut, "edc_decision")
        self.sum_max = (1 << params.sum_bits) - 1
        self.length_max = (1 << params.length_bits) - 1

    def draft_bits(self, s: int, length: int) -> int:
        return encode_draft(self.params, s, length)

    def verify_bits(self, full: bool, s_acc: int, n_acc: int) -> int:
        return encode_verify(self.params, full, s_acc, n_acc)

    def decode_decision(self, bits: int) -> dict[str, int]:
        return decode_decision(self.params, bits)


class TVCPorts:
    """The TVC's ``tvc_cmd`` (in) and ``tvc_ans`` (out) streams."""

    def __init__(self, dut: Any, params: TVCParams) -> None:
        self.params = params
        self.command = StreamPort(dut, "tvc_cmd")
        self.answer = StreamPort(dut, "tvc_ans")
        self.command_layout = command_layout(params)
        self.answer_layout = answer_layout(params)
        self.length_max = (1 << params.length_bits) - 1
        self.cycles_max = (1 << params.cycle_bits) - 1

    def command_bits(self, op: Op, args: dict) -> int:
        """``op`` with ``args`` (the fields of its member of the command's ``args`` union)."""
        value: dict[str, Any] = {"op": op}
        member = _COMMAND_MEMBERS.get(op)
        if member is not None:
            value["args"] = {member: args}
        return encode(self.command_layout, value)

    def decode_answer(self, bits: int) -> dict[str, int]:
        """``{"n", "c_left"}`` of an answer (``c_left`` signed)."""
        return decode(self.answer_layout, bits)


class GTSUPorts:
    """The GTSU's request level ``want_draft`` (in) and its status outputs."""

    def __init__(self, dut: Any) -> None:
        self.want_draft = dut.want_draft
        self.want_preverify_ = dut.want_preverify
        self.task_ = dut.gtsu_task
        self.ready_ = dut.gtsu_ready
        self.gating = dut.gtsu_gating
        self.dlm_enable = dut.gtsu_dlm_enable
        self.tlm_enable = dut.gtsu_tlm_enable

    def request_draft(self, level: bool | int) -> None:
        self.want_draft.value = int(level)

    def task(self) -> int:
        return int(self.task_.value)

    def ready(self) -> bool:
        return bool(int(self.ready_.value))

    def want_preverify(self) -> bool:
        return bool(int(self.want_preverify_.value))

    def outputs(self) -> dict[str, int]:
        """``task``, ``ready``, ``gating``, ``dlm_enable``, ``tlm_enable`` (as the golden
        GTSU's ``outputs()`` names them)."""
        return {
            "task": int(self.task_.value),
            "ready": int(self.ready_.value),
            "gating": int(self.gating.value),
            "dlm_enable": int(self.dlm_enable.value),
            "tlm_enable": int(self.tlm_enable.value),
        }


class QueuePorts:
    """The three queues' ports: writers and readers, the draft reader's epoch and squash
    flag, and the level outputs (``draft``: PIM writes, NPU reads; ``feedback``: NPU
    writes, PIM reads; ``preverify``: CPU writes, PIM reads)."""

    def __init__(self, dut: Any) -> None:
        self.draft_w = StreamPort(dut, "draft_w")
        self.draft_r = StreamPort(dut, "draft_r")
        self.feedback_w = StreamPort(dut, "feedback_w")
        self.feedback_r = StreamPort(dut, "feedback_r")
        self.preverify_w = StreamPort(dut, "preverify_w")
        self.preverify_r = StreamPort(dut, "preverify_r")
        self.draft_r_epoch = dut.draft_r_epoch
        self.draft_r_squashed = dut.draft_r_squashed
        self.levels = {
            "draft_w": dut.draft_w_level,
            "draft_r": dut.draft_r_level,
            "feedback_r": dut.feedback_r_level,
            "preverify_r": dut.preverify_r_level,
        }

    @property
    def writers(self) -> tuple[StreamPort, ...]:
        return (self.draft_w, self.feedback_w, self.preverify_w)

    @property
    def readers(self) -> tuple[StreamPort, ...]:
        return (self.draft_r, self.feedback_r, self.preverify_r)

    def set_reader_epoch(self, epoch: int) -> None:
        self.draft_r_epoch.value = epoch

    def squashed(self) -> bool:
        """The draft reader drops a stale entry at the coming edge."""
        return bool(int(self.draft_r_squashed.value))

    def level(self, port: str) -> int:
        """The level output beside ``port`` (``draft_w``, ``draft_r``, ``feedback_r``,
        ``preverify_r``)."""
        return int(self.levels[port].value)


class ControllerTopDriver:
    """Every driver of the controller top, and its clocks and reset.

    Parameters
    ----------
    dut : the cocotb handle of the top module.
    params : the TopParams the top was built with.

    Attributes
    ----------
    bus : RegisterBus; edc : EDCPorts; tvc : TVCPorts; gtsu : GTSUPorts; queues : QueuePorts
    """

    def __init__(self, dut: Any, params: TopParams) -> None:
        self.dut = dut
        self.params = params
        self.bus = RegisterBus(dut, register_map(params))
        self.edc = EDCPorts(dut, params.edc)
        self.tvc = TVCPorts(dut, params.tvc)
        self.gtsu = GTSUPorts(dut)
        self.queues = QueuePorts(dut)

    def start_clocks(self, periods_ps: dict[str, int]) -> None:
        """Start one clock per domain (``{"pim": 1250, ...}``, in that order), all low first."""
        if sorted(periods_ps) != sorted(CLOCK_DOMAINS):
            raise ValueError(f"periods_ps must name the domains {CLOCK_DOMAINS}, not {periods_ps}")
        for domain, period in periods_ps.items():
            start_clock(getattr(self.dut, f"{domain}_clk"), period)

    def hold_reset(self, level: bool | int) -> None:
        """Drive every domain's reset (synchronous, active high)."""
        for domain in CLOCK_DOMAINS:
            getattr(self.dut, f"{domain}_rst").value = int(level)

    def quiet_inputs(self) -> None:
        """Every input at rest: no bus access, no stream offered or taken, no request."""
        self.bus.quiet()
        self.gtsu.request_draft(0)
        self.queues.set_reader_epoch(0)
        for port in (self.edc.event, self.tvc.command, *self.queues.writers):
            port.quiet()
        for port in (self.edc.decision, self.tvc.answer, *self.queues.readers):
            port.accept(0)


@dataclass(frozen=True)
class PimCycle:
    """What the ``pim`` side of the top does at the coming edge (sampled in ``ReadOnly``).

    Transfers are payload bits, ``None`` when nothing moves.
    """

    bus_ready: bool
    read_data: int | None  # rdata with rvalid high: the read taken in the previous cycle
    edc_ready: bool
    edc_event: int | None
    edc_decision: int | None
    tvc_ready: bool
    tvc_command: int | None
    tvc_answer: int | None
    draft_written: int | None
    feedback_read: int | None
    preverify_read: int | None
    gtsu: dict[str, int]
    want_preverify: bool


@dataclass(frozen=True)
class NpuCycle:
    """What the ``npu`` side of the top does at the coming edge."""

    draft_read: int | None
    squashed: bool
    feedback_written: int | None


@dataclass(frozen=True)
class CpuCycle:
    """What the ``cpu`` side of the top does at the coming edge."""

    preverify_written: int | None


class ControllerTopMonitor:
    """Samples every port of one clock domain of the top in ``ReadOnly``."""

    def __init__(self, driver: ControllerTopDriver) -> None:
        self.driver = driver

    def pim(self) -> PimCycle:
        d = self.driver
        return PimCycle(
            bus_ready=d.bus.ready(),
            read_data=d.bus.read_data(),
            edc_ready=bool(int(d.edc.event.ready.value)),
            edc_event=d.edc.event.transfer(),
            edc_decision=d.edc.decision.transfer(),
            tvc_ready=bool(int(d.tvc.command.ready.value)),
            tvc_command=d.tvc.command.transfer(),
            tvc_answer=d.tvc.answer.transfer(),
            draft_written=d.queues.draft_w.transfer(),
            feedback_read=d.queues.feedback_r.transfer(),
            preverify_read=d.queues.preverify_r.transfer(),
            gtsu=d.gtsu.outputs(),
            want_preverify=d.gtsu.want_preverify(),
        )

    def npu(self) -> NpuCycle:
        queues = self.driver.queues
        return NpuCycle(
            draft_read=queues.draft_r.transfer(),
            squashed=queues.squashed(),
            feedback_written=queues.feedback_w.transfer(),
        )

    def cpu(self) -> CpuCycle:
        return CpuCycle(preverify_written=self.driver.queues.preverify_w.transfer())
