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
  block's documented figures, within the spec's 40 cycles).

The small parameter set is proved by k-induction (unbounded) and its latency bounds are
checked by bounded model checking from reset; the default widths are checked by bounded
model checking over a shorter depth (their k-induction proof takes minutes).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Signal
from harness.formal import check

from ahasd.hw.tvc import TVC, Op, divider_cycles
from ahasd.params import TVCParams

SMALL = TVCParams(
    depth=2, frac_bits=2, cycle_bits=8, length_bits=4, ratio_bits=8, n_bits=3, n_max=5
)


class Properties(Elaboratable):
    """The TVC with free inputs and the properties of this module's docstring.

    ``reader_always_ready`` assumes ``ans.ready`` high and adds the latency bounds.
    """

    def __init__(self, params: TVCParams, *, reader_always_ready: bool = False):
        self.params = params
        self.reader_always_ready = reader_always_ready

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = TVC(self.params)
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
        ask_taken = cmd_taken & (op == Op.ASK)
        learn_taken = cmd_taken & (op == Op.LEARN)
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
