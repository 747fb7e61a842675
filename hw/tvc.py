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

Payload layouts are built once here, as functions of :class:`~ahasd.params.TVCParams`; the
testbenches pack and unpack through them.

The description is written for lint-clean Verilog (``verilator -Wall`` with the project's
waivers only): every arithmetic or comparison operator sees operands of equal width (an
adder tree, :func:`_at_least`), constants are matched bit by bit (:func:`_equals`) and the
states are one-hot flags tested with ``If``, because Amaranth emits minimal-width constants
and ``case`` statements that Verilator reports as width mismatches and incomplete cases.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.arith import product, sum_of, widened
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


def _value_bits(params: TVCParams) -> int:
    """Width of the write/read port value: a table entry or the ``N_max`` register."""
    return max(params.ratio_bits, params.n_bits)


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
        {"table": Table, "index": read_index_bits(params), "value": _value_bits(params)}
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
                "rd_value": Out(_value_bits(params)),
                "busy": Out(1),
                "npu_busy": Out(1),
                "ncr": Out(params.cycle_bits),
                "error": Out(1),
            }
        )
        self.learn_done = Signal()
        self.n_max = Signal(params.n_bits, init=params.n_max)
        self.tables = {
            table: [
                Signal(params.ratio_bits, name=f"{table.name.lower()}_{i}")
                for i in range(params.depth)
            ]
            for table in (Table.NVCT, Table.PDCT, Table.PVCT)
        }
        self.l_kv = Signal(params.length_bits)

    def elaborate(self, platform):
        p = self.params
        m = Module()

        shift = p.frac_bits + p.depth_log2  # the spec's F + 2 for depth 4
        sum_bits = p.ratio_bits + p.depth_log2
        divisor_bits = max(sum_bits, p.length_bits)
        ask_q = _even(p.n_bits)
        learn_q = _even(_learn_quotient_bits(p))
        quotient_bits = max(ask_q, learn_q)
        dividend_bits = max(p.cycle_bits + shift, quotient_bits) + 1
        # C_left = C_npu - (NCR + C_d1) with all three held at one width, so that every
        # operator sees equal operand widths (lint-clean Verilog, see docs/tvc.md).
        term_bits = c_left_bits(p) - 2

        tables = self.tables  # index 0 newest
        n_max = self.n_max
        # The tables' sums, registered one cycle behind the tables. A table changes only at
        # the edge that ends a write (accepted while idle) or a LEARN; the port is idle in the
        # cycle after, so an ASK is accepted one cycle later at the earliest and first reads
        # a sum (in ask_product) one cycle after that, when the register has caught up. The
        # tables cannot change while the ASK runs (the ports are not ready).
        sums = {table: Signal(sum_bits, name=f"sum_{table.name.lower()}") for table in tables}
        for table, entries in tables.items():
            m.d.sync += sums[table].eq(sum_of(m, entries, sum_bits, f"sum_{table.name.lower()}"))

        def entry_writes(table_sel, index, value):
            """``table[index] := value`` for the table and index given by signals."""
            for table, entries in tables.items():
                with m.If(_equals(table_sel, table.value)):
                    for i, entry in enumerate(entries):
                        with m.If(_equals(index, i)):
                            m.d.sync += entry.eq(value)

        def push(table_sel, value):
            for table, entries in tables.items():
                with m.If(_equals(table_sel, table.value)):
                    m.d.sync += entries[0].eq(value)
                    m.d.sync += [entries[i].eq(entries[i - 1]) for i in range(1, p.depth)]

        # Read port (combinational).
        if p.depth == 1:
            table_values = [Mux(self.rd_index.any(), 0, entries[0]) for entries in tables.values()]
        else:
            table_values = [Array(entries)[self.rd_index] for entries in tables.values()]
        m.d.comb += self.rd_value.eq(Array([*table_values, n_max])[self.rd_table.as_value()])

        # NPU task: L_kv and the NCR counter.
        npu_busy = Signal()
        ncr = Signal(p.cycle_bits)
        l_kv = self.l_kv
        error = Signal()
        m.d.comb += [self.npu_busy.eq(npu_busy), self.ncr.eq(ncr), self.error.eq(error)]
        with m.If(npu_busy & ~ncr.all()):
            m.d.sync += ncr.eq(ncr + 1)

        # Latched command arguments and intermediate terms.
        learn_table = Signal(2)
        learn_cycles = Signal(p.cycle_bits)
        learn_length = Signal(p.length_bits)
        ask_p = Signal(p.length_bits)
        ask_ncr = Signal(term_bits)
        ask_npu_busy = Signal()
        # (sum(NVCT) * L_kv) >> S before its clamp at 2**cycle_bits - 1, and NCR + C_d1: the
        # product and the sum are registered in ask_product, the clamp and the difference
        # are formed in ask_left, so that neither cycle holds two carry propagations.
        npu_scaled = Signal(sum_bits + p.length_bits - shift)
        consumed = Signal(term_bits + 1)
        c_left = Signal(signed(c_left_bits(p)))
        limit = Signal(p.n_bits)  # min(P, N_max)
        answer_n = Signal(p.n_bits)
        learning = Signal()  # what the divider is working for

        # The shared divider: radix 4, two quotient bits per cycle. The remainder stays below
        # the divisor; the dividend's low bits shift out of the top of `low` while the
        # quotient bits shift in at its bottom. Each cycle forms trial = 4*remainder + the
        # next two dividend bits (below 4*divisor) and subtracts divisor, 2*divisor and
        # 3*divisor side by side: the largest multiple that fits is the quotient digit. One
        # subtraction deep, where two chained restoring steps would be two. The multiples
        # are registers as wide as the trial (their constant bits cost nothing after
        # synthesis), so that every comparison sees operands of equal width.
        step_bits = divisor_bits + 2  # trial < 4*divisor
        multiples = [Signal(step_bits, name=f"divisor_x{k}") for k in (1, 2, 3)]
        remainder = Signal(divisor_bits)
        low = Signal(quotient_bits)
        count = Signal(range(max(2, quotient_bits // 2)))  # cycles left after this one

        trial = Cat(low[-2], low[-1], remainder)
        fits = [_at_least(trial, multiple) for multiple in multiples]  # fits[k-1]: k*d fits
        # When k*divisor fits and (k+1)*divisor does not, trial - k*divisor < divisor: its
        # low bits are the whole new remainder.
        differences = [
            (trial[:divisor_bits] - multiple[:divisor_bits])[:divisor_bits]
            for multiple in multiples
        ]
        rem_2 = Mux(
            fits[2],
            differences[2],
            Mux(fits[1], differences[1], Mux(fits[0], differences[0], trial[:divisor_bits])),
        )
        digit = Cat(fits[2] | (fits[0] & ~fits[1]), fits[1])
        low_2 = Cat(digit, low[:-2])

        c_left_positive = c_left.as_unsigned()[: p.cycle_bits]  # exact when C_left > 0
        learn_dividend = learn_cycles << p.frac_bits
        ask_dividend = c_left_positive << shift
        dividend = Signal(dividend_bits)
        with m.If(learning):
            m.d.comb += dividend.eq(learn_dividend)
        with m.Else():
            m.d.comb += dividend.eq(ask_dividend)

        divisor_source = Signal(divisor_bits)
        with m.If(learning):
            m.d.comb += divisor_source.eq(learn_length)
        with m.Else():
            m.d.comb += divisor_source.eq(sums[Table.PVCT])
        source_x3 = sum_of(m, [divisor_source, divisor_source << 1], step_bits, "divisor_source_x3")

        def start_division(q_bits):
            m.d.sync += [
                remainder.eq(dividend >> q_bits),
                low.eq(dividend[:q_bits] << (quotient_bits - q_bits)),
                count.eq(q_bits // 2 - 1),
            ]
            m.d.sync += [
                multiples[0].eq(divisor_source),
                multiples[1].eq(divisor_source << 1),
                multiples[2].eq(source_x3),
            ]

        # Stream ports and states (one-hot: every test is a single bit).
        cmd = self.cmd.payload
        write = self.wr.payload
        idle = Signal(init=1)
        learn_check = Signal()
        ask_product = Signal()
        ask_left = Signal()
        ask_decide = Signal()
        dividing = Signal()
        answering = Signal()
        states = [idle, learn_check, ask_product, ask_left, ask_decide, dividing, answering]

        def goto(state):
            m.d.sync += [other.eq(int(other is state)) for other in states]

        m.d.comb += [
            self.busy.eq(~idle),
            self.wr.ready.eq(idle),
            self.cmd.ready.eq(idle & ~self.wr.valid),
            self.ans.valid.eq(answering),
            # The clamp min(quotient, min(P, N_max)) is applied here, on registers, rather than
            # after the last divider step. answer_n is 0 or `limit` when no division ran.
            self.ans.payload.n.eq(Mux(answer_n < limit, answer_n, limit)),
            self.ans.payload.c_left.eq(c_left),
        ]

        with m.If(idle):
            with m.If(self.wr.valid):
                with m.If(_equals(write.table.as_value(), Table.N_MAX.value)):
                    if len(write.value) > p.n_bits:
                        too_big = write.value[p.n_bits :].any()
                        m.d.sync += n_max.eq(Mux(too_big, (1 << p.n_bits) - 1, write.value))
                    else:
                        m.d.sync += n_max.eq(write.value)
                with m.Else():
                    entry_writes(write.table.as_value(), write.index, write.value)
            with m.Elif(self.cmd.valid):
                op = cmd.op.as_value()
                with m.If(_equals(op, Op.LEARN.value)):
                    m.d.sync += [
                        learn_table.eq(cmd.args.learn.table.as_value()),
                        learn_cycles.eq(cmd.args.learn.cycles),
                        learn_length.eq(cmd.args.learn.length),
                        learning.eq(1),
                    ]
                    goto(learn_check)
                with m.Elif(_equals(op, Op.NPU_START.value)):
                    # NCR in cycle t0 + 1 is 1: NCR(t) = t - t0.
                    m.d.sync += [l_kv.eq(cmd.args.npu_start.l_kv), npu_busy.eq(1), ncr.eq(1)]
                with m.Elif(_equals(op, Op.NPU_DONE.value)):
                    m.d.sync += [npu_busy.eq(0), ncr.eq(ncr)]  # freeze NCR
                with m.Else():  # Op.ASK
                    m.d.sync += [
                        ask_p.eq(cmd.args.ask.p),
                        ask_ncr.eq(ncr),
                        ask_npu_busy.eq(npu_busy),
                        learning.eq(0),
                    ]
                    goto(ask_product)

        with m.If(learn_check):
            saturates = Const(0)
            if p.cycle_bits + p.frac_bits > p.ratio_bits:
                saturates = _at_least(learn_dividend >> p.ratio_bits, learn_length)
            with m.If(~learn_length.any() | _equals(learn_table, Table.N_MAX.value)):
                m.d.sync += error.eq(1)
                m.d.comb += self.learn_done.eq(1)
                goto(idle)
            with m.Elif(saturates):
                push(learn_table, Const((1 << p.ratio_bits) - 1, p.ratio_bits))
                m.d.comb += self.learn_done.eq(1)
                goto(idle)
            with m.Else():
                start_division(learn_q)
                goto(dividing)

        with m.If(ask_product):
            npu_product = product(m, sums[Table.NVCT], l_kv, "npu_product")
            c_d1 = sums[Table.PDCT] >> shift
            m.d.sync += [
                npu_scaled.eq(npu_product >> shift),
                consumed.eq(sum_of(m, [ask_ncr, c_d1], term_bits + 1, "ncr_plus_c_d1")),
            ]
            p_fits = ~_at_least(ask_p, n_max)  # P < N_max: then P fits n_bits
            m.d.sync += limit.eq(Mux(p_fits, ask_p, n_max))
            goto(ask_left)

        with m.If(ask_left):
            if len(npu_scaled) > p.cycle_bits:
                saturated = Const((1 << p.cycle_bits) - 1, p.cycle_bits)
                c_npu = Mux(npu_scaled[p.cycle_bits :].any(), saturated, npu_scaled[: p.cycle_bits])
            else:
                c_npu = npu_scaled
            # C_npu - (NCR + C_d1) in two's complement: C_npu + ~consumed + 1.
            width = c_left_bits(p)
            negated = ~widened(m, consumed, width, "consumed_wide")
            difference = sum_of(m, [c_npu, negated, Const(1, width)], width, "c_left_next")
            m.d.sync += c_left.eq(difference)
            goto(ask_decide)

        with m.If(ask_decide):
            no_room = c_left[-1] | ~c_left.any()
            with m.If(~ask_npu_busy | no_room):
                m.d.sync += answer_n.eq(0)
                goto(answering)
            with m.Elif(
                ~sums[Table.PVCT].any() | _at_least(ask_dividend >> p.n_bits, sums[Table.PVCT])
            ):
                # No PVCT ratio, or a quotient of 2**n_bits or more: min(P, N_max) wins.
                m.d.sync += answer_n.eq(limit)
                goto(answering)
            with m.Else():
                start_division(ask_q)
                goto(dividing)

        with m.If(dividing):
            m.d.sync += [remainder.eq(rem_2), low.eq(low_2), count.eq(count - 1)]
            with m.If(~count.any()):
                with m.If(learning):
                    push(learn_table, low_2[:learn_q])
                    m.d.comb += self.learn_done.eq(1)
                    goto(idle)
                with m.Else():
                    # Below 2**n_bits: the saturation test said so. Clamped at the output.
                    m.d.sync += answer_n.eq(low_2[: p.n_bits])
                    goto(answering)

        with m.If(answering & self.ans.ready):
            goto(idle)

        return m


def _equals(value, constant: int):
    """``value == constant`` as an AND of bits (no operand-width mismatch in the Verilog)."""
    return Cat(*(value[i] if (constant >> i) & 1 else ~value[i] for i in range(len(value)))).all()


def _at_least(a, b):
    """``a >= b`` for unsigned values of any widths, comparing equal widths only."""
    if len(a) > len(b):
        return a[len(b) :].any() | (a[: len(b)] >= b)
    if len(a) < len(b):
        return ~b[len(a) :].any() & (a >= b[: len(a)])
    return a >= b
