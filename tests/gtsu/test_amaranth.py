"""GTSU, Amaranth-simulator tier: directed sequences from spec 2.5 and docs/spec-decisions.md.

Every expectation is written out by hand, cycle by cycle, in a compact notation (see
:func:`state`): ``"DRG 0011 0000"`` reads "task DRAFT, ready, gating, DLM enables 0011, TLM
enables 0000" (rank 0 is the rightmost bit), a ``.`` in place of ``R``/``G`` means low. The
timing rule the hand traces follow (docs/gtsu.md): requests seen in ready cycle ``d`` start a
switch whose first cycle is ``d + 1``; the old ranks are off for ``t_off`` cycles, the new
ones on for ``t_on`` cycles before ``ready`` is back, in cycle ``d + 1 + t_off + t_on``; a
switch to ``IDLE`` has no ``t_on`` wait.

Most cases use 4 ranks: the reset masks are then ``dlm = 0011`` and ``tlm = 1100``.
"""

from __future__ import annotations

import pytest
from harness.amaranth_sim import simulate

from ahasd.hw.gtsu import GTSU, Reg, Task, default_masks
from ahasd.params import GTSUParams

LETTER = {Task.IDLE: "I", Task.DRAFT: "D", Task.PREVERIFY: "P"}
NONE, DRAFT, PREVERIFY, BOTH = (0, 0), (1, 0), (0, 1), (1, 1)


def state(ctx, dut: GTSU) -> str:
    """This cycle's outputs as ``"<task><R|.><G|.> <dlm_enable> <tlm_enable>"`` (binary)."""
    ranks = dut.params.ranks
    task = LETTER[ctx.get(dut.current_task)]
    ready = "R" if ctx.get(dut.ready) else "."
    gating = "G" if ctx.get(dut.gating) else "."
    dlm = format(ctx.get(dut.dlm_enable), f"0{ranks}b")
    tlm = format(ctx.get(dut.tlm_enable), f"0{ranks}b")
    return f"{task}{ready}{gating} {dlm} {tlm}"


def run(
    dut: GTSU,
    requests: list[tuple[int, int]],
    *,
    writes: dict[int, list[tuple[Reg, int]]] | None = None,
    extra: tuple = (),
) -> list[dict]:
    """Drive ``requests[c] = (want_draft, want_preverify)`` and the register write listed in
    ``writes[c]`` (at most one) in cycle ``c``; return every cycle's outputs, sampled before
    its closing edge.

    ``extra`` names more output members to record (by attribute name).
    """
    trace: list[dict] = []
    writes = writes or {}

    async def testbench(ctx):
        for cycle, (want_draft, want_preverify) in enumerate(requests):
            ctx.set(dut.want_draft, want_draft)
            ctx.set(dut.want_preverify, want_preverify)
            pending = writes.get(cycle, [])
            assert len(pending) <= 1, "one register write per cycle"
            if pending:
                reg, value = pending[0]
                ctx.set(dut.wr.payload, {"reg": reg, "value": value})
            ctx.set(dut.wr.valid, bool(pending))
            assert ctx.get(dut.wr.ready) == 1
            sample = {"state": state(ctx, dut)}
            for name in ("last_switch_cycles", "switches", "config_error", *extra):
                sample[name] = ctx.get(getattr(dut, name))
            trace.append(sample)
            await ctx.tick()

    simulate(dut, testbench, name="gtsu")
    return trace


def states(trace: list[dict]) -> list[str]:
    return [sample["state"] for sample in trace]


def column(trace: list[dict], name: str) -> list[int]:
    return [sample[name] for sample in trace]


def four(t_off: int, t_on: int, **kwargs) -> GTSU:
    return GTSU(GTSUParams(ranks=4, t_off=t_off, t_on=t_on, **kwargs))


def test_reset_state_and_default_masks():
    for ranks, dlm, tlm in [(4, 0b0011, 0b1100), (16, 0x00FF, 0xFF00), (5, 0b00011, 0b11100)]:
        params = GTSUParams(ranks=ranks, t_off=7, t_on=9)
        assert default_masks(params) == (dlm, tlm)
        dut = GTSU(params)
        trace = run(dut, [NONE] * 3, extra=("dlm_mask", "tlm_mask", "t_off", "t_on"))
        zeros = "0" * ranks
        for sample in trace:
            assert sample["state"] == f"IR. {zeros} {zeros}"
            assert (sample["dlm_mask"], sample["tlm_mask"]) == (dlm, tlm)
            assert (sample["t_off"], sample["t_on"]) == (7, 9)
            assert (sample["last_switch_cycles"], sample["switches"]) == (0, 0)
            assert sample["config_error"] == 0


def test_idle_to_draft_and_back_cycle_by_cycle():
    # t_off = 2, t_on = 3: to DRAFT takes 5 cycles, back to IDLE 2 (no t_on wait).
    trace = run(four(2, 3), [DRAFT] * 10 + [NONE] * 6)
    assert states(trace) == [
        "IR. 0000 0000",  # 0: decision IDLE -> DRAFT
        "D.G 0000 0000",  # 1: t_off wait (nothing was on)
        "D.G 0000 0000",  # 2
        "D.. 0011 0000",  # 3: DLM ranks on, t_on wait
        "D.. 0011 0000",  # 4
        "D.. 0011 0000",  # 5
        "DR. 0011 0000",  # 6: ready, 5 cycles after the decision's first cycle
        "DR. 0011 0000",  # 7
        "DR. 0011 0000",  # 8
        "DR. 0011 0000",  # 9
        "DR. 0011 0000",  # 10: requests gone: decision DRAFT -> IDLE
        "I.G 0000 0000",  # 11: DLM ranks off at once
        "I.G 0000 0000",  # 12
        "IR. 0000 0000",  # 13: ready after t_off only
        "IR. 0000 0000",  # 14
        "IR. 0000 0000",  # 15
    ]
    assert column(trace, "last_switch_cycles") == [0] * 6 + [5] * 7 + [2] * 3
    assert column(trace, "switches") == [0] * 6 + [1] * 7 + [2] * 3


def test_draft_to_preverify_gates_off_then_on():
    trace = run(four(1, 2), [DRAFT] * 4 + [BOTH] * 6)
    assert states(trace) == [
        "IR. 0000 0000",  # 0: decision -> DRAFT
        "D.G 0000 0000",  # 1
        "D.. 0011 0000",  # 2
        "D.. 0011 0000",  # 3
        "DR. 0011 0000",  # 4: ready, both requests: PREVERIFY wins
        "P.G 0000 0000",  # 5: DLM ranks off, nothing on
        "P.. 0000 1100",  # 6: TLM ranks on
        "P.. 0000 1100",  # 7
        "PR. 0000 1100",  # 8
        "PR. 0000 1100",  # 9: still wanted, no switch
    ]
    assert column(trace, "last_switch_cycles")[4:] == [3] * 4 + [3, 3]
    assert column(trace, "switches") == [0] * 4 + [1] * 4 + [2] * 2


def test_zero_waits_switch_in_one_edge():
    trace = run(four(0, 0), [DRAFT, PREVERIFY, NONE, NONE, BOTH, DRAFT])
    assert states(trace) == [
        "IR. 0000 0000",
        "DR. 0011 0000",
        "PR. 0000 1100",
        "IR. 0000 0000",
        "IR. 0000 0000",
        "PR. 0000 1100",
    ]
    assert column(trace, "switches") == [0, 1, 2, 3, 3, 4]
    assert column(trace, "last_switch_cycles") == [0] * 6


def test_zero_t_off_enables_at_once_and_idle_skips_t_on():
    trace = run(four(0, 2), [DRAFT, DRAFT, DRAFT, NONE, NONE])
    assert states(trace) == [
        "IR. 0000 0000",
        "D.. 0011 0000",  # no gating cycle: the new ranks are on in the first switch cycle
        "D.. 0011 0000",
        "DR. 0011 0000",  # decision -> IDLE: t_off = 0 and no t_on: one edge
        "IR. 0000 0000",
    ]
    assert column(trace, "last_switch_cycles") == [0, 0, 0, 2, 0]
    assert column(trace, "switches") == [0, 0, 0, 1, 2]


def test_zero_t_on():
    trace = run(four(2, 0), [PREVERIFY] * 5)
    assert states(trace) == [
        "IR. 0000 0000",
        "P.G 0000 0000",
        "P.G 0000 0000",
        "PR. 0000 1100",  # the ranks come on with ready
        "PR. 0000 1100",
    ]
    assert column(trace, "last_switch_cycles") == [0, 0, 0, 2, 2]


def test_no_preemption_during_a_switch():
    # DRAFT is decided in cycle 0; from cycle 1 only PREVERIFY is wanted, but the switch
    # to DRAFT completes first, and only its ready cycle decides the next one.
    trace = run(four(2, 2), [DRAFT] + [PREVERIFY] * 11)
    assert states(trace) == [
        "IR. 0000 0000",
        "D.G 0000 0000",
        "D.G 0000 0000",
        "D.. 0011 0000",
        "D.. 0011 0000",
        "DR. 0011 0000",  # 5: ready with DRAFT, decision -> PREVERIFY
        "P.G 0000 0000",
        "P.G 0000 0000",
        "P.. 0000 1100",
        "P.. 0000 1100",
        "PR. 0000 1100",  # 10: ready within t_off + t_on + 1 = 5 cycles of cycle 5
        "PR. 0000 1100",
    ]


def test_mask_and_timer_writes_take_effect_at_the_next_switch():
    writes = {
        3: [(Reg.DLM_MASK, 0b0001)],
        4: [(Reg.TLM_MASK, 0b0110)],
        5: [(Reg.T_OFF, 2)],
    }
    requests = [DRAFT] * 7 + [PREVERIFY] * 6
    trace = run(four(1, 1), requests, writes=writes, extra=("dlm_mask", "tlm_mask", "t_off"))
    assert states(trace) == [
        "IR. 0000 0000",
        "D.G 0000 0000",
        "D.. 0011 0000",
        "DR. 0011 0000",  # 3: write dlm_mask
        "DR. 0011 0000",  # 4: write tlm_mask; the running task keeps its ranks
        "DR. 0011 0000",  # 5: write t_off = 2
        "DR. 0011 0000",  # 6
        "DR. 0011 0000",  # 7: decision -> PREVERIFY with the new masks and t_off
        "P.G 0000 0000",  # 8
        "P.G 0000 0000",  # 9: t_off = 2 now
        "P.. 0000 0110",  # 10: the new TLM ranks
        "PR. 0000 0110",  # 11
        "PR. 0000 0110",
    ]
    assert column(trace, "dlm_mask")[3:5] == [0b0011, 0b0001]
    assert column(trace, "tlm_mask")[4:6] == [0b1100, 0b0110]
    assert column(trace, "t_off")[5:7] == [1, 2]
    assert column(trace, "last_switch_cycles")[11] == 3
    assert column(trace, "config_error") == [0] * len(requests)


def test_a_write_in_the_decision_cycle_applies_to_the_switch_after():
    # The write lands at the edge that latches the decision, so the decision uses the old
    # mask; the following switch uses the new one.
    writes = {0: [(Reg.DLM_MASK, 0b0001)]}
    trace = run(four(0, 0), [DRAFT, NONE, DRAFT], writes=writes)
    assert states(trace) == ["IR. 0000 0000", "DR. 0011 0000", "IR. 0000 0000"]
    trace = run(four(0, 0), [DRAFT, NONE, DRAFT, DRAFT], writes=writes)
    assert states(trace)[3] == "DR. 0001 0000"


def test_overlapping_masks_raise_a_sticky_error_and_shared_ranks_stay_off():
    writes = {0: [(Reg.DLM_MASK, 0b0111)], 6: [(Reg.DLM_MASK, 0b0011)]}
    requests = [NONE, DRAFT, DRAFT, PREVERIFY, PREVERIFY, NONE, NONE, NONE, DRAFT, DRAFT]
    trace = run(four(0, 0), requests, writes=writes)
    assert states(trace) == [
        "IR. 0000 0000",  # 0: write dlm = 0111, rank 2 in both masks
        "IR. 0000 0000",  # 1: decision -> DRAFT
        "DR. 0011 0000",  # 2: rank 2 is not enabled
        "DR. 0011 0000",  # 3: decision -> PREVERIFY
        "PR. 0000 1000",  # 4: nor here
        "PR. 0000 1000",  # 5: -> IDLE
        "IR. 0000 0000",  # 6: write dlm = 0011, no overlap any more
        "IR. 0000 0000",
        "IR. 0000 0000",  # 8: -> DRAFT
        "DR. 0011 0000",
    ]
    # Registered: the masks overlap from cycle 1 on, the error shows from cycle 2 on, and
    # stays after the overlap is gone.
    assert column(trace, "config_error") == [0, 0] + [1] * 8


def test_a_rank_in_neither_mask_is_never_enabled():
    writes = {0: [(Reg.DLM_MASK, 0b0001)], 1: [(Reg.TLM_MASK, 0b0100)]}
    trace = run(four(0, 0), [NONE, NONE, DRAFT, PREVERIFY, PREVERIFY], writes=writes)
    assert states(trace)[3:] == ["DR. 0001 0000", "PR. 0000 0100"]


def test_switch_counter_saturates():
    dut = GTSU(GTSUParams(ranks=2, t_off=0, t_on=0), counter_bits=2)
    trace = run(dut, [DRAFT, NONE] * 4)
    assert column(trace, "switches") == [0, 1, 2, 3, 3, 3, 3, 3]


def test_latency_report_saturates_at_the_timer_width():
    # timer_bits = 2: t_off = t_on = 3 takes 6 cycles, reported as 3 (2**2 - 1); a switch
    # to IDLE takes t_off = 3 cycles, reported exactly.
    dut = GTSU(GTSUParams(ranks=2, timer_bits=2, t_off=3, t_on=3))
    assert len(dut.last_switch_cycles) == 2
    trace = run(dut, [DRAFT] * 8 + [NONE] * 4)
    assert states(trace) == (
        ["IR. 00 00"]
        + ["D.G 00 00"] * 3
        + ["D.. 01 00"] * 3
        + ["DR. 01 00"] * 2
        + ["I.G 00 00"] * 3
    )
    trace = run(dut, [DRAFT] * 8 + [NONE] * 5)
    assert column(trace, "last_switch_cycles")[7:] == [3] * 6
    dut = GTSU(GTSUParams(ranks=2, timer_bits=2, t_off=2, t_on=0))
    trace = run(dut, [DRAFT] * 4 + [NONE] * 4)
    assert column(trace, "last_switch_cycles") == [0, 0, 0, 2, 2, 2, 2, 2]


def test_writes_are_truncated_to_the_register_width():
    dut = GTSU(GTSUParams(ranks=4, timer_bits=4, t_off=1, t_on=1))
    writes = {0: [(Reg.T_OFF, 0b1_0011)], 1: [(Reg.T_ON, 0b10_0000)], 2: [(Reg.TLM_MASK, 0x1F8)]}
    trace = run(dut, [NONE] * 4, writes=writes, extra=("t_off", "t_on", "tlm_mask"))
    assert (trace[3]["t_off"], trace[3]["t_on"], trace[3]["tlm_mask"]) == (3, 0, 0b1000)


@pytest.mark.parametrize(("t_off", "t_on"), [(0, 0), (0, 5), (4, 0), (3, 7), (16, 32)])
def test_latency_is_t_off_plus_t_on(t_off, t_on):
    # Cycles the unit is not ready, counted by the testbench, against the unit's own count.
    dut = GTSU(GTSUParams(ranks=4, t_off=t_off, t_on=t_on))
    length = t_off + t_on + 3
    trace = run(dut, [DRAFT] * length + [NONE] * (t_off + 2))
    waiting = [sample["state"][1] == "." for sample in trace]
    assert sum(waiting[:length]) == t_off + t_on
    assert trace[length - 1]["last_switch_cycles"] == t_off + t_on
    assert sum(waiting[length:]) == t_off
    assert trace[-1]["last_switch_cycles"] == t_off


def test_parameter_validation():
    with pytest.raises(TypeError, match=r"^params must be a GTSUParams, not 3$"):
        GTSU(3)
    with pytest.raises(TypeError, match=r"^counter_bits must be an integer, not True$"):
        GTSU(GTSUParams(), counter_bits=True)
    with pytest.raises(ValueError, match=r"^counter_bits must be between 1 and 64, not 0$"):
        GTSU(GTSUParams(), counter_bits=0)
    with pytest.raises(ValueError, match=r"^ranks must be between 2 and 64, not 1$"):
        GTSUParams(ranks=1)
    with pytest.raises(ValueError, match=r"^t_off must be between 0 and 3, not 4$"):
        GTSUParams(timer_bits=2, t_off=4, t_on=0)
    with pytest.raises(ValueError, match=r"^t_on must be between 0 and 1023, not 1024$"):
        GTSUParams(t_on=1024)
