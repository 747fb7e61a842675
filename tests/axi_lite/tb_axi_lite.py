"""cocotb testbench of the AXI4-Lite subordinate (``target.py``) with cocotbext-axi's
AXI4-Lite manager.

Every channel has a random pause generator (AW, W and AR sources stall before presenting,
the B and R sinks hold ``READY`` low), the register side stalls writes at random (the
target's ``stall``), and four workers run concurrently, so reads and writes interleave on the
channels in random order. Each worker owns its own read/write words and keeps a model of
them: every read returns what the worker last wrote there (strobes applied), every write and
read of an owned word is OKAY; besides, reads of the read-only words return their constants,
writes to them and accesses to unmapped words are SLVERR. A monitor counts how AW and W came
(AW first, W first, together) and the test asserts that each happened.

Environment: ``AHASD_TB_SEED``, ``AHASD_TRANSACTIONS`` (default 4,000).
"""

from __future__ import annotations

import logging
import os

import cocotb
from axi_lite.target import READ_ONLY_BASE, READ_WRITE, WORDS
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp
from harness.tb import report, rng_from_env

TRANSACTIONS = int(os.environ.get("AHASD_TRANSACTIONS", "4000"))
WORKERS = 4


def pauses(rng, busy: float):
    """A pause generator: runs of pauses (1) and go (0), ``busy`` the share of pauses."""
    while True:
        paused = rng.random() < busy
        for _ in range(rng.randrange(1, 6)):
            yield int(paused)


async def count_orders(dut, orders: dict) -> None:
    """Count, per write, whether AW came before W, W before AW, or both in one cycle."""
    aw_first = w_first = False
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        aw = int(dut.axi__awvalid.value) and int(dut.axi__awready.value)
        w = int(dut.axi__wvalid.value) and int(dut.axi__wready.value)
        if aw and w:
            orders["together"] += 1
        elif aw and w_first:
            orders["w_first"] += 1
            w_first = False
        elif w and aw_first:
            orders["aw_first"] += 1
            aw_first = False
        elif aw:
            aw_first = True
        elif w:
            w_first = True


async def stall_register_side(dut, rng) -> None:
    while True:
        await RisingEdge(dut.clk)
        dut.stall.value = int(rng.random() < 0.2)


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def random_interleaved_traffic(dut):
    rng = rng_from_env("axi-lite")
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.stall.value = 0
    axi = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
    # The manager logs every transaction at INFO; the test's own report stays.
    logging.getLogger("cocotb.axi_target.axi_").setLevel(logging.WARNING)
    for channel in (
        axi.write_if.aw_channel,
        axi.write_if.w_channel,
        axi.write_if.b_channel,
        axi.read_if.ar_channel,
        axi.read_if.r_channel,
    ):
        channel.set_pause_generator(pauses(rng, rng.choice([0.1, 0.3, 0.5])))
    for _ in range(4):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    orders = {"aw_first": 0, "w_first": 0, "together": 0}
    cocotb.start_soon(count_orders(dut, orders))
    cocotb.start_soon(stall_register_side(dut, rng))
    counts = {"writes": 0, "reads": 0, "slverr": 0, "partial": 0}
    errors: list[str] = []

    async def worker(index: int) -> None:
        own = [w for w in range(READ_WRITE) if w % WORKERS == index]
        model = dict.fromkeys(own, 0)
        wrng = rng_from_env(f"axi-lite-{index}")
        for _ in range(TRANSACTIONS // WORKERS):
            roll = wrng.random()
            word = wrng.choice(own)
            if roll < 0.4:
                value = wrng.randrange(1 << 32)
                offset = wrng.randrange(4) if wrng.random() < 0.3 else 0
                length = wrng.randrange(1, 5 - offset) if offset or wrng.random() < 0.3 else 4
                data = value.to_bytes(4, "little")[offset : offset + length]
                response = await axi.write(4 * word + offset, data)
                counts["writes"] += 1
                counts["partial"] += length < 4
                old = model[word].to_bytes(4, "little")
                model[word] = int.from_bytes(old[:offset] + data + old[offset + length :], "little")
                if response.resp != AxiResp.OKAY:
                    errors.append(f"write word {word}: {response.resp}")
            elif roll < 0.85:
                response = await axi.read(4 * word, 4)
                counts["reads"] += 1
                got = int.from_bytes(response.data, "little")
                if (got, response.resp) != (model[word], AxiResp.OKAY):
                    errors.append(
                        f"read word {word}: {got:#x} {response.resp}, model {model[word]:#x}"
                    )
            elif roll < 0.9:
                ro = wrng.randrange(READ_WRITE, WORDS)
                response = await axi.read(4 * ro, 4)
                counts["reads"] += 1
                got = int.from_bytes(response.data, "little")
                if (got, response.resp) != (READ_ONLY_BASE + ro, AxiResp.OKAY):
                    errors.append(f"read-only word {ro}: {got:#x} {response.resp}")
            else:
                refused = wrng.choice(
                    [
                        ("write", wrng.randrange(READ_WRITE, WORDS)),
                        ("write", wrng.randrange(WORDS, 64)),
                        ("read", wrng.randrange(WORDS, 64)),
                    ]
                )
                if refused[0] == "write":
                    response = await axi.write(4 * refused[1], b"\xff\xff\xff\xff")
                    counts["writes"] += 1
                    resp = response.resp
                else:
                    response = await axi.read(4 * refused[1], 4)
                    counts["reads"] += 1
                    resp = response.resp
                    if response.data != bytes(4):
                        errors.append(f"refused read of {refused[1]} returned {response.data!r}")
                counts["slverr"] += 1
                if resp != AxiResp.SLVERR:
                    errors.append(f"{refused[0]} word {refused[1]}: {resp}, not SLVERR")

    tasks = [cocotb.start_soon(worker(index)) for index in range(WORKERS)]
    for task in tasks:
        await task
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:20])
    transactions = counts["writes"] + counts["reads"]
    assert transactions == WORKERS * (TRANSACTIONS // WORKERS)
    assert min(orders.values()) > 0, f"not every AW/W order happened: {orders}"
    assert counts["partial"] > 0, counts
    assert counts["slverr"] > 0, counts
    report(
        dut,
        f"{transactions} transactions ({counts['writes']} writes, {counts['reads']} reads, "
        f"{counts['partial']} with partial strobes, {counts['slverr']} SLVERR); AW/W orders "
        f"{orders}",
    )
