"""AXI4-Lite subordinate, Amaranth-simulator tier: directed cases on the bridge in front of a
16-word register file (``target.py``): AW before W, W before AW and together, back-pressure on
every channel the manager drives the ready of, a register file that waits, SLVERR, WSTRB, the
documented latencies, and the rejected parameters."""

from __future__ import annotations

import pytest
from axi_lite.target import READ_ONLY_BASE, AxiTarget
from harness.amaranth_sim import simulate

from ahasd.hw.axi_lite import AXI4LiteSubordinate, Resp, register_access_signature

OKAY, SLVERR = Resp.OKAY, Resp.SLVERR
PATIENCE = 50


class Manager:
    def __init__(self, ctx, dut):
        self.ctx, self.axi, self.dut = ctx, dut.axi, dut

    async def tick(self, n: int = 1):
        await self.ctx.tick().repeat(n)

    async def aw(self, address: int) -> int:
        """Present AW until taken; the cycle count it took."""
        return await self._offer(self.axi.awvalid, self.axi.awready, awaddr=address)

    async def w(self, data: int, strobe: int = 0xF) -> int:
        return await self._offer(self.axi.wvalid, self.axi.wready, wdata=data, wstrb=strobe)

    async def ar(self, address: int) -> int:
        return await self._offer(self.axi.arvalid, self.axi.arready, araddr=address)

    async def _offer(self, valid, ready, **payload) -> int:
        ctx = self.ctx
        for name, value in payload.items():
            ctx.set(getattr(self.axi, name), value)
        ctx.set(valid, 1)
        for waited in range(PATIENCE):
            taken = ctx.get(ready)
            await self.tick()
            if taken:
                ctx.set(valid, 0)
                return waited
        raise AssertionError("never taken")

    async def b(self, delay: int = 0) -> tuple[Resp, int]:
        """Wait for BVALID (cycles counted from now), keep BREADY low ``delay`` cycles while
        BVALID is up (its payload must hold), then take it."""
        return await self._take(self.axi.bvalid, self.axi.bready, self.axi.bresp, delay)

    async def r(self, delay: int = 0) -> tuple[tuple[int, Resp], int]:
        payload = (self.axi.rdata, self.axi.rresp)
        return await self._take(self.axi.rvalid, self.axi.rready, payload, delay)

    async def _take(self, valid, ready, payload, delay):
        ctx = self.ctx

        def sample():
            if isinstance(payload, tuple):
                return tuple(ctx.get(p) for p in payload)
            return ctx.get(payload)

        waited = 0
        while not ctx.get(valid):
            await self.tick()
            waited += 1
            assert waited < PATIENCE, "no response"
        first = sample()
        for _ in range(delay):
            await self.tick()
            assert ctx.get(valid) == 1, "VALID dropped before READY"
            assert sample() == first, "payload changed before READY"
        ctx.set(ready, 1)
        await self.tick()
        ctx.set(ready, 0)
        return first, waited

    async def write(self, address, data, strobe=0xF) -> Resp:
        await self.aw(address)
        await self.w(data, strobe)
        return (await self.b())[0]

    async def read(self, address) -> tuple[int, Resp]:
        await self.ar(address)
        return (await self.r())[0]


def run(body, name):
    dut = AxiTarget()
    done = []

    async def testbench(ctx):
        await body(Manager(ctx, dut))
        done.append(True)

    simulate(dut, testbench, name=name)
    assert done


def test_aw_and_w_in_any_order():
    async def body(m):
        # AW first, W three cycles later.
        await m.aw(0x04)
        await m.tick(3)
        assert m.ctx.get(m.axi.bvalid) == 0  # no response before both halves
        await m.w(0x1111_1111)
        assert (await m.b())[0] == OKAY
        # W first, AW later.
        await m.w(0x2222_2222)
        await m.tick(2)
        assert m.ctx.get(m.axi.bvalid) == 0
        await m.aw(0x08)
        assert (await m.b())[0] == OKAY
        # Together.
        m.ctx.set(m.axi.awaddr, 0x0C)
        m.ctx.set(m.axi.wdata, 0x3333_3333)
        m.ctx.set(m.axi.wstrb, 0xF)
        m.ctx.set(m.axi.awvalid, 1)
        m.ctx.set(m.axi.wvalid, 1)
        assert m.ctx.get(m.axi.awready) == 1
        assert m.ctx.get(m.axi.wready) == 1
        await m.tick()
        m.ctx.set(m.axi.awvalid, 0)
        m.ctx.set(m.axi.wvalid, 0)
        (resp, waited) = await m.b()
        # BVALID 2 cycles after the handshake edge: waited counts from the cycle after it.
        assert (resp, waited) == (OKAY, 1)
        for address, value in ((0x04, 0x1111_1111), (0x08, 0x2222_2222), (0x0C, 0x3333_3333)):
            assert await m.read(address) == (value, OKAY)

    run(body, "axi_orders")


def test_read_latency_and_held_responses():
    async def body(m):
        await m.write(0x10, 0xCAFE_F00D)
        await m.ar(0x10)
        (data, resp), waited = await m.r(delay=5)  # RREADY low 5 cycles: RDATA holds
        assert (data, resp, waited) == (0xCAFE_F00D, OKAY, 1)
        await m.aw(0x14)
        await m.w(7)
        resp, _ = await m.b(delay=4)
        assert resp == OKAY
        # While a response waits for BREADY, the next write's halves are taken and held
        # (AWREADY/WREADY low) until the B channel is free.
        await m.aw(0x18)
        await m.w(8)
        await m.tick(3)  # BVALID of 0x18 is up, BREADY low
        assert m.ctx.get(m.axi.bvalid) == 1
        await m.aw(0x1C)
        await m.w(9)
        await m.tick(3)
        assert (m.ctx.get(m.axi.awready), m.ctx.get(m.axi.wready)) == (0, 0)
        assert (await m.b())[0] == OKAY  # 0x18's
        assert (await m.b())[0] == OKAY  # then 0x1C's
        assert await m.read(0x18) == (8, OKAY)
        assert await m.read(0x1C) == (9, OKAY)

    run(body, "axi_held")


def test_slverr_changes_nothing_and_strobes_select_bytes():
    async def body(m):
        assert await m.write(0x00, 0xAABB_CCDD) == OKAY
        assert await m.write(0x00, 0x1122_3344, 0b0101) == OKAY
        assert await m.read(0x00) == (0xAA22_CC44, OKAY)
        # Read-only word: reads, refuses a write; unmapped: refuses both (data 0).
        assert await m.read(0x30) == (READ_ONLY_BASE + 12, OKAY)
        assert await m.write(0x30, 1) == SLVERR
        assert await m.read(0x30) == (READ_ONLY_BASE + 12, OKAY)
        assert await m.read(0x40) == (0, SLVERR)
        assert await m.write(0xFC, 1) == SLVERR
        # The low address bits are ignored: 0x03 is word 0.
        assert await m.read(0x03) == (0xAA22_CC44, OKAY)

    run(body, "axi_slverr")


def test_a_waiting_register_file_delays_the_response_only():
    async def body(m):
        m.ctx.set(m.dut.stall, 1)
        await m.aw(0x20)
        await m.w(0x55)
        await m.tick(6)
        assert m.ctx.get(m.axi.bvalid) == 0
        # A read goes by the held write (the write waits for the register file).
        await m.ar(0x20)
        (data, resp), _ = await m.r()
        assert (data, resp) == (0, OKAY)
        m.ctx.set(m.dut.stall, 0)
        assert (await m.b())[0] == OKAY
        assert await m.read(0x20) == (0x55, OKAY)

    run(body, "axi_stall")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"addr_bits": "8"}, TypeError, "addr_bits must be an integer, not '8'"),
        ({"addr_bits": 8, "data_bits": 16}, ValueError,
         "data_bits must be 32 or 64 (AXI4-Lite), not 16"),
        ({"addr_bits": 2}, ValueError, "addr_bits must be between 3 and 32, not 2"),
        ({"addr_bits": 33}, ValueError, "addr_bits must be between 3 and 32, not 33"),
    ],
)  # fmt: skip
def test_rejects_bad_parameters(kwargs, error, message):
    import re

    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        AXI4LiteSubordinate(**kwargs)


def test_access_signature_rejects_no_address():
    with pytest.raises(ValueError, match=r"^word_bits must be a positive integer, not 0$"):
        register_access_signature(0)
