"""Stream ports of generated Verilog: payload packing, drive and sample, handshakes.

Streams follow Amaranth's port naming: a stream member ``x`` becomes ``x__valid``,
``x__ready`` and ``x__payload``. Payloads are packed and unpacked through the block's own
``data`` layout (:func:`pack`, :func:`unpack`, :func:`encode`, :func:`decode`), so a field
change is one edit.

Three levels, all following :mod:`ahasd.hw.tb.clocking`'s discipline:

- :class:`StreamPort`: the three signals as :class:`~ahasd.hw.tb.pins.Pin` s, driven and
  sampled by an agent that does all of its domain's work in one loop per cycle (the
  integration testbench);
- :func:`send`, :func:`receive`, :func:`take`: one whole handshake as a coroutine on a
  :class:`~ahasd.hw.tb.clocking.CycleClock`, giving up after a number of cycles (the
  co-simulation, which drives one transaction at a time);
- :class:`StreamSource`, :class:`StreamSink`: free-running drivers with random idle and
  stall cycles (block testbenches), agents of their clock's
  :class:`~ahasd.hw.tb.clocking.DomainLoop`, through :class:`~ahasd.hw.tb.pins.Pin` s.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import ReadOnly

from ahasd.hw.tb.clocking import CycleClock, DomainLoop
from ahasd.hw.tb.pins import Pin, pins

__all__ = [
    "StreamPort",
    "StreamSink",
    "StreamSource",
    "decode",
    "encode",
    "pack",
    "receive",
    "send",
    "take",
    "unpack",
]


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
    """The fields of ``layout`` held in the bits of ``value`` (every field unsigned)."""
    return {name: (value >> offset) & mask for name, offset, mask, _ in _fields(layout)}


def decode(layout: data.StructLayout, value: int) -> dict[str, int]:
    """Like :func:`unpack`, but a field of a signed shape comes out as a signed integer."""
    fields = {}
    for name, offset, mask, sign in _fields(layout):
        field = (value >> offset) & mask
        fields[name] = field - ((field & sign) << 1)
    return fields


def encode(layout: Any, value: Any) -> int:
    """Bits of a nested dict ``value`` in a struct or union ``layout`` (enums by value).

    Fields left out of ``value`` are zero; for a union, give the one member that is meant.
    """
    if isinstance(layout, data.Layout):
        bits = 0
        for name, field_value in value.items():
            offset, shape = _member(layout, name)
            bits |= encode(shape, field_value) << offset
        return bits
    return int(getattr(value, "value", value))


# A layout's fields and members, once per layout object (kept here, so its id stays its
# own): walking an Amaranth layout casts every field's shape, and hashing one hashes every
# field, microseconds per word a testbench packs.
_FIELDS: dict[int, tuple[data.Layout, tuple[tuple[str, int, int, int], ...]]] = {}
_MEMBERS: dict[int, tuple[data.Layout, dict[str, tuple[int, Any]]]] = {}


def _fields(layout: data.StructLayout) -> tuple[tuple[str, int, int, int], ...]:
    """``(name, offset, mask, sign bit or 0)`` of every field of ``layout``."""
    known = _FIELDS.get(id(layout))
    if known is None or known[0] is not layout:
        fields = []
        for name, field in layout:
            sign = 1 << (field.width - 1) if Shape.cast(field.shape).signed else 0
            fields.append((name, field.offset, (1 << field.width) - 1, sign))
        known = _FIELDS[id(layout)] = (layout, tuple(fields))
    return known[1]


def _member(layout: data.Layout, name: str) -> tuple[int, Any]:
    """``(offset, shape)`` of member ``name`` of ``layout``."""
    known = _MEMBERS.get(id(layout))
    if known is None or known[0] is not layout:
        members = {member: (field.offset, field.shape) for member, field in layout}
        known = _MEMBERS[id(layout)] = (layout, members)
    return known[1][name]


class StreamPort:
    """One stream port (``name__valid/ready/payload``) of ``dut``, driven and sampled as
    integers through :class:`~ahasd.hw.tb.pins.Pin` s.

    Drive methods are for the writable phase, the sampling ones (:meth:`transfer`,
    :meth:`is_valid`, :meth:`is_ready`, :meth:`bits`) for ``ReadOnly``. A drive method
    writes a signal only when its value changes (an agent that presents the same payload
    every cycle would pay a simulator write each time), so the port's inputs must be driven
    through these methods alone.

    Attributes
    ----------
    valid, ready, payload : the cocotb handles (for triggers such as ``RisingEdge``).
    """

    def __init__(self, dut: Any, name: str) -> None:
        self.name = name
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self._valid, self._ready, self._payload = (
            Pin(self.valid),
            Pin(self.ready),
            Pin(self.payload),
        )
        # The last value written to valid, ready and payload (None: not written yet).
        self._valid_w: int | None = None
        self._ready_w: int | None = None
        self._payload_w: int | None = None

    # source side
    def present(self, bits: int) -> None:
        """Offer ``bits`` (hold them until :meth:`transfer` sees them taken)."""
        if bits != self._payload_w:
            self._payload.write(bits)
            self._payload_w = bits
        if self._valid_w != 1:
            self._valid.write(1)
            self._valid_w = 1

    def set_payload(self, bits: int) -> None:
        """Put ``bits`` on the payload without offering them (``valid`` as it is)."""
        if bits != self._payload_w:
            self._payload.write(bits)
            self._payload_w = bits

    def withdraw(self) -> None:
        if self._valid_w != 0:
            self._valid.write(0)
            self._valid_w = 0

    def quiet(self) -> None:
        """Nothing offered, payload zero (four-state simulators start every input at X)."""
        self.withdraw()
        self.set_payload(0)

    # sink side
    def accept(self, ready: bool | int) -> None:
        level = int(ready)
        if level != self._ready_w:
            self._ready.write(level)
            self._ready_w = level

    # sampling
    def is_valid(self) -> bool:
        return bool(self._valid.read())

    def is_ready(self) -> bool:
        return bool(self._ready.read())

    def bits(self) -> int:
        """The payload's value."""
        return self._payload.read()

    def transfer(self) -> int | None:
        """The payload moving at the coming rising edge (valid and ready), else ``None``.

        The signals this port drives are taken as written, the others read: a write reaches
        the simulator's pin only at its next evaluation (Verilator applies the writes of a
        callback after it), so a port whose other side is a function of registers alone can
        be sampled right after driving, at the falling edge, without waiting for
        ``ReadOnly``; there both give the same answer.
        """
        valid, ready = self._valid_w, self._ready_w
        if valid == 0 or ready == 0:
            return None
        if valid is None:
            valid = self._valid.read()
        if ready is None:
            ready = self._ready.read()
        if not (valid and ready):
            return None
        return self._payload.read() if self._payload_w is None else self._payload_w


async def send(port: StreamPort, clock: CycleClock, bits: int, limit: int) -> int:
    """Present ``bits`` on ``port`` until taken; returns the cycle of the transfer.

    Starts in a writable phase and ends in the writable phase after the transfer, with
    ``valid`` low again. Raises ``AssertionError`` after ``limit`` cycles without it.
    """
    port.present(bits)
    for _ in range(limit):
        await ReadOnly()
        if port.is_ready():
            accepted = clock.cycle
            await clock.next()
            port.withdraw()
            return accepted
        await clock.next()
    raise AssertionError(f"cycle {clock.cycle}: nothing took {port.name}")


async def receive(port: StreamPort, clock: CycleClock, limit: int) -> tuple[int, int]:
    """Wait until ``port`` is valid (its ``ready`` is the caller's); ``(payload, cycle)``.

    Returns in the read-only phase of that cycle, before its rising edge.
    """
    for _ in range(limit):
        await ReadOnly()
        if port.is_valid():
            return port.bits(), clock.cycle
        await clock.next()
    raise AssertionError(f"cycle {clock.cycle}: no answer on {port.name}")


async def take(port: StreamPort, clock: CycleClock, limit: int) -> int:
    """Raise ``ready`` until one payload is taken, then lower it; returns the payload.

    Ends in the writable phase after the transfer.
    """
    port.accept(1)
    for _ in range(limit):
        await ReadOnly()
        taken = port.transfer()
        await clock.next()
        if taken is not None:
            port.accept(0)
            return taken
    raise AssertionError(f"cycle {clock.cycle}: nothing to take on {port.name}")


class StreamSource:
    """Drives ``{name}__valid/__payload`` from a queue of payload integers.

    An agent of a :class:`~ahasd.hw.tb.clocking.DomainLoop` (``loop``; without one it runs
    in a loop of its own): drives after the falling edge and samples the handshake in
    ``ReadOnly`` of the same time step. ``idle`` is the probability of an idle cycle before
    presenting the next item; once ``valid`` is raised the payload is held until the
    transfer (stream rule). Ports are written only when their value changes.
    """

    def __init__(
        self,
        dut: Any,
        name: str,
        clock: Any,
        rng: random.Random,
        idle: float = 0.0,
        loop: DomainLoop | None = None,
    ):
        self.valid, self.ready, self.payload = pins(
            dut, f"{name}__valid", f"{name}__ready", f"{name}__payload"
        )
        self.rng = rng
        self.idle = idle
        self.items: deque[int] = deque()
        self.sent: list[int] = []
        self.presenting = False
        self.valid.write(0)
        self.valid_level = 0
        if loop is None:
            loop = DomainLoop(clock).start()
        loop.add(self)

    def send(self, payload: int) -> None:
        self.items.append(payload)

    @property
    def done(self) -> bool:
        return not self.items and not self.presenting

    def drive(self) -> None:
        if self.presenting:
            return  # held until taken
        if self.items and self.rng.random() >= self.idle:
            self.payload.write(self.items[0])
            self.presenting = True
        if self.valid_level != self.presenting:
            self.valid_level = int(self.presenting)
            self.valid.write(self.valid_level)

    def sample(self) -> None:
        if self.presenting and self.ready.read():
            self.sent.append(self.items.popleft())
            self.presenting = False


class StreamSink:
    """Drives ``{name}__ready`` high with probability ``1 - stall`` and collects payloads.

    An agent of a :class:`~ahasd.hw.tb.clocking.DomainLoop`, like :class:`StreamSource`.
    """

    def __init__(
        self,
        dut: Any,
        name: str,
        clock: Any,
        rng: random.Random,
        stall: float = 0.0,
        on_item: Callable[[int], None] | None = None,
        loop: DomainLoop | None = None,
    ):
        self.valid, self.ready, self.payload = pins(
            dut, f"{name}__valid", f"{name}__ready", f"{name}__payload"
        )
        self.rng = rng
        self.stall = stall
        self.on_item = on_item
        self.received: list[int] = []
        self.ready.write(0)
        self.ready_level = 0
        if loop is None:
            loop = DomainLoop(clock).start()
        loop.add(self)

    def drive(self) -> None:
        level = int(self.rng.random() >= self.stall)
        if level != self.ready_level:
            self.ready.write(level)
            self.ready_level = level

    def sample(self) -> None:
        if self.ready_level and self.valid.read():
            item = self.payload.read()
            self.received.append(item)
            if self.on_item is not None:
                self.on_item(item)
