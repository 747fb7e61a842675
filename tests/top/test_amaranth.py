"""Controller top, Amaranth-simulator tier: the AXI4-Lite port reaches the blocks, reset
values read back, the wide-register rule, the interrupt, and one EDC event and one TVC ASK
go through the top.

Expected values come from the spec and the parameters' documented defaults, worked out by
hand in the comments (never from the golden controller). Clocks: PIM 800 MHz, NPU 1 GHz,
CPU 667 MHz.
"""

from __future__ import annotations

import itertools

import pytest
from harness.amaranth_sim import simulate
from harness.planted import cases

from ahasd.hw.axi_lite import Resp
from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
from ahasd.hw.gtsu import Task
from ahasd.hw.registers import RegisterFile
from ahasd.hw.top import ControllerTop
from ahasd.hw.tvc import Op, Table
from ahasd.params import EDCParams, GTSUParams, TopParams, TVCParams
from ahasd.regmap import register_map

CLOCKS = {"pim": 1.25e-9, "npu": 1.0e-9, "cpu": 1.5e-9}
PATIENCE = 200
REGS = register_map()
OKAY, SLVERR = Resp.OKAY.value, Resp.SLVERR.value


def addr(name: str) -> int:
    return REGS.get(name).address


class Bus:
    """An AXI4-Lite manager on the top's ``s_axi`` port, in the ``pim`` domain."""

    def __init__(self, ctx, dut: ControllerTop):
        self.ctx, self.dut = ctx, dut

    async def tick(self, count: int = 1) -> None:
        await self.ctx.tick("pim").repeat(count)

    async def _handshake(self, valid, ready) -> int:
        """Hold ``valid`` until ``ready``; the cycles it waited."""
        ctx = self.ctx
        ctx.set(valid, 1)
        for waited in range(PATIENCE):
            if ctx.get(ready):
                await self.tick()
                ctx.set(valid, 0)
                return waited
            await self.tick()
        raise AssertionError("AXI handshake never completed")

    async def _response(self, valid, ready) -> int:
        ctx = self.ctx
        ctx.set(ready, 1)
        for waited in range(PATIENCE):
            if ctx.get(valid):
                return waited
            await self.tick()
        raise AssertionError("AXI response never came")

    async def read_word(self, address: int) -> tuple[int, int]:
        """``(rdata, rresp)`` of a read of the word at ``address``."""
        ctx, axi = self.ctx, self.dut.s_axi
        ctx.set(axi.araddr, address)
        await self._handshake(axi.arvalid, axi.arready)
        await self._response(axi.rvalid, axi.rready)
        data, resp = ctx.get(axi.rdata), ctx.get(axi.rresp).value
        await self.tick()
        ctx.set(axi.rready, 0)
        return data, resp

    async def write_word(self, address: int, value: int, strobe: int = 0xF) -> tuple[int, int]:
        """AW and W together; ``(bresp, cycles until BVALID after the handshakes)``."""
        ctx, axi = self.ctx, self.dut.s_axi
        ctx.set(axi.awaddr, address)
        ctx.set(axi.wdata, value)
        ctx.set(axi.wstrb, strobe)
        ctx.set(axi.awvalid, 1)
        ctx.set(axi.wvalid, 1)
        for _ in range(PATIENCE):
            aw, w = ctx.get(axi.awready), ctx.get(axi.wready)
            await self.tick()
            if aw:
                ctx.set(axi.awvalid, 0)
            if w:
                ctx.set(axi.wvalid, 0)
            if not ctx.get(axi.awvalid) and not ctx.get(axi.wvalid):
                break
        else:
            raise AssertionError("AW/W never taken")
        waited = await self._response(axi.bvalid, axi.bready)
        resp = ctx.get(axi.bresp).value
        await self.tick()
        ctx.set(axi.bready, 0)
        return resp, waited

    async def read(self, name: str) -> int:
        """The whole register (a 64-bit one: low word, then high word)."""
        reg = REGS.get(name)
        value = 0
        for word, address in enumerate(reg.word_addresses):
            data, resp = await self.read_word(address)
            assert resp == OKAY, name
            value |= data << (32 * word)
        return value

    async def write(self, name: str, value: int) -> int:
        """The whole register (low word first); the cycles the last word waited for B."""
        reg = REGS.get(name)
        waited = 0
        for word, address in enumerate(reg.word_addresses):
            resp, waited = await self.write_word(address, (value >> (32 * word)) & 0xFFFF_FFFF)
            assert resp == OKAY, name
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
    with pytest.raises(
        ValueError, match=r"^edc.stats_bits must be at most 32 to fit its 32-bit register, not 40$"
    ):
        ControllerTop(wide)
    many = TopParams(gtsu=GTSUParams(ranks=40))
    with pytest.raises(ValueError, match=r"^gtsu.ranks must be at most 32 .*, not 40$"):
        ControllerTop(many)


def test_reset_values_read_back():
    # From the spec and the parameter defaults, not from the map: Hmax = 10.0 nats in UQ4.12,
    # N_max 8, the low 8 of 16 ranks DLM, t_off 16, t_on 32, GTSU idle and ready.
    expected = {
        "ID": 0x41485344,
        "VERSION": 0x00020000,
        "ERROR": 0,
        "STATUS": 0b000100,
        "IRQ_STATUS": 0,
        "IRQ_ENABLE": 0,
        "EDC_HMAX": 10 * 4096,
        "EDC_LLR": 0,
        "EDC_DRAFTS": 0,
        "TVC_N_MAX": 8,
        "TVC_NCR": 0,
        "TVC_PVCT[3]": 0,
        "GTSU_DLM_MASK": 0x00FF,
        "GTSU_TLM_MASK": 0xFF00,
        "GTSU_T_OFF": 16,
        "GTSU_T_ON": 32,
        "GTSU_SWITCHES": 0,
        "DRAFT_QUEUE_LEVEL": 0,
        "SOFT_RESET": 0,  # write 1 to pulse: reads 0
    }

    async def body(bus, dut):
        await bus.tick(4)
        for name, value in expected.items():
            assert await bus.read(name) == value, name
        # Unmapped words: SLVERR, data 0 (0x01C between IRQ_ENABLE and the queue levels,
        # 0x084 below NCR, the word past the last PVCT entry, the top of the window).
        for address in (0x01C, 0x084, 0x620, 0xFFC):
            assert await bus.read_word(address) == (0, SLVERR), hex(address)
        assert dut.s_axi.awaddr.shape().width == 12

    run(body, name="top_reset")


def test_register_writes_reach_the_blocks():
    async def body(bus, dut):
        writes = {
            "EDC_HMAX": 0x1234,
            "TVC_N_MAX": 5,
            "TVC_NVCT[0]": 0xAB_DEAD_BEEF,  # 40 bits: both words
            "TVC_PDCT[2]": 77,
            "TVC_PVCT[3]": (1 << 40) - 1,
            "GTSU_DLM_MASK": 0x000F,
            "GTSU_TLM_MASK": 0x0F00,
            "GTSU_T_OFF": 3,
            "GTSU_T_ON": 5,
            "IRQ_ENABLE": 0b10101,
        }
        for name, value in writes.items():
            await bus.write(name, value)
        for name, value in writes.items():
            assert await bus.read(name) == value, name
        # Read-only registers refuse writes (SLVERR) and keep their value; a write keeps the
        # field's bits only (GTSU_T_OFF has 10, TVC_N_MAX 8: 1000 = 0x3E8 keeps 0xE8).
        assert (await bus.write_word(addr("EDC_LLR"), 5))[0] == SLVERR
        assert (await bus.write_word(addr("ID"), 0))[0] == SLVERR
        assert (await bus.write_word(addr("TVC_NCR") + 4, 1))[0] == SLVERR
        assert (await bus.write_word(0x01C, 1))[0] == SLVERR  # unmapped
        assert await bus.read("EDC_LLR") == 0
        assert await bus.read("ID") == 0x41485344
        await bus.write("GTSU_T_OFF", 0xFFFF_F402)
        assert await bus.read("GTSU_T_OFF") == 2
        await bus.write("TVC_N_MAX", 1000)
        assert await bus.read("TVC_N_MAX") == 1000 & 0xFF
        await bus.write("TVC_N_MAX", 5)
        # WSTRB: only byte 1 of the mask (0x0F00 -> 0x3300 with 0x33 in byte 1).
        assert (await bus.write_word(addr("GTSU_TLM_MASK"), 0x1234_3355, 0b0010))[0] == OKAY
        assert await bus.read("GTSU_TLM_MASK") == 0x3300
        await bus.write("GTSU_TLM_MASK", 0x0F00)
        # The blocks see them: the GTSU's masks and timers at a switch.
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


def test_wide_registers_write_whole_on_the_high_word_and_read_a_snapshot():
    async def body(bus, dut):
        low, high = addr("TVC_PDCT[1]"), addr("TVC_PDCT[1]") + 4
        # The low word alone changes nothing: it waits in the write buffer.
        await bus.write_word(low, 0x1111_2222)
        assert await bus.read("TVC_PDCT[1]") == 0
        # The high word writes the register whole: buffered low word and new high byte.
        await bus.write_word(high, 0x0000_0033)
        assert await bus.read("TVC_PDCT[1]") == 0x33_1111_2222
        # A high word alone keeps the low word (the buffer emptied at the last commit).
        await bus.write_word(high, 0x0000_0044)
        assert await bus.read("TVC_PDCT[1]") == 0x44_1111_2222
        # Strobes: low word byte 0 only, then high word with no strobe: one byte changes.
        await bus.write_word(low, 0xFFFF_FF99, 0b0001)
        await bus.write_word(high, 0xFFFF_FFFF, 0b0000)
        assert await bus.read("TVC_PDCT[1]") == 0x44_1111_2299
        # The high word of a read returns the snapshot its low word took: NCR counts on.
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.NPU_START, l_kv=1))
        first, _ = await bus.read_word(addr("TVC_NCR"))
        await bus.tick(20)
        snapshot_high, _ = await bus.read_word(addr("TVC_NCR") + 4)
        assert snapshot_high == 0
        later, _ = await bus.read_word(addr("TVC_NCR"))
        assert later > first + 20

    run(body, name="top_wide")


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


def test_interrupt_causes_enable_and_write_one_to_clear():
    params = EDCParams()

    async def body(bus, dut):
        ctx = bus.ctx
        await bus.write("GTSU_T_OFF", 1)
        await bus.write("GTSU_T_ON", 1)
        # An error cause with its enable off: status set, irq low.
        await bus.write("EDC_HMAX", 0)
        await bus.tick(2)
        assert await bus.read("IRQ_STATUS") == 0b00100  # edc_error
        assert ctx.get(dut.irq) == 0
        await bus.write("IRQ_ENABLE", 0b11111)
        assert ctx.get(dut.irq) == 1
        await bus.write("IRQ_STATUS", 0b00100)  # write 1 to clear
        assert await bus.read("IRQ_STATUS") == 0
        assert ctx.get(dut.irq) == 0
        # The flag stays set (sticky), but the cause was its rise: no new interrupt.
        await bus.tick(4)
        assert await bus.read("ERROR") == 0b001
        assert await bus.read("IRQ_STATUS") == 0
        # A pre-verification order: the queue goes non-empty on the PIM side.
        ctx.set(dut.preverify_w.payload, {"batch_id": 1, "n_tokens": 2})
        ctx.set(dut.preverify_w.valid, 1)
        await ctx.tick("cpu")
        ctx.set(dut.preverify_w.valid, 0)
        for _ in range(20):
            if ctx.get(dut.irq):
                break
            await bus.tick()
        assert await bus.read("IRQ_STATUS") == 0b00001
        # Writing 0 clears nothing; writing 1 without its strobe clears nothing.
        await bus.write("IRQ_STATUS", 0)
        await bus.write_word(addr("IRQ_STATUS"), 1, 0b0000)
        assert await bus.read("IRQ_STATUS") == 0b00001
        await bus.write("IRQ_STATUS", 1)
        assert ctx.get(dut.irq) == 0
        # EDC backpressure: fill the EDC (7 outstanding DRAFTs), then present one more.
        ctx.set(dut.edc_decision.ready, 1)
        for _ in range(params.llr_max):
            await bus.send(dut.edc_event, encode_draft(params, 100, 1))
        await bus.tick(3)
        assert await bus.read("EDC_LLR") == 7
        ctx.set(dut.edc_event.payload.as_value(), encode_draft(params, 100, 1))
        ctx.set(dut.edc_event.valid, 1)
        await bus.tick(3)
        assert ctx.get(dut.edc_event.ready) == 0
        assert ctx.get(dut.irq) == 1
        assert await bus.read("IRQ_STATUS") == 0b00010
        # A VERIFY frees a slot: the held DRAFT goes in.
        ctx.set(dut.edc_event.valid, 0)
        await bus.send(dut.edc_event, encode_verify(params, True, 100, 1))
        await bus.send(dut.edc_event, encode_draft(params, 100, 1))
        await bus.write("IRQ_STATUS", 0b00010)
        assert ctx.get(dut.irq) == 0

    run(body, name="top_irq")


def clear_outcomes(register_file_class: type = RegisterFile) -> list[int]:
    """``IRQ_STATUS.edc_backpressure`` after a write of 1 to it, when the cause's condition
    rises in the cycle before the write is taken, in that cycle, and in the cycle after, on
    the register file alone (its access port and the cause's condition driven directly, so
    the cycle is exact): the write is presented in cycle 0 and taken at the end of cycle 1
    (one decode cycle)."""
    status = REGS.get("IRQ_STATUS")
    cause = status.field("edc_backpressure").mask
    outcomes = []
    for rise in range(3):
        dut = register_file_class(REGS)

        async def testbench(ctx, dut=dut, rise=rise):
            access, condition = dut.access, dut.irq_status.edc_backpressure
            ctx.set(access.addr, status.address >> 2)
            ctx.set(access.wdata, cause)
            ctx.set(access.wstrb, 0xF)
            ctx.set(access.write, 1)
            ctx.set(access.valid, 1)
            for cycle in range(3):
                if cycle == rise:
                    ctx.set(condition, 1)
                assert ctx.get(access.ready) == (cycle == 1), f"write taken in cycle {cycle}"
                await ctx.tick()
                if cycle == 1:
                    ctx.set(access.valid, 0)
            ctx.set(access.write, 0)
            ctx.set(access.valid, 1)
            while not ctx.get(access.ready):
                await ctx.tick()
            outcomes.append(ctx.get(access.rdata) & cause)

        simulate(dut, testbench, name="register_file_clear")
    return [1 if outcome else 0 for outcome in outcomes]


def test_a_cause_rising_in_the_cycle_of_its_clearing_write_stays_set():
    # docs/integration.md, "The interrupt": a cause set before the clearing write is cleared
    # by it, one that rises in the cycle of the write or after it stays set.
    assert clear_outcomes() == [0, 1, 1]


@pytest.mark.parametrize("bug", cases("top.clear_cycle"))
def test_clear_check_fails_on_planted_bugs(bug):
    assert clear_outcomes(bug.build(RegisterFile)) != [0, 1, 1]


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


#: docs/integration.md, "The bus": RVALID (BVALID) is high from cycle 3 on, cycle 0 being
#: the cycle of the AR handshake (of the later of the AW and W handshakes).
RESPONSE_CYCLE = 3


def test_bus_latency_is_the_documented_one():
    async def body(bus, dut):
        axi = dut.s_axi
        # Bus.write_word / _response count the cycles after the handshake's: cycle 1 is 0.
        for address in (addr("EDC_HMAX"), addr("TVC_N_MAX"), addr("TVC_PVCT[1]") + 4):
            resp, waited = await bus.write_word(address, 5)
            assert (resp, waited + 1) == (OKAY, RESPONSE_CYCLE)
        for address in (addr("ID"), addr("TVC_N_MAX"), addr("TVC_NCR"), 0x01C):
            bus.ctx.set(axi.araddr, address)
            await bus._handshake(axi.arvalid, axi.arready)
            waited = await bus._response(axi.rvalid, axi.rready)
            assert waited + 1 == RESPONSE_CYCLE
            await bus.tick()
            bus.ctx.set(axi.rready, 0)
        # Back to back: a manager holding ARVALID and RREADY high gets one read every 3
        # cycles (AR taken in the cycle of the previous R handshake).
        bus.ctx.set(axi.araddr, addr("ID"))
        bus.ctx.set(axi.arvalid, 1)
        bus.ctx.set(axi.rready, 1)
        edges = []
        for cycle in range(20):
            if bus.ctx.get(axi.rvalid):
                edges.append(cycle)
            await bus.tick()
        bus.ctx.set(axi.arvalid, 0)
        assert [b - a for a, b in itertools.pairwise(edges)] == [3] * (len(edges) - 1)
        assert len(edges) >= 5

    run(body, name="top_latency")


def test_tvc_ask_through_the_top():
    params = TVCParams()

    async def body(bus, dut):
        # NVCT = 100 cycles per KV token (100 << 8), PDCT 0, PVCT 200 cycles per token.
        for index in range(params.depth):
            await bus.write(f"TVC_NVCT[{index}]", 100 << 8)
            await bus.write(f"TVC_PVCT[{index}]", 200 << 8)
        # L_kv = 64: C_npu = (4 * 25600 * 64) >> 10 = 6400 cycles.
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.NPU_START, l_kv=64))
        await bus.tick(9)
        # NCR is 10 here (NPU_START taken 10 edges ago). ASK(5) taken now: C_left = 6390,
        # quotient (6390 << 10) // 204800 = 31; n = min(5, N_max 8, 31) = 5.
        await bus.send(dut.tvc_cmd, tvc_command(dut, Op.ASK, p=5))
        answer = await bus.receive(dut.tvc_ans)
        assert answer["n"] == 5
        assert answer["c_left"] == 6390
        # NCR has counted on since: an AXI read (low word, then the snapshot's high word).
        assert 10 < await bus.read("TVC_NCR") < 40
        # While a LEARN runs (into PDCT: LEARN(PDCT, 0 cycles, 1) pushes ratio 0, so C_d1
        # stays 0) a TVC write waits: BVALID comes late.
        await bus.send(
            dut.tvc_cmd, tvc_command(dut, Op.LEARN, table=Table.PDCT, cycles=0, length=1)
        )
        waited = await bus.write("TVC_N_MAX", 3)
        assert waited + 1 > RESPONSE_CYCLE
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
        assert await bus.read("TVC_PDCT[0]") == 25600
        assert await bus.read("TVC_PDCT[1]") == 0
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


def test_refuses_a_register_map_its_blocks_do_not_match():
    # A map compiled for 16-bit EDC counters on a top whose EDC counts in 32 bits.
    import gc
    import warnings

    from amaranth.hdl import Fragment, UnusedElaboratable

    top = ControllerTop(TopParams())
    top.regmap = register_map(TopParams(edc=EDCParams(stats_bits=16)))
    message = r"^register field EDC_DRAFTS.count is 16 bits wide, its signal in the top 32$"
    # The refused elaboration leaves the blocks it had made unused: that is expected here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=message) as refused:
            Fragment.get(top, None)
        del refused, top
        gc.collect()
