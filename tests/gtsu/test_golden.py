"""Tests of the GTSU golden model (spec 2.5, docs/spec-decisions.md "GTSU").

Directed tests compare per-cycle outputs with tables written by hand from the decisions'
switch sequence. Most use 4 ranks, so the reset masks are DLM = 0b0011 (the low half) and
TLM = 0b1100, with ``t_off = 2`` and ``t_on = 3``: a switch keeps ``ready`` low for
2 + 3 = 5 cycles (2 gated, 3 with the new ranks on), a switch to IDLE for 2.

Convention (module docstring of ``ahasd.golden.gtsu``): ``outputs()`` read before
``step(inputs)`` are the values of the cycle in which ``inputs`` are presented.

The random test checks the invariants every cycle and, independently of the model's FSM,
predicts each switch's whole timeline from its decision cycle (a closed-form table).
"""

from __future__ import annotations

import random
import re

import pytest
from harness.seeds import choose_seed

from ahasd.golden.gtsu import GTSU, SWITCH_COUNTER_BITS, TASK_CODES, TASKS, switch_cycles
from ahasd.params import GTSUParams

SMALL = GTSUParams(ranks=4, t_off=2, t_on=3)
DLM, TLM = 0b0011, 0b1100  # reset masks with 4 ranks
IDLE, DRAFT, PREVERIFY = TASKS


def observe(gtsu: GTSU) -> tuple[str, int, int, int, int]:
    """(task, ready, dlm_enable, tlm_enable, gating) of the current cycle."""
    return (gtsu.task, int(gtsu.ready), gtsu.dlm_enable, gtsu.tlm_enable, int(gtsu.gating))


def run(gtsu: GTSU, rows: list[tuple[tuple[int, int], tuple]]) -> None:
    """Each row: ((want_draft, want_preverify), expected observe() in that cycle), then step."""
    for cycle, (inputs, expected) in enumerate(rows):
        assert observe(gtsu) == expected, f"cycle {cycle}"
        gtsu.step(*inputs)


# -- reset and parameters ---------------------------------------------------------------------


def test_reset_state():
    gtsu = GTSU(SMALL)
    assert observe(gtsu) == (IDLE, 1, 0, 0, 0)
    assert (gtsu.dlm_mask, gtsu.tlm_mask, gtsu.t_off, gtsu.t_on) == (DLM, TLM, 2, 3)
    assert (gtsu.last_switch_cycles, gtsu.switches, gtsu.config_error) == (0, 0, False)
    assert gtsu.outputs() == {
        "task": 0,
        "ready": 1,
        "dlm_enable": 0,
        "tlm_enable": 0,
        "gating": 0,
        "last_switch_cycles": 0,
        "switches": 0,
        "config_error": 0,
    }


def test_reset_masks_default_and_odd_ranks():
    # 16 ranks: low 8 DLM, high 8 TLM. 5 ranks: low 5 // 2 = 2 DLM, the other 3 TLM.
    gtsu = GTSU()
    assert (gtsu.dlm_mask, gtsu.tlm_mask, gtsu.t_off, gtsu.t_on) == (0x00FF, 0xFF00, 16, 32)
    odd = GTSU(GTSUParams(ranks=5))
    assert (odd.dlm_mask, odd.tlm_mask) == (0b00011, 0b11100)


def test_task_codes():
    assert TASKS == ("IDLE", "DRAFT", "PREVERIFY")
    assert TASK_CODES == {"IDLE": 0, "DRAFT": 1, "PREVERIFY": 2}


def test_reset_clears_everything():
    gtsu = GTSU(SMALL)
    gtsu.dlm_mask = 0b1111
    gtsu.t_off = 0
    for _ in range(3):
        gtsu.step(True, False)
    assert gtsu.config_error
    gtsu.reset()
    assert observe(gtsu) == (IDLE, 1, 0, 0, 0)
    assert (gtsu.dlm_mask, gtsu.t_off, gtsu.switches, gtsu.config_error) == (DLM, 2, 0, False)


# -- switch sequences -------------------------------------------------------------------------


def test_draft_preverify_draft_sequence():
    gtsu = GTSU(SMALL)
    off = (DRAFT, 0, 0, 0, 1)  # gating towards DRAFT
    run(
        gtsu,
        [
            ((1, 0), (IDLE, 1, 0, 0, 0)),  # cycle 0: decision IDLE -> DRAFT
            ((1, 0), off),  # 1: t_off wait, 1 of 2
            ((0, 1), off),  # 2: 2 of 2 (want_preverify ignored: no preemption)
            ((0, 1), (DRAFT, 0, DLM, 0, 0)),  # 3: DLM ranks on, t_on wait 1 of 3
            ((0, 1), (DRAFT, 0, DLM, 0, 0)),  # 4: 2 of 3
            ((0, 0), (DRAFT, 0, DLM, 0, 0)),  # 5: 3 of 3
            ((1, 1), (DRAFT, 1, DLM, 0, 0)),  # 6: ready; decision DRAFT -> PREVERIFY (priority)
            ((1, 0), (PREVERIFY, 0, 0, 0, 1)),  # 7: DLM ranks off at once
            ((1, 0), (PREVERIFY, 0, 0, 0, 1)),  # 8
            ((1, 0), (PREVERIFY, 0, 0, TLM, 0)),  # 9: TLM ranks on
            ((1, 0), (PREVERIFY, 0, 0, TLM, 0)),  # 10
            ((1, 0), (PREVERIFY, 0, 0, TLM, 0)),  # 11
            ((1, 0), (PREVERIFY, 1, 0, TLM, 0)),  # 12: ready; decision PREVERIFY -> DRAFT
            ((0, 0), (DRAFT, 0, 0, 0, 1)),  # 13
            ((0, 0), (DRAFT, 0, 0, 0, 1)),  # 14
            ((0, 0), (DRAFT, 0, DLM, 0, 0)),  # 15
            ((0, 0), (DRAFT, 0, DLM, 0, 0)),  # 16
            ((1, 0), (DRAFT, 0, DLM, 0, 0)),  # 17
            ((1, 0), (DRAFT, 1, DLM, 0, 0)),  # 18: ready, want_draft: stay
            ((1, 0), (DRAFT, 1, DLM, 0, 0)),  # 19
        ],
    )
    assert (gtsu.switches, gtsu.last_switch_cycles) == (3, 5)


def test_latency_and_counter_change_with_ready():
    gtsu = GTSU(SMALL)
    gtsu.step(True, False)  # decision in cycle 0
    for _ in range(5):  # cycles 1..5: switch in progress, previous values still shown
        assert (gtsu.ready, gtsu.switches, gtsu.last_switch_cycles) == (False, 0, 0)
        gtsu.step(False, False)
    assert (gtsu.ready, gtsu.switches, gtsu.last_switch_cycles) == (True, 1, 5)  # cycle 6


def test_idle_transitions():
    gtsu = GTSU(SMALL)
    for _ in range(6):  # IDLE -> DRAFT, 5 cycles of switch, ready in DRAFT at cycle 6
        gtsu.step(True, False)
    run(
        gtsu,
        [
            ((0, 0), (DRAFT, 1, DLM, 0, 0)),  # decision DRAFT -> IDLE
            ((0, 1), (IDLE, 0, 0, 0, 1)),  # t_off wait 1 of 2
            ((0, 1), (IDLE, 0, 0, 0, 1)),  # 2 of 2; no t_on wait for IDLE
            ((0, 1), (IDLE, 1, 0, 0, 0)),  # ready in IDLE; decision IDLE -> PREVERIFY
            ((0, 0), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 0), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 1, 0, TLM, 0)),  # ready; decision PREVERIFY -> IDLE
            ((0, 0), (IDLE, 0, 0, 0, 1)),
            ((0, 0), (IDLE, 0, 0, 0, 1)),
            ((0, 0), (IDLE, 1, 0, 0, 0)),  # IDLE and nothing wanted: stays
            ((0, 0), (IDLE, 1, 0, 0, 0)),
        ],
    )
    assert (gtsu.switches, gtsu.last_switch_cycles) == (4, 2)


def test_idle_with_no_request_never_switches():
    gtsu = GTSU(SMALL)
    for _ in range(10):
        assert observe(gtsu) == (IDLE, 1, 0, 0, 0)
        gtsu.step(False, False)
    assert gtsu.switches == 0


def test_t_off_zero():
    # New ranks on at the decision edge, never gating; ready low for t_on = 3 cycles.
    gtsu = GTSU(GTSUParams(ranks=4, t_off=0, t_on=3))
    run(
        gtsu,
        [
            ((1, 0), (IDLE, 1, 0, 0, 0)),
            ((1, 0), (DRAFT, 0, DLM, 0, 0)),
            ((1, 0), (DRAFT, 0, DLM, 0, 0)),
            ((0, 1), (DRAFT, 0, DLM, 0, 0)),
            ((0, 1), (DRAFT, 1, DLM, 0, 0)),  # decision DRAFT -> PREVERIFY
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 0, 0, TLM, 0)),
            ((0, 0), (PREVERIFY, 1, 0, TLM, 0)),  # decision PREVERIFY -> IDLE: t_off = 0, latency 0
            ((0, 0), (IDLE, 1, 0, 0, 0)),
        ],
    )
    assert (gtsu.switches, gtsu.last_switch_cycles) == (3, 0)


def test_t_on_zero():
    # Gated t_off = 2 cycles, then new ranks and ready together.
    gtsu = GTSU(GTSUParams(ranks=4, t_off=2, t_on=0))
    run(
        gtsu,
        [
            ((1, 0), (IDLE, 1, 0, 0, 0)),
            ((1, 0), (DRAFT, 0, 0, 0, 1)),
            ((1, 0), (DRAFT, 0, 0, 0, 1)),
            ((0, 1), (DRAFT, 1, DLM, 0, 0)),
            ((0, 1), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 1), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 1), (PREVERIFY, 1, 0, TLM, 0)),
        ],
    )
    assert (gtsu.switches, gtsu.last_switch_cycles) == (2, 2)


def test_t_off_and_t_on_zero():
    # Latency 0: ready never drops; the task and its ranks change at the decision edge.
    gtsu = GTSU(GTSUParams(ranks=4, t_off=0, t_on=0))
    run(
        gtsu,
        [
            ((1, 0), (IDLE, 1, 0, 0, 0)),
            ((0, 1), (DRAFT, 1, DLM, 0, 0)),
            ((1, 0), (PREVERIFY, 1, 0, TLM, 0)),
            ((0, 0), (DRAFT, 1, DLM, 0, 0)),
            ((0, 0), (IDLE, 1, 0, 0, 0)),
        ],
    )
    assert (gtsu.switches, gtsu.last_switch_cycles) == (4, 0)


# -- priority and preemption ------------------------------------------------------------------


def test_preverify_wins_from_idle():
    gtsu = GTSU(SMALL)
    gtsu.step(True, True)
    assert gtsu.task == PREVERIFY


def test_preverify_holds_against_draft():
    # In PREVERIFY and ready with both requests: no switch.
    gtsu = GTSU(SMALL)
    for _ in range(6):
        gtsu.step(False, True)
    assert observe(gtsu) == (PREVERIFY, 1, 0, TLM, 0)
    for _ in range(10):
        gtsu.step(True, True)
        assert observe(gtsu) == (PREVERIFY, 1, 0, TLM, 0)
    assert gtsu.switches == 1


def test_no_preemption_of_a_switch_to_idle():
    # A request arriving during a switch to IDLE waits for it to finish, then is decided.
    gtsu = GTSU(SMALL)
    for _ in range(6):
        gtsu.step(True, False)
    gtsu.step(False, False)  # decision DRAFT -> IDLE
    gtsu.step(False, True)
    gtsu.step(False, True)
    assert observe(gtsu) == (IDLE, 1, 0, 0, 0)  # IDLE reached although preverify is wanted
    gtsu.step(False, True)
    assert observe(gtsu) == (PREVERIFY, 0, 0, 0, 1)


# -- masks ------------------------------------------------------------------------------------


def test_overlapping_masks():
    gtsu = GTSU(SMALL)
    gtsu.dlm_mask = 0b0111
    gtsu.tlm_mask = 0b1110  # ranks 1 and 2 in both: never enabled
    assert not gtsu.config_error  # registered: shows the cycle after the overlap
    run(
        gtsu,
        [
            ((1, 0), (IDLE, 1, 0, 0, 0)),
            ((1, 0), (DRAFT, 0, 0, 0, 1)),
            ((1, 0), (DRAFT, 0, 0, 0, 1)),
            ((1, 0), (DRAFT, 0, 0b0001, 0, 0)),
            ((1, 0), (DRAFT, 0, 0b0001, 0, 0)),
            ((1, 0), (DRAFT, 0, 0b0001, 0, 0)),
            ((0, 1), (DRAFT, 1, 0b0001, 0, 0)),
            ((0, 1), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 1), (PREVERIFY, 0, 0, 0, 1)),
            ((0, 1), (PREVERIFY, 0, 0, 0b1000, 0)),
            ((0, 1), (PREVERIFY, 0, 0, 0b1000, 0)),
            ((0, 1), (PREVERIFY, 0, 0, 0b1000, 0)),
            ((0, 1), (PREVERIFY, 1, 0, 0b1000, 0)),
        ],
    )
    assert gtsu.config_error
    gtsu.tlm_mask = 0b1000  # fixed: the flag is sticky
    gtsu.step(False, True)
    assert gtsu.config_error


def test_config_error_timing():
    gtsu = GTSU(SMALL)
    gtsu.step(False, False)
    gtsu.tlm_mask = 0b1101  # overlaps DLM in rank 0 from this cycle
    assert gtsu.outputs()["config_error"] == 0
    gtsu.step(False, False)
    assert gtsu.outputs()["config_error"] == 1


def test_mask_write_takes_effect_at_next_switch():
    gtsu = GTSU(SMALL)
    for _ in range(6):
        gtsu.step(True, False)
    assert observe(gtsu) == (DRAFT, 1, DLM, 0, 0)
    gtsu.dlm_mask = 0b0001
    gtsu.tlm_mask = 0b0100
    for _ in range(3):  # still drafting on the old mask
        gtsu.step(True, False)
        assert observe(gtsu) == (DRAFT, 1, DLM, 0, 0)
    gtsu.step(False, True)  # decision -> PREVERIFY with the new masks
    for _ in range(5):
        gtsu.step(False, True)
    assert observe(gtsu) == (PREVERIFY, 1, 0, 0b0100, 0)


def test_register_writes_during_a_switch_wait_for_the_next_one():
    gtsu = GTSU(SMALL)
    gtsu.step(True, False)  # decision with DLM = 0b0011, t_off 2, t_on 3
    gtsu.dlm_mask = 0b0010
    gtsu.t_off = 5
    gtsu.t_on = 1
    expected = [(DRAFT, 0, 0, 0, 1)] * 2 + [(DRAFT, 0, DLM, 0, 0)] * 3 + [(DRAFT, 1, DLM, 0, 0)]
    for cycle, row in enumerate(expected, start=1):
        assert observe(gtsu) == row, f"cycle {cycle}"
        gtsu.step(True, False)
    assert gtsu.last_switch_cycles == 5
    # The next switch (-> PREVERIFY, then back to DRAFT) uses t_off 5, t_on 1 and the new mask.
    gtsu.step(False, True)
    lows = 0
    while not gtsu.ready:
        lows += 1
        gtsu.step(True, False)
    assert (lows, gtsu.last_switch_cycles, gtsu.tlm_enable) == (6, 6, TLM)
    gtsu.step(True, False)
    for _ in range(6):
        gtsu.step(True, False)
    assert observe(gtsu) == (DRAFT, 1, 0b0010, 0, 0)


# -- latency ----------------------------------------------------------------------------------


def test_switch_cycles_closed_form():
    # Defaults: t_off 16, t_on 32.
    assert switch_cycles("IDLE", "DRAFT") == 48
    assert switch_cycles("DRAFT", "PREVERIFY") == 48
    assert switch_cycles("PREVERIFY", "DRAFT") == 48
    assert switch_cycles("DRAFT", "IDLE") == 16
    assert switch_cycles("DRAFT", "DRAFT") == 0
    assert switch_cycles("DRAFT", "PREVERIFY", SMALL) == 5
    assert switch_cycles("DRAFT", "PREVERIFY", SMALL, t_off=0, t_on=7) == 7
    assert switch_cycles("PREVERIFY", "IDLE", SMALL, t_off=4) == 4


def test_default_latency_measured():
    # 48 cycles at 800 MHz = 48 * 1.25 ns = 60 ns, far below 1 us (800 cycles).
    gtsu = GTSU()
    gtsu.step(True, False)
    low = 0
    while not gtsu.ready:
        low += 1
        gtsu.step(True, False)
    assert low == 48
    assert gtsu.last_switch_cycles == 48
    assert gtsu.dlm_enable == 0x00FF
    assert low * 1000 / 800 == 60.0


def test_latency_counter_saturates():
    # timer_bits 3: t_off = t_on = 7 gives a 14-cycle switch, reported as 2**3 - 1 = 7.
    gtsu = GTSU(GTSUParams(ranks=4, t_off=7, t_on=7, timer_bits=3))
    gtsu.step(True, False)
    low = 0
    while not gtsu.ready:
        low += 1
        gtsu.step(True, False)
    assert (low, gtsu.last_switch_cycles) == (14, 7)
    assert switch_cycles("IDLE", "DRAFT", gtsu.params) == 14


def test_switch_counter_saturates():
    gtsu = GTSU(GTSUParams(ranks=4, t_off=0, t_on=0))
    gtsu.switches = (1 << SWITCH_COUNTER_BITS) - 2
    gtsu.step(True, False)
    gtsu.step(False, True)
    gtsu.step(True, False)
    assert gtsu.switches == (1 << 32) - 1


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("dlm_mask", 16, ValueError, "dlm_mask must be between 0 and 15, not 16"),
        ("tlm_mask", -1, ValueError, "tlm_mask must be between 0 and 15, not -1"),
        ("t_off", 1024, ValueError, "t_off must be between 0 and 1023, not 1024"),
        ("t_on", 2.0, TypeError, "t_on must be an integer, not 2.0"),
        ("dlm_mask", True, TypeError, "dlm_mask must be an integer, not True"),
    ],
)
def test_register_validation(name, value, error, message):
    gtsu = GTSU(SMALL)
    with pytest.raises(error, match=re.escape(message)):
        setattr(gtsu, name, value)


def test_input_validation():
    gtsu = GTSU(SMALL)
    with pytest.raises(TypeError, match=re.escape("want_draft must be a bool or 0 or 1, not 2")):
        gtsu.step(2, False)
    with pytest.raises(
        TypeError, match=re.escape("want_preverify must be a bool or 0 or 1, not None")
    ):
        gtsu.step(False, None)
    gtsu.step(1, 0)  # ints 0/1 are accepted
    assert gtsu.task == DRAFT


def test_params_and_task_validation():
    with pytest.raises(TypeError, match=re.escape("params must be a GTSUParams, not 4")):
        GTSU(4)
    with pytest.raises(
        ValueError, match=re.escape("to_task must be one of IDLE, DRAFT, PREVERIFY, not 'RUN'")
    ):
        switch_cycles("IDLE", "RUN")
    with pytest.raises(ValueError, match=re.escape("t_on must be between 0 and 1023, not 5000")):
        switch_cycles("IDLE", "DRAFT", t_on=5000)


# -- random run with invariants ---------------------------------------------------------------


def expected_timeline(source: str, target: str, masks: tuple[int, int], t_off: int, t_on: int):
    """Observed (task, ready, dlm, tlm, gating) for the cycles after a decision, up to ready.

    Written from the decisions' sequence, independently of the model's state machine.
    """
    dlm_mask, tlm_mask = masks
    on_dlm = dlm_mask & ~tlm_mask if target == DRAFT else 0
    on_tlm = tlm_mask & ~dlm_mask if target == PREVERIFY else 0
    wait_on = 0 if target == IDLE else t_on
    rows = [(target, 0, 0, 0, 1)] * t_off + [(target, 0, on_dlm, on_tlm, 0)] * wait_on
    return [*rows, (target, 1, on_dlm, on_tlm, 0)], on_dlm, on_tlm


@pytest.mark.seeded
def test_random_run_invariants():
    seed = choose_seed(20261129)
    rng = random.Random(seed)
    for _trial in range(12):
        ranks = rng.randint(2, 8)
        timer_bits = rng.randint(1, 4)
        top = (1 << timer_bits) - 1
        params = GTSUParams(
            ranks=ranks, timer_bits=timer_bits, t_off=rng.randint(0, top), t_on=rng.randint(0, top)
        )
        gtsu = GTSU(params)
        want_draft = want_preverify = False
        timeline: list = []  # expected observations of the coming cycles of a switch
        latency = 0  # of the switch in progress
        held_enables = (0, 0)  # enables expected while ready, per the last decision
        preverify_deadline = None  # cycle by which a held want_preverify must be served
        overlap_seen = False
        switches = 0
        for cycle in range(1500):
            # Occasional register writes (sometimes overlapping masks, sometimes zero waits).
            if rng.random() < 0.03:
                name = rng.choice(["dlm_mask", "tlm_mask", "t_off", "t_on"])
                width = ranks if name.endswith("mask") else timer_bits
                setattr(gtsu, name, rng.randrange(1 << width))
            # Levels that stay put for a while, so that held requests occur.
            if rng.random() < 0.08:
                want_draft = not want_draft
            if rng.random() < 0.04:
                want_preverify = not want_preverify

            seen = observe(gtsu)
            task, ready, dlm_on, tlm_on, gating = seen
            where = f"seed {seed}, {params}, cycle {cycle}"
            # Invariants.
            assert dlm_on & tlm_on == 0, where
            assert not (dlm_on and tlm_on), where  # one role at a time
            assert not (gating and (dlm_on or tlm_on)), where
            assert dlm_on < (1 << ranks), where
            assert tlm_on < (1 << ranks), where
            assert gtsu.config_error == overlap_seen, where
            # The switch timeline predicted at the decision.
            if timeline:
                assert seen == timeline.pop(0), where
                if not timeline:  # the first ready cycle: latency and counter just updated
                    switches += 1
                    assert gtsu.last_switch_cycles == min(top, latency), where
            else:
                assert ready, where
                assert (dlm_on, tlm_on) == held_enables, where
            assert gtsu.switches == switches, where
            # Service of a held pre-verification request.
            if (task == PREVERIFY and ready) or not want_preverify:
                preverify_deadline = None
            elif ready and preverify_deadline is None:
                preverify_deadline = cycle + gtsu.t_off + gtsu.t_on + 1
            if preverify_deadline is not None:
                assert cycle < preverify_deadline, where
            # A decision this cycle?
            if ready:
                target = PREVERIFY if want_preverify else DRAFT if want_draft else IDLE
                if target != task:
                    masks = (gtsu.dlm_mask, gtsu.tlm_mask)
                    latency = switch_cycles(task, target, params, t_off=gtsu.t_off, t_on=gtsu.t_on)
                    timeline, *held = expected_timeline(task, target, masks, gtsu.t_off, gtsu.t_on)
                    held_enables = tuple(held)
                    assert len(timeline) == latency + 1, where
            overlap_seen = overlap_seen or bool(gtsu.dlm_mask & gtsu.tlm_mask)
            gtsu.step(want_draft, want_preverify)
        assert switches > 20, f"seed {seed}: too few switches to mean anything"
