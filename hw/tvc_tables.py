"""The TVC's tables (spec 2.2, ``docs/tvc.md``): the three cycle tables, the ``N_max``
register, their registered sums and the combinational read port.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import equals, sum_of
from ahasd.params import TVCParams

__all__ = ["N_MAX_CODE", "TABLE_NAMES", "TVCTables", "table_sum_bits", "table_value_bits"]

#: The tables by selector code (``hw/tvc.py``'s ``Table``: ``NVCT = 0``, ``PDCT = 1``,
#: ``PVCT = 2``); code 3 selects the ``N_max`` register.
TABLE_NAMES = ("nvct", "pdct", "pvct")
N_MAX_CODE = 3


def table_value_bits(params: TVCParams) -> int:
    """Width of a written or read value: a table entry or the ``N_max`` register."""
    return max(params.ratio_bits, params.n_bits)


def table_sum_bits(params: TVCParams) -> int:
    """Width of a table's sum: ``depth`` ratios."""
    return params.ratio_bits + params.depth_log2


class TVCTables(wiring.Component):
    """The TVC's three cycle tables of ``depth`` ratios (index 0 newest) and ``N_max``.

    Parameters
    ----------
    params : TVCParams

    Members
    -------
    write_en : In(1)
        Write ``write`` at this edge.
    write : In(StructLayout(table: 2, index, value))
        ``table[index] := value`` (``index >= depth`` ignored), or ``N_max := min(value,
        2**n_bits - 1)`` for table code :data:`N_MAX_CODE`.
    push_en : In(1)
        Push ``push_value`` into table ``push_table`` at this edge (the entries shift by
        one, the oldest falls out): a ``LEARN``'s ratio. Has priority over ``write_en``.
    push_table : In(2)
    push_value : In(ratio_bits)
    rd_table : In(2), rd_index : In(read index bits)
    rd_value : Out(table_value_bits(params))
        Combinational read of ``table[index]`` (0 when ``index >= depth``) or of ``N_max``.
    sums : Out(ArrayLayout(table_sum_bits(params), 3))
        Each table's sum, registered: one edge behind the tables.
    n_max : Out(n_bits, init=params.n_max)
        The ``N_max`` register.

    Latency: a write or a push is in the table after its edge, in ``sums`` one edge later.
    No handshake: the TVC's state machine orders writes, pushes and the reads of ``sums``.

    Attributes
    ----------
    entries : list of list of Signal(ratio_bits)
        The entries by table code and index (the formal proofs read them whole).
    """

    def __init__(self, params: TVCParams):
        if not isinstance(params, TVCParams):
            self._MustUse__silence = True
            raise TypeError(f"params must be a TVCParams, not {params!r}")
        self.params = params
        index_bits = max(1, params.depth_log2)
        write = data.StructLayout(
            {"table": 2, "index": index_bits, "value": table_value_bits(params)}
        )
        super().__init__(
            {
                "write_en": In(1),
                "write": In(write),
                "push_en": In(1),
                "push_table": In(2),
                "push_value": In(params.ratio_bits),
                "rd_table": In(2),
                "rd_index": In(index_bits),
                "rd_value": Out(table_value_bits(params)),
                "sums": Out(data.ArrayLayout(table_sum_bits(params), len(TABLE_NAMES))),
                "n_max": Out(params.n_bits, init=params.n_max),
            }
        )
        self.entries = [
            [Signal(params.ratio_bits, name=f"{name}_{i}") for i in range(params.depth)]
            for name in TABLE_NAMES
        ]

    def elaborate(self, platform):
        p = self.params
        m = Module()
        sum_bits = table_sum_bits(p)
        for code, entries in enumerate(self.entries):
            name = f"sum_{TABLE_NAMES[code]}"
            total = Signal(sum_bits, name=name)
            m.d.sync += total.eq(sum_of(m, entries, sum_bits, name))
            m.d.comb += self.sums[code].eq(total)

        # Read port (combinational).
        if p.depth == 1:
            values = [Mux(self.rd_index.any(), 0, entries[0]) for entries in self.entries]
        else:
            values = [Array(entries)[self.rd_index] for entries in self.entries]
        m.d.comb += self.rd_value.eq(Array([*values, self.n_max])[self.rd_table])

        write = self.write
        with m.If(self.write_en):
            with m.If(equals(write.table, N_MAX_CODE)):
                if len(write.value) > p.n_bits:
                    too_big = write.value[p.n_bits :].any()
                    m.d.sync += self.n_max.eq(Mux(too_big, (1 << p.n_bits) - 1, write.value))
                else:
                    m.d.sync += self.n_max.eq(write.value)
            with m.Else():
                for code, entries in enumerate(self.entries):
                    with m.If(equals(write.table, code)):
                        for i, entry in enumerate(entries):
                            with m.If(equals(write.index, i)):
                                m.d.sync += entry.eq(write.value)

        with m.If(self.push_en):
            for code, entries in enumerate(self.entries):
                with m.If(equals(self.push_table, code)):
                    m.d.sync += entries[0].eq(self.push_value)
                    m.d.sync += [entries[i].eq(entries[i - 1]) for i in range(1, p.depth)]
        return m
