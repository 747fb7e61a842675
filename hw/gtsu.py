"""GTSU: gated task scheduling unit (spec 2.5, ``docs/gtsu.md``).

The GTSU decides which of the PIM's two roles computes, and switches the PIM ranks between
them with an off-then-on sequence. Two programmed masks tag the ranks: ``dlm_mask`` (ranks
holding draft-model weights) and ``tlm_mask`` (target-model weights). Tasks and the ranks
they enable:

- ``PREVERIFY`` (``want_preverify``, wins): ``tlm_mask & ~dlm_mask`` on ``tlm_enable``;
- ``DRAFT`` (``want_draft``): ``dlm_mask & ~tlm_mask`` on ``dlm_enable``;
- ``IDLE`` (neither): none.

A rank in both masks is never enabled, and the overlap raises the sticky ``config_error``.

The switch (``docs/spec-decisions.md``): the requests are levels, looked at only in a cycle
in which the unit is ready. In ready cycle ``d`` with target ``B`` different from the current
task ``A``, the decision is registered at the edge that ends ``d``; from cycle ``d + 1`` (the
first cycle of the switch) ``ready`` is low and ``A``'s ranks are off (``gating`` high) for
``t_off`` cycles; ``B``'s ranks are enabled in cycle ``d + 1 + t_off``; ``ready`` rises with
``current_task == B`` in cycle ``d + 1 + t_off + t_on``. A switch to ``IDLE`` skips the ``t_on``
wait. The switch latency ``t_off + t_on`` (``t_off`` to ``IDLE``), the number of cycles
``ready`` is low, is counted by the unit while it switches and shown on ``last_switch_cycles``
from the ready cycle on; ``switches`` counts the switches (saturating) and steps in that
same cycle. With ``t_off = t_on = 0`` a switch
takes one edge and ``ready`` never drops.

All outputs are registers or decoded from registers (no combinational path from an input to
an output), so the controller top can use them without timing surprises.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.params import GTSUParams

__all__ = [
    "GTSU",
    "Phase",
    "Reg",
    "Task",
    "default_masks",
    "write_layout",
]

SWITCH_COUNTER_BITS = 32


class Task(enum.Enum, shape=2):
    """What the PIM ranks compute."""

    IDLE = 0
    DRAFT = 1
    PREVERIFY = 2


class Reg(enum.Enum, shape=2):
    """Register selector of the write port."""

    DLM_MASK = 0
    TLM_MASK = 1
    T_OFF = 2
    T_ON = 3


class Phase(enum.Enum, shape=2):
    """Where the unit is in a switch."""

    READY = 0
    OFF = 1  # the old ranks are off, waiting t_off (``gating``)
    ON = 2  # the new ranks are on, waiting t_on


def default_masks(params: GTSUParams) -> tuple[int, int]:
    """Reset values ``(dlm_mask, tlm_mask)``: the low ``ranks // 2`` ranks DLM, the rest TLM."""
    low = params.ranks // 2
    all_ranks = (1 << params.ranks) - 1
    dlm = (1 << low) - 1
    return dlm, all_ranks & ~dlm


def _value_bits(params: GTSUParams) -> int:
    return max(params.ranks, params.timer_bits)


def write_layout(params: GTSUParams) -> data.StructLayout:
    """A register write: ``reg := value`` (``value`` truncated to the register's width)."""
    return data.StructLayout({"reg": Reg, "value": _value_bits(params)})


class GTSU(wiring.Component):
    """Gated task scheduling unit (spec 2.5).

    Parameters
    ----------
    params : GTSUParams
    counter_bits : int, keyword-only
        Width of the saturating ``switches`` counter (default 32; the tests shrink it to
        reach saturation).

    Members
    -------
    want_draft : In(1)
        Level: the PIM wants to draft.
    want_preverify : In(1)
        Level: a pre-verification order is pending (the pre-verification queue is not
        empty). Wins over ``want_draft``.
    wr : In(stream.Signature(write_layout(params)))
        Register writes, ``reg := value[:width]``; always ready, takes effect at the edge of
        the cycle ``wr.valid`` is high. Mask and timer writes apply from the next switch
        decision on: a switch in progress, and the task running, keep the values latched at
        their decision.
    dlm_mask, tlm_mask : Out(ranks); t_off, t_on : Out(timer_bits)
        The programmed registers (read back). Reset: ``default_masks(params)``,
        ``params.t_off``, ``params.t_on``.
    current_task : Out(Task)
        The task the ranks are given to: from the first cycle of a switch on, the task being
        switched to. (Named ``current_task``, not ``task``: ``task`` is a Verilog keyword.)
    ready : Out(1)
        No switch in progress; the requests are looked at in this cycle.
    dlm_enable, tlm_enable : Out(ranks)
        Per-rank enables for the DLM and the TLM role.
    gating : Out(1)
        The ``t_off`` wait of a switch: no rank is enabled.
    last_switch_cycles : Out(timer_bits)
        Latency of the last completed switch: the cycles ``ready`` was low, i.e. the edges
        from the decision edge to the one that raises ``ready``, counted by the unit while it
        switches (saturating at ``2**timer_bits - 1``, the width ``GTSUParams`` gives the
        latency counter); 0 after reset.
    switches : Out(counter_bits)
        Completed switches, saturating.
    config_error : Out(1)
        Sticky, registered: the mask registers have shared a rank in some cycle since reset
        (high from the cycle after the first such cycle on). Cleared by reset only.

    Attributes (not ports; for the formal wrapper)
    ----------------------------------------------
    phase : Signal(Phase)
    rank_set : Signal(ranks)
        The enabled set of the current task, latched at its decision.
    timer : Signal(timer_bits)
        Cycles left in the current wait, minus one.
    on_wait : Signal(timer_bits)
        The ``t_on`` of the switch in progress (0 for a switch to ``IDLE``).

    Latency: a switch decided in ready cycle ``d`` ends with ``ready`` high in cycle
    ``d + 1 + t_off + t_on`` (``d + 1 + t_off`` to ``IDLE``); no preemption during a switch.
    """

    def __init__(self, params: GTSUParams, *, counter_bits: int = SWITCH_COUNTER_BITS):
        if not isinstance(params, GTSUParams):
            self._MustUse__silence = True
            raise TypeError(f"params must be a GTSUParams, not {params!r}")
        if isinstance(counter_bits, bool) or not isinstance(counter_bits, int):
            self._MustUse__silence = True
            raise TypeError(f"counter_bits must be an integer, not {counter_bits!r}")
        if not 1 <= counter_bits <= 64:
            self._MustUse__silence = True
            raise ValueError(f"counter_bits must be between 1 and 64, not {counter_bits!r}")
        self.params = params
        self.counter_bits = counter_bits
        dlm, tlm = default_masks(params)
        super().__init__(
            {
                "want_draft": In(1),
                "want_preverify": In(1),
                "wr": In(stream.Signature(write_layout(params))),
                "dlm_mask": Out(params.ranks, init=dlm),
                "tlm_mask": Out(params.ranks, init=tlm),
                "t_off": Out(params.timer_bits, init=params.t_off),
                "t_on": Out(params.timer_bits, init=params.t_on),
                "current_task": Out(Task),
                "ready": Out(1),
                "dlm_enable": Out(params.ranks),
                "tlm_enable": Out(params.ranks),
                "gating": Out(1),
                "last_switch_cycles": Out(params.timer_bits),
                "switches": Out(counter_bits),
                "config_error": Out(1),
            }
        )
        self.phase = Signal(Phase)
        self.rank_set = Signal(params.ranks)
        self.timer = Signal(params.timer_bits)
        self.on_wait = Signal(params.timer_bits)

    def elaborate(self, platform):
        p = self.params
        m = Module()

        # Verilator's -Wall objects to Amaranth's comparisons of an enum with a narrower
        # constant and to `case` without default, so the state is kept as single-bit flags
        # (Task's encoding is one bit per task) and decoded with bit operations.

        # Register writes.
        m.d.comb += self.wr.ready.eq(1)
        reg = self.wr.payload.reg.as_value()
        value = self.wr.payload.value
        writes = {
            Reg.DLM_MASK: (self.dlm_mask, p.ranks),
            Reg.TLM_MASK: (self.tlm_mask, p.ranks),
            Reg.T_OFF: (self.t_off, p.timer_bits),
            Reg.T_ON: (self.t_on, p.timer_bits),
        }
        for code, (register, width) in writes.items():
            selected = (reg[0] if code.value & 1 else ~reg[0]) & (
                reg[1] if code.value & 2 else ~reg[1]
            )
            with m.If(self.wr.valid & selected):
                m.d.sync += register.eq(value[:width])

        # Sticky configuration error, registered: high from the cycle after the first cycle
        # in which the mask registers overlap.
        with m.If((self.dlm_mask & self.tlm_mask).any()):
            m.d.sync += self.config_error.eq(1)

        # State: the task as one flag per task, the phase as `ready`/`gating` (both low: the
        # t_on wait), the latched rank set and the wait timer.
        drafting = Signal()
        preverifying = Signal()
        ready = Signal(init=1)
        gating = Signal()
        rank_set, timer, on_wait = self.rank_set, self.timer, self.on_wait
        m.d.comb += [
            self.current_task.as_value().eq(Cat(drafting, preverifying)),
            self.ready.eq(ready),
            self.gating.eq(gating),
            self.dlm_enable.eq(Mux(drafting & ~gating, rank_set, 0)),
            self.tlm_enable.eq(Mux(preverifying & ~gating, rank_set, 0)),
            self.phase.eq(Mux(ready, Phase.READY, Mux(gating, Phase.OFF, Phase.ON))),
        ]

        # The target the requests ask for (pre-verification wins), and its ranks.
        want_preverify = self.want_preverify
        want_draft = self.want_draft & ~want_preverify
        going_idle = ~want_preverify & ~self.want_draft
        target_ranks = Mux(
            want_preverify,
            self.tlm_mask & ~self.dlm_mask,
            Mux(want_draft, self.dlm_mask & ~self.tlm_mask, 0),
        )
        switching = (want_draft ^ drafting) | (want_preverify ^ preverifying)

        # The switch sequence. `elapsed` counts the edges since the decision edge, saturating
        # (the latency counter is `timer_bits` wide, as `last_switch_cycles`).
        elapsed = Signal(p.timer_bits)
        elapsed_next = Mux(elapsed.all(), elapsed, elapsed + 1)

        def finish(latency):
            """End the switch at this edge: ready in the next cycle, latency recorded."""
            m.d.sync += [
                ready.eq(1),
                gating.eq(0),
                self.last_switch_cycles.eq(latency),
                self.switches.eq(Mux(self.switches.all(), self.switches, self.switches + 1)),
            ]

        with m.If(ready & switching):
            m.d.sync += [
                drafting.eq(want_draft),
                preverifying.eq(want_preverify),
                rank_set.eq(target_ranks),
                on_wait.eq(Mux(going_idle, 0, self.t_on)),
                elapsed.eq(0),
            ]
            with m.If(self.t_off.any()):
                m.d.sync += [ready.eq(0), gating.eq(1), timer.eq(self.t_off - 1)]
            with m.Elif(~going_idle & self.t_on.any()):
                m.d.sync += [ready.eq(0), timer.eq(self.t_on - 1)]
            with m.Else():
                finish(Const(0))
        with m.Elif(~ready):
            m.d.sync += elapsed.eq(elapsed_next)
            with m.If(timer.any()):
                m.d.sync += timer.eq(timer - 1)
            with m.Elif(gating & on_wait.any()):  # end of t_off: the new ranks come on
                m.d.sync += [gating.eq(0), timer.eq(on_wait - 1)]
            with m.Else():
                finish(elapsed_next)

        return m
