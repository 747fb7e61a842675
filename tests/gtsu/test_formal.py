"""GTSU, formal tier (yowasp-sby): properties over every input sequence.

Every input is free in every cycle (``AnySeq``): both requests and the register write port
(any register, any value, in any cycle, including during a switch), so the solver also
programs overlapping masks and zero waits. A small parameter set (4 ranks, ``timer_bits =
2``, so ``t_off``/``t_on`` range over 0..3, a 3-bit switch counter) keeps the runs short; the
properties do not depend on the widths.

The wrapper keeps its own record, from the ports only, of each switch decision (the cycle in
which the unit is ready and the requests name another task): the target, the programmed
masks and waits of that cycle, and the cycles since. Properties:

- safety (``mode prove``, k-induction with z3, unbounded): no rank is enabled for both roles;
  no rank is enabled while gating; a task enables exactly its own ranks of the masks latched
  at its decision (``dlm & ~tlm`` or ``tlm & ~dlm``), so a rank in both masks never is;
  ``gating`` covers exactly the first ``t_off`` switch cycles; ``ready`` comes back exactly
  ``t_off + t_on`` cycles (``t_off`` to ``IDLE``) after the decision's first cycle, the unit's
  ``last_switch_cycles`` says so (saturating at ``2**timer_bits - 1``) and ``switches``
  steps once (saturating); no preemption (``current_task`` does not move while not ready);
  the task is the priority target after every switch; ``config_error`` is exactly "the
  masks have overlapped in some earlier cycle".
- service (bounded, ``mode bmc``): a ``want_preverify`` held high from a ready cycle is the
  task, with ``ready``, within ``t_off + t_on + 1`` cycles, and stays while held; likewise a
  ``want_draft`` held high while ``want_preverify`` stays low.
- cover: a full DRAFT -> PREVERIFY switch with both waits non-zero, the counter saturating.
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cover, Elaboratable, Module, Mux, Signal
from harness import small_params
from harness.formal import check
from harness.planted import cases

from ahasd.hw.gtsu import GTSU, default_masks
from ahasd.params import GTSUParams

SMALL = small_params.GTSU
COUNTER_BITS = small_params.GTSU_COUNTER_BITS
SERVICE_DEPTH = 30  # 2 * (longest switch 6 + 1) + room for writes and a second request


class Properties(Elaboratable):
    """The GTSU with free inputs and the properties of this module's docstring.

    ``which`` selects ``"safety"``, ``"service"`` or ``"cover"``.
    """

    def __init__(self, params: GTSUParams, which: str, block: type = GTSU):
        self.params = params
        self.which = which
        self.block = block

    def elaborate(self, platform):
        m = Module()
        # The block's own enum: a planted block is rebuilt with enum classes of its own.
        tasks = self.block.elaborate.__globals__["Task"]
        p = self.params
        m.submodules.dut = dut = self.block(p, counter_bits=COUNTER_BITS)

        for port in (dut.want_draft, dut.want_preverify, dut.wr.valid):
            m.d.comb += port.eq(AnySeq(1))
        payload = dut.wr.payload.as_value()
        m.d.comb += payload.eq(AnySeq(len(payload)))

        # The priority target, from the requests (spec 2.5: pre-verification wins).
        target = Signal(tasks)
        with m.If(dut.want_preverify):
            m.d.comb += target.eq(tasks.PREVERIFY)
        with m.Elif(dut.want_draft):
            m.d.comb += target.eq(tasks.DRAFT)
        task = dut.current_task
        decision = dut.ready & (target != task)

        # The record of the last decision (reset values: as if the reset state were the end
        # of a switch to IDLE with the reset registers).
        dlm_reset, tlm_reset = default_masks(p)
        rec_target = Signal(tasks)
        rec_from = Signal(tasks)
        rec_dlm = Signal(p.ranks, init=dlm_reset)
        rec_tlm = Signal(p.ranks, init=tlm_reset)
        rec_off = Signal(p.timer_bits)
        rec_on = Signal(p.timer_bits)
        since = Signal(p.timer_bits + 2)  # cycles since the decision's first cycle
        with m.If(decision):
            m.d.sync += [
                rec_target.eq(target),
                rec_from.eq(task),
                rec_dlm.eq(dut.dlm_mask),
                rec_tlm.eq(dut.tlm_mask),
                rec_off.eq(dut.t_off),
                rec_on.eq(dut.t_on),
                since.eq(0),
            ]
        with m.Elif(~dut.ready):
            m.d.sync += since.eq(since + 1)
        latency = Mux(rec_target == tasks.IDLE, rec_off, rec_off + rec_on)
        timer_max = (1 << p.timer_bits) - 1

        prev_ready = Signal(init=1)
        prev_task = Signal(tasks)
        prev_switches = Signal(COUNTER_BITS)
        prev_decision = Signal()
        m.d.sync += [
            prev_ready.eq(dut.ready),
            prev_task.eq(task),
            prev_switches.eq(dut.switches),
            prev_decision.eq(decision),
        ]
        # A switch ends in the cycle `ready` is back: after a non-ready cycle, or right after
        # the decision when the latency is zero.
        switch_done = dut.ready & (~prev_ready | (prev_decision & (latency == 0)))

        overlapped = Signal()
        m.d.sync += overlapped.eq(overlapped | (dut.dlm_mask & dut.tlm_mask).any())

        if self.which == "safety":
            drafting = task == tasks.DRAFT
            preverifying = task == tasks.PREVERIFY
            powered = ~dut.ready & (since >= rec_off) | dut.ready
            m.d.comb += [
                Assert((dut.dlm_enable & dut.tlm_enable) == 0),
                Assert(~dut.gating | ((dut.dlm_enable | dut.tlm_enable) == 0)),
                Assert(~(dut.ready & dut.gating)),
                Assert(task == rec_target),
                Assert(dut.gating == (~dut.ready & (since < rec_off))),
                Assert(dut.ready | (since < latency)),
                Assert(dut.dlm_enable == Mux(drafting & powered, rec_dlm & ~rec_tlm, 0)),
                Assert(dut.tlm_enable == Mux(preverifying & powered, rec_tlm & ~rec_dlm, 0)),
                Assert(dut.config_error == overlapped),
            ]
            with m.If(~prev_ready):
                m.d.comb += Assert(task == prev_task)  # no preemption
            with m.If(switch_done):
                m.d.comb += [
                    Assert(dut.last_switch_cycles == Mux(latency > timer_max, timer_max, latency)),
                    Assert(prev_ready | (since == latency)),
                    Assert(
                        dut.switches == Mux(prev_switches.all(), prev_switches, prev_switches + 1)
                    ),
                ]
            with m.Else():
                m.d.comb += Assert(dut.switches == prev_switches)

        elif self.which == "service":
            for wanted, held in (
                (tasks.PREVERIFY, dut.want_preverify),
                (tasks.DRAFT, dut.want_draft & ~dut.want_preverify),
            ):
                armed = Signal(name=f"armed_{wanted.name.lower()}")
                waited = Signal(range(16), name=f"waited_{wanted.name.lower()}")
                bound = Signal(p.timer_bits + 2, name=f"bound_{wanted.name.lower()}")
                with m.If(~held):
                    m.d.sync += armed.eq(0)
                with m.Elif(~armed & dut.ready):
                    m.d.sync += [armed.eq(1), waited.eq(1), bound.eq(dut.t_off + dut.t_on + 1)]
                with m.Elif(armed & (waited != 15)):
                    m.d.sync += waited.eq(waited + 1)
                with m.If(held & armed & (waited >= bound)):
                    m.d.comb += [Assert(dut.ready), Assert(task == wanted)]

        else:  # cover
            m.d.comb += [
                Cover(
                    switch_done
                    & (rec_from == tasks.DRAFT)
                    & (task == tasks.PREVERIFY)
                    & (rec_off != 0)
                    & (rec_on != 0)
                ),
                Cover(dut.switches.all() & switch_done & prev_switches.all()),
                Cover(dut.config_error & (task == tasks.DRAFT) & dut.ready),
            ]
        return m


@pytest.mark.formal
def test_safety_invariants_proved():
    check(Properties(SMALL, "safety"), name="gtsu_safety", mode="prove", depth=12)


@pytest.mark.formal
def test_every_request_is_served_within_the_bound():
    check(Properties(SMALL, "service"), name="gtsu_service", mode="bmc", depth=SERVICE_DEPTH)


@pytest.mark.formal
def test_a_full_switch_and_saturation_are_reachable():
    check(Properties(SMALL, "cover"), name="gtsu_cover", mode="cover", depth=20)


@pytest.mark.formal
@pytest.mark.parametrize("bug", cases("gtsu.safety_proof"))
def test_safety_proof_fails_on_planted_bugs(bug):
    with pytest.raises(pytest.fail.Exception, match="failed assertion"):
        check(
            Properties(SMALL, "safety", block=bug.build(GTSU)),
            name="gtsu_safety_planted",
            mode="prove",
            depth=12,
        )
