"""The AHASD controller top (spec 2.6, ``docs/top.md``).

One component holding the EDC, the TVC, the GTSU and the three async queues, behind a small
synchronous register bus for the CPU and event ports for the PIM and NPU sides. This is what
the co-simulation drives.

Clock domains: the controller core (EDC, TVC, GTSU, the register bus) runs in ``pim`` (the
PIM clock, 800 MHz on the paper's platform): the blocks' ``sync`` is renamed to ``pim``. The
queues cross to ``npu`` (the draft queue's reader, the feedback queue's writer) and ``cpu``
(the pre-verification queue's writer). The generated Verilog has ``pim_clk``/``pim_rst``,
``npu_clk``/``npu_rst`` and ``cpu_clk``/``cpu_rst``.

Internal wiring: the GTSU's ``want_preverify`` is the pre-verification queue's PIM-side
``valid`` (an order is pending), exactly the level ``docs/spec-decisions.md`` names; every
other block port is either a top port or behind a register (``ahasd.regmap``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, DomainRenamer, Module, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.edc import EDC, decision_layout, event_layout
from ahasd.hw.gtsu import GTSU, Task
from ahasd.hw.queues import AsyncQueues
from ahasd.hw.tvc import TVC, Table, answer_layout, command_layout
from ahasd.params import TopParams
from ahasd.regmap import (
    ADDR_BITS,
    DATA_BITS,
    ERROR_BITS,
    ID_VALUE,
    SOFT_RESET_BITS,
    STATUS_BITS,
    TABLE_BASES,
    TABLE_REGION,
    VERSION_VALUE,
    register_map,
)

__all__ = ["BUS_SIGNATURE", "ControllerTop"]

#: The register bus, seen from the CPU (the master): ``top.bus`` is ``In(BUS_SIGNATURE)``.
BUS_SIGNATURE = wiring.Signature(
    {
        "addr": Out(ADDR_BITS),
        "wdata": Out(DATA_BITS),
        "we": Out(1),
        "re": Out(1),
        "ready": In(1),
        "rdata": In(DATA_BITS),
        "rvalid": In(1),
    }
)

# Table regions: the two high address bits select the table, TVC's Table code is one less.
_TABLE_OF_REGION = {
    TABLE_BASES[name] // TABLE_REGION: table
    for name, table in (("nvct", Table.NVCT), ("pdct", Table.PDCT), ("pvct", Table.PVCT))
}


def _equals(value, constant: int):
    """``value == constant`` as an AND of bits (no operand-width mismatch in the Verilog)."""
    bits = [value[i] if (constant >> i) & 1 else ~value[i] for i in range(len(value))]
    return Cat(*bits).all()


def _rejected(component: wiring.Component, error: Exception) -> Exception:
    component._MustUse__silence = True
    return error


class ControllerTop(wiring.Component):
    """EDC, TVC, GTSU and the queues behind one register interface (spec 2.6).

    Parameters
    ----------
    params : TopParams
        The blocks' parameter sets. Every register must fit the 32-bit bus
        (``edc.stats_bits``, ``tvc.ratio_bits``, ``tvc.cycle_bits``, ``gtsu.ranks`` at most 32).

    Members
    -------
    bus : In(BUS_SIGNATURE), ``pim``
        The CPU's register bus: ``addr`` (word address), ``wdata``, ``we``, ``re`` from the
        CPU; ``ready``, ``rdata``, ``rvalid`` to it. An access (read, write or both) presented
        in cycle ``c`` is taken at the edge ending ``c`` if ``ready`` is high in ``c``; otherwise
        the CPU holds it. ``ready`` is low only for a write to a TVC register (``TVC_N_MAX``, a
        table entry) while the TVC is busy with a ``LEARN`` or an ``ASK`` (at most
        ``2 + divider_cycles`` cycles). A taken read returns the register's value during cycle
        ``c`` on ``rdata`` with ``rvalid`` high in cycle ``c + 1`` (``rdata`` then holds until
        the next read). A taken write holds from cycle ``c + 1``; ``SOFT_RESET`` acts at the
        edge itself. Register map: ``ahasd.regmap`` / ``docs/registers.md``.
    edc_event : In(stream.Signature(event_layout(params.edc))), ``pim``
        EDC events (``DRAFT``/``VERIFY``), as the EDC's ``i``.
    edc_decision : Out(stream.Signature(decision_layout(params.edc))), ``pim``
        EDC decisions, as the EDC's ``o``.
    tvc_cmd : In(stream.Signature(command_layout(params.tvc))), ``pim``
        TVC commands, as the TVC's ``cmd`` (also not ready while a bus write to the TVC waits).
    tvc_ans : Out(stream.Signature(answer_layout(params.tvc))), ``pim``
        TVC answers, as the TVC's ``ans``.
    want_draft : In(1), ``pim``
        The PIM wants to draft (GTSU request level).
    want_preverify : Out(1), ``pim``
        The GTSU's pre-verification request: the pre-verification queue holds an order on the
        PIM side.
    gtsu_task : Out(Task), gtsu_ready, gtsu_gating : Out(1),
    gtsu_dlm_enable, gtsu_tlm_enable : Out(ranks), ``pim``
        The GTSU's status and rank enables.
    draft_w, draft_w_level, feedback_r, feedback_r_level, preverify_r, preverify_r_level : ``pim``
    draft_r, draft_r_epoch, draft_r_level, draft_r_squashed, feedback_w, feedback_w_level : ``npu``
    preverify_w, preverify_w_level : ``cpu``
        The queues' ports, as in :class:`~ahasd.hw.queues.AsyncQueues`.

    Latency: the blocks' own (EDC decision 2 cycles, TVC answer ``4 + divider_cycles``, GTSU
    switch ``t_off + t_on``); the top adds no register stage on any event path.
    """

    def __init__(self, params: TopParams):
        if not isinstance(params, TopParams):
            raise _rejected(self, TypeError(f"params must be a TopParams, not {params!r}"))
        try:
            self.regmap = register_map(params)
        except ValueError as error:
            raise _rejected(self, error) from None
        self.params = params
        # Built here for its signature; elaborated as a submodule (like AsyncQueues' queues).
        self._queues = AsyncQueues(params.queues)
        queue_members = dict(self._queues.signature.members.items())
        ranks = params.gtsu.ranks
        super().__init__(
            {
                "bus": In(BUS_SIGNATURE),
                "edc_event": In(stream.Signature(event_layout(params.edc))),
                "edc_decision": Out(stream.Signature(decision_layout(params.edc))),
                "tvc_cmd": In(stream.Signature(command_layout(params.tvc))),
                "tvc_ans": Out(stream.Signature(answer_layout(params.tvc))),
                "want_draft": In(1),
                "want_preverify": Out(1),
                "gtsu_task": Out(Task),
                "gtsu_ready": Out(1),
                "gtsu_gating": Out(1),
                "gtsu_dlm_enable": Out(ranks),
                "gtsu_tlm_enable": Out(ranks),
                **queue_members,
            }
        )

    def member_domains(self) -> dict[str, str]:
        """The clock domain of every member: the queues' own, ``pim`` for the rest."""
        domains = dict.fromkeys(self.signature.members, "pim")
        domains.update(self._queues.member_domains())
        return domains

    def elaborate(self, platform):
        m = Module()
        p = self.params
        bus = self.bus

        # Soft resets: one pulse per block, at the edge of the write (W1P).
        soft_reset = {name: Signal(name=f"soft_reset_{name}") for name in SOFT_RESET_BITS}
        edc = EDC(p.edc)
        tvc = TVC(p.tvc)
        gtsu = GTSU(p.gtsu)
        m.submodules.edc = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["edc"]})(edc))
        m.submodules.tvc = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["tvc"]})(tvc))
        m.submodules.gtsu = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["gtsu"]})(gtsu))
        m.submodules.queues = queues = self._queues

        # Event ports.
        wiring.connect(m, wiring.flipped(self.edc_event), edc.i)
        wiring.connect(m, wiring.flipped(self.edc_decision), edc.o)
        wiring.connect(m, wiring.flipped(self.tvc_cmd), tvc.cmd)
        wiring.connect(m, wiring.flipped(self.tvc_ans), tvc.ans)
        for member, flow in queues.signature.members.items():
            ours, theirs = getattr(self, member), getattr(queues, member)
            if flow.is_port:
                if flow.flow == wiring.In:
                    m.d.comb += theirs.eq(ours)
                else:
                    m.d.comb += ours.eq(theirs)
            else:
                wiring.connect(m, wiring.flipped(ours), theirs)

        # GTSU requests and status.
        m.d.comb += [
            gtsu.want_draft.eq(self.want_draft),
            gtsu.want_preverify.eq(queues.preverify_r.valid),
            self.want_preverify.eq(queues.preverify_r.valid),
            self.gtsu_task.eq(gtsu.current_task),
            self.gtsu_ready.eq(gtsu.ready),
            self.gtsu_gating.eq(gtsu.gating),
            self.gtsu_dlm_enable.eq(gtsu.dlm_enable),
            self.gtsu_tlm_enable.eq(gtsu.tlm_enable),
        ]

        # Address decode.
        regs = self.regmap
        addr = bus.addr
        selected = {reg.name: _equals(addr, reg.address) for reg in regs}
        region = addr[ADDR_BITS - 2 :]
        table_index_bits = max(1, p.tvc.depth_log2)
        # An entry of a TVC table: the region's offset is below the depth.
        region_offset = addr[: ADDR_BITS - 2]
        entry_in_range = Signal()
        if p.tvc.depth == TABLE_REGION:
            m.d.comb += entry_in_range.eq(1)
        else:
            m.d.comb += entry_in_range.eq(~region_offset[p.tvc.depth_log2 :].any())
        in_table = Signal()
        table_code = Signal(2)
        m.d.comb += [
            in_table.eq(region.any() & entry_in_range),
            # Region 1, 2, 3 -> NVCT 0, PDCT 1, PVCT 2.
            table_code.eq(Cat(region[1] & ~region[0], region[1] & region[0])),
        ]
        assert all(_TABLE_OF_REGION[r].value == r - 1 for r in (1, 2, 3))

        # TVC writes go through the TVC's write port, which waits while a command runs.
        tvc_write = Signal()
        m.d.comb += [
            tvc_write.eq(bus.we & (selected["TVC_N_MAX"] | in_table)),
            bus.ready.eq(~(tvc_write & ~tvc.wr.ready)),
            tvc.wr.valid.eq(tvc_write),
            tvc.wr.payload.value.eq(bus.wdata),
        ]
        with m.If(selected["TVC_N_MAX"]):
            m.d.comb += tvc.wr.payload.table.eq(Table.N_MAX)
        with m.Else():
            m.d.comb += [
                tvc.wr.payload.table.as_value().eq(table_code),
                tvc.wr.payload.index.eq(region_offset[:table_index_bits]),
            ]
        # The TVC read port follows the address (combinational).
        m.d.comb += [
            tvc.rd_table.as_value().eq(table_code),
            tvc.rd_index.eq(region_offset[:table_index_bits]),
        ]

        write = bus.we & bus.ready
        m.d.comb += [
            edc.hmax_w.valid.eq(write & selected["EDC_HMAX"]),
            edc.hmax_w.payload.eq(bus.wdata),
        ]
        gtsu_regs = ("GTSU_DLM_MASK", "GTSU_TLM_MASK", "GTSU_T_OFF", "GTSU_T_ON")
        m.d.comb += [
            gtsu.wr.valid.eq(write & Cat(*(selected[name] for name in gtsu_regs)).any()),
            gtsu.wr.payload.reg.as_value().eq(addr[:2]),  # 0x30..0x33 in Reg's order
            gtsu.wr.payload.value.eq(bus.wdata),
        ]
        for name, bit in SOFT_RESET_BITS.items():
            m.d.comb += soft_reset[name].eq(write & selected["SOFT_RESET"] & bus.wdata[bit])

        # Read values.
        errors = Signal(len(ERROR_BITS))
        flags = {"edc": edc.error, "tvc": tvc.error, "gtsu_config": gtsu.config_error}
        for name, flag in flags.items():
            m.d.comb += errors[ERROR_BITS[name]].eq(flag)
        status = Signal(max(lsb + width for lsb, width in STATUS_BITS.values()))
        status_sources = {
            "gtsu_task": gtsu.current_task.as_value(),
            "gtsu_ready": gtsu.ready,
            "gtsu_gating": gtsu.gating,
            "tvc_busy": tvc.busy,
            "tvc_npu_busy": tvc.npu_busy,
        }
        for name, (lsb, width) in STATUS_BITS.items():
            m.d.comb += status[lsb : lsb + width].eq(status_sources[name])
        sources = {
            "ID": Const(ID_VALUE, DATA_BITS),
            "VERSION": Const(VERSION_VALUE, DATA_BITS),
            "ERROR": errors,
            "STATUS": status,
            "DRAFT_QUEUE_LEVEL": queues.draft_w_level,
            "FEEDBACK_QUEUE_LEVEL": queues.feedback_r_level,
            "PREVERIFY_QUEUE_LEVEL": queues.preverify_r_level,
            "EDC_HMAX": edc.hmax,
            "EDC_LLR": edc.llr,
            "EDC_DRAFTS": edc.drafts,
            "EDC_CONTINUES": edc.continues,
            "EDC_SUPPRESSIONS": edc.suppressions,
            "EDC_VERIFIES": edc.verifies,
            "EDC_ROLLBACKS": edc.rollbacks,
            "TVC_N_MAX": tvc.rd_value,  # the read port shows N_max when the table is N_MAX
            "TVC_NCR": tvc.ncr,
            "GTSU_DLM_MASK": gtsu.dlm_mask,
            "GTSU_TLM_MASK": gtsu.tlm_mask,
            "GTSU_T_OFF": gtsu.t_off,
            "GTSU_T_ON": gtsu.t_on,
            "GTSU_LAST_SWITCH": gtsu.last_switch_cycles,
            "GTSU_SWITCHES": gtsu.switches,
            "GTSU_DLM_ENABLE": gtsu.dlm_enable,
            "GTSU_TLM_ENABLE": gtsu.tlm_enable,
        }
        # N_MAX through the read port: region 0 decodes as table code 0, so override it.
        with m.If(selected["TVC_N_MAX"]):
            m.d.comb += tvc.rd_table.eq(Table.N_MAX)

        read_value = Signal(DATA_BITS)
        terms = []
        for reg in regs:
            if not reg.readable:
                continue
            if reg.name.startswith(("TVC_NVCT_", "TVC_PDCT_", "TVC_PVCT_")):
                continue  # decoded as a region below
            if reg.name not in sources:
                raise AssertionError(f"register {reg.name} has no source in the top")
            value = Signal(DATA_BITS, name=f"read_{reg.name.lower()}")
            m.d.comb += value.eq(sources[reg.name])
            terms.append(value & selected[reg.name].replicate(DATA_BITS))
        table_value = Signal(DATA_BITS)
        m.d.comb += table_value.eq(tvc.rd_value)
        terms.append(table_value & in_table.replicate(DATA_BITS))
        while len(terms) > 1:
            terms = [a | b for a, b in zip(terms[::2], terms[1::2], strict=False)] + (
                [terms[-1]] if len(terms) % 2 else []
            )
        m.d.comb += read_value.eq(terms[0])

        take_read = bus.re & bus.ready
        m.d.pim += bus.rvalid.eq(take_read)
        with m.If(take_read):
            m.d.pim += bus.rdata.eq(read_value)
        return m
