"""The register file generated from the compiled SystemRDL map (``hw/regmap.rdl``).

:class:`RegisterFile` answers the register accesses of the AXI4-Lite bridge
(:mod:`ahasd.hw.axi_lite`) with the decode the map describes, and nothing written by hand:
every address compare, read-mux term, byte strobe, access rule and reset value below comes
from the :class:`~ahasd.regmap.RegisterMap` records, so the RTL and the map cannot drift.
What the register file holds itself: the interrupt causes and enables, the write buffers and
read snapshots of the 64-bit registers, and the previous value of every interrupt condition
(to find its rising edge). Everything else lives in the blocks: a read shows the value the
block drives on the register file's ports, a write to an ``external`` register goes to the
block's write port.

Rules (``docs/integration.md``, the RDL's ``desc`` texts):

- An access to an address no register covers, or a write to a register with no writable
  field, is refused (``error``): ``SLVERR``, no effect. A read of a write-only register
  returns 0.
- A write changes the bytes whose ``wstrb`` bit is 1 and keeps the others. ``w1c`` bits
  clear where a 1 is written (a cause that rises in the same cycle stays set), ``w1p`` bits
  pulse for the cycle of the write.
- A 64-bit register with ``buffer_writes``: a write to its low word goes into its write
  buffer (bytes and their strobes); a write to its high word writes the register whole:
  buffered low bytes, the new high bytes, the register's current value in the bytes neither
  wrote; then the buffer empties. With ``buffer_reads``: a read of its low word takes a
  snapshot of the register's high word, which a read of its high word returns.
- A write to an ``external`` register waits (``ready`` low) until the block's write port is
  ready.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.axi_lite import register_access_signature
from ahasd.regmap import (
    ADDR_BITS,
    DATA_BITS,
    IRQ_ENABLE,
    IRQ_STATUS,
    STRB_BITS,
    Register,
    RegisterMap,
)

__all__ = ["RegisterFile", "group_signature", "port_name"]

WORD_BITS = ADDR_BITS - (STRB_BITS.bit_length() - 1)


def port_name(group: str) -> str:
    """The member of :class:`RegisterFile` for the RDL instance ``group`` (``tvc_nvct``)."""
    return group.lower()


def _write_layout(regs: tuple[Register, ...]) -> data.StructLayout:
    fields = {f.name: f.width for f in regs[0].fields if f.access == "rw"}
    if len(regs) > 1:
        fields = {"index": range(len(regs)), **fields}
    return data.StructLayout(fields)


def group_signature(regs: tuple[Register, ...]) -> wiring.Signature | None:
    """The ports of one RDL instance (a register, or the elements of an array), seen from
    the register file; ``None`` when it needs none (constants, storage of its own).

    - a readable field held elsewhere (``r`` not constant, ``rw`` of an ``external``
      register), or the condition of a ``w1c`` cause: ``In(width)``, named as the field; for
      an array, the value of the element ``index`` names;
    - a ``w1p`` field: ``Out(width)``, high for the cycle of the write;
    - an ``external`` register: ``selected`` (``Out(1)``, an access addresses it), ``index``
      (``Out``, for an array: which element) and ``write`` (``Out(stream)``, the new values
      of its read/write fields, and the element ``index`` for an array).
    """
    first = regs[0]
    members = {}
    for f in first.fields:
        held_elsewhere = (f.access == "r" and not f.constant) or (
            f.access == "rw" and first.external
        )
        if held_elsewhere or f.access == "w1c":
            members[f.name] = In(f.width)
        elif f.access == "w1p":
            members[f.name] = Out(f.width)
    if first.external or len(regs) > 1:
        members["selected"] = Out(1)
    if len(regs) > 1:
        members["index"] = Out(range(len(regs)))
    if first.external and any(f.access == "rw" for f in first.fields):
        members["write"] = Out(stream.Signature(_write_layout(regs)))
    return wiring.Signature(members) if members else None


def _equals(value, constant: int):
    """``value == constant`` as an AND of bits (no operand-width mismatch in the Verilog)."""
    return Cat(*(value[i] if (constant >> i) & 1 else ~value[i] for i in range(len(value)))).all()


def _or_tree(terms: list):
    while len(terms) > 1:
        terms = [a | b for a, b in zip(terms[::2], terms[1::2], strict=False)] + (
            [terms[-1]] if len(terms) % 2 else []
        )
    return terms[0]


def _tag(reg: Register) -> str:
    """A signal-name-safe name of a register (``tvc_nvct_2``)."""
    return reg.name.lower().replace("[", "_").replace("]", "")


class RegisterFile(wiring.Component):
    """Register decode, read mux and write strobes generated from a register map.

    Parameters
    ----------
    regmap : RegisterMap
        The compiled map (:func:`ahasd.regmap.register_map`).

    Members
    -------
    access : In(register_access_signature(WORD_BITS, 32))
        The bridge's register accesses (:mod:`ahasd.hw.axi_lite`): decoded in the cycle they
        are first presented, answered (``ready``, ``rdata``, ``error``) from the next cycle
        on, acting at the edge that takes them. The presenter keeps an access of one
        direction (``write``) unchanged until it is taken; presenting the other direction in
        between is allowed and starts a new decode.
    irq : Out(1)
        High while an ``IRQ_STATUS`` cause and its ``IRQ_ENABLE`` bit are both 1 (from
        registers, no combinational path from an input).
    <group> : Out(group_signature(...)), one per RDL instance that needs ports
        (:func:`port_name`: ``edc_hmax``, ``tvc_nvct``, ...; see :func:`group_signature`).

    Latency: one cycle of decode: an access presented in cycle 0 is answered and taken at
    the end of cycle 1 at the earliest (the word selects are registers: the address decode
    is off the paths into the blocks, which kept the ``pim`` clock below 800 MHz at 28 nm);
    reads show the registers' values in the cycle they are taken; writes act at the edge
    that takes them; an interrupt cause is set at the edge after its condition rises.
    ``ready`` is low in a decode cycle and for a write that reaches an ``external`` register
    whose ``write`` port is not ready. Throughput: one access every 2 cycles.
    """

    def __init__(self, regmap: RegisterMap):
        if not isinstance(regmap, RegisterMap):
            self._MustUse__silence = True
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        self.regmap = regmap
        self.groups = regmap.groups()
        members = {
            "access": In(register_access_signature(WORD_BITS, DATA_BITS)),
            "irq": Out(1),
        }
        for group, regs in self.groups.items():
            signature = group_signature(regs)
            if signature is not None:
                members[port_name(group)] = Out(signature)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        access = self.access
        # The registered decode: each word select is a register, loaded from the address of
        # the access presented in the cycle before. An access is answered once it has been
        # presented for a cycle with the same direction (``write``): the bridge keeps each
        # direction's address, data and strobes until that access is taken, but may present
        # the other direction in between (a read goes by a write that waits), and a change
        # of direction costs a new decode cycle. The first cycle after a taken access is a
        # decode cycle too, as the next access may have a new address.
        presented = Signal(name="decode_presented")
        presented_write = Signal(name="decode_write")
        m.d.sync += [
            presented.eq(access.valid & ~(access.valid & access.ready)),
            presented_write.eq(access.write),
        ]
        self._decoded = access.valid & presented & ~(access.write ^ presented_write)
        self._taken = access.valid & access.ready
        self._strobe_mask = Signal(DATA_BITS)
        m.d.comb += self._strobe_mask.eq(Cat(*(bit.replicate(8) for bit in access.wstrb)))

        # State the register file keeps: read/write fields of its own, interrupt causes.
        self._storage: dict[tuple[str, str], Signal] = {}
        for reg in self.regmap:
            for f in reg.fields:
                if (f.access == "rw" and not reg.external) or f.access == "w1c":
                    self._storage[(reg.name, f.name)] = Signal(
                        f.width, init=f.reset, name=f"{_tag(reg)}_{f.name}"
                    )

        hits, refused, waits, read_terms = [], [], [], []
        for group, regs in self.groups.items():
            ports = getattr(self, port_name(group), None)
            members = ports.signature.members if ports is not None else {}
            selected, offers = [], []
            for reg in regs:
                word_selects = []
                for address in reg.word_addresses:
                    select = Signal(name=f"select_{_tag(reg)}_{(address - reg.address) // 4}")
                    m.d.sync += select.eq(_equals(access.addr, address >> 2))
                    word_selects.append(select)
                hits += word_selects
                selected.append(Cat(*word_selects).any())
                if not reg.writable:
                    refused += word_selects
                current = self._current_value(m, reg, ports)
                read_terms += self._reads(m, reg, word_selects, current)
                if reg.writable:
                    offer = self._writes(m, reg, ports, word_selects, current)
                    if offer is not None:
                        offers.append(offer)
                        waits.append(offer & ~ports.write.ready)
            if "selected" in members:
                m.d.comb += ports.selected.eq(Cat(*selected).any())
            if "index" in members:
                width = len(ports.index)
                m.d.comb += ports.index.eq(
                    _or_tree([Const(i, width) & s.replicate(width) for i, s in enumerate(selected)])
                )
            if offers:
                m.d.comb += ports.write.valid.eq(Cat(*offers).any())

        m.d.comb += [
            access.error.eq(~Cat(*hits).any() | (access.write & Cat(*refused).any())),
            access.ready.eq(self._decoded & ~(access.write & Cat(*waits).any())),
            access.rdata.eq(_or_tree(read_terms)),
        ]
        self._interrupts(m)
        return m

    def _current_value(self, m, reg: Register, ports) -> Signal:
        """The register's value as a read shows it now (readable fields at their bits)."""
        current = Signal(reg.width, name=f"value_{_tag(reg)}")
        for f in reg.fields:
            if not f.readable:
                continue
            if f.constant:
                source = Const(f.reset, f.width)
            elif (reg.name, f.name) in self._storage:
                source = self._storage[(reg.name, f.name)]
            else:
                source = getattr(ports, f.name)
            m.d.comb += current[f.lsb : f.lsb + f.width].eq(source)
        return current

    def _reads(self, m, reg: Register, word_selects: list, current: Signal) -> list:
        """Read-mux terms of the register's words; the snapshot of a ``buffer_reads`` one."""
        if not reg.readable:
            return []  # write-only: reads 0
        values = [current[w * DATA_BITS : (w + 1) * DATA_BITS] for w in range(reg.words)]
        if reg.buffer_reads and reg.words > 1:
            snapshot = Signal(reg.width - DATA_BITS, name=f"snapshot_{_tag(reg)}")
            with m.If(self._taken & ~self.access.write & word_selects[0]):
                m.d.sync += snapshot.eq(current[DATA_BITS:])
            values[1:] = [
                snapshot[(w - 1) * DATA_BITS : w * DATA_BITS] for w in range(1, reg.words)
            ]
        return [
            value & select.replicate(DATA_BITS)
            for value, select in zip(values, word_selects, strict=True)
        ]

    def _writes(self, m, reg: Register, ports, word_selects: list, current: Signal):
        """Writes into the register (buffer, storage, pulses, clears); returns the offer to
        the block's write port of an ``external`` register, else None."""
        access, mask = self.access, self._strobe_mask
        taken_write = self._taken & access.write
        last = reg.words - 1
        buffer = strobes = None
        if reg.buffer_writes and reg.words > 1:
            buffer = Signal(last * DATA_BITS, name=f"wbuffer_{_tag(reg)}")
            strobes = Signal(last * 4, name=f"wbuffer_strobes_{_tag(reg)}")
            for word in range(last):
                chunk = buffer[word * DATA_BITS : (word + 1) * DATA_BITS]
                chunk_strobes = strobes[word * 4 : (word + 1) * 4]
                with m.If(taken_write & word_selects[word]):
                    m.d.sync += [
                        chunk.eq((chunk & ~mask) | (access.wdata & mask)),
                        chunk_strobes.eq(chunk_strobes | access.wstrb),
                    ]
            with m.If(taken_write & word_selects[last]):
                m.d.sync += strobes.eq(0)
        # The words that write the register: every word, or only the last when buffered.
        writing = [last] if buffer is not None else list(range(reg.words))
        new_value = Signal(reg.width, name=f"new_{_tag(reg)}")
        changed = Signal(reg.width, name=f"changed_{_tag(reg)}")
        for word in writing:  # one word is selected at most
            with m.If(word_selects[word]):
                parts, changes = [], []
                for other in range(reg.words):
                    old = current[other * DATA_BITS : (other + 1) * DATA_BITS]
                    if other == word:
                        parts.append((old & ~mask) | (access.wdata & mask))
                        changes.append(mask)
                    elif buffer is not None:
                        held = buffer[other * DATA_BITS : (other + 1) * DATA_BITS]
                        held_mask = Cat(
                            *(b.replicate(8) for b in strobes[other * 4 : (other + 1) * 4])
                        )
                        parts.append((old & ~held_mask) | (held & held_mask))
                        changes.append(held_mask)
                    else:
                        parts.append(old)
                        changes.append(Const(0, DATA_BITS))
                m.d.comb += [new_value.eq(Cat(*parts)), changed.eq(Cat(*changes))]
        write = taken_write & Cat(*(word_selects[w] for w in writing)).any()
        # Bits a write to this word can reach, for the pulses and the clears.
        written = Signal(reg.width, name=f"written_{_tag(reg)}")
        m.d.comb += written.eq(
            Cat(
                *(
                    (access.wdata & mask & word_selects[word].replicate(DATA_BITS))
                    if word in writing
                    else Const(0, DATA_BITS)
                    for word in range(reg.words)
                )
            )
        )
        offer = None
        rw_fields = [f for f in reg.fields if f.access == "rw"]
        for f in reg.fields:
            bits = slice(f.lsb, f.lsb + f.width)
            if f.access == "rw" and not reg.external:
                with m.If(write):
                    m.d.sync += self._storage[(reg.name, f.name)].eq(new_value[bits])
            elif f.access == "w1p":
                m.d.comb += getattr(ports, f.name).eq(written[bits] & write.replicate(f.width))
            elif f.access == "w1c":
                status = self._storage[(reg.name, f.name)]
                condition = getattr(ports, f.name)
                before = Signal(f.width, name=f"{_tag(reg)}_{f.name}_before")
                m.d.sync += before.eq(condition)
                rises = condition & ~before
                with m.If(write):
                    m.d.sync += status.eq((status & ~written[bits]) | rises)
                with m.Else():
                    m.d.sync += status.eq(status | rises)
        if reg.external and rw_fields:
            port = ports.write
            touches = Cat(*(changed[f.lsb : f.lsb + f.width] for f in rw_fields)).any()
            offer = self._decoded & access.write & Cat(*(word_selects[w] for w in writing)).any()
            offer = offer & touches
            with m.If(Cat(*word_selects).any()):
                for f in rw_fields:
                    m.d.comb += getattr(port.payload, f.name).eq(new_value[f.lsb : f.lsb + f.width])
                if reg.index is not None:
                    m.d.comb += port.payload.index.eq(reg.index)
        return offer

    def _interrupts(self, m) -> None:
        status = self.regmap.get(IRQ_STATUS)
        active = [
            self._storage[(IRQ_STATUS, f.name)].any()
            & self._storage[(IRQ_ENABLE, self.regmap.irq_enable(f.name).name)].any()
            for f in status.fields
        ]
        m.d.comb += self.irq.eq(Cat(*active).any())
