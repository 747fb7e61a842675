"""TVC, Amaranth-simulator tier: directed cases from spec 2.2 and docs/spec-decisions.md.

Expected answers come from hand calculation (the literal numbers in the comments) or from
:func:`spec_answer`, this file's own transcription of the spec's integer formulas; never from
the golden model. Default parameters: depth 4, F = 8, so every shift is S = F + 2 = 10 and a
table of four equal entries ``r << 8`` averages to ``r`` cycles per token.

The :class:`Driver` counts clock cycles itself (it is the only testbench), so the NCR value
of an ``ASK`` is known exactly: ``ask_cycle - start_cycle``.
"""

from __future__ import annotations

import random

import pytest
from harness.amaranth_sim import simulate
from harness.seeds import choose_seed

from ahasd.hw.tvc import TVC, Op, Table, divider_cycles
from ahasd.params import TVCParams

PATIENCE = 200  # cycles any wait may take before the test fails (the targets are 40)
TABLES = (Table.NVCT, Table.PDCT, Table.PVCT)


def spec_answer(params: TVCParams, state: dict, ncr: int, p: int) -> tuple[int, int]:
    """``(n, C_left)`` by the spec's formulas (spec 2.2 with docs/spec-decisions.md)."""
    shift = params.frac_bits + params.depth_log2
    s_nv, s_pd, s_pv = (sum(state[t]) for t in TABLES)
    c_npu = min((1 << params.cycle_bits) - 1, (s_nv * state["l_kv"]) >> shift)
    c_left = c_npu - ncr - (s_pd >> shift)
    if not state["npu_busy"] or c_left <= 0:
        return 0, c_left
    if s_pv == 0:
        return min(p, state["n_max"]), c_left
    return min(p, state["n_max"], (c_left << shift) // s_pv), c_left


def spec_ratio(params: TVCParams, cycles: int, length: int) -> int:
    return min((1 << params.ratio_bits) - 1, (cycles << params.frac_bits) // length)


class Driver:
    """One testbench driving ``cmd``/``wr``, taking ``ans`` and counting cycles.

    ``self.cycle`` is the index of the current cycle (ticks so far); a transfer "in cycle
    c" happens at the edge that ends cycle c.
    """

    def __init__(self, ctx, dut: TVC):
        self.ctx = ctx
        self.dut = dut
        self.cycle = 0

    async def tick(self, count: int = 1) -> None:
        for _ in range(count):
            await self.ctx.tick()
            self.cycle += 1

    async def wait_for(self, signal, what: str) -> None:
        """Tick until ``signal`` is high; fail after PATIENCE cycles (a lost handshake)."""
        for _ in range(PATIENCE):
            if self.ctx.get(signal):
                return
            await self.tick()
        raise AssertionError(f"{what} not within {PATIENCE} cycles (cycle {self.cycle})")

    async def until_cycle(self, cycle: int) -> None:
        assert cycle >= self.cycle, (cycle, self.cycle)
        await self.tick(cycle - self.cycle)

    async def _send(self, port, payload) -> int:
        ctx = self.ctx
        ctx.set(port.payload, payload)
        ctx.set(port.valid, 1)
        await self.wait_for(port.ready, "ready")
        accepted = self.cycle
        await self.tick()
        ctx.set(port.valid, 0)
        return accepted

    async def write(self, table: Table, index: int, value: int) -> int:
        return await self._send(self.dut.wr, {"table": table, "index": index, "value": value})

    async def fill(self, table: Table, value: int) -> None:
        for index in range(self.dut.params.depth):
            await self.write(table, index, value)

    async def command(self, op: Op, **args) -> int:
        member = {Op.LEARN: "learn", Op.NPU_START: "npu_start", Op.ASK: "ask"}.get(op)
        payload = {"op": op, "args": {member: args}} if member else {"op": op}
        return await self._send(self.dut.cmd, payload)

    async def idle(self) -> int:
        """Wait until the block is idle; the cycle in which it is."""
        await self.wait_for(~self.dut.busy, "idle")
        return self.cycle

    async def learn(self, table: Table, cycles: int, length: int) -> int:
        """LEARN and wait for it; its latency (acceptance to the cycle the entry is there)."""
        accepted = await self.command(Op.LEARN, table=table, cycles=cycles, length=length)
        return await self.idle() - accepted

    async def answer(self) -> tuple[int, int, int]:
        """Take one answer: ``(n, c_left, cycle in which it was valid)``."""
        ctx = self.ctx
        ctx.set(self.dut.ans.ready, 1)
        await self.wait_for(self.dut.ans.valid, "an answer")
        n = ctx.get(self.dut.ans.payload.n)
        c_left = ctx.get(self.dut.ans.payload.c_left)
        valid_cycle = self.cycle
        await self.tick()
        ctx.set(self.dut.ans.ready, 0)
        return n, c_left, valid_cycle

    async def ask(self, p: int, *, at: int | None = None) -> tuple[int, int, int, int]:
        """ASK(p) accepted in cycle ``at`` (default: now): ``(n, c_left, latency, accepted)``."""
        if at is not None:
            await self.until_cycle(at)
        accepted = await self.command(Op.ASK, p=p)
        if at is not None:
            assert accepted == at, "the ASK was back-pressured"
        n, c_left, valid_cycle = await self.answer()
        return n, c_left, valid_cycle - accepted, accepted

    def read(self, table: Table, index: int = 0) -> int:
        self.ctx.set(self.dut.rd_table, table)
        self.ctx.set(self.dut.rd_index, index)
        return self.ctx.get(self.dut.rd_value)

    def table(self, table: Table) -> list[int]:
        return [self.read(table, index) for index in range(self.dut.params.depth)]


def run(params: TVCParams, body, name: str) -> None:
    """Simulate ``body(driver)`` on a fresh TVC; fail if it does not finish."""
    dut = TVC(params)
    finished = []

    async def testbench(ctx):
        await body(Driver(ctx, dut))
        finished.append(True)

    simulate(dut, testbench, name=f"tvc_{name}")
    assert finished, "the testbench did not finish before the deadline"


# The reference preset of the worked example in docs/tvc.md: NPU 10 cycles per KV token,
# drafting 50 PIM cycles per token, pre-verification 30 PIM cycles per token.
NVCT_10 = 10 << 8
PDCT_50 = 50 << 8
PVCT_30 = 30 << 8


async def preset(d: Driver, nvct: int = NVCT_10, pdct: int = PDCT_50, pvct: int = PVCT_30):
    await d.fill(Table.NVCT, nvct)
    await d.fill(Table.PDCT, pdct)
    await d.fill(Table.PVCT, pvct)


def test_reset_state():
    params = TVCParams()

    async def body(d):
        assert all(d.table(t) == [0, 0, 0, 0] for t in TABLES)
        assert d.read(Table.N_MAX) == 8
        ctx, dut = d.ctx, d.dut
        assert (ctx.get(dut.busy), ctx.get(dut.error), ctx.get(dut.npu_busy)) == (0, 0, 0)
        assert ctx.get(dut.cmd.ready) == 1
        assert ctx.get(dut.wr.ready) == 1
        assert ctx.get(dut.ans.valid) == 0

    run(params, body, "reset")


def test_worked_example_by_hand():
    """The docs/tvc.md example: L_kv = 1000, ASK(6) 100 cycles after NPU_START.

    C_npu = (4*2560 * 1000) >> 10 = 10000; C_d1 = (4*12800) >> 10 = 50;
    C_left = 10000 - 100 - 50 = 9850; quotient = (9850 << 10) // (4*7680) = 328;
    n = min(6, 8, 328) = 6. With ASK(20): min(20, 8, 328) = 8 (the N_max clamp).
    """
    params = TVCParams()

    async def body(d):
        await preset(d)
        start = await d.command(Op.NPU_START, l_kv=1000)
        n, c_left, _, _ = await d.ask(6, at=start + 100)
        assert (n, c_left) == (6, 9850)
        n, c_left, _, accepted = await d.ask(20)
        assert n == 8
        assert c_left == 10000 - (accepted - start) - 50
        # 100 tokens pre-verified in 3000 cycles: (3000 << 8) // 100 = 7680, 30.0 per token.
        # LEARN latency 2 + 40 / 2: the 40 quotient bits of a UQ32.8 ratio, two a cycle.
        assert await d.learn(Table.PVCT, 3000, 100) == 22
        assert d.table(Table.PVCT) == [7680] * 4

    run(params, body, "worked_example")


def test_quotient_below_the_clamps_by_hand():
    """C_left small enough that the quotient decides: L_kv = 100 gives C_npu = 1000;
    ASK 900 cycles later: C_left = 1000 - 900 - 50 = 50; (50 << 10) // 30720 = 1."""
    params = TVCParams()

    async def body(d):
        await preset(d)
        start = await d.command(Op.NPU_START, l_kv=100)
        n, c_left, _, _ = await d.ask(8, at=start + 900)
        assert (n, c_left) == (1, 50)
        # 29 cycles of room: (29 << 10) // 30720 = 0 although C_left > 0.
        n, c_left, _, _ = await d.ask(8, at=start + 921)
        assert (n, c_left) == (0, 29)

    run(params, body, "quotient")


@pytest.mark.parametrize(("offset", "expected_c_left"), [(950, 0), (951, -1), (5000, -4050)])
def test_no_room_left_answers_zero(offset, expected_c_left):
    """C_left = 1000 - NCR - 50 <= 0: no pre-verification, whatever P and PVCT say."""
    params = TVCParams()

    async def body(d):
        await preset(d)
        start = await d.command(Op.NPU_START, l_kv=100)
        n, c_left, _, _ = await d.ask(8, at=start + offset)
        assert (n, c_left) == (0, expected_c_left)

    run(params, body, f"no_room_{offset}")


def test_empty_pvct_answers_the_clamp():
    """sum(PVCT) == 0 with room left: min(P, N_max)."""
    params = TVCParams()

    async def body(d):
        await preset(d, pvct=0)
        start = await d.command(Op.NPU_START, l_kv=1000)
        assert (await d.ask(5, at=start + 10))[0] == 5
        assert (await d.ask(200))[0] == 8
        assert (await d.ask(0))[0] == 0

    run(params, body, "empty_pvct")


def test_p_zero_answers_zero():
    params = TVCParams()

    async def body(d):
        await preset(d)
        start = await d.command(Op.NPU_START, l_kv=1000)
        n, c_left, _, _ = await d.ask(0, at=start + 5)
        assert (n, c_left) == (0, 10000 - 5 - 50)

    run(params, body, "p_zero")


def test_n_max_clamp_and_its_register():
    params = TVCParams()

    async def body(d):
        await preset(d)
        await d.write(Table.N_MAX, 0, 3)
        assert d.read(Table.N_MAX) == 3
        start = await d.command(Op.NPU_START, l_kv=1000)
        assert (await d.ask(6, at=start + 10))[0] == 3  # quotient 328, P 6, N_max 3
        await d.write(Table.N_MAX, 0, 0)
        assert (await d.ask(6))[0] == 0
        # Values beyond n_bits saturate (a decision of this design, docs/tvc.md).
        await d.write(Table.N_MAX, 0, 1000)
        assert d.read(Table.N_MAX) == 255
        assert (await d.ask(300))[0] == 255  # quotient 328 > 255
        await d.write(Table.N_MAX, 0, 200)
        assert (await d.ask(300))[0] == 200

    run(params, body, "n_max")


def test_empty_versus_preset_tables():
    """Reset tables are empty: C_npu = C_d1 = 0, so C_left = -NCR < 0 and the answer is 0.
    One LEARN fills one entry of four; the spec still averages over four (sum >> 2)."""
    params = TVCParams()

    async def body(d):
        start = await d.command(Op.NPU_START, l_kv=1000)
        n, c_left, _, accepted = await d.ask(8)
        assert (n, c_left) == (0, -(accepted - start))
        # One NVCT entry of 40 cycles/token is an average of 10 over four entries:
        # C_npu = (10240 * 1000) >> 10 = 10000; PDCT, PVCT still empty.
        assert await d.learn(Table.NVCT, 40 * 1000, 1000) > 0
        assert d.table(Table.NVCT) == [40 << 8, 0, 0, 0]
        n, c_left, _, accepted = await d.ask(7)
        assert (n, c_left) == (7, 10000 - (accepted - start))  # sum(PVCT) == 0: min(P, N_max)
        # The same average from a full preset answers the same.
        await d.fill(Table.NVCT, NVCT_10)
        n, c_left, _, accepted = await d.ask(7)
        assert (n, c_left) == (7, 10000 - (accepted - start))

    run(params, body, "empty_vs_preset")


def test_no_npu_task_answers_zero():
    """ASK before any NPU_START, and after NPU_DONE, answers 0 even with room by formula."""
    params = TVCParams()

    async def body(d):
        await preset(d)
        assert (await d.ask(8))[0] == 0
        start = await d.command(Op.NPU_START, l_kv=1000)
        assert (await d.ask(8, at=start + 20))[0] == 8
        await d.command(Op.NPU_DONE)
        assert (await d.ask(8))[0] == 0

    run(params, body, "no_npu_task")


def test_ncr_counts_across_start_and_done():
    params = TVCParams()

    async def body(d):
        ctx, dut = d.ctx, d.dut
        assert ctx.get(dut.ncr) == 0
        start = await d.command(Op.NPU_START, l_kv=7)
        for _ in range(5):  # NCR(t) = t - t0
            assert ctx.get(dut.ncr) == d.cycle - start
            assert ctx.get(dut.npu_busy) == 1
            await d.tick(13)
        # An ASK uses NCR as of its acceptance cycle, and NCR keeps counting meanwhile.
        await preset(d)
        _, c_left, _, accepted = await d.ask(1)
        assert c_left == ((4 * NVCT_10 * 7) >> 10) - (accepted - start) - 50
        assert ctx.get(dut.ncr) == d.cycle - start
        done = await d.command(Op.NPU_DONE)
        assert ctx.get(dut.npu_busy) == 0
        await d.tick(10)
        assert ctx.get(dut.ncr) == done - start  # frozen
        restart = await d.command(Op.NPU_START, l_kv=7)
        assert ctx.get(dut.ncr) == d.cycle - restart == 1
        await d.tick(3)
        assert ctx.get(dut.ncr) == 4

    run(params, body, "ncr")


def test_ncr_saturates():
    params = TVCParams(cycle_bits=8)

    async def body(d):
        ctx, dut = d.ctx, d.dut
        start = await d.command(Op.NPU_START, l_kv=1)
        await d.until_cycle(start + 254)
        assert ctx.get(dut.ncr) == 254
        await d.tick()
        assert ctx.get(dut.ncr) == 255
        await d.tick(100)
        assert ctx.get(dut.ncr) == 255
        # C_npu = 0 (empty NVCT); C_left = 0 - 255 - 0.
        assert (await d.ask(3))[:2] == (0, -255)

    run(params, body, "ncr_saturates")


def test_saturation_at_the_widest_values_32_bits():
    # The first version's widths (UQ24.8, 32-bit cycles): the reduced set.
    params = TVCParams(ratio_bits=32, cycle_bits=32)
    top = (1 << 32) - 1

    async def body(d):
        # C_npu = min(2**32 - 1, (4 * (2**32 - 1) * 65535) >> 10) = 2**32 - 1.
        await d.fill(Table.NVCT, top)
        await d.fill(Table.PDCT, top)  # C_d1 = (4 * (2**32 - 1)) >> 10 = 16777215
        await d.fill(Table.PVCT, 1)  # sum 4: quotient ~ 2**40, far beyond n_bits
        await d.write(Table.N_MAX, 0, 255)
        start = await d.command(Op.NPU_START, l_kv=65535)
        n, c_left, latency, accepted = await d.ask(65535)
        assert c_left == top - (accepted - start) - 16777215
        assert n == 255
        assert latency == 4  # decided by the early saturation test, no division
        # LEARN: (2**32 - 1) << 8 over 1 saturates at 2**32 - 1; over 65535 it fits.
        assert await d.learn(Table.PVCT, top, 1) == 2
        assert d.read(Table.PVCT, 0) == top
        await d.learn(Table.PVCT, top, 65535)
        assert d.read(Table.PVCT, 0) == (top << 8) // 65535 == 65537 << 8
        # Exactly 2**32 - 1: 0xFFFFFFFF << 8 // 256 = 0xFFFFFFFF, no saturation needed.
        await d.learn(Table.PDCT, top, 256)
        assert d.read(Table.PDCT, 0) == top
        await d.learn(Table.PDCT, top, 255)
        assert d.read(Table.PDCT, 0) == top  # 0x100000000.. saturates
        assert not d.ctx.get(d.dut.error)

    run(params, body, "saturation_32")


def test_saturation_at_the_widest_values_40_bits():
    params = TVCParams()
    top = (1 << 40) - 1

    async def body(d):
        # C_npu = min(2**40 - 1, (4 * (2**40 - 1) * 65535) >> 10) = 2**40 - 1.
        await d.fill(Table.NVCT, top)
        await d.fill(Table.PDCT, top)  # C_d1 = (4 * (2**40 - 1)) >> 10 = 2**32 - 1
        await d.fill(Table.PVCT, 1)  # sum 4: quotient ~ 2**48, far beyond n_bits
        await d.write(Table.N_MAX, 0, 255)
        start = await d.command(Op.NPU_START, l_kv=65535)
        n, c_left, latency, accepted = await d.ask(65535)
        assert c_left == top - (accepted - start) - (2**32 - 1)
        assert n == 255
        assert latency == 4  # decided by the early saturation test, no division
        # LEARN: (2**40 - 1) << 8 over 1 saturates at 2**40 - 1; over 65535 it fits.
        assert await d.learn(Table.PVCT, top, 1) == 2
        assert d.read(Table.PVCT, 0) == top
        await d.learn(Table.PVCT, top, 65535)
        # (2**48 - 2**8) // (2**16 - 1) = 2**32 + 2**16 (remainder 2**16 - 2**8).
        assert d.read(Table.PVCT, 0) == (top << 8) // 65535 == 2**32 + 2**16
        # 300 ms of a target token at 800 MHz, 240e6 cycles: UQ24.8 would saturate
        # (240e6 << 8 >= 2**32), UQ32.8 holds 61,440,000,000 exactly.
        await d.learn(Table.PVCT, 240_000_000, 1)
        assert d.read(Table.PVCT, 0) == 61_440_000_000
        assert not d.ctx.get(d.dut.error)

    run(params, body, "saturation_40")


def test_learn_pushes_newest_first_and_drops_the_oldest():
    params = TVCParams()

    async def body(d):
        for i, (cycles, length) in enumerate([(100, 10), (7, 2), (1, 3), (65, 1), (999, 7)]):
            latency = await d.learn(Table.PDCT, cycles, length)
            assert latency == 2 + divider_cycles(params)["learn"] == 2 + 40 // 2, i
        # floor(c * 256 / l): 999*256//7 = 36534, 65*256 = 16640, 256//3 = 85, 7*128 = 896
        assert d.table(Table.PDCT) == [36534, 16640, 85, 896]
        assert d.table(Table.NVCT) == [0, 0, 0, 0]
        assert d.table(Table.PVCT) == [0, 0, 0, 0]

    run(params, body, "learn_fifo")


def test_learn_with_length_zero_is_a_sticky_protocol_error():
    params = TVCParams()

    async def body(d):
        await d.learn(Table.NVCT, 123, 1)
        assert not d.ctx.get(d.dut.error)
        assert await d.learn(Table.NVCT, 456, 0) == 2
        assert d.ctx.get(d.dut.error) == 1
        assert d.table(Table.NVCT) == [123 << 8, 0, 0, 0]
        await d.learn(Table.NVCT, 5, 5)  # later commands work; the flag stays
        assert d.table(Table.NVCT) == [256, 123 << 8, 0, 0]
        assert d.ctx.get(d.dut.error) == 1

    run(params, body, "learn_zero")


def test_learn_into_n_max_is_a_protocol_error():
    params = TVCParams()

    async def body(d):
        await d.learn(Table.N_MAX, 4, 1)
        assert d.ctx.get(d.dut.error) == 1
        assert d.read(Table.N_MAX) == 8
        assert all(d.table(t) == [0, 0, 0, 0] for t in TABLES)

    run(params, body, "learn_n_max")


def test_commands_and_writes_wait_while_busy_and_are_not_lost():
    params = TVCParams()

    async def body(d):
        ctx, dut = d.ctx, d.dut
        await preset(d)
        await d.command(Op.NPU_START, l_kv=1000)
        accepted = await d.command(Op.LEARN, table=Table.PVCT, cycles=30, length=1)
        # While the divider works, both ports refuse; a held command waits.
        ctx.set(dut.cmd.payload, {"op": Op.ASK, "args": {"ask": {"p": 5}}})
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.wr.valid, 0)
        busy_cycles = 0
        while not ctx.get(dut.cmd.ready):
            assert ctx.get(dut.busy)
            assert not ctx.get(dut.wr.ready)
            busy_cycles += 1
            await d.tick()
        assert d.cycle - accepted == 22  # LEARN latency: the ASK goes in right after
        await d.tick()
        ctx.set(dut.cmd.valid, 0)
        # The answer waits for its reader; meanwhile the block stays busy.
        for _ in range(30):
            await d.tick()
            assert ctx.get(dut.busy)
            assert not ctx.get(dut.cmd.ready)
        assert ctx.get(dut.ans.valid)
        n, _, _ = await d.answer()
        assert n == 5
        assert not ctx.get(dut.busy)
        # A write has priority over a command presented in the same cycle.
        ctx.set(dut.cmd.payload, {"op": Op.NPU_DONE})
        ctx.set(dut.cmd.valid, 1)
        ctx.set(dut.wr.payload, {"table": Table.NVCT, "index": 2, "value": 77})
        ctx.set(dut.wr.valid, 1)
        assert ctx.get(dut.wr.ready)
        assert not ctx.get(dut.cmd.ready)
        await d.tick()
        ctx.set(dut.wr.valid, 0)
        assert ctx.get(dut.cmd.ready)
        assert ctx.get(dut.npu_busy)
        await d.tick()
        ctx.set(dut.cmd.valid, 0)
        assert d.read(Table.NVCT, 2) == 77
        assert not ctx.get(dut.npu_busy)

    run(params, body, "backpressure")


@pytest.mark.parametrize(
    "params",
    [
        TVCParams(),
        TVCParams(ratio_bits=64, cycle_bits=48, frac_bits=16, n_bits=16, n_max=65535),
        TVCParams(ratio_bits=33, n_bits=7, depth=8),
    ],
    ids=["default", "widest", "odd_widths"],
)
def test_latency_targets(params):
    """Worst-case paths: a LEARN that divides, an ASK that divides. Both within 40 cycles."""
    expected = divider_cycles(params)

    async def body(d):
        shift = params.frac_bits + params.depth_log2
        # One NVCT/PVCT entry each so that the quotient is small and needs the divider.
        assert await d.learn(Table.NVCT, 3, 1) == 2 + expected["learn"]
        await d.learn(Table.PVCT, 1, 1)
        # C_npu = ((3 << F) * L_kv) >> shift = 12 with L_kv = 4 << log2(depth); the ASK one
        # cycle after NPU_START has C_left = 11 and a quotient of 11 << log2(depth).
        l_kv = 4 << params.depth_log2
        await d.write(Table.N_MAX, 0, (1 << params.n_bits) - 1)
        start = await d.command(Op.NPU_START, l_kv=l_kv)
        n, c_left, latency, accepted = await d.ask(65535)
        assert accepted == start + 1
        assert c_left == 11
        quotient = (11 << shift) // (1 << params.frac_bits)
        assert 0 < quotient < 1 << params.n_bits  # the path through the divider
        assert n == quotient
        assert latency == 4 + expected["ask"] <= 40
        assert 2 + expected["learn"] <= 40

    run(params, body, f"latency_{params.tag()}")


@pytest.mark.seeded
@pytest.mark.parametrize(
    "params",
    [
        TVCParams(),
        TVCParams(frac_bits=4, cycle_bits=24, n_max=5),
        TVCParams(
            depth=2, frac_bits=3, cycle_bits=12, length_bits=6, ratio_bits=9, n_bits=3, n_max=5
        ),
    ],
    ids=["default", "f4_c24", "tiny"],
)
def test_random_commands_match_the_spec_formulas(params):
    """Random presets, LEARNs, NPU tasks and ASKs at random NCR, log-uniform values so that
    every outcome (no room, clamp, quotient) occurs; answers by formula, tables compared."""
    rng = random.Random(choose_seed(default=4))
    seen = {"zero": 0, "quotient": 0, "clamp": 0}

    def ratio_value() -> int:
        kind = rng.random()
        if kind < 0.1:
            return 0
        if kind < 0.2:
            return rng.randrange(1 << params.ratio_bits)
        return rng.randrange(1 << rng.randrange(params.ratio_bits + 1))  # log-uniform

    async def body(d):
        state = {t: [0] * params.depth for t in TABLES}
        state.update(l_kv=0, npu_busy=False, n_max=params.n_max)
        start = 0
        for step in range(5000):
            # At least 300 steps, then until every outcome has been seen a few times.
            if step >= 300 and min(seen.values()) >= 5:
                break
            action = rng.random()
            if action < 0.15:
                table, index = rng.choice(TABLES), rng.randrange(params.depth)
                value = ratio_value()
                await d.write(table, index, value)
                state[table][index] = value
            elif action < 0.25:
                table = rng.choice(TABLES)
                cycles = rng.randrange(1 << params.cycle_bits)
                length = rng.randrange(1, 1 << params.length_bits)
                await d.learn(table, cycles, length)
                state[table] = [spec_ratio(params, cycles, length), *state[table][:-1]]
            elif action < 0.3:
                state["n_max"] = rng.randrange(1 << params.n_bits)
                await d.write(Table.N_MAX, 0, state["n_max"])
            elif action < 0.4:
                state["l_kv"] = rng.randrange(1 << rng.randrange(params.length_bits + 1))
                start = await d.command(Op.NPU_START, l_kv=state["l_kv"])
                state["npu_busy"] = True
            elif action < 0.43:
                await d.command(Op.NPU_DONE)
                state["npu_busy"] = False
            else:
                p = rng.randrange(1 << params.length_bits if rng.random() < 0.2 else 12)
                wait = rng.choice([0, 0, 1, rng.randrange(100)])
                at = d.cycle + wait
                ncr = min(at - start, (1 << params.cycle_bits) - 1) if state["npu_busy"] else 0
                n, c_left, latency, _ = await d.ask(p, at=at)
                want_n, want_c_left = spec_answer(params, state, ncr, p)
                assert n == want_n, (state, ncr, p, n, want_n)
                if state["npu_busy"]:
                    assert c_left == want_c_left
                assert latency <= 4 + divider_cycles(params)["ask"]
                clamp = min(p, state["n_max"])
                seen["zero" if n == 0 else "clamp" if n == clamp else "quotient"] += 1
        for table in TABLES:
            assert d.table(table) == state[table]

    run(params, body, f"random_{params.tag()}")
    assert min(seen.values()) >= 5, seen


def test_construction_is_validated():
    with pytest.raises(TypeError, match=r"^params must be a TVCParams, not 3$"):
        TVC(3)
    with pytest.raises(ValueError, match=r"^depth must be a power of two, not 3$"):
        TVCParams(depth=3)
    with pytest.raises(ValueError, match=r"^ratio_bits must be between 9 and 64, not 8$"):
        TVCParams(ratio_bits=8)
