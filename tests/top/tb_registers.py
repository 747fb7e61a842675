"""cocotb register walk of the controller top through its AXI4-Lite port (cocotbext-axi's
manager), every expectation read off the compiled SystemRDL map (``ahasd.regmap``):

1. after reset, every word of every register reads its reset value (``OKAY``); a write-only
   register reads 0;
2. a register with no writable field refuses writes (``SLVERR``) to each of its words and
   keeps its value;
3. a read/write register takes two complementary patterns and reads back exactly its
   writable field bits (reserved bits read 0); a write with one byte strobe changes that
   byte only (each byte in turn, to its complement); a 64-bit one changes only when its
   high word is written, with what every low-word write since the last high word put in
   its buffer (a full word, then one byte of it rewritten); every write drives ones on the
   byte lanes its strobes disable, which must change nothing;
4. the write-one-to-clear causes: an EDC error (``EDC_HMAX := 0``) sets ``IRQ_STATUS.
   edc_error`` and ``irq`` once enabled; writing 0, or 1 without its strobe, keeps it;
   writing 1 clears it;
5. the write-one-to-pulse ``SOFT_RESET`` bits reset their block (its error flag, its
   registers back to their reset values) and read 0;
6. a 64-bit read is atomic: a ``LEARN`` on the TVC's command port between the reads of a
   table entry's low and high words leaves the high word read as the low word's read saw it
   (the buffer_reads snapshot), for every entry of every table;
7. a write to a table entry that changes no field (strobes on a reserved byte only) is
   not handed to the TVC: its command port stays ready, and during a ``LEARN`` the write
   answers as fast as with the TVC idle; one to the field's byte holds the command port
   for a cycle, and waits for the ``LEARN``.

Unmapped words (every gap of the 4 KiB window, in steps of 4 bytes) answer ``SLVERR`` with
data 0. The overlapping mask patterns of step 3 raise the GTSU's configuration error, which
must set ``IRQ_STATUS.gtsu_error``.
"""

from __future__ import annotations

import json
import logging
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp
from harness.tb import report

from ahasd.hw.tb.streams import encode
from ahasd.hw.tb.top import TABLE_CODES
from ahasd.hw.tvc import Op, command_layout
from ahasd.params import TopParams
from ahasd.regmap import register_map

PATTERNS = (0x5555_5555_5555_5555, 0xAAAA_AAAA_AAAA_AAAA)
# A LEARN's longest run (2 + divider_cycles at the default TVC) with a margin.
LEARN_CYCLES = 40


class Walk:
    def __init__(self, dut, params: TopParams):
        self.dut = dut
        self.regs = register_map(params)
        self.axi = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_"), dut.pim_clk, dut.pim_rst)
        self._ones_on_disabled_lanes()
        self.checks = 0
        self.errors: list[str] = []

    def _ones_on_disabled_lanes(self) -> None:
        """Every write beat carries ones on the byte lanes its WSTRB disables (the manager
        zero-pads them; AXI leaves them free), so a register that takes a disabled lane's
        bits shows it."""
        send = self.axi.write_if.w_channel.send

        async def send_with_ones(beat):
            strobe = int(beat.wstrb)
            disabled = sum(0xFF << (8 * lane) for lane in range(4) if not strobe >> lane & 1)
            beat.wdata = int(beat.wdata) | disabled
            await send(beat)

        self.axi.write_if.w_channel.send = send_with_ones

    def expect(self, what: str, got, wanted) -> None:
        self.checks += 1
        if got != wanted:
            self.errors.append(f"{what}: got {got!r}, the map says {wanted!r}")

    async def read_word(self, address: int) -> tuple[int, AxiResp]:
        response = await self.axi.read(address, 4)
        return int.from_bytes(response.data, "little"), response.resp

    async def write_word(self, address: int, value: int, strobe: int = 0xF) -> AxiResp:
        if strobe == 0xF:
            response = await self.axi.write(address, value.to_bytes(4, "little"))
        else:  # one byte (the manager derives WSTRB from the address and length)
            byte = strobe.bit_length() - 1
            response = await self.axi.write(address + byte, bytes([(value >> (8 * byte)) & 0xFF]))
        return response.resp

    async def read(self, reg) -> int:
        value = 0
        for word, address in enumerate(reg.word_addresses):
            data, resp = await self.read_word(address)
            self.expect(f"{reg.name} word {word} read response", resp, AxiResp.OKAY)
            value |= data << (32 * word)
        return value

    async def write(self, reg, value: int) -> None:
        for word, address in enumerate(reg.word_addresses):
            resp = await self.write_word(address, (value >> (32 * word)) & 0xFFFF_FFFF)
            self.expect(f"{reg.name} word {word} write response", resp, AxiResp.OKAY)

    async def learn(self, params: TopParams, table: str, cycles: int, length: int) -> None:
        """One ``LEARN`` on the TVC's command port, waited out."""
        await self.start_learn(params, table, cycles, length)
        await ClockCycles(self.dut.pim_clk, LEARN_CYCLES)

    async def start_learn(self, params: TopParams, table: str, cycles: int, length: int) -> None:
        """Present one ``LEARN`` on the TVC's command port until it is taken (it then runs
        for up to ``2 + divider_cycles`` cycles)."""
        bits = encode(
            command_layout(params.tvc),
            {
                "op": Op.LEARN,
                "args": {
                    "learn": {"table": TABLE_CODES[table], "cycles": cycles, "length": length}
                },
            },
        )
        clock, command = self.dut.pim_clk, self.dut
        await FallingEdge(clock)
        command.tvc_cmd__payload.value = bits
        command.tvc_cmd__valid.value = 1
        await ReadOnly()
        while not command.tvc_cmd__ready.value:
            await FallingEdge(clock)
            await ReadOnly()
        await FallingEdge(clock)
        command.tvc_cmd__valid.value = 0

    async def write_time(self, address: int, value: int, strobe: int) -> tuple[int, int]:
        """One write, started after a falling edge of the clock (so two times compare): the
        simulated time (ps) from its start to its response, and the cycles meanwhile in
        which the TVC's command port was not ready."""
        clock, ready = self.dut.pim_clk, self.dut.tvc_cmd__ready
        await FallingEdge(clock)
        start = get_sim_time("ps")
        not_ready = 0

        async def watch():
            nonlocal not_ready
            while True:
                await ReadOnly()
                not_ready += not ready.value
                await FallingEdge(clock)

        watcher = cocotb.start_soon(watch())
        resp = await self.write_word(address, value, strobe)
        watcher.cancel()
        self.expect(f"write of {address:#05x} response", resp, AxiResp.OKAY)
        return get_sim_time("ps") - start, not_ready


# The walk takes about 7 us of simulated time: a mutant that hangs the bus fails at 1 ms.
@cocotb.test(timeout_time=1, timeout_unit="ms")
async def register_walk(dut):
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    for domain, period in (("pim", 1250), ("npu", 1000), ("cpu", 1500)):
        cocotb.start_soon(Clock(getattr(dut, f"{domain}_clk"), period, unit="ps").start())
        getattr(dut, f"{domain}_rst").value = 1
    for name in (
        "want_draft",
        "edc_event__valid",
        "tvc_cmd__valid",
        "draft_w__valid",
        "feedback_w__valid",
        "preverify_w__valid",
        "draft_r_epoch",
    ):
        getattr(dut, name).value = 0
    for name in (
        "edc_decision__ready",
        "tvc_ans__ready",
        "draft_r__ready",
        "feedback_r__ready",
        "preverify_r__ready",
    ):
        getattr(dut, name).value = 0
    walk = Walk(dut, params)
    logging.getLogger("cocotb.top.s_axi_").setLevel(logging.WARNING)
    await Timer(20, unit="ns")
    for domain in ("pim", "npu", "cpu"):
        getattr(dut, f"{domain}_rst").value = 0
    await ClockCycles(dut.pim_clk, 8)
    regs = walk.regs

    # 1. Reset values.
    for reg in regs:
        walk.expect(f"{reg.name} reset value", await walk.read(reg), reg.reset)
    # Unmapped words.
    covered = {a for reg in regs for a in reg.word_addresses}
    # Every word of the window: a register that also answers one address bit off (a
    # decoder ignoring that bit) shows at an unmapped alias wherever it lands.
    gaps = [a for a in range(0, 0x1000, 4) if a not in covered]
    for address in gaps:
        walk.expect(
            f"unmapped {address:#05x} read", await walk.read_word(address), (0, AxiResp.SLVERR)
        )
    walk.expect("unmapped write", await walk.write_word(gaps[0], 0xFFFF_FFFF), AxiResp.SLVERR)

    # 2. Read-only registers refuse writes and keep their value (the counters and live
    # values are static here: nothing runs).
    for reg in regs:
        if reg.writable:
            continue
        for word, address in enumerate(reg.word_addresses):
            resp = await walk.write_word(address, 0xFFFF_FFFF)
            walk.expect(f"{reg.name} word {word} write to read-only", resp, AxiResp.SLVERR)
        walk.expect(f"{reg.name} after refused writes", await walk.read(reg), reg.reset)

    # 3. Read/write masks, strobes, the 64-bit rule.
    for reg in regs:
        if not all(f.access == "rw" for f in reg.fields):
            continue
        full = (1 << reg.width) - 1
        for pattern in PATTERNS:
            await walk.write(reg, pattern & full)
            walk.expect(
                f"{reg.name} <- {pattern:#x}", await walk.read(reg), pattern & reg.write_mask
            )
        # One byte strobe, each byte of the low word in turn, writing its complement (never
        # 0 where the rest is 0: EDC_HMAX refuses 0); a 64-bit register waits for its high
        # word, written here as one byte holding the value it has.
        for byte in range(4):
            before = await walk.read(reg)
            shift = 8 * byte
            flipped = ~before & (0xFF << shift)
            await walk.write_word(reg.address, flipped & 0xFFFF_FFFF, 1 << byte)
            if reg.words > 1:
                walk.expect(f"{reg.name} low word buffered", await walk.read(reg), before)
                high_byte = (before >> 32) & 0xFF
                await walk.write_word(reg.address + 4, high_byte, 0b0001)
            wanted = ((before & ~(0xFF << shift)) | flipped) & reg.write_mask
            walk.expect(f"{reg.name} after a write of byte {byte}", await walk.read(reg), wanted)
        await walk.write(reg, reg.reset)
        walk.expect(f"{reg.name} restored", await walk.read(reg), reg.reset)

    # 3b. A 64-bit register's write buffer merges the low-word writes before the high
    # word's: the low word all ones, then one byte of it zeroed, then the high word. Each
    # byte position once, so every buffered bit is both kept (three times) and replaced.
    for reg in regs:
        if not (reg.buffer_writes and all(f.access == "rw" for f in reg.fields)):
            continue
        low, high = reg.word_addresses
        for byte in range(4):
            high_word = PATTERNS[byte % 2] & 0xFFFF_FFFF
            await walk.write_word(low, 0xFFFF_FFFF)
            await walk.write_word(low, 0x0000_0000, 1 << byte)
            await walk.write_word(high, high_word)
            merged = (high_word << 32) | (0xFFFF_FFFF & ~(0xFF << (8 * byte)))
            walk.expect(
                f"{reg.name} after two low-word writes (byte {byte} cleared by the second)",
                await walk.read(reg),
                merged & reg.write_mask,
            )
        await walk.write(reg, reg.reset)

    # The mask patterns overlapped (GTSU configuration error, sticky): reset the GTSU and
    # clear every cause before the next steps.
    status, enable = regs.get("IRQ_STATUS"), regs.get("IRQ_ENABLE")
    gtsu_cause = status.field("gtsu_error").mask
    walk.expect(
        "IRQ_STATUS.gtsu_error after the overlap", await walk.read(status) & gtsu_cause, gtsu_cause
    )
    await walk.write(regs.get("SOFT_RESET"), regs.get("SOFT_RESET").field("gtsu").mask)
    await walk.write(status, status.write_mask)
    walk.expect("ERROR after the GTSU's soft reset", await walk.read(regs.get("ERROR")), 0)
    walk.expect("IRQ_STATUS cleared", await walk.read(status), 0)

    # 4. Write one to clear, and the interrupt.
    cause = status.field("edc_error").mask
    await walk.write(regs.get("EDC_HMAX"), 0)  # the EDC's protocol error
    await ClockCycles(dut.pim_clk, 4)
    walk.expect("IRQ_STATUS after an EDC error", await walk.read(status), cause)
    walk.expect("irq while disabled", int(dut.irq.value), 0)
    await walk.write(enable, enable.field("edc_error").mask)
    await ClockCycles(dut.pim_clk, 1)
    walk.expect("irq when enabled", int(dut.irq.value), 1)
    await walk.write(status, 0)
    walk.expect("IRQ_STATUS after writing 0", await walk.read(status), cause)
    await walk.write_word(status.address, cause, 0b0010)  # the strobe misses the bit
    walk.expect("IRQ_STATUS after a strobe-less 1", await walk.read(status), cause)
    await walk.write(status, cause)
    walk.expect("IRQ_STATUS after writing 1", await walk.read(status), 0)
    await ClockCycles(dut.pim_clk, 1)
    walk.expect("irq after the clear", int(dut.irq.value), 0)

    # 5. Write one to pulse.
    error = regs.get("ERROR")
    walk.expect("ERROR before the soft reset", await walk.read(error), error.field("edc").mask)
    await walk.write(regs.get("TVC_N_MAX"), 3)
    await walk.write(regs.get("SOFT_RESET"), regs.get("SOFT_RESET").field("edc").mask)
    walk.expect("ERROR after SOFT_RESET.edc", await walk.read(error), 0)
    walk.expect("TVC_N_MAX kept (not the EDC)", await walk.read(regs.get("TVC_N_MAX")), 3)
    await walk.write(regs.get("SOFT_RESET"), regs.get("SOFT_RESET").field("tvc").mask)
    tvc_n_max = regs.get("TVC_N_MAX")
    walk.expect("TVC_N_MAX after SOFT_RESET.tvc", await walk.read(tvc_n_max), tvc_n_max.reset)
    walk.expect("SOFT_RESET reads 0", await walk.read(regs.get("SOFT_RESET")), 0)

    # 6. A 64-bit read is atomic: its high word is the snapshot the low word's read took,
    # even when a LEARN shifts the table between the two. Each entry's high word is made
    # to differ from its neighbour's, so the shift changes every one of them.
    frac_bits = params.tvc.frac_bits
    for table in TABLE_CODES:
        entries = [regs.get(f"TVC_{table.upper()}[{i}]") for i in range(params.tvc.depth)]
        for index, reg in enumerate(entries):
            values = [((0x10 + i) << 32) | (0x100 * (i + 1)) for i in range(len(entries))]
            for entry, value in zip(entries, values, strict=True):
                await walk.write(entry, value)
            low, high = reg.word_addresses
            data, _ = await walk.read_word(low)
            walk.expect(f"{reg.name} low word", data, values[index] & 0xFFFF_FFFF)
            await walk.learn(params, table, cycles=1, length=1)
            data, _ = await walk.read_word(high)
            walk.expect(f"{reg.name} high word, a LEARN after the low word", data, 0x10 + index)
            # The LEARN shifted (1 << F) // 1 into entry 0.
            shifted = values[index - 1] if index else 1 << frac_bits
            walk.expect(f"{reg.name} after the LEARN", await walk.read(reg), shifted)
        for entry in entries:
            await walk.write(entry, entry.reset)

    # 7. A write to a TVC table entry that changes no field (its strobes on byte 1 of the
    # high word only, the buffer empty) is not handed to the TVC: with the TVC idle its
    # command port stays ready throughout (a write handed over holds it for a cycle), and
    # while a LEARN runs it answers as fast as with the TVC idle (one to the field's byte
    # waits: the check that a wait shows in the time measured).
    for table in TABLE_CODES:
        for index in range(params.tvc.depth):
            reg = regs.get(f"TVC_{table.upper()}[{index}]")
            high = reg.word_addresses[1]
            idle, held = await walk.write_time(high, 0, 0b0010)
            walk.expect(f"{reg.name} reserved-byte write: command port held", held, 0)
            _, held = await walk.write_time(high, 0, 0b0001)
            walk.expect(f"{reg.name} field write: command port held", held, 1)
            await walk.start_learn(params, table, cycles=1, length=1)
            busy, _ = await walk.write_time(high, 0, 0b0010)
            walk.expect(f"{reg.name} reserved-byte write during a LEARN (ps)", busy, idle)
            await ClockCycles(dut.pim_clk, LEARN_CYCLES)
            await walk.start_learn(params, table, cycles=1, length=1)
            waited, _ = await walk.write_time(high, 0, 0b0001)
            walk.expect(f"{reg.name} field write during a LEARN waits", waited > idle, True)
            await ClockCycles(dut.pim_clk, LEARN_CYCLES)
            await walk.write(reg, reg.reset)

    assert not walk.errors, f"{len(walk.errors)} error(s):\n" + "\n".join(walk.errors[:30])
    report(dut, f"register walk: {len(regs)} registers, {walk.checks} checks, all as the map says")
