"""The AHASD controller top (spec 2.6, ``docs/top.md``, ``docs/integration.md``).

One component holding the EDC, the TVC, the GTSU and the three async queues, behind an
AXI4-Lite subordinate port for the CPU, with one level-sensitive interrupt, and event ports
for the PIM and NPU sides. This is what the co-simulation drives.

Clock domains: the controller core (EDC, TVC, GTSU, the AXI4-Lite port and the register
file) runs in ``pim`` (the PIM clock, 800 MHz on the paper's platform): the blocks' ``sync``
is renamed to ``pim``. The queues cross to ``npu`` (the draft queue's reader, the feedback
queue's writer) and ``cpu`` (the pre-verification queue's writer). The generated Verilog has
``pim_clk``/``pim_rst``, ``npu_clk``/``npu_rst`` and ``cpu_clk``/``cpu_rst``.

The register decode is generated from the SystemRDL map (``hw/regmap.rdl``, compiled by
:mod:`ahasd.regmap`) by :class:`ahasd.hw.registers.RegisterFile`; this module only binds the
register file's ports to the blocks, and refuses, with a message naming the field, a map
whose fields the blocks do not match. Internal wiring besides: the GTSU's
``want_preverify`` is the pre-verification queue's PIM-side ``valid`` (an order is
pending), exactly the level ``docs/spec-decisions.md`` names.
"""

from __future__ import annotations

from amaranth.hdl import Cat, DomainRenamer, Module, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.axi_lite import AXI4LiteSubordinate, axi4_lite_signature
from ahasd.hw.edc import EDC, EventKind, decision_layout, event_layout
from ahasd.hw.gtsu import GTSU, Reg, Task
from ahasd.hw.queues import AsyncQueues
from ahasd.hw.registers import RegisterFile, port_name
from ahasd.hw.tvc import TVC, Table, answer_layout, command_layout
from ahasd.params import TopParams
from ahasd.regmap import ADDR_BITS, DATA_BITS, register_map

__all__ = ["ControllerTop"]

#: The TVC table of each table register array.
_TABLES = {"TVC_NVCT": Table.NVCT, "TVC_PDCT": Table.PDCT, "TVC_PVCT": Table.PVCT}
#: The GTSU write-port register of each GTSU register.
_GTSU_REGISTERS = {
    "GTSU_DLM_MASK": Reg.DLM_MASK,
    "GTSU_TLM_MASK": Reg.TLM_MASK,
    "GTSU_T_OFF": Reg.T_OFF,
    "GTSU_T_ON": Reg.T_ON,
}


def _equals(value, constant: int):
    """``value == constant`` as an AND of bits (no operand-width mismatch in the Verilog)."""
    bits = [value[i] if (constant >> i) & 1 else ~value[i] for i in range(len(value))]
    return Cat(*bits).all()


def _rejected(component: wiring.Component, error: Exception) -> Exception:
    component._MustUse__silence = True
    return error


class ControllerTop(wiring.Component):
    """EDC, TVC, GTSU and the queues behind an AXI4-Lite port and an interrupt (spec 2.6).

    Parameters
    ----------
    params : TopParams
        The blocks' parameter sets. ``edc.stats_bits`` and ``gtsu.ranks`` must fit a 32-bit
        register; the TVC's 40-bit (up to 64-bit) table entries and NCR are 64-bit registers.

    Members
    -------
    s_axi : In(axi4_lite_signature(ADDR_BITS, 32)), ``pim``
        AXI4-Lite subordinate port (:class:`~ahasd.hw.axi_lite.AXI4LiteSubordinate`): 12-bit
        byte addresses, 32-bit data, ``SLVERR`` for an unmapped address or a write to a
        read-only register, ``WSTRB`` honoured. Register map: ``hw/regmap.rdl`` /
        ``docs/registers.md``; rules and timing: ``docs/integration.md``.
    irq : Out(1), ``pim``
        Level-sensitive, active high: an ``IRQ_STATUS`` cause with its ``IRQ_ENABLE`` bit.
    edc_event : In(stream.Signature(event_layout(params.edc))), ``pim``
        EDC events (``DRAFT``/``VERIFY``), as the EDC's ``i``.
    edc_decision : Out(stream.Signature(decision_layout(params.edc))), ``pim``
        EDC decisions, as the EDC's ``o``.
    tvc_cmd : In(stream.Signature(command_layout(params.tvc))), ``pim``
        TVC commands, as the TVC's ``cmd`` (also not ready while a register write to the TVC
        is presented: the TVC gives its write port priority).
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

    Latency: the blocks' own on the event ports (EDC decision 2 cycles, TVC answer ``4 +
    divider_cycles``, GTSU switch ``t_off + t_on``); the top adds no register stage on any
    event path. AXI (``docs/integration.md``, "The bus"): ``RVALID`` is high from the 3rd
    cycle after the cycle of the AR handshake (cycle 0), ``BVALID`` from the 3rd after the
    later AW/W handshake's (the bridge's 2 and the register file's decode cycle), plus the
    time a write to a TVC
    register waits for a ``LEARN`` or an ``ASK`` to finish (at most ``2 + divider_cycles``
    cycles plus the time an answer waits on ``tvc_ans.ready``).
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
                "s_axi": In(axi4_lite_signature(ADDR_BITS, DATA_BITS)),
                "irq": Out(1),
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

        registers = RegisterFile(self.regmap)
        soft_reset = {name: Signal(name=f"soft_reset_{name}") for name in ("edc", "tvc", "gtsu")}
        edc = EDC(p.edc)
        tvc = TVC(p.tvc)
        gtsu = GTSU(p.gtsu)
        queues = self._queues
        bridge = AXI4LiteSubordinate(addr_bits=ADDR_BITS, data_bits=DATA_BITS)
        # The register file's ports first: a map the blocks do not match stops here.
        self._bind(m, registers, *self._register_signals(edc, tvc, gtsu, soft_reset))
        m.submodules.edc = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["edc"]})(edc))
        m.submodules.tvc = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["tvc"]})(tvc))
        m.submodules.gtsu = DomainRenamer("pim")(ResetInserter({"sync": soft_reset["gtsu"]})(gtsu))
        m.submodules.queues = queues
        m.submodules.axi = DomainRenamer("pim")(bridge)
        m.submodules.registers = DomainRenamer("pim")(registers)
        wiring.connect(m, wiring.flipped(self.s_axi), bridge.axi)
        wiring.connect(m, bridge.access, registers.access)
        m.d.comb += self.irq.eq(registers.irq)

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

        # The TVC's read port follows the access: the table array (and element) or N_MAX
        # the register file selects. One access at a time, so one of them at most.
        index_bits = len(tvc.rd_index)
        m.d.comb += tvc.rd_table.eq(Table.N_MAX)  # TVC_N_MAX, and any other access
        for group, table in _TABLES.items():
            ports = getattr(registers, port_name(group))
            with m.If(ports.selected):
                m.d.comb += tvc.rd_table.eq(table)
                if p.tvc.depth > 1:  # a one-entry table has no index
                    m.d.comb += tvc.rd_index.eq(ports.index[:index_bits])

        # Writes: the EDC's Hmax port, the GTSU's and the TVC's write ports.
        hmax = registers.edc_hmax.write
        m.d.comb += [
            edc.hmax_w.valid.eq(hmax.valid),
            edc.hmax_w.payload.eq(hmax.payload.hmax),
            hmax.ready.eq(1),
        ]
        self._gtsu_writes(m, registers, gtsu)
        self._tvc_writes(m, registers, tvc)
        return m

    def _register_signals(self, edc: EDC, tvc: TVC, gtsu: GTSU, soft_reset: dict):
        """``(sources, pulses)``: the block signal of every register field the register file
        reads, and of every pulse it drives, by ``(register, field)``."""
        p = self.params
        queues = self._queues
        # A DRAFT held off while the EDC is full (the EDC_LLR register at its maximum).
        event = self.edc_event
        refusing = (
            event.valid
            & ~event.ready
            & _equals(event.payload.kind.as_value(), EventKind.DRAFT.value)
            & edc.llr.all()
        )

        # What the register file reads: (register, field) -> the block's signal.
        levels = {
            "DRAFT_QUEUE_LEVEL": queues.draft_w_level,
            "FEEDBACK_QUEUE_LEVEL": queues.feedback_r_level,
            "PREVERIFY_QUEUE_LEVEL": queues.preverify_r_level,
        }
        sources = {
            ("ERROR", "edc"): edc.error,
            ("ERROR", "tvc"): tvc.error,
            ("ERROR", "gtsu_config"): gtsu.config_error,
            ("STATUS", "gtsu_task"): gtsu.current_task.as_value(),
            ("STATUS", "gtsu_ready"): gtsu.ready,
            ("STATUS", "gtsu_gating"): gtsu.gating,
            ("STATUS", "tvc_busy"): tvc.busy,
            ("STATUS", "tvc_npu_busy"): tvc.npu_busy,
            ("IRQ_STATUS", "preverify"): queues.preverify_r.valid,
            ("IRQ_STATUS", "edc_backpressure"): refusing,
            ("IRQ_STATUS", "edc_error"): edc.error,
            ("IRQ_STATUS", "tvc_error"): tvc.error,
            ("IRQ_STATUS", "gtsu_error"): gtsu.config_error,
            **{(name, "entries"): level for name, level in levels.items()},
            ("EDC_HMAX", "hmax"): edc.hmax,
            ("EDC_LLR", "llr"): edc.llr,
            **{
                (f"EDC_{name.upper()}", "count"): getattr(edc, name)
                for name in ("drafts", "continues", "suppressions", "verifies", "rollbacks")
            },
            ("TVC_N_MAX", "n_max"): tvc.rd_value[: p.tvc.n_bits],
            ("TVC_NCR", "ncr"): tvc.ncr,
            **{(group, "ratio"): tvc.rd_value[: p.tvc.ratio_bits] for group in _TABLES},
            ("GTSU_DLM_MASK", "mask"): gtsu.dlm_mask,
            ("GTSU_TLM_MASK", "mask"): gtsu.tlm_mask,
            ("GTSU_T_OFF", "cycles"): gtsu.t_off,
            ("GTSU_T_ON", "cycles"): gtsu.t_on,
            ("GTSU_LAST_SWITCH", "cycles"): gtsu.last_switch_cycles,
            ("GTSU_SWITCHES", "count"): gtsu.switches,
            ("GTSU_DLM_ENABLE", "enable"): gtsu.dlm_enable,
            ("GTSU_TLM_ENABLE", "enable"): gtsu.tlm_enable,
        }
        pulses = {("SOFT_RESET", name): signal for name, signal in soft_reset.items()}

        return sources, pulses

    def _bind(self, m, registers: RegisterFile, sources: dict, pulses: dict) -> None:
        """Connect every port of the register file to its block signal, refusing (with the
        field's name) a field the top has no signal for, or one of another width."""
        bound = set()
        for group in registers.groups:
            ports = getattr(registers, port_name(group), None)
            if ports is None:
                continue
            for member, flow in ports.signature.members.items():
                if member in ("selected", "index", "write"):
                    continue  # bound below, by the writes and the TVC read port
                key = (group, member)
                table = sources if flow.flow == wiring.In else pulses
                if key not in table:
                    raise ValueError(f"register field {group}.{member} has no signal in the top")
                signal = table[key]
                port = getattr(ports, member)
                if len(signal) != len(port):
                    raise ValueError(
                        f"register field {group}.{member} is {len(port)} bits wide, its "
                        f"signal in the top {len(signal)}"
                    )
                if flow.flow == wiring.In:
                    m.d.comb += port.eq(signal)
                else:
                    m.d.comb += signal.eq(port)
                bound.add(key)
        unused = [key for key in {**sources, **pulses} if key not in bound]
        if unused:
            group, member = unused[0]
            raise ValueError(f"the register map has no field {group}.{member}")

    def _gtsu_writes(self, m, registers: RegisterFile, gtsu: GTSU) -> None:
        writes = {name: getattr(registers, port_name(name)).write for name in _GTSU_REGISTERS}
        m.d.comb += gtsu.wr.valid.eq(Cat(*(w.valid for w in writes.values())).any())
        for name, write in writes.items():
            m.d.comb += write.ready.eq(gtsu.wr.ready)
            field = next(iter(write.payload.shape().members))
            with m.If(write.valid):
                m.d.comb += [
                    gtsu.wr.payload.reg.eq(_GTSU_REGISTERS[name]),
                    gtsu.wr.payload.value.eq(getattr(write.payload, field)),
                ]

    def _tvc_writes(self, m, registers: RegisterFile, tvc: TVC) -> None:
        index_bits = len(tvc.wr.payload.index)
        writes = {Table.N_MAX: registers.tvc_n_max.write}
        writes.update(
            {table: getattr(registers, port_name(group)).write for group, table in _TABLES.items()}
        )
        m.d.comb += tvc.wr.valid.eq(Cat(*(w.valid for w in writes.values())).any())
        for table, write in writes.items():
            m.d.comb += write.ready.eq(tvc.wr.ready)
            with m.If(write.valid):
                m.d.comb += tvc.wr.payload.table.eq(table)
                if table == Table.N_MAX:
                    m.d.comb += tvc.wr.payload.value.eq(write.payload.n_max)
                else:
                    m.d.comb += tvc.wr.payload.value.eq(write.payload.ratio)
                    if self.params.tvc.depth > 1:  # a one-entry table has no index
                        m.d.comb += tvc.wr.payload.index.eq(write.payload.index[:index_bits])
