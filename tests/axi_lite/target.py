"""The device under test of the AXI4-Lite tiers: the bridge in front of a small register file.

:class:`AxiTarget` holds :class:`ahasd.hw.axi_lite.AXI4LiteSubordinate` and answers its
register accesses from 16 words: words 0-11 read/write (``WSTRB`` honoured), words 12-15
read only (word ``i`` reads ``READ_ONLY_BASE + i``; a write is refused), every other word
unmapped (refused). A write waits (access ``ready`` low) while the input ``stall`` is high,
so the tests can hold the bridge's register side off at will.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ahasd.hw.axi_lite import AXI4LiteSubordinate, axi4_lite_signature

ADDR_BITS = 8
WORDS = 16
READ_WRITE = 12
READ_ONLY_BASE = 0x5EED0000


class AxiTarget(wiring.Component):
    """The bridge and a 16-word register file (module docstring).

    Members
    -------
    axi : In(axi4_lite_signature(ADDR_BITS))
    stall : In(1)
        Hold writes off (the register file's ``ready`` low for a write).
    """

    def __init__(self):
        super().__init__({"axi": In(axi4_lite_signature(ADDR_BITS)), "stall": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = AXI4LiteSubordinate(addr_bits=ADDR_BITS)
        wiring.connect(m, wiring.flipped(self.axi), bridge.axi)
        access = bridge.access
        memory = [Signal(32, name=f"word_{i}") for i in range(READ_WRITE)]
        values = Array(
            [*memory, *(Const(READ_ONLY_BASE + i, 32) for i in range(READ_WRITE, WORDS))]
        )
        word = access.addr
        mapped = word < WORDS
        writable = word < READ_WRITE
        mask = Cat(*(bit.replicate(8) for bit in access.wstrb))
        m.d.comb += [
            access.ready.eq(~(access.write & self.stall)),
            access.error.eq(~mapped | (access.write & ~writable)),
            access.rdata.eq(values[word[:4]] & mapped.replicate(32)),
        ]
        with m.If(access.valid & access.ready & access.write & writable):
            for index, stored in enumerate(memory):
                with m.If(word == index):
                    m.d.sync += stored.eq((stored & ~mask) | (access.wdata & mask))
        return m
