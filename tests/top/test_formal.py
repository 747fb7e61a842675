"""Controller top, formal tier (yowasp-sby): every AXI4-Lite read returns the addressed
register's value.

The wrapper holds ``ControllerTop(TopParams())`` whole (the mutation campaign's netlist) and
drives every input with a free value in every cycle (``AnySeq``): the AXI4-Lite manager,
the event ports, the queues' ends. It records the address of each read it hands over (the
AR handshake) and, in every cycle, the value the register map says that address reads
(``hw/regmap.rdl``, ``docs/registers.md``) from the value sources themselves:

- a field a block holds reads the block's output port (``GTSU.switches``,
  ``EDC.drafts``, ``AsyncQueues.draft_w_level``, ...) or, for the TVC's tables and
  ``N_max``, the TVC's own registers (``TVC.tables``, ``TVC.n_max``), not its read port;
- a field the register file holds itself (the ``IRQ_STATUS`` causes, the ``IRQ_ENABLE``
  bits) reads that register;
- a constant field reads its reset value, a write-only field and every bit outside a field
  read 0;
- the high word of a 64-bit register reads the high word the last read of its low word saw
  (the wrapper keeps its own copy of that rule's snapshot);
- an address no register covers is answered ``SLVERR`` with data 0.

When ``RVALID`` rises, ``RDATA`` and ``RRESP`` must be that value as of the cycle the read
was taken, the cycle before (``docs/integration.md``: a read shows the registers' values in
the cycle it is taken). The proof is k-induction: the counters, tables and every other state
start anywhere, so a read-mux defect that only a high counter bit shows (2**30 GTSU switches,
say) is found as readily as one in bit 0. Induction needs two facts about state the
properties do not name, asserted too: the bridge's held read address is the one the wrapper
recorded, and each 64-bit register's snapshot in the register file is the wrapper's copy,
which is 0 outside the register's fields (without that, a state no run reaches, a snapshot
bit above a 40-bit entry set, failed the proof on a mutant that no read can tell apart).
Resets are held low (what a reset does is ``tb_registers``' and ``tb_top``'s).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import (
    Assert,
    Assume,
    Elaboratable,
    Fragment,
    Module,
    Mux,
    ResetSignal,
    Signal,
    Value,
)
from amaranth.lib import wiring
from harness.formal import check, registers_named
from harness.planted import cases

import ahasd.hw.top
from ahasd.hw.axi_lite import Resp
from ahasd.hw.registers import RegisterFile
from ahasd.hw.top import ControllerTop
from ahasd.hw.tvc import Table
from ahasd.params import TopParams
from ahasd.regmap import ADDR_BITS, DATA_BITS, IRQ_ENABLE, IRQ_STATUS, register_map

INDUCTION_DEPTH = 4  # the AR handshake, the decode cycle, the take, the response
DOMAINS = ("cpu", "npu", "pim")


def _blocks(fragment: Fragment) -> dict[str, object]:
    """The top's blocks (``edc``, ``tvc``, ``gtsu``, ``queues``, ``axi``, ``registers``)
    and their elaborated fragments, by submodule name: ``{name: (block, fragment)}``."""
    found = {}
    for child, name, *_ in fragment.subfragments:
        for origin in child.origins or ():
            if isinstance(origin, wiring.Component):
                found[name] = (origin, child)
    return found


def _tag(name: str) -> str:
    return name.lower().replace("[", "_").replace("]", "")


class ReadMux(Elaboratable):
    """The top with free inputs and the read property of this module's docstring."""

    def elaborate(self, platform):
        m = Module()
        params = TopParams()
        regmap = register_map(params)
        top = ControllerTop(params)
        m.submodules.dut = fragment = Fragment.get(top, platform)
        for domain in DOMAINS:
            m.d.comb += Assume(~ResetSignal(domain))
        for _path, member, value in top.signature.flatten(top):
            if member.flow == wiring.In:
                value = Value.cast(value)
                m.d.comb += value.eq(AnySeq(len(value)))

        blocks = _blocks(fragment)
        (edc, _), (tvc, _), (gtsu, _) = blocks["edc"], blocks["tvc"], blocks["gtsu"]
        queues, _ = blocks["queues"]
        _, bridge = blocks["axi"]
        _, registers = blocks["registers"]

        # What each field reads (docs/registers.md), by (register or array, field).
        irq_fields = [f.name for f in regmap.get(IRQ_STATUS).fields]
        own = registers_named(
            registers,
            *(f"{_tag(r)}_{name}" for r in (IRQ_STATUS, IRQ_ENABLE) for name in irq_fields),
        )
        sources = {
            ("ERROR", "edc"): edc.error,
            ("ERROR", "tvc"): tvc.error,
            ("ERROR", "gtsu_config"): gtsu.config_error,
            ("STATUS", "gtsu_task"): gtsu.current_task.as_value(),
            ("STATUS", "gtsu_ready"): gtsu.ready,
            ("STATUS", "gtsu_gating"): gtsu.gating,
            ("STATUS", "tvc_busy"): tvc.busy,
            ("STATUS", "tvc_npu_busy"): tvc.npu_busy,
            **{
                (r, name): own[f"{_tag(r)}_{name}"]
                for r in (IRQ_STATUS, IRQ_ENABLE)
                for name in irq_fields
            },
            ("DRAFT_QUEUE_LEVEL", "entries"): queues.draft_w_level,
            ("FEEDBACK_QUEUE_LEVEL", "entries"): queues.feedback_r_level,
            ("PREVERIFY_QUEUE_LEVEL", "entries"): queues.preverify_r_level,
            ("EDC_HMAX", "hmax"): edc.hmax,
            ("EDC_LLR", "llr"): edc.llr,
            ("EDC_DRAFTS", "count"): edc.drafts,
            ("EDC_CONTINUES", "count"): edc.continues,
            ("EDC_SUPPRESSIONS", "count"): edc.suppressions,
            ("EDC_VERIFIES", "count"): edc.verifies,
            ("EDC_ROLLBACKS", "count"): edc.rollbacks,
            ("TVC_N_MAX", "n_max"): tvc.n_max,
            ("TVC_NCR", "ncr"): tvc.ncr,
            ("GTSU_DLM_MASK", "mask"): gtsu.dlm_mask,
            ("GTSU_TLM_MASK", "mask"): gtsu.tlm_mask,
            ("GTSU_T_OFF", "cycles"): gtsu.t_off,
            ("GTSU_T_ON", "cycles"): gtsu.t_on,
            ("GTSU_LAST_SWITCH", "cycles"): gtsu.last_switch_cycles,
            ("GTSU_SWITCHES", "count"): gtsu.switches,
            ("GTSU_DLM_ENABLE", "enable"): gtsu.dlm_enable,
            ("GTSU_TLM_ENABLE", "enable"): gtsu.tlm_enable,
        }
        tables = {"TVC_NVCT": Table.NVCT, "TVC_PDCT": Table.PDCT, "TVC_PVCT": Table.PVCT}

        def source(reg, field):
            if reg.group in tables:
                return tvc.tables[tables[reg.group]][reg.index]
            return sources[(reg.group, field.name)]

        axi = top.s_axi
        address = Signal(ADDR_BITS)  # of the read handed over and not yet answered
        with m.If(axi.arvalid & axi.arready):
            m.d.pim += address.eq(axi.araddr)
        rvalid_before = Signal()
        m.d.pim += rvalid_before.eq(axi.rvalid)
        answered = axi.rvalid & ~rvalid_before  # a read taken in the cycle before

        # The value the recorded address reads in this cycle. A 64-bit register's high word
        # reads the wrapper's copy of its snapshot, as a read of its low word taken in the
        # cycle before left it.
        expected = Signal(DATA_BITS)
        expected_resp = Signal(Resp)
        m.d.comb += expected_resp.eq(Resp.SLVERR)
        copies = {}
        for reg in regmap:
            value = Signal(reg.width, name=f"value_{_tag(reg.name)}")
            for field in reg.fields:
                bits = value[field.lsb : field.lsb + field.width]
                if field.access == "w1p":
                    continue  # reads 0
                m.d.comb += bits.eq(field.reset if field.constant else source(reg, field))
            words = [value[:DATA_BITS]]
            if reg.words > 1:
                high_before = Signal(reg.width - DATA_BITS, name=f"high_before_{_tag(reg.name)}")
                copy = Signal(reg.width - DATA_BITS, name=f"copy_{_tag(reg.name)}")
                copy_now = Signal.like(copy, name=f"copy_now_{_tag(reg.name)}")
                m.d.pim += [high_before.eq(value[DATA_BITS:]), copy.eq(copy_now)]
                low_read = answered & (address[2:] == reg.address >> 2)
                m.d.comb += copy_now.eq(Mux(low_read, high_before, copy))
                copies[reg.name] = copy_now
                words.append(copy_now)
                # What a read of the low word copies is 0 outside the fields.
                outside = ((1 << len(copy)) - 1) & ~(reg.read_mask >> DATA_BITS)
                m.d.comb += Assert((copy_now & outside) == 0)
            with m.Switch(address[2:]):
                for word, word_value in zip(reg.word_addresses, words, strict=True):
                    with m.Case(word >> 2):
                        m.d.comb += [expected.eq(word_value), expected_resp.eq(Resp.OKAY)]

        expected_before = Signal(DATA_BITS)
        resp_before = Signal(Resp)
        m.d.pim += [expected_before.eq(expected), resp_before.eq(expected_resp)]
        with m.If(answered):
            m.d.comb += [Assert(axi.rdata == expected_before), Assert(axi.rresp == resp_before)]

        # What makes the property inductive: the bridge holds the address recorded, and the
        # register file's snapshots are the wrapper's copies.
        ar_word = registers_named(bridge, "ar_word")["ar_word"]
        m.d.comb += Assert(axi.arready | (ar_word == address[2:]))
        snapshots = registers_named(registers, *(f"snapshot_{_tag(name)}" for name in copies))
        for name, copy_now in copies.items():
            m.d.comb += Assert(snapshots[f"snapshot_{_tag(name)}"] == copy_now)
        return m


@pytest.mark.formal
def test_every_read_returns_the_addressed_register():
    """k-induction: from any state, every read answers the register its address names."""
    check(
        ReadMux(), name="top_read_mux", mode="prove", depth=INDUCTION_DEPTH, engine="smtbmc yices"
    )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("top.read_mux_proof"))
def test_read_mux_proof_fails_on_planted_bugs(bug, monkeypatch):
    monkeypatch.setattr(ahasd.hw.top, "RegisterFile", bug.build(RegisterFile))
    with pytest.raises(pytest.fail.Exception, match="formal prove"):
        check(
            ReadMux(),
            name=f"top_read_mux_{bug.tag}",
            mode="prove",
            depth=INDUCTION_DEPTH,
            engine="smtbmc yices",
        )
