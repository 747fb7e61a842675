"""Drivers and monitors of the controller top (:class:`ahasd.hw.top.ControllerTop`).

The top's ports, grouped by block, each group a small driver: the CPU's AXI4-Lite port and
the interrupt (:class:`RegisterPort`, registers by their names in :mod:`ahasd.regmap`), the
EDC's event and decision streams (:class:`EDCPorts`), the TVC's command and answer streams
(:class:`TVCPorts`), the GTSU's request level and outputs (:class:`GTSUPorts`) and the three
queues' ports in their three clock domains (:class:`QueuePorts`).
:class:`ControllerTopDriver` holds one of each and starts the clocks and the reset;
:class:`ControllerTopMonitor` samples every port of one clock domain in one cycle
(:class:`PimCycle`, :class:`NpuCycle`, :class:`CpuCycle`), with the register accesses
rebuilt from the AXI4-Lite port's handshakes (:class:`RegisterAccesses`): the monitor reads
the top's ports only, so it runs on any netlist of the top (the flattened one of the
mutation campaign too).

Every method that drives is for the writable phase after the falling edge of the port's
clock; every method that samples is for ``ReadOnly`` (:mod:`ahasd.hw.tb.clocking`). The
``async`` methods run whole accesses on a :class:`~ahasd.hw.tb.clocking.CycleClock` of the
``pim`` clock, or on the :class:`~ahasd.hw.tb.clocking.LoopClock` of a coroutine that the
``pim`` domain's loop steps (:class:`~ahasd.hw.tb.clocking.LoopTask`). Payload bits are
packed through the blocks' own layouts (:func:`ahasd.hw.edc.encode_draft`,
:func:`ahasd.hw.tvc.command_layout`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
from ahasd.hw.tb.clocking import CycleClock, LoopClock, start_clock
from ahasd.hw.tb.pins import Pin
from ahasd.hw.tb.streams import StreamPort, decode, encode
from ahasd.hw.tvc import Op, Table, answer_layout, command_layout
from ahasd.params import EDCParams, TopParams, TVCParams
from ahasd.regmap import DATA_BITS, STRB_BITS, RegisterMap, register_map

__all__ = [
    "CLOCK_DOMAINS",
    "GTSU_OUTPUTS",
    "TABLE_CODES",
    "ControllerTopDriver",
    "ControllerTopMonitor",
    "CpuCycle",
    "EDCPorts",
    "GTSUPorts",
    "NpuCycle",
    "PimCycle",
    "QueuePorts",
    "RegisterAccesses",
    "RegisterPort",
    "SlaveError",
    "TVCPorts",
]

#: The top's clock domains (ports ``<domain>_clk``/``<domain>_rst``).
CLOCK_DOMAINS = ("cpu", "npu", "pim")
#: The TVC tables by the names the golden models and the register map use.
TABLE_CODES = {"nvct": Table.NVCT, "pdct": Table.PDCT, "pvct": Table.PVCT}
#: The GTSU's status outputs, in the order of :meth:`GTSUPorts.levels` and ``PimCycle.gtsu``.
GTSU_OUTPUTS = ("task", "ready", "gating", "dlm_enable", "tlm_enable")
#: A byte address's low bits that select the byte within a word (``AWADDR >> 2``).
WORD_SHIFT = STRB_BITS.bit_length() - 1
#: The ``args`` member of the TVC command that each operation fills (``NPU_DONE`` has none).
_COMMAND_MEMBERS = {Op.LEARN: "learn", Op.NPU_START: "npu_start", Op.ASK: "ask"}


class SlaveError(Exception):
    """A register access answered ``SLVERR``."""


class RegisterPort:
    """The CPU's side of the top's AXI4-Lite port (``s_axi__*``) and its interrupt.

    One access at a time, AW and W presented together, every response taken at once; the
    registers by their names in the register map (:mod:`ahasd.regmap`), a 64-bit one as two
    words, low word first (the map's rule: the high word writes it whole, the low word's
    read snapshots the high word). Drives in the writable phase, samples in ``ReadOnly``.
    Every signal is a :class:`~ahasd.hw.tb.pins.Pin` (``self.awvalid.read()``, ...).
    """

    def __init__(self, dut: Any, regmap: RegisterMap) -> None:
        self.regmap = regmap
        self.irq_ = Pin(dut.irq)
        for name in (
            "awvalid", "awready", "awaddr", "awprot", "wvalid", "wready", "wdata", "wstrb",
            "bvalid", "bready", "bresp", "arvalid", "arready", "araddr", "arprot", "rvalid",
            "rready", "rdata", "rresp",
        ):  # fmt: skip
            setattr(self, name, Pin(getattr(dut, f"s_axi__{name}")))
        self.reads = 0
        self.writes = 0

    def quiet(self) -> None:
        """No request, no response taken (the state before reset ends)."""
        for pin in (self.awvalid, self.wvalid, self.arvalid, self.bready, self.rready):
            pin.write(0)
        for pin in (self.awaddr, self.awprot, self.wdata, self.wstrb, self.araddr):
            pin.write(0)
        self.arprot.write(0)

    def irq(self) -> bool:
        return bool(self.irq_.read())

    async def write_word(
        self,
        clock: CycleClock | LoopClock,
        address: int,
        data: int,
        limit: int,
        strobe: int = 0xF,
        skew: int = 0,
    ) -> int:
        """Write one word; returns ``BRESP`` (0 OKAY, 2 SLVERR). ``skew`` > 0 presents W that
        many cycles before AW, ``skew`` < 0 AW before W (AXI leaves the order free)."""
        self.awaddr.write(address)
        self.wdata.write(data)
        self.wstrb.write(strobe)
        self.bready.write(1)
        aw_from, w_from = max(0, skew), max(0, -skew)
        for cycle in range(limit):
            if cycle == aw_from:
                self.awvalid.write(1)
            if cycle == w_from:
                self.wvalid.write(1)
            await clock.sample()
            aw_taken = self.awvalid.read() and self.awready.read()
            w_taken = self.wvalid.read() and self.wready.read()
            response = self.bresp.read() if self.bvalid.read() else None
            await clock.next()
            if aw_taken:
                self.awvalid.write(0)
            if w_taken:
                self.wvalid.write(0)
            if response is not None:
                self.bready.write(0)
                self.writes += 1
                return response
        raise AssertionError(f"cycle {clock.cycle}: no write response for {address:#05x}")

    async def read_word(
        self, clock: CycleClock | LoopClock, address: int, limit: int
    ) -> tuple[int, int]:
        """Read one word; returns ``(RDATA, RRESP)``."""
        self.araddr.write(address)
        self.arvalid.write(1)
        self.rready.write(1)
        for _ in range(limit):
            await clock.sample()
            ar_taken = self.arvalid.read() and self.arready.read()
            response = None
            if self.rvalid.read():
                response = (self.rdata.read(), self.rresp.read())
            await clock.next()
            if ar_taken:
                self.arvalid.write(0)
            if response is not None:
                self.rready.write(0)
                self.reads += 1
                return response
        raise AssertionError(f"cycle {clock.cycle}: no read response for {address:#05x}")

    async def write(self, clock: CycleClock | LoopClock, name: str, value: int, limit: int) -> None:
        """Write register ``name`` whole (low word first); SLVERR raises :class:`SlaveError`."""
        reg = self.regmap.get(name)
        for word, address in enumerate(reg.word_addresses):
            data = (value >> (DATA_BITS * word)) & ((1 << DATA_BITS) - 1)
            if await self.write_word(clock, address, data, limit):
                raise SlaveError(f"write of {name} word {word}: SLVERR")

    async def read(self, clock: CycleClock | LoopClock, name: str, limit: int) -> int:
        """Read register ``name`` whole (low word first); SLVERR raises :class:`SlaveError`."""
        reg = self.regmap.get(name)
        value = 0
        for word, address in enumerate(reg.word_addresses):
            data, response = await self.read_word(clock, address, limit)
            if response:
                raise SlaveError(f"read of {name} word {word}: SLVERR")
            value |= data << (DATA_BITS * word)
        return value


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
    """The GTSU's request level ``want_draft`` (in) and its status outputs (as
    :class:`~ahasd.hw.tb.pins.Pin` s; ``want_draft`` is written only when it changes, so
    drive it through :meth:`request_draft` alone)."""

    def __init__(self, dut: Any) -> None:
        self.want_draft = Pin(dut.want_draft)
        self.want_preverify_ = Pin(dut.want_preverify)
        self.task_ = Pin(dut.gtsu_task)
        self.ready_ = Pin(dut.gtsu_ready)
        self.gating = Pin(dut.gtsu_gating)
        self.dlm_enable = Pin(dut.gtsu_dlm_enable)
        self.tlm_enable = Pin(dut.gtsu_tlm_enable)
        self._level: int | None = None

    def request_draft(self, level: bool | int) -> None:
        level = int(level)
        if level != self._level:
            self.want_draft.write(level)
            self._level = level

    def task(self) -> int:
        return self.task_.read()

    def ready(self) -> bool:
        return bool(self.ready_.read())

    def want_preverify(self) -> bool:
        return bool(self.want_preverify_.read())

    def outputs(self) -> dict[str, int]:
        """``task``, ``ready``, ``gating``, ``dlm_enable``, ``tlm_enable`` (as the golden
        GTSU's ``outputs()`` names them)."""
        return dict(zip(GTSU_OUTPUTS, self.levels(), strict=True))

    def levels(self) -> tuple[int, int, int, int, int]:
        """The outputs of :meth:`outputs` as a tuple, in :data:`GTSU_OUTPUTS` order."""
        return (
            self.task_.read(),
            self.ready_.read(),
            self.gating.read(),
            self.dlm_enable.read(),
            self.tlm_enable.read(),
        )


class QueuePorts:
    """The three queues' ports: writers and readers, the draft reader's epoch and squash
    flag, and the level outputs (``draft``: PIM writes, NPU reads; ``feedback``: NPU
    writes, PIM reads; ``preverify``: CPU writes, PIM reads). The reader's epoch is written
    only when it changes (drive it through :meth:`set_reader_epoch` alone)."""

    def __init__(self, dut: Any) -> None:
        self.draft_w = StreamPort(dut, "draft_w")
        self.draft_r = StreamPort(dut, "draft_r")
        self.feedback_w = StreamPort(dut, "feedback_w")
        self.feedback_r = StreamPort(dut, "feedback_r")
        self.preverify_w = StreamPort(dut, "preverify_w")
        self.preverify_r = StreamPort(dut, "preverify_r")
        self.draft_r_epoch = Pin(dut.draft_r_epoch)
        self.draft_r_squashed = Pin(dut.draft_r_squashed)
        self.levels = {
            "draft_w": Pin(dut.draft_w_level),
            "draft_r": Pin(dut.draft_r_level),
            "feedback_r": Pin(dut.feedback_r_level),
            "preverify_r": Pin(dut.preverify_r_level),
        }
        self._epoch: int | None = None

    @property
    def writers(self) -> tuple[StreamPort, ...]:
        return (self.draft_w, self.feedback_w, self.preverify_w)

    @property
    def readers(self) -> tuple[StreamPort, ...]:
        return (self.draft_r, self.feedback_r, self.preverify_r)

    def set_reader_epoch(self, epoch: int) -> None:
        if epoch != self._epoch:
            self.draft_r_epoch.write(epoch)
            self._epoch = epoch

    def squashed(self) -> bool:
        """The draft reader drops a stale entry at the coming edge."""
        return bool(self.draft_r_squashed.read())

    def level(self, port: str) -> int:
        """The level output beside ``port`` (``draft_w``, ``draft_r``, ``feedback_r``,
        ``preverify_r``)."""
        return self.levels[port].read()


class ControllerTopDriver:
    """Every driver of the controller top, and its clocks and reset.

    Parameters
    ----------
    dut : the cocotb handle of the top module.
    params : the TopParams the top was built with.

    Attributes
    ----------
    bus : RegisterPort; edc : EDCPorts; tvc : TVCPorts; gtsu : GTSUPorts; queues : QueuePorts
    """

    def __init__(self, dut: Any, params: TopParams) -> None:
        self.dut = dut
        self.params = params
        self.bus = RegisterPort(dut, register_map(params))
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


@dataclass(slots=True)
class PimCycle:
    """What the ``pim`` side of the top does at the coming edge (sampled in ``ReadOnly``).

    Transfers are payload bits, ``None`` when nothing moves. The register accesses are
    rebuilt from the AXI4-Lite port (:class:`RegisterAccesses`): a read is known at the
    edge that takes it, a write and a read's data one cycle later, from the response the
    bridge raises after that edge. Not frozen: a frozen dataclass's constructor costs a few
    microseconds more, once per cycle.
    """

    read: int | None  # the word address of a read the register file takes at the coming edge
    read_answer: tuple[int, int] | None  # (RDATA, RRESP) of the read taken at the last edge
    write: tuple[int, int, int, int] | None  # (word address, WDATA, WSTRB, BRESP) of the
    # write taken at the last edge
    irq: bool
    edc_ready: bool
    edc_event: int | None
    edc_decision: int | None
    tvc_ready: bool
    tvc_command: int | None
    tvc_answer: int | None
    draft_written: int | None
    feedback_read: int | None
    preverify_read: int | None
    gtsu: tuple[int, int, int, int, int]  # in GTSU_OUTPUTS order
    want_preverify: bool


@dataclass(slots=True)
class NpuCycle:
    """What the ``npu`` side of the top does at the coming edge."""

    draft_read: int | None
    squashed: bool
    feedback_written: int | None


@dataclass(slots=True)
class CpuCycle:
    """What the ``cpu`` side of the top does at the coming edge."""

    preverify_written: int | None


class RegisterAccesses:
    """The register accesses of the top, rebuilt from its AXI4-Lite port alone.

    The bridge's state shows at the port (``docs/integration.md``, :mod:`ahasd.hw.axi_lite`):
    ``AWREADY``, ``WREADY`` and ``ARREADY`` are low while the bridge holds a write address,
    a write beat or a read address, and ``BVALID``/``RVALID`` rise in the cycle after the
    edge at which the register file takes the access. This follows the bridge's choice of
    access (a complete write whose B channel is free, a read whose R channel is free,
    alternating when both are) and the register file's decode cycle (an access is taken
    once it has been presented for a cycle in the same direction; a read then at once, a
    write when the block behind an ``external`` register is ready, which the port does not
    show). So a read is known at the edge that takes it, 2 cycles after its AR handshake with
    nothing waiting; a write at the response that follows it. Every response is matched
    with an access: an R response that no read predicted, or a B response with no write
    presented and decoded, raises ``AssertionError``.

    Call :meth:`sample` once per ``pim`` cycle in ``ReadOnly``, from the first cycle after
    the reset on (the bridge holds nothing then).
    """

    def __init__(self, bus: RegisterPort) -> None:
        self.bus = bus
        self.cycle = 0
        self._aw_word = self._ar_word = 0
        self._w_beat = (0, 0)  # (WDATA, WSTRB) the bridge holds
        self._prefer_write = False  # the last access taken was a read
        self._presented = self._presented_write = False  # the register file's decode state
        # The last cycle's access as the bridge presented it.
        self._valid = self._write = self._read_taken = self._write_decoded = False
        self._bvalid = self._rvalid = False

    def sample(self) -> tuple[int | None, tuple[int, int] | None, tuple | None]:
        """``(read, read_answer, write)`` of :class:`PimCycle` for this cycle."""
        bus = self.bus
        bvalid, rvalid = bool(bus.bvalid.read()), bool(bus.rvalid.read())
        read_answer = write = None
        write_taken = bvalid and not self._bvalid
        read_taken = rvalid and not self._rvalid
        if read_taken != self._read_taken:
            raise AssertionError(
                f"pim cycle {self.cycle}: "
                + ("an R response with no read taken" if read_taken else "a read without R")
            )
        if write_taken and not self._write_decoded:
            raise AssertionError(f"pim cycle {self.cycle}: a B response with no write presented")
        if read_taken:
            read_answer = (bus.rdata.read(), bus.rresp.read())
        if write_taken:
            write = (self._aw_word, *self._w_beat, bus.bresp.read())
        taken = read_taken or write_taken
        if taken:
            self._prefer_write = read_taken
        self._presented = self._valid and not taken
        self._presented_write = self._write

        # What the bridge holds now (captured at an earlier edge), and what it presents.
        aw_held, w_held = not bus.awready.read(), not bus.wready.read()
        ar_held = not bus.arready.read()
        write_ready = aw_held and w_held and not bvalid
        read_ready = ar_held and not rvalid
        self._write = write_ready and (not read_ready or self._prefer_write)
        self._valid = write_ready or read_ready
        decoded = self._valid and self._presented and self._write == self._presented_write
        self._read_taken = decoded and not self._write
        self._write_decoded = decoded and self._write
        read = self._ar_word if self._read_taken else None

        # Handshakes at the coming edge: the bridge holds them from the next cycle on.
        if bus.awvalid.read() and not aw_held:
            self._aw_word = bus.awaddr.read() >> WORD_SHIFT
        if bus.wvalid.read() and not w_held:
            self._w_beat = (bus.wdata.read(), bus.wstrb.read())
        if bus.arvalid.read() and not ar_held:
            self._ar_word = bus.araddr.read() >> WORD_SHIFT
        self._bvalid, self._rvalid = bvalid, rvalid
        self.cycle += 1
        return read, read_answer, write


class ControllerTopMonitor:
    """Samples every port of one clock domain of the top in ``ReadOnly``; the register
    accesses rebuilt from the AXI4-Lite port (:class:`RegisterAccesses`)."""

    def __init__(self, driver: ControllerTopDriver) -> None:
        self.driver = driver
        self.accesses = RegisterAccesses(driver.bus)

    def pim(self) -> PimCycle:
        d = self.driver
        edc, tvc, queues = d.edc, d.tvc, d.queues
        return PimCycle(
            *self.accesses.sample(),
            d.bus.irq(),
            edc.event.is_ready(),
            edc.event.transfer(),
            edc.decision.transfer(),
            tvc.command.is_ready(),
            tvc.command.transfer(),
            tvc.answer.transfer(),
            queues.draft_w.transfer(),
            queues.feedback_r.transfer(),
            queues.preverify_r.transfer(),
            d.gtsu.levels(),
            d.gtsu.want_preverify(),
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
