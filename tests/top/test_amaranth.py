"""Controller top, Amaranth-simulator tier: the register bus reaches the blocks, reset values
read back, and one EDC event and one TVC ASK go through the top.

Expected values come from the spec and the parameters' documented defaults, worked out by
hand in the comments (never from the golden controller). Clocks: PIM 800 MHz, NPU 1 GHz,
CPU 667 MHz.
"""

from __future__ import annotations

import pytest
from harness.amaranth_sim import simulate

from ahasd.hw.edc import decode_decision, encode_draft
from ahasd.hw.gtsu import Task
from ahasd.hw.top import ControllerTop
from ahasd.hw.tvc import Op, Table
from ahasd.params import EDCParams, TopParams, TVCParams
from ahasd.regmap import register_map

CLOCKS = {"pim": 1.25e-9, "npu": 1.0e-9, "cpu": 1.5e-9}
PATIENCE = 200
REGS = register_map()


def addr(name: str) -> int:
    return REGS.get(name).address


class Bus:
    """The CPU side of the register bus, in the ``pim`` domain."""

    def __init__(self, ctx, dut: ControllerTop):
        self.ctx, self.dut = ctx, dut

    async def tick(self, count: int = 1) -> None:
        await self.ctx.tick("pim").repeat(count)

    async def read(self, address: int | str) -> int:
        ctx, bus = self.ctx, self.dut.bus
        ctx.set(bus.addr, addr(address) if isinstance(address, str) else address)
        ctx.set(bus.re, 1)
        await self.tick()
        ctx.set(bus.re, 0)
        assert ctx.get(bus.rvalid) == 1
        return ctx.get(bus.rdata)

    async def write(self, address: int | str, value: int) -> int:
        """Write; return the cycles the bus held the write off (``ready`` low)."""
        ctx, bus = self.ctx, self.dut.bus
        ctx.set(bus.addr, addr(address) if isinstance(address, str) else address)
        ctx.set(bus.wdata, value)
        ctx.set(bus.we, 1)
        waited = 0
        while not ctx.get(bus.ready):
            await self.tick()
            waited += 1
            assert waited < PATIENCE, "bus write never taken"
        await self.tick()
        ctx.set(bus.we, 0)
        return waited

    async def send(self, port, payload) -> None:
        ctx = self.ctx
        if isinstance(payload, int):  # raw bits (the EDC's encode_* helpers)
            ctx.set(port.payload.as_value(), payload)
        else:
            ctx.set(port.payload, payload)
        ctx.set(port.valid, 1)
        for _ in range(PATIENCE):
            if ctx.get(port.ready):
                break
            await self.tick()
        else:
            raise AssertionError("stream never ready")
        await self.tick()
        ctx.set(port.valid, 0)

    async def receive(self, port) -> int:
        ctx = self.ctx
        ctx.set(port.ready, 1)
        for _ in range(PATIENCE):
            if ctx.get(port.valid):
                value = ctx.get(port.payload)
                await self.tick()
                ctx.set(port.ready, 0)
                return value
            await self.tick()
        raise AssertionError("stream never valid")


def run(body, *, params: TopParams | None = None, name: str = "top") -> None:
    dut = ControllerTop(params or TopParams())
    done = []

    async def testbench(ctx):
        await body(Bus(ctx, dut), dut)
        done.append(True)

    # No deadline: the run ends with the testbench (every wait above is bounded by PATIENCE),
    # and the clocks do not keep a finished simulation going.
    simulate(dut, testbench, clocks=CLOCKS, name=name)
    assert done, "testbench did not finish"


def test_rejects_wrong_params():
    with pytest.raises(TypeError, match=r"^params must be a TopParams, not 3$"):
        ControllerTop(3)
    wide = TopParams(edc=EDCParams(stats_bits=40))
    with pytest.raises(ValueError, match=r"^edc.stats_bits must be at most 32 .*, not 40$"):
        ControllerTop(wide)


def test_reset_values_read_back():
    # From the spec and the parameter defaults, not from the map: Hmax = 10.0 nats in UQ4.12,
    # N_max 8, the low 8 of 16 ranks DLM, t_off 16, t_on 32, GTSU idle and ready.
    expected = {
        "ID": 0x41485344,
        "VERSION": 0x00010000,
        "ERROR": 0,
        "STATUS": 0b000100,
        "EDC_HMAX": 10 * 4096,
        "EDC_LLR": 0,
        "EDC_DRAFTS": 0,
        "TVC_N_MAX": 8,
        "TVC_NCR": 0,
        "TVC_PVCT_3": 0,
        "GTSU_DLM_MASK": 0x00FF,
        "GTSU_TLM_MASK": 0xFF00,
        "GTSU_T_OFF": 16,
        "GTSU_T_ON": 32,
        "GTSU_SWITCHES": 0,
        "DRAFT_QUEUE_LEVEL": 0,
        "SOFT_RESET": 0,  # W1P reads 0
        0x05: 0,  # unmapped
        0xFF: 0,
    }

    async def body(bus, dut):
        await bus.tick(4)
        for name, value in expected.items():
            assert await bus.read(name) == value, name
        # And every register of the map reads its documented reset value.
        for reg in REGS:
            assert await bus.read(reg.address) == (reg.reset if reg.readable else 0), reg.name

    run(body, name="top_reset")


def test_register_writes_reach_the_blocks():
    async def body(bus, dut):
        writes = {
            "EDC_HMAX": 0x1234,
            "TVC_N_MAX": 5,
            "TVC_NVCT_0": 0xDEADBEEF,
            "TVC_PDCT_2": 77,
            "TVC_PVCT_3": 99,
            "GTSU_DLM_MASK": 0x000F,
            "GTSU_TLM_MASK": 0x0F00,
            "GTSU_T_OFF": 3,
            "GTSU_T_ON": 5,
        }
        for name, value in writes.items():
            await bus.write(name, value)
        for name, value in writes.items():
            assert await bus.read(name) == value, name
        # Read-only registers ignore writes; only the low bits of a field are kept.
        await bus.write("EDC_LLR", 5)
        await bus.write("ID", 0)
        assert await bus.read("EDC_LLR") == 0
        assert await bus.read("ID") == 0x41485344
        await bus.write("GTSU_T_OFF", 0xFFFF_F402)  # timer_bits = 10: 0x002
        assert await bus.read("GTSU_T_OFF") == 2
        await bus.write("TVC_N_MAX", 1000)  # n_bits = 8: saturates at 255
        assert await bus.read("TVC_N_MAX") == 255
        # The block sees them: the EDC's Hmax port, the GTSU's masks and timers at a switch.
        bus.ctx.set(dut.want_draft, 1)
        await bus.tick()  # decision cycle
        cycles = 0
        while not bus.ctx.get(dut.gtsu_ready):
            await bus.tick()
            cycles += 1
        assert bus.ctx.get(dut.gtsu_task) == Task.DRAFT
        assert bus.ctx.get(dut.gtsu_dlm_enable) == 0x000F
        assert cycles == 2 + 5  # t_off + t_on
        assert await bus.read("GTSU_LAST_SWITCH") == 7
        assert await bus.read("GTSU_SWITCHES") == 1
        assert await bus.read("GTSU_DLM_ENABLE") == 0x000F
        assert await bus.read("STATUS") == 0b000101  # DRAFT, ready

    run(body, name="top_writes")


def test_soft_reset_clears_sticky_errors_and_restores_reset_values():
    async def body(bus, dut):
        await bus.write("EDC_HMAX", 0)  # a zero Hmax: EDC protocol error, Hmax kept
        await bus.write("GTSU_DLM_MASK", 0x0100)  # overlaps the TLM mask: config error
        await bus.tick(2)
        assert await bus.read("ERROR") == 0b101
        assert await bus.read("EDC_HMAX") == 40960
        await bus.write("GTSU_DLM_MASK", 0x00FF)
        await bus.write("EDC_HMAX", 1000)
        await bus.write("SOFT_RESET", 0b001)  # EDC only
        assert await bus.read("ERROR") == 0b100
        assert await bus.read("EDC_HMAX") == 40960
        await bus.write("SOFT_RESET", 0b100)
        assert await bus.read("ERROR") == 0
        assert await bus.read("SOFT_RESET") == 0

    run(body, name="top_soft_reset")


def test_edc_draft_through_the_top():
    params = EDCParams()

    async def body(bus, dut):
        # S = 3 * L * Hmax / 8 exactly: bucket 3. LEHT = [3, 0, ...], LLR 1, so the index is
        # {avg(LEHT[4..7]) = 0, avg(LEHT[0..3]) = 3 >> 2 = 0, LLR = 1} = 1; PHT resets to 2
        # (weakly continue): keep drafting, counter 2.
        length = 4
        s = 3 * length * 40960 // 8
        await bus.send(dut.edc_event, encode_draft(params, s, length))
        decision = decode_decision(params, (await bus.receive(dut.edc_decision)).as_bits())
        assert decision == {"keep_drafting": 1, "counter": 2, "index": 1, "bucket": 3}
        await bus.tick(2)
        assert await bus.read("EDC_DRAFTS") == 1
        assert await bus.read("EDC_CONTINUES") == 1
        assert await bus.read("EDC_SUPPRESSIONS") == 0
        assert await bus.read("EDC_LLR") == 1
        # Halving Hmax through the bus doubles the bucket: 6.
        await bus.write("EDC_HMAX", 20480)
        await bus.send(dut.edc_event, encode_draft(params, s, length))
        assert (
            decode_decision(params, (await bus.receive(dut.edc_decision)).as_bits())["bucket"] == 6
        )

    run(body, name="top_edc")


def tvc_command(dut, op: Op, **args) -> dict:
    payload = {"op": op}
    if args:
        payload["args"] = {{Op.LEARN: "learn", Op.NPU_START: "npu_start", Op.ASK: "ask"}[op]: args}
    return payload


def test_tvc_ask_through_the_top():
    params = TVCParams()

    async def body(bus, dut):
        # NVCT = 100 cycles per KV token (100 << 8), PDCT 0, PVCT 200 cycles per token.
        for index in range(params.depth):
            await bus.write(f"TVC_NVCT_{index}", 100 << 8)
            await bus.write(f"TVC_PVCT_{index}", 200 << 8)
        # L_kv = 64: C_npu = (4 * 25600 * 64) >> 10 = 6400 cycles.
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.NPU_START, l_kv=64))
        await bus.tick(9)
        # NCR is 10 here (NPU_START taken 10 edges ago); a read shows it.
        assert await bus.read("TVC_NCR") == 10
        # ASK(5) taken now, NCR 11: C_left = 6389, quotient (6389 << 10) // 204800 = 31;
        # n = min(5, N_max 8, 31) = 5.
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.ASK, p=5))
        answer = await bus.receive(dut.tvc_ans)
        assert answer["n"] == 5
        assert answer["c_left"] == 6389
        # While a LEARN runs (into PDCT: LEARN(PDCT, 0 cycles, 1) pushes ratio 0, so C_d1
        # stays 0) a TVC write waits on the bus.
        await bus.send(
            dut.tvc_cmd, tvc_command(dut, Op.LEARN, table=Table.PDCT, cycles=0, length=1)
        )
        waited = await bus.write("TVC_N_MAX", 3)
        assert waited > 0
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.ASK, p=20))
        assert (await bus.receive(dut.tvc_ans))["n"] == 3  # min(20, N_max 3, 31)
        assert await bus.read("STATUS") & 0b110000 == 0b100000  # NPU busy, TVC idle

    run(body, name="top_tvc")


def test_tvc_learn_lands_in_the_table_read_through_the_bus():
    async def body(bus, dut):
        # LEARN(PDCT, 1000 cycles, 10 tokens): ratio (1000 << 8) // 10 = 25600.
        await bus.send(
            dut.tvc_cmd, tvc_command(dut, Op.LEARN, table=Table.PDCT, cycles=1000, length=10)
        )
        await bus.tick(40)
        assert await bus.read("TVC_PDCT_0") == 25600
        assert await bus.read("TVC_PDCT_1") == 0
        await bus.send(
            dut.tvc_cmd, tvc_command(dut, Op.LEARN, table=Table.PDCT, cycles=5, length=0)
        )
        await bus.tick(4)
        assert await bus.read("ERROR") == 0b010

    run(body, name="top_learn")


def test_preverify_order_switches_the_gtsu():
    async def body(bus, dut):
        ctx = bus.ctx
        await bus.write("GTSU_T_OFF", 2)
        await bus.write("GTSU_T_ON", 3)
        # The CPU posts an order into the pre-verification queue (cpu domain).
        ctx.set(dut.preverify_w.payload, {"batch_id": 7, "n_tokens": 4})
        ctx.set(dut.preverify_w.valid, 1)
        await ctx.tick("cpu")
        ctx.set(dut.preverify_w.valid, 0)
        for _ in range(20):
            if ctx.get(dut.want_preverify):
                break
            await bus.tick()
        assert ctx.get(dut.want_preverify) == 1
        assert await bus.read("PREVERIFY_QUEUE_LEVEL") == 1
        for _ in range(2 + 3 + 2):
            await bus.tick()
        assert ctx.get(dut.gtsu_task) == Task.PREVERIFY
        assert ctx.get(dut.gtsu_ready) == 1
        assert ctx.get(dut.gtsu_tlm_enable) == 0xFF00
        entry = await bus.receive(dut.preverify_r)
        assert (entry["batch_id"], entry["n_tokens"]) == (7, 4)
        await bus.tick(2)
        assert ctx.get(dut.want_preverify) == 0

    run(body, name="top_preverify")
