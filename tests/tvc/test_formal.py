"""TVC, formal tier (yowasp-sby): properties over every input sequence, from reset.

Every input of the block (both streams' valid and payload, ``ans.ready``, the read address)
is free in every cycle (``AnySeq``), so the solver picks presets, NPU tasks, ``LEARN``s and
``ASK``s and when to stall the answer. Properties, in a wrapper that keeps the RTL free of
verification code:

- the answer never exceeds ``min(P, N_max)`` (``P`` of the ``ASK`` it answers, ``N_max`` as
  the block holds it);
- a busy divider never drops a command: both ports are not ready while busy; ``busy`` is
  exactly "one accepted ``LEARN``/``ASK`` not yet completed"; every completion (an answer
  taken, ``learn_done``) belongs to the one outstanding command of its kind, so each accepted
  command completes exactly once and no command is accepted while another is in progress;
- with the answer reader always ready, a command completes within its latency bound (the
  block's documented figures, within the spec's 40 cycles);
- arithmetic (:class:`Arithmetic`): every answer's ``n`` and ``C_left`` equal spec 2.2's
  formulas, written out again below from the spec (``C_npu`` with its saturation, ``C_d1``,
  the signed ``C_left``, the ``C_left <= 0`` and NPU-idle zeros, the empty-``PVCT`` clamp,
  the quotient and both clamps), evaluated on the tables, ``L_kv``, NCR, ``P`` and ``N_max``
  of the cycle the ``ASK`` is accepted; and every ``LEARN`` shifts ``min(2**ratio_bits - 1,
  (cycles << F) // length)`` into its table, or flags an error and changes no table.

The small parameter set is proved by k-induction (unbounded) and its latency bounds are
checked by bounded model checking from reset; the default widths are checked by bounded
model checking over a shorter depth (their k-induction proof takes minutes). The arithmetic
is proved by k-induction at the small widths: every state is covered, so every table content,
NCR up to its saturation, ``P`` and ``N_max`` (a bounded check from reset could not reach a
saturated NCR).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, Signal
from harness import small_params
from harness.formal import check
from harness.planted import cases

from ahasd.hw.tvc import TVC, Table, divider_cycles
from ahasd.params import TVCParams

# Two-entry tables, F = 2, 8-bit cycles (harness/small_params.py; the mutation campaigns
# mutate this netlist).
SMALL = small_params.TVC
# The answer's k-induction proof: one-entry tables and the narrowest widths the parameters
# allow keep the solver quick.
ARITH = TVCParams(
    depth=1, frac_bits=1, cycle_bits=8, length_bits=3, ratio_bits=6, n_bits=2, n_max=2
)


class Properties(Elaboratable):
    """The TVC with free inputs and the properties of this module's docstring.

    ``reader_always_ready`` assumes ``ans.ready`` high and adds the latency bounds.
    """

    def __init__(self, params: TVCParams, *, reader_always_ready: bool = False, block: type = TVC):
        self.params = params
        self.reader_always_ready = reader_always_ready
        self.block = block

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.block(self.params)
        # The block's own enums: a planted block is rebuilt with enum classes of its own.
        ops = self.block.elaborate.__globals__["Op"]
        p = self.params

        for port in (dut.cmd, dut.wr):
            bits = port.payload.as_value()
            m.d.comb += [port.valid.eq(AnySeq(1)), bits.eq(AnySeq(len(bits)))]
        m.d.comb += [
            dut.rd_table.eq(AnySeq(2)),
            dut.rd_index.eq(AnySeq(len(dut.rd_index))),
            dut.ans.ready.eq(AnySeq(1)),
        ]
        if self.reader_always_ready:
            m.d.comb += Assume(dut.ans.ready)

        cmd_taken = dut.cmd.valid & dut.cmd.ready
        wr_taken = dut.wr.valid & dut.wr.ready
        op = dut.cmd.payload.op
        ask_taken = cmd_taken & (op == ops.ASK)
        learn_taken = cmd_taken & (op == ops.LEARN)
        answer_taken = dut.ans.valid & dut.ans.ready

        pending_ask = Signal()
        pending_learn = Signal()
        asked_p = Signal(p.length_bits)
        waited = Signal(range(64))

        with m.If(ask_taken):
            m.d.sync += [pending_ask.eq(1), asked_p.eq(dut.cmd.payload.args.ask.p)]
        with m.If(answer_taken):
            m.d.sync += pending_ask.eq(0)
        with m.If(learn_taken):
            m.d.sync += pending_learn.eq(1)
        with m.If(dut.learn_done):
            m.d.sync += pending_learn.eq(0)
        with m.If(dut.busy & (waited != 63)):
            m.d.sync += waited.eq(waited + 1)
        with m.Else():
            m.d.sync += waited.eq(0)

        # The answer bound.
        with m.If(dut.ans.valid):
            m.d.comb += [
                Assert(dut.ans.payload.n <= asked_p),
                Assert(dut.ans.payload.n <= dut.n_max),
            ]

        # Nothing is dropped, nothing completes twice, nothing overtakes.
        m.d.comb += [
            Assert(~(pending_ask & pending_learn)),
            Assert(dut.busy == (pending_ask | pending_learn)),
        ]
        with m.If(dut.busy):
            m.d.comb += [Assert(~dut.cmd.ready), Assert(~dut.wr.ready)]
        with m.If(dut.ans.valid):
            m.d.comb += Assert(pending_ask)
        with m.If(dut.learn_done):
            m.d.comb += Assert(pending_learn)
        m.d.comb += Assert(~(cmd_taken & wr_taken))

        if self.reader_always_ready:
            cycles = divider_cycles(p)
            # `waited` counts busy cycles: an ASK's answer is valid (and taken) in cycle
            # a + 4 + D after acceptance in cycle a, busy from a + 1 to a + 4 + D.
            learn_bound = 1 + cycles["learn"]
            ask_bound = 4 + cycles["ask"]
            with m.If(pending_learn):
                m.d.comb += Assert(waited < learn_bound)
            with m.If(pending_ask):
                m.d.comb += Assert(waited < ask_bound)
            # The bounds are tight: the slowest paths are reachable.
            m.d.comb += [
                Cover(pending_learn & dut.learn_done & (waited == learn_bound - 1)),
                Cover(answer_taken & (waited == ask_bound - 1) & (dut.ans.payload.n != 0)),
            ]
        return m


def _floor_quotient(q, dividend, divisor):
    """``q == dividend // divisor`` (``divisor > 0``) by floor division's definition,
    ``q * divisor <= dividend < (q + 1) * divisor``: multiplications are far cheaper for the
    solver than a division."""
    return (q * divisor <= dividend) & (dividend < (q + 1) * divisor)


def spec_answer_holds(params: TVCParams, n, c_left, sums: dict, l_kv, ncr, busy, p, n_max):
    """Whether ``(n, C_left)`` answers ``ASK(P)`` by spec 2.2 and docs/spec-decisions.md
    (TVC), as an Amaranth expression over wide enough values (nothing wraps).

    ``n = 0`` if the NPU is idle or ``C_left <= 0``; else ``min(P, N_max)`` if
    ``sum(PVCT) == 0``; else ``min(P, N_max, q)`` with ``q = (C_left << S) // sum(PVCT)``,
    which holds exactly when ``n <= min(P, N_max)``, ``n <= q`` and ``n`` reaches one of them.
    """
    shift = params.frac_bits + params.depth_log2
    cycle_max = (1 << params.cycle_bits) - 1
    c_npu_exact = (sums[Table.NVCT] * l_kv) >> shift
    c_npu = Mux(c_npu_exact > cycle_max, cycle_max, c_npu_exact)
    c_d1 = sums[Table.PDCT] >> shift
    spec_c_left = c_npu - ncr - c_d1
    limit = Mux(p < n_max, p, n_max)
    sum_pvct = sums[Table.PVCT]
    dividend = spec_c_left.as_unsigned() << shift  # used only when C_left > 0
    answer = Mux(
        ~busy | (spec_c_left <= 0),
        n == 0,
        Mux(
            sum_pvct == 0,
            n == limit,
            (n <= limit)
            & (n * sum_pvct <= dividend)
            & ((n == limit) | _floor_quotient(n, dividend, sum_pvct)),
        ),
    )
    return (c_left == spec_c_left) & answer


class Arithmetic(Elaboratable):
    """The TVC with free inputs; its answers and ``LEARN`` pushes against spec 2.2.

    The spec side is evaluated on a copy of the inputs taken in the cycle the command is
    accepted (the tables, ``L_kv``, ``N_max``, NCR and the NPU's busy flag as they are then,
    and the command's arguments), so the check covers the block's whole pipeline from the
    acceptance edge to the answer or the table update.
    """

    def __init__(self, params: TVCParams, which: str, block: type = TVC):
        self.params = params
        self.which = which
        self.block = block

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.dut = dut = self.block(p)
        # The block's own enums: a planted block is rebuilt with enum classes of its own.
        ops, codes = (self.block.elaborate.__globals__[name] for name in ("Op", "Table"))
        for port in (dut.cmd, dut.wr):
            bits = port.payload.as_value()
            m.d.comb += [port.valid.eq(AnySeq(1)), bits.eq(AnySeq(len(bits)))]
        m.d.comb += [
            dut.rd_table.eq(AnySeq(2)),
            dut.rd_index.eq(AnySeq(len(dut.rd_index))),
            dut.ans.ready.eq(AnySeq(1)),
        ]
        cmd_taken = dut.cmd.valid & dut.cmd.ready
        op = dut.cmd.payload.op
        args = dut.cmd.payload.args
        tables = (Table.NVCT, Table.PDCT, Table.PVCT)

        # ASK: the inputs of the acceptance cycle.
        sum_bits = p.ratio_bits + p.depth_log2
        sums = {t: Signal(sum_bits, name=f"asked_sum_{t.name.lower()}") for t in tables}
        l_kv = Signal(p.length_bits)
        ncr = Signal(p.cycle_bits)
        busy = Signal()
        asked_p = Signal(p.length_bits)
        n_max = Signal(p.n_bits)
        pending_ask = Signal()
        with m.If(cmd_taken & (op == ops.ASK)):
            m.d.sync += [
                *(sums[t].eq(sum(dut.tables[codes[t.name]])) for t in tables),
                l_kv.eq(dut.l_kv),
                ncr.eq(dut.ncr),
                busy.eq(dut.npu_busy),
                asked_p.eq(args.ask.p),
                n_max.eq(dut.n_max),
                pending_ask.eq(1),
            ]
        with m.If(dut.ans.valid & dut.ans.ready):
            m.d.sync += pending_ask.eq(0)
        with m.If(dut.ans.valid):
            m.d.comb += Assert(pending_ask)
        if self.which == "ask":
            answer = dut.ans.payload
            m.d.comb += [
                Assert(
                    ~dut.ans.valid
                    | spec_answer_holds(
                        p, answer.n, answer.c_left, sums, l_kv, ncr, busy, asked_p, n_max
                    )
                ),
            ]

        # LEARN: the tables of the acceptance cycle and the arguments; the entries that must
        # stay (all of them, or all but the oldest, shifted one place older).
        learn = args.learn
        learn_table = Signal(2)
        cycles = Signal(p.cycle_bits)
        length = Signal(p.length_bits)
        bad = Signal()
        kept = {
            t: [Signal(p.ratio_bits, name=f"kept_{t.name.lower()}_{i}") for i in range(p.depth)]
            for t in tables
        }
        pending_learn = Signal()
        with m.If(cmd_taken & (op == ops.LEARN)):
            m.d.sync += [
                pending_learn.eq(1),
                learn_table.eq(learn.table),
                cycles.eq(learn.cycles),
                length.eq(learn.length),
                bad.eq((learn.length == 0) | (learn.table == codes.N_MAX)),
            ]
            for t in tables:
                now = dut.tables[codes[t.name]]
                pushes = (learn.table == codes[t.name]) & (learn.length != 0)
                m.d.sync += [
                    kept_entry.eq(Mux(pushes, older, entry))
                    for kept_entry, older, entry in zip(
                        kept[t], [now[0], *now[:-1]], now, strict=True
                    )
                ]
        learned = Signal()  # the cycle after the one whose edge completed the LEARN
        m.d.sync += learned.eq(dut.learn_done)
        with m.If(dut.learn_done):
            m.d.sync += pending_learn.eq(0)
            m.d.comb += Assert(pending_learn)
        # The bookkeeping above is exact: one command in progress, the one recorded.
        m.d.comb += [
            Assert(dut.busy == (pending_ask | pending_learn)),
            Assert(~(pending_learn & pending_ask)),
        ]
        if self.which != "learn":
            return m

        ratio_max = (1 << p.ratio_bits) - 1
        dividend = cycles << p.frac_bits
        with m.If(learned):
            with m.If(bad):
                m.d.comb += Assert(dut.error)
            for t in tables:
                entries = dut.tables[codes[t.name]]
                m.d.comb += [
                    Assert(kept_entry == entry)
                    for kept_entry, entry in zip(kept[t][1:], entries[1:], strict=True)
                ]
                ratio = entries[0]
                with m.If(~bad & (learn_table == t)):
                    # min(2**ratio_bits - 1, (cycles << F) // length)
                    m.d.comb += Assert(
                        Mux(
                            ratio == ratio_max,
                            ratio * length <= dividend,
                            _floor_quotient(ratio, dividend, length),
                        )
                    )
                with m.Else():
                    m.d.comb += Assert(ratio == kept[t][0])
        return m


@pytest.mark.formal
@pytest.mark.parametrize("which", ["ask", "learn"])
def test_answers_and_learned_ratios_equal_the_spec_formulas_proved(which):
    """k-induction over every state (every table content, NCR up to its saturation, every
    P and N_max): each answer's n and C_left, or each LEARN's table update, by the spec.
    The answer is proved on one-entry tables (the proof over two entries takes minutes; the
    sums' adder and the log2(depth) shift are covered by the bounded check below)."""
    params = ARITH if which == "ask" else SMALL
    check(
        Arithmetic(params, which),
        name=f"tvc_arithmetic_{which}",
        mode="prove",
        depth=7,
        engine="smtbmc yices",
    )


@pytest.mark.formal
@pytest.mark.long
def test_answers_equal_the_spec_formulas_two_entries_bmc():
    """Bounded check from reset with two-entry tables (sums of two ratios, shift F + 1) at
    the small parameter set."""
    check(
        Arithmetic(SMALL, "ask"),
        name="tvc_arithmetic_ask_bmc",
        mode="bmc",
        depth=10,
        engine="smtbmc yices",
    )


@pytest.mark.formal
def test_answer_bound_and_no_lost_command_proved_small():
    """k-induction: the properties hold in every reachable state, not only for a bounded
    number of cycles (k = 12 exceeds the longest command, so no helper invariant is needed;
    with the default widths the same proof needs k = 22 and two minutes, too long here)."""
    check(Properties(SMALL), name="tvc_safety_small", mode="prove", depth=12)


@pytest.mark.formal
def test_answer_bound_and_no_lost_command_default_widths():
    check(Properties(TVCParams()), name="tvc_safety_default", mode="bmc", depth=14)


@pytest.mark.formal
def test_latency_bounds_small():
    check(
        Properties(SMALL, reader_always_ready=True), name="tvc_latency_small", mode="bmc", depth=24
    )


@pytest.mark.formal
def test_slowest_paths_are_reachable_small():
    check(
        Properties(SMALL, reader_always_ready=True),
        name="tvc_latency_cover_small",
        mode="cover",
        depth=16,
    )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("tvc.answer_proof"))
def test_answer_proof_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            Arithmetic(ARITH, "ask", block=bug.build(TVC)),
            name="tvc_arithmetic_ask_planted",
            mode="prove",
            depth=7,
            engine="smtbmc yices",
        )


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("tvc.safety_proof"))
def test_safety_proof_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            Properties(SMALL, block=bug.build(TVC)),
            name="tvc_safety_planted",
            mode="prove",
            depth=12,
        )
