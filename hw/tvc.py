"""TVC: time-aware pre-verification control (spec 2.2, ``docs/tvc.md``).

The TVC predicts how many NPU cycles the running verification has left and answers how many
drafted tokens the PIM can pre-verify in that time. It holds three cycle tables of
``depth`` UQ(ratio_bits - F).F ratios (index 0 newest, FIFO replacement by shifting):

=========  ==========================================  ===================================
table      ratio                                       learned from
=========  ==========================================  ===================================
``NVCT``   NPU cycles per KV-cache token               a finished NPU verification
``PDCT``   PIM cycles per drafted token                a finished draft batch
``PVCT``   PIM cycles per pre-verified token           a finished pre-verification
=========  ==========================================  ===================================

and answers ``ASK(P)`` with the spec's integer formulas (``S = F + log2(depth)``)::

    C_npu  = min(2**cycle_bits - 1, (sum(NVCT) * L_kv) >> S)
    C_d1   = sum(PDCT) >> S
    C_left = C_npu - NCR - C_d1                                     (signed, exact)
    n      = 0                                   if the NPU is idle or C_left <= 0
           = min(P, N_max)                       if sum(PVCT) == 0
           = min(P, N_max, (C_left << S) // sum(PVCT))   otherwise

One sequential divider (two restoring steps per cycle, i.e. radix 4) serves both ``LEARN``'s
ratio and ``ASK``'s quotient; an early saturation test bounds the quotient width, so an
``ASK`` divides over ``n_bits`` quotient bits only (see ``docs/tvc.md``).

Structure (``m.submodules`` names): ``tables``, the tables, ``N_max``, their sums and the
read port (:class:`~ahasd.hw.tvc_tables.TVCTables`); ``divider``, the radix-4 divider
(:class:`~ahasd.hw.tvc_divider.Radix4Divider`); the command state machine is here.

Payload layouts are built once here, as functions of :class:`~ahasd.params.TVCParams`; the
testbenches pack and unpack through them.

The description is written for lint-clean Verilog (``verilator -Wall`` with the project's
waivers only): every arithmetic or comparison operator sees operands of equal width (an
adder tree, ``at_least`` in ``hw/arith.py``), constants are matched bit by bit (``equals``) and the
states are one-hot flags tested with ``If``, because Amaranth emits minimal-width constants
and ``case`` statements that Verilator reports as width mismatches and incomplete cases.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import at_least, equals, product, sum_of, widened
from ahasd.hw.tvc_divider import Radix4Divider
from ahasd.hw.tvc_tables import TVCTables, table_sum_bits, table_value_bits
from ahasd.params import TVCParams

__all__ = [
    "TVC",
    "Op",
    "Table",
    "answer_layout",
    "c_left_bits",
    "command_layout",
    "divider_cycles",
    "read_index_bits",
    "write_layout",
]


class Table(enum.Enum, shape=2):
    """Table selector of ``LEARN``, the write port and the read port.

    ``N_MAX`` names the answer clamp register on the write and read ports; a ``LEARN`` into
    it is a protocol error.
    """

    NVCT = 0
    PDCT = 1
    PVCT = 2
    N_MAX = 3


class Op(enum.Enum, shape=2):
    """The tag of a command."""

    LEARN = 0
    NPU_START = 1
    NPU_DONE = 2
    ASK = 3


def read_index_bits(params: TVCParams) -> int:
    """Width of a table index (at least one bit, so a depth-1 table still has a field)."""
    return max(1, params.depth_log2)


def c_left_bits(params: TVCParams) -> int:
    """Width of the signed ``C_left``: ``C_npu`` and ``NCR`` are below ``2**cycle_bits``,
    ``C_d1`` below ``2**(ratio_bits - F)``; two more bits hold the sign and the borrow."""
    return max(params.cycle_bits, params.ratio_bits - params.frac_bits) + 2


def command_layout(params: TVCParams) -> data.StructLayout:
    """A tagged command: ``op`` selects which member of ``args`` is meaningful.

    ``LEARN(table, cycles, length)``, ``NPU_START(l_kv)``, ``NPU_DONE()``, ``ASK(p)``.
    """
    return data.StructLayout(
        {
            "op": Op,
            "args": data.UnionLayout(
                {
                    "learn": data.StructLayout(
                        {
                            "table": Table,
                            "cycles": params.cycle_bits,
                            "length": params.length_bits,
                        }
                    ),
                    "npu_start": data.StructLayout({"l_kv": params.length_bits}),
                    "ask": data.StructLayout({"p": params.length_bits}),
                }
            ),
        }
    )


def write_layout(params: TVCParams) -> data.StructLayout:
    """``table[index] := value`` (a preset), or ``N_max := value`` when ``table`` is ``N_MAX``."""
    return data.StructLayout(
        {"table": Table, "index": read_index_bits(params), "value": table_value_bits(params)}
    )


def answer_layout(params: TVCParams) -> data.StructLayout:
    """The answer to an ``ASK``: ``n`` and, for inspection, the ``C_left`` it came from."""
    return data.StructLayout({"n": params.n_bits, "c_left": signed(c_left_bits(params))})


def _even(bits: int) -> int:
    return bits + (bits & 1)


def _learn_quotient_bits(params: TVCParams) -> int:
    """Quotient bits a ``LEARN`` needs: the ratio saturates at ``ratio_bits``, and
    ``(cycles << F) // length`` never exceeds ``cycle_bits + F`` bits."""
    return min(params.ratio_bits, params.cycle_bits + params.frac_bits)


def divider_cycles(params: TVCParams) -> dict[str, int]:
    """Cycles the shared divider runs for each command (two quotient bits per cycle)."""
    return {
        "ask": _even(params.n_bits) // 2,
        "learn": _even(_learn_quotient_bits(params)) // 2,
    }


#: The cycle tables, in the order of their codes (``hw/tvc_tables.py``'s ``TABLE_NAMES``).
TABLES = (Table.NVCT, Table.PDCT, Table.PVCT)


class TVC(wiring.Component):
    """Time-aware pre-verification control (spec 2.2).

    Parameters
    ----------
    params : TVCParams

    Members
    -------
    cmd : In(stream.Signature(command_layout(params)))
        Commands. ``ready`` is low while a ``LEARN`` or an ``ASK`` is in progress (including
        an answer waiting on ``ans.ready``) and while ``wr.valid`` is high: a command waits,
        it is never dropped. ``NPU_START`` and ``NPU_DONE`` take effect at their acceptance
        edge and free the port at once.
    wr : In(stream.Signature(write_layout(params)))
        Presets: ``table[index] := value`` (``index >= depth`` is ignored), or ``N_max :=
        min(value, 2**n_bits - 1)``. Takes effect at the acceptance edge; has priority over
        ``cmd`` in the same cycle; held off (``ready`` low) while a command is in progress,
        so every write and command is ordered.
    ans : Out(stream.Signature(answer_layout(params)))
        One answer per ``ASK``, held until taken.
    rd_table : In(Table), rd_index : In(read_index_bits(params))
    rd_value : Out(max(ratio_bits, n_bits))
        Combinational read of ``table[index]`` (0 when ``index >= depth``) or of ``N_max``.
    busy : Out(1)
        A ``LEARN`` or an ``ASK`` is in progress (``cmd`` and ``wr`` are not ready).
    npu_busy : Out(1)
        Between an accepted ``NPU_START`` and the next ``NPU_DONE``.
    ncr : Out(cycle_bits)
        The NPU current-cycle register: ``t - t0`` in cycle ``t`` after an ``NPU_START``
        accepted in cycle ``t0``, saturating; frozen by ``NPU_DONE``.
    error : Out(1)
        Sticky protocol error: a ``LEARN`` with ``length == 0`` or into ``N_MAX`` (the
        command is consumed, no table changes). Cleared by reset only.

    Attributes (not ports; for the formal wrapper)
    ----------------------------------------------
    learn_done : Signal(1)
        High in the cycle whose closing edge completes a ``LEARN`` (push or error).
    n_max : Signal(n_bits)
        The ``N_max`` register (also readable through the read port).
    tables : dict of Table to list of Signal(ratio_bits)
        ``NVCT``, ``PDCT``, ``PVCT``, index 0 newest (the arithmetic proofs read them whole).
    l_kv : Signal(length_bits)
        ``L_kv`` latched by the last ``NPU_START``.

    Latency, counted from the cycle ``a`` in which a command is accepted (``ans.ready``
    high): ``NPU_START``/``NPU_DONE`` act at the acceptance edge, the port is ready again in
    cycle ``a + 1``; a ``LEARN``'s entry is in the table (and the port ready) in cycle
    ``a + 2 + divider_cycles["learn"]`` (``a + 2`` when rejected or saturated); an ``ASK``'s
    answer is valid in cycle ``a + 4 + divider_cycles["ask"]`` (``a + 4`` when it needs no
    division) and the port is ready one cycle after the answer is taken. Defaults (40-bit
    ratios and cycles): ``LEARN`` 22, ``ASK`` 8; the worst parameters allowed (``ratio_bits =
    64``, ``cycle_bits + F >= 64``, ``n_bits = 16``): 34 and 12, both within the spec's 40.
    """

    def __init__(self, params: TVCParams):
        if not isinstance(params, TVCParams):
            self._MustUse__silence = True
            raise TypeError(f"params must be a TVCParams, not {params!r}")
        self.params = params
        super().__init__(
            {
                "cmd": In(stream.Signature(command_layout(params))),
                "wr": In(stream.Signature(write_layout(params))),
                "ans": Out(stream.Signature(answer_layout(params))),
                "rd_table": In(Table),
                "rd_index": In(read_index_bits(params)),
                "rd_value": Out(table_value_bits(params)),
                "busy": Out(1),
                "npu_busy": Out(1),
                "ncr": Out(params.cycle_bits),
                "error": Out(1),
            }
        )
        self.learn_done = Signal()
        self.table_unit = TVCTables(params)
        self.n_max = self.table_unit.n_max
        self.tables = dict(zip(TABLES, self.table_unit.entries, strict=True))
        self.l_kv = Signal(params.length_bits)

    def elaborate(self, platform):
        p = self.params
        m = Module()
        shift = p.frac_bits + p.depth_log2  # the spec's F + 2 for depth 4
        m.submodules.tables = tables = self.table_unit
        m.d.comb += [
            tables.rd_table.eq(self.rd_table.as_value()),
            tables.rd_index.eq(self.rd_index),
            self.rd_value.eq(tables.rd_value),
        ]
        # The tables' sums, registered one cycle behind the tables. A table changes only at
        # the edge that ends a write (accepted while idle) or a LEARN; the port is idle in the
        # cycle after, so an ASK is accepted one cycle later at the earliest and first reads
        # a sum (in ask_product) one cycle after that, when the register has caught up. The
        # tables cannot change while the ASK runs (the ports are not ready).
        sums = {table: tables.sums[table.value] for table in self.tables}
        learn_bits, ask_bits = _even(_learn_quotient_bits(p)), _even(p.n_bits)
        m.submodules.divider = divider = Radix4Divider(
            dividend_bits=max(p.cycle_bits + shift, learn_bits, ask_bits) + 1,
            divisor_bits=max(table_sum_bits(p), p.length_bits),
            learn_bits=learn_bits,
            ask_bits=ask_bits,
        )

        # NPU task: L_kv and the NCR counter.
        npu_busy = Signal()
        ncr = Signal(p.cycle_bits)
        error = Signal()
        m.d.comb += [self.npu_busy.eq(npu_busy), self.ncr.eq(ncr), self.error.eq(error)]
        with m.If(npu_busy & ~ncr.all()):
            m.d.sync += ncr.eq(ncr + 1)

        # Latched command arguments and intermediate terms.
        # C_left = C_npu - (NCR + C_d1) with all three held at one width, so that every
        # operator sees equal operand widths (lint-clean Verilog, see docs/tvc.md).
        term_bits = c_left_bits(p) - 2
        held = SimpleNamespace(
            learn_table=Signal(2, name="learn_table"),
            learn_cycles=Signal(p.cycle_bits, name="learn_cycles"),
            learn_length=Signal(p.length_bits, name="learn_length"),
            ask_p=Signal(p.length_bits, name="ask_p"),
            ask_ncr=Signal(term_bits, name="ask_ncr"),
            ask_npu_busy=Signal(name="ask_npu_busy"),
            # (sum(NVCT) * L_kv) >> S before its clamp at 2**cycle_bits - 1, and NCR + C_d1:
            # the product and the sum are registered in ask_product, the clamp and the
            # difference are formed in ask_left, so that neither cycle holds two carry
            # propagations.
            npu_scaled=Signal(table_sum_bits(p) + p.length_bits - shift, name="npu_scaled"),
            consumed=Signal(term_bits + 1, name="consumed"),
            c_left=Signal(signed(c_left_bits(p)), name="c_left"),
            limit=Signal(p.n_bits, name="limit"),  # min(P, N_max)
            answer_n=Signal(p.n_bits, name="answer_n"),
            learning=Signal(name="learning"),  # what the divider is working for
        )
        c_left_positive = held.c_left.as_unsigned()[: p.cycle_bits]  # exact when C_left > 0
        held.learn_dividend = held.learn_cycles << p.frac_bits
        held.ask_dividend = c_left_positive << shift
        with m.If(held.learning):
            m.d.comb += [
                divider.dividend.eq(held.learn_dividend),
                divider.divisor.eq(held.learn_length),
            ]
        with m.Else():
            m.d.comb += [
                divider.dividend.eq(held.ask_dividend),
                divider.divisor.eq(sums[Table.PVCT]),
            ]

        # Stream ports and states (one-hot: every test is a single bit).
        names = ("idle", "learn_check", "ask_product", "ask_left", "ask_decide", "dividing")
        states = {name: Signal(name=name, init=name == "idle") for name in (*names, "answering")}
        m.d.comb += [
            self.busy.eq(~states["idle"]),
            self.wr.ready.eq(states["idle"]),
            self.cmd.ready.eq(states["idle"] & ~self.wr.valid),
            self.ans.valid.eq(states["answering"]),
            # The clamp min(quotient, min(P, N_max)) is applied here, on registers, rather than
            # after the last divider step. answer_n is 0 or `limit` when no division ran.
            self.ans.payload.n.eq(Mux(held.answer_n < held.limit, held.answer_n, held.limit)),
            self.ans.payload.c_left.eq(held.c_left),
            tables.write.table.eq(self.wr.payload.table.as_value()),
            tables.write.index.eq(self.wr.payload.index),
            tables.write.value.eq(self.wr.payload.value),
            tables.push_table.eq(held.learn_table),
        ]
        self._states(m, states, held, sums, divider, npu_busy, ncr, error)
        return m

    def _states(self, m, states, held, sums, divider, npu_busy, ncr, error) -> None:
        """The command state machine: one branch per one-hot state."""
        p = self.params
        shift = p.frac_bits + p.depth_log2
        tables = self.table_unit
        n_max = tables.n_max

        def goto(state):
            m.d.sync += [flag.eq(int(name == state)) for name, flag in states.items()]

        def push(value):
            m.d.comb += [tables.push_en.eq(1), tables.push_value.eq(value)]
            m.d.comb += self.learn_done.eq(1)
            goto("idle")

        with m.If(states["idle"]):
            with m.If(self.wr.valid):
                m.d.comb += tables.write_en.eq(1)
            with m.Elif(self.cmd.valid):
                self._accept(m, held, npu_busy, ncr, goto)

        with m.If(states["learn_check"]):
            saturates = Const(0)
            if p.cycle_bits + p.frac_bits > p.ratio_bits:
                saturates = at_least(held.learn_dividend >> p.ratio_bits, held.learn_length)
            bad_table = equals(held.learn_table, Table.N_MAX.value)
            with m.If(~held.learn_length.any() | bad_table):
                m.d.sync += error.eq(1)
                m.d.comb += self.learn_done.eq(1)
                goto("idle")
            with m.Elif(saturates):
                push(Const((1 << p.ratio_bits) - 1, p.ratio_bits))
            with m.Else():
                m.d.comb += [divider.start.eq(1), divider.learn.eq(1)]
                goto("dividing")

        with m.If(states["ask_product"]):
            npu_product = product(m, sums[Table.NVCT], self.l_kv, "npu_product")
            c_d1 = sums[Table.PDCT] >> shift
            width = len(held.consumed)
            m.d.sync += [
                held.npu_scaled.eq(npu_product >> shift),
                held.consumed.eq(sum_of(m, [held.ask_ncr, c_d1], width, "ncr_plus_c_d1")),
            ]
            p_fits = ~at_least(held.ask_p, n_max)  # P < N_max: then P fits n_bits
            m.d.sync += held.limit.eq(Mux(p_fits, held.ask_p, n_max))
            goto("ask_left")

        with m.If(states["ask_left"]):
            npu_scaled = held.npu_scaled
            if len(npu_scaled) > p.cycle_bits:
                saturated = Const((1 << p.cycle_bits) - 1, p.cycle_bits)
                c_npu = Mux(npu_scaled[p.cycle_bits :].any(), saturated, npu_scaled[: p.cycle_bits])
            else:
                c_npu = npu_scaled
            # C_npu - (NCR + C_d1) in two's complement: C_npu + ~consumed + 1.
            width = c_left_bits(p)
            negated = ~widened(m, held.consumed, width, "consumed_wide")
            difference = sum_of(m, [c_npu, negated, Const(1, width)], width, "c_left_next")
            m.d.sync += held.c_left.eq(difference)
            goto("ask_decide")

        with m.If(states["ask_decide"]):
            no_room = held.c_left[-1] | ~held.c_left.any()
            with m.If(~held.ask_npu_busy | no_room):
                m.d.sync += held.answer_n.eq(0)
                goto("answering")
            with m.Elif(
                ~sums[Table.PVCT].any() | at_least(held.ask_dividend >> p.n_bits, sums[Table.PVCT])
            ):
                # No PVCT ratio, or a quotient of 2**n_bits or more: min(P, N_max) wins.
                m.d.sync += held.answer_n.eq(held.limit)
                goto("answering")
            with m.Else():
                m.d.comb += [divider.start.eq(1), divider.learn.eq(0)]
                goto("dividing")

        with m.If(states["dividing"]):
            m.d.comb += divider.step.eq(1)
            with m.If(divider.last):
                with m.If(held.learning):
                    push(divider.quotient[: divider.learn_bits])
                with m.Else():
                    # Below 2**n_bits: the saturation test said so. Clamped at the output.
                    m.d.sync += held.answer_n.eq(divider.quotient[: p.n_bits])
                    goto("answering")

        with m.If(states["answering"] & self.ans.ready):
            goto("idle")

    def _accept(self, m, held, npu_busy, ncr, goto) -> None:
        """A command accepted while idle."""
        cmd = self.cmd.payload
        op = cmd.op.as_value()
        with m.If(equals(op, Op.LEARN.value)):
            m.d.sync += [
                held.learn_table.eq(cmd.args.learn.table.as_value()),
                held.learn_cycles.eq(cmd.args.learn.cycles),
                held.learn_length.eq(cmd.args.learn.length),
                held.learning.eq(1),
            ]
            goto("learn_check")
        with m.Elif(equals(op, Op.NPU_START.value)):
            # NCR in cycle t0 + 1 is 1: NCR(t) = t - t0.
            m.d.sync += [self.l_kv.eq(cmd.args.npu_start.l_kv), npu_busy.eq(1), ncr.eq(1)]
        with m.Elif(equals(op, Op.NPU_DONE.value)):
            m.d.sync += [npu_busy.eq(0), ncr.eq(ncr)]  # freeze NCR
        with m.Else():  # Op.ASK
            m.d.sync += [
                held.ask_p.eq(cmd.args.ask.p),
                held.ask_ncr.eq(ncr),
                held.ask_npu_busy.eq(npu_busy),
                held.learning.eq(0),
            ]
            goto("ask_product")
