"""cocotb check that the controller top's Verilog, as delivered, shows no X or Z after reset.

Run under Icarus (4-state: an ``always @*`` block that never ran at time zero leaves its
outputs X) and under Verilator with every variable that has no initial value randomised
(``+verilator+rand+reset+2``: a value that depended on uninitialised state differs from the
map's reset value). In that order, after a reset of every domain:

1. every output port is 0 or 1 (no X, no Z);
2. every word of every register, read through the AXI4-Lite port in address order (so
   ``TVC_N_MAX`` is read before any other TVC register), answers ``OKAY`` with data that is
   0 or 1 in every bit and equals the compiled map's reset value of that word;
3. the first ``DRAFT`` after reset is answered with a decision whose every bit is 0 or 1,
   and no output port holds an X or Z then either.

The AXI accesses are driven by hand (one handshake at a time): a bus model would turn an X
of ``RDATA`` into an exception rather than a finding.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer

from ahasd.hw.tb.top import CLOCK_DOMAINS, ControllerTopDriver
from ahasd.hw.top import ControllerTop
from ahasd.params import TopParams
from ahasd.regmap import DATA_BITS, register_map

#: Cycles any handshake may take before the check gives up (a hung port is a finding too).
LIMIT = 64


def output_ports(params: TopParams) -> list[str]:
    """The names of the top's output ports, as the Verilog has them."""
    top = ControllerTop(params)
    top._MustUse__silence = True  # built for its signature only
    names = []
    for path, flow, _value in top.signature.flatten(top):
        if flow.flow.name == "Out":
            names.append("__".join(map(str, path)))
    return names


def unknown(handle) -> bool:
    return not handle.value.is_resolvable


async def handshake(dut, ready) -> bool:
    """Wait for the edge at which ``ready`` (and the valid the caller drives) is high; True
    once past it, False after :data:`LIMIT` cycles."""
    for _ in range(LIMIT):
        await ReadOnly()
        taken = ready.value == 1
        await RisingEdge(dut.pim_clk)
        if taken:
            return True
    return False


async def read_word(dut, address: int) -> tuple[object, object]:
    """One AXI4-Lite read; ``(RDATA, RRESP)`` as the simulator shows them (may hold X)."""
    dut.s_axi__araddr.value = address
    dut.s_axi__arvalid.value = 1
    dut.s_axi__rready.value = 1
    if not await handshake(dut, dut.s_axi__arready):
        raise AssertionError(f"read of {address:#05x}: ARREADY never rose")
    dut.s_axi__arvalid.value = 0
    for _ in range(LIMIT):
        await ReadOnly()
        if dut.s_axi__rvalid.value == 1:
            data, resp = dut.s_axi__rdata.value, dut.s_axi__rresp.value
            await RisingEdge(dut.pim_clk)
            dut.s_axi__rready.value = 0
            return data, resp
        await RisingEdge(dut.pim_clk)
    raise AssertionError(f"read of {address:#05x}: RVALID never rose")


@cocotb.test(timeout_time=50, timeout_unit="ms")
async def no_x_after_reset(dut):
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    top = ControllerTopDriver(dut, params)
    top.quiet_inputs()
    top.hold_reset(1)
    top.start_clocks({"pim": 1250, "npu": 1000, "cpu": 1500})
    await Timer(20, unit="ns")
    top.hold_reset(0)
    await ClockCycles(dut.pim_clk, 8)
    errors: list[str] = []
    outputs = output_ports(params)

    def check_outputs(when: str) -> None:
        for name in outputs:
            handle = getattr(dut, name)
            if unknown(handle):
                errors.append(f"{when}: output {name} = {handle.value}")

    # 1. Outputs after reset.
    await ReadOnly()
    check_outputs("after reset")
    await RisingEdge(dut.pim_clk)

    # 2. Every register word, in address order.
    words = sorted(
        (address, reg, word)
        for reg in register_map(params)
        for word, address in enumerate(reg.word_addresses)
    )
    for address, reg, word in words:
        data, resp = await read_word(dut, address)
        wanted = (reg.reset >> (DATA_BITS * word)) & ((1 << DATA_BITS) - 1)
        if not data.is_resolvable or not resp.is_resolvable:
            errors.append(f"{reg.name} word {word} reads {data} (RRESP {resp})")
        elif int(resp) != 0 or int(data) != wanted:
            errors.append(
                f"{reg.name} word {word} reads {int(data):#x} (RRESP {int(resp)}), "
                f"the map's reset value is {wanted:#x}"
            )

    # 3. The first DRAFT's decision.
    event = top.edc.event
    event.present(top.edc.draft_bits(s=1 << 12, length=4))
    top.edc.decision.accept(1)
    if not await handshake(dut, dut.edc_event__ready):
        errors.append("the first DRAFT was never taken")
    event.quiet()
    for _ in range(LIMIT):
        await ReadOnly()
        if dut.edc_decision__valid.value == 1:
            if unknown(dut.edc_decision__payload):
                errors.append(f"first EDC decision = {dut.edc_decision__payload.value}")
            check_outputs("at the first EDC decision")
            break
        await RisingEdge(dut.pim_clk)
    else:
        errors.append("the first DRAFT got no decision")

    assert not errors, f"{len(errors)} X/Z finding(s) in {CLOCK_DOMAINS} after reset:\n" + (
        "\n".join(errors[:40])
    )
    dut._log.info(
        "AHASD: no X/Z after reset: %d outputs, %d register words, first EDC decision",
        len(outputs),
        len(words),
    )
