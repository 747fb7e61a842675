"""AXI4-Lite subordinate port: a CPU's bus into a register file (``docs/integration.md``).

:class:`AXI4LiteSubordinate` takes AXI4-Lite transactions on its ``axi`` port and runs them,
one at a time, as *register accesses* on its ``access`` port, which a register file answers
(``ahasd.hw.registers``). It holds one write address, one write data beat and one read
address at a time, so the manager may present AW and W in any order or together, and reads
interleave with writes; back-pressure on any channel (a ``READY`` held low, a register file
that waits) only delays. ``BVALID``/``RVALID`` and their payloads are registers, held until
``BREADY``/``RREADY``.

The register access (:func:`register_access_signature`, seen from the bridge): the bridge
presents ``valid`` with ``write``, the word address ``addr``, ``wdata`` and ``wstrb``; the
register file answers in the same cycle with ``ready`` (the access is taken at the edge that
ends a cycle where both are high), ``rdata`` (a read's data, from the registers' values
during that cycle) and ``error`` (the access is refused: ``SLVERR``, and the register file
changes nothing). Everything the access does happens at that edge.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "AXI4LiteSubordinate",
    "Resp",
    "axi4_lite_signature",
    "register_access_signature",
]


class Resp(enum.Enum, shape=2):
    """``BRESP``/``RRESP`` codes (AXI4-Lite uses OKAY and SLVERR; the others for decoding)."""

    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


def _check_widths(addr_bits: object, data_bits: object) -> None:
    if isinstance(addr_bits, bool) or not isinstance(addr_bits, int):
        raise TypeError(f"addr_bits must be an integer, not {addr_bits!r}")
    if data_bits not in (32, 64):
        raise ValueError(f"data_bits must be 32 or 64 (AXI4-Lite), not {data_bits!r}")
    low = (data_bits // 8).bit_length()  # at least one word address bit
    if not low <= addr_bits <= 32:
        raise ValueError(f"addr_bits must be between {low} and 32, not {addr_bits!r}")


def axi4_lite_signature(addr_bits: int, data_bits: int = 32) -> wiring.Signature:
    """AXI4-Lite as the manager sees it (a subordinate's port is ``In`` of this).

    Channels AW (``awaddr``, ``awprot``), W (``wdata``, ``wstrb``), B (``bresp``), AR
    (``araddr``, ``arprot``), R (``rdata``, ``rresp``), each with ``*valid``/``*ready``.
    """
    _check_widths(addr_bits, data_bits)
    return wiring.Signature(
        {
            "awvalid": Out(1),
            "awready": In(1),
            "awaddr": Out(addr_bits),
            "awprot": Out(3),
            "wvalid": Out(1),
            "wready": In(1),
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "bvalid": In(1),
            "bready": Out(1),
            "bresp": In(Resp),
            "arvalid": Out(1),
            "arready": In(1),
            "araddr": Out(addr_bits),
            "arprot": Out(3),
            "rvalid": In(1),
            "rready": Out(1),
            "rdata": In(data_bits),
            "rresp": In(Resp),
        }
    )


def register_access_signature(word_bits: int, data_bits: int = 32) -> wiring.Signature:
    """One register access, as the bridge (the initiator) sees it (module docstring)."""
    if isinstance(word_bits, bool) or not isinstance(word_bits, int) or word_bits < 1:
        raise ValueError(f"word_bits must be a positive integer, not {word_bits!r}")
    return wiring.Signature(
        {
            "valid": Out(1),
            "ready": In(1),
            "write": Out(1),
            "addr": Out(word_bits),
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "rdata": In(data_bits),
            "error": In(1),
        }
    )


class AXI4LiteSubordinate(wiring.Component):
    """AXI4-Lite subordinate that runs each transaction as one register access.

    Parameters
    ----------
    addr_bits : int
        Width of ``AWADDR``/``ARADDR`` (byte addresses).
    data_bits : int
        32 or 64.

    Members
    -------
    axi : In(axi4_lite_signature(addr_bits, data_bits))
        The subordinate port. ``AWPROT``/``ARPROT`` are accepted and ignored (the registers
        have one protection level). The address's low ``log2(data_bits / 8)`` bits are
        ignored: an access covers the whole word, ``WSTRB`` says which bytes a write
        changes.
    access : Out(register_access_signature(addr_bits - log2(data_bits / 8), data_bits))
        The register access (module docstring).

    Latency: a read's ``RVALID`` rises 2 cycles after its AR handshake; a write's ``BVALID``
    2 cycles after the later of its AW and W handshakes, with a register file that takes an
    access in the cycle it is presented; one more per cycle the register file holds
    ``ready`` low (the controller's :class:`~ahasd.hw.registers.RegisterFile` decodes for
    one cycle: 3 in the controller top, ``docs/integration.md``); more when the register
    file waits
    or the other direction's access goes first. Throughput: one write and one read every 2
    cycles each, alternating when both are pending. Back-pressure: ``AWREADY`` is low while
    a write address is held, ``WREADY`` while a write beat is held, ``ARREADY`` while a read
    address is held; a held write waits for the B channel to be free, a held read for the R
    channel; a response is held until taken.
    """

    def __init__(self, *, addr_bits: int, data_bits: int = 32):
        try:
            _check_widths(addr_bits, data_bits)
        except (TypeError, ValueError):
            self._MustUse__silence = True
            raise
        self.addr_bits = addr_bits
        self.data_bits = data_bits
        self.byte_bits = (data_bits // 8).bit_length() - 1
        super().__init__(
            {
                "axi": In(axi4_lite_signature(addr_bits, data_bits)),
                "access": Out(register_access_signature(addr_bits - self.byte_bits, data_bits)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        axi, access = self.axi, self.access
        word_bits = self.addr_bits - self.byte_bits

        # The held halves of a transaction: a write address, a write beat, a read address.
        aw_held = Signal()
        aw_word = Signal(word_bits)
        w_held = Signal()
        w_data = Signal(self.data_bits)
        w_strb = Signal(self.data_bits // 8)
        ar_held = Signal()
        ar_word = Signal(word_bits)
        # Responses, registered and held until taken.
        bvalid = Signal()
        bresp = Signal(Resp)
        rvalid = Signal()
        rdata = Signal(self.data_bits)
        rresp = Signal(Resp)
        prefer_write = Signal()  # the last access taken was a read

        m.d.comb += [
            axi.awready.eq(~aw_held),
            axi.wready.eq(~w_held),
            axi.arready.eq(~ar_held),
            axi.bvalid.eq(bvalid),
            axi.bresp.eq(bresp),
            axi.rvalid.eq(rvalid),
            axi.rdata.eq(rdata),
            axi.rresp.eq(rresp),
        ]
        with m.If(axi.awvalid & ~aw_held):
            m.d.sync += [aw_held.eq(1), aw_word.eq(axi.awaddr[self.byte_bits :])]
        with m.If(axi.wvalid & ~w_held):
            m.d.sync += [w_held.eq(1), w_data.eq(axi.wdata), w_strb.eq(axi.wstrb)]
        with m.If(axi.arvalid & ~ar_held):
            m.d.sync += [ar_held.eq(1), ar_word.eq(axi.araddr[self.byte_bits :])]
        with m.If(axi.bready):
            m.d.sync += bvalid.eq(0)
        with m.If(axi.rready):
            m.d.sync += rvalid.eq(0)

        # One access at a time: a complete write whose B channel is free, or a read whose R
        # channel is free; alternate when both are ready.
        write_ready = aw_held & w_held & ~bvalid
        read_ready = ar_held & ~rvalid
        pick_write = Signal()
        m.d.comb += [
            pick_write.eq(write_ready & (~read_ready | prefer_write)),
            access.valid.eq(write_ready | read_ready),
            access.write.eq(pick_write),
            access.addr.eq(Mux(pick_write, aw_word, ar_word)),
            access.wdata.eq(w_data),
            access.wstrb.eq(w_strb),
        ]
        response = Mux(access.error, Resp.SLVERR, Resp.OKAY)
        with m.If(access.valid & access.ready):
            m.d.sync += prefer_write.eq(~pick_write)
            with m.If(pick_write):
                m.d.sync += [aw_held.eq(0), w_held.eq(0), bvalid.eq(1), bresp.eq(response)]
            with m.Else():
                m.d.sync += [ar_held.eq(0), rvalid.eq(1), rresp.eq(response)]
                m.d.sync += rdata.eq(Mux(access.error, 0, access.rdata))
        return m
