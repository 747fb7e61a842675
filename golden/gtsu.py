"""Golden model of the GTSU, the gated task scheduling unit (spec 2.5).

A cycle-accurate model written from ``docs/spec.md`` section 2.5 and
``docs/spec-decisions.md`` (section "GTSU"), never from the RTL. The cocotb testbench
compares it with the RTL cycle by cycle.

Behaviour
---------
The unit owns ``ranks`` PIM ranks and runs one of three tasks: ``DRAFT`` (the ranks of
``dlm_mask & ~tlm_mask`` enabled), ``PREVERIFY`` (the ranks of ``tlm_mask & ~dlm_mask``)
or ``IDLE`` (none). A rank set in both masks is never enabled and raises the sticky
``config_error``. While ``ready``, the inputs pick the target task: ``PREVERIFY`` if
``want_preverify``, else ``DRAFT`` if ``want_draft``, else ``IDLE``. A target different
from the current task starts a switch (the *decision*); requests are not looked at again
until the switch is over (no preemption). A switch from ``A`` to ``B`` latches the four
registers, disables every rank, waits ``t_off`` cycles, enables the ranks of ``B``, waits
``t_on`` cycles (skipped when ``B`` is ``IDLE``) and raises ``ready``.

Timing convention (a synchronous design, every output a register)
------------------------------------------------------------------
Cycle ``c`` is the clock period that ends with rising edge ``c``. :meth:`GTSU.step` is
rising edge ``c``: it samples the inputs presented during cycle ``c`` together with the
state of cycle ``c``, and computes the state of cycle ``c + 1``. So:

- :meth:`GTSU.outputs` (and the attributes) read *before* ``step(inputs)`` are the values
  during the cycle in which ``inputs`` are presented; read *after* it they are the values
  of the next cycle.
- No output depends combinationally on ``want_draft``/``want_preverify``: inputs
  presented in cycle ``c`` show at the earliest in cycle ``c + 1``.
- Assigning a register (``dlm_mask``, ``tlm_mask``, ``t_off``, ``t_on``) between two
  ``step`` calls models a register that holds the new value from the current cycle on
  (an RTL write port would have been strobed in the previous cycle). A decision taken at
  the end of this cycle already uses it.

A decision in cycle ``d`` (``ready`` high, target ``B`` != ``task``), with ``t_off`` and
``t_on`` the register values of cycle ``d``:

========================================  =====  ==========  ========  =========
cycles                                    ready  enables     gating    task
========================================  =====  ==========  ========  =========
``d`` (decision)                          1      ranks of A  0         A
``d+1 .. d+t_off``                        0      none        1         B
``d+t_off+1 .. d+t_off+t_on``             0      ranks of B  0         B
``d+t_off+t_on+1`` onwards                1      ranks of B  0         B
========================================  =====  ==========  ========  =========

For ``B = IDLE`` the third row is absent (``t_on`` is skipped). Empty ranges are
skipped: with ``t_off = t_on = 0`` the switch completes at the decision edge and
``ready`` never drops. The switch latency ``L`` (the number of rising edges from the
decision to ``ready``, equal to the number of cycles ``ready`` is low) is ``t_off + t_on``,
or ``t_off`` when ``B = IDLE`` (:func:`switch_cycles`). At the edge that completes a
switch, ``last_switch_cycles`` takes the value of a cycle counter started at the
decision edge (so ``L``, saturating at ``2**timer_bits - 1``) and ``switches`` counts
one (saturating at ``2**SWITCH_COUNTER_BITS - 1``); both change in cycle ``d + L + 1``,
together with ``ready``.

Mask and timer writes take effect at the next switch: the enable vectors and waits of a
switch come from the registers of its decision cycle, and a write in the middle of a task
or a switch changes nothing until the next decision.

``config_error`` is sticky and registered: it rises in cycle ``c + 1`` after any cycle
``c`` in which ``dlm_mask & tlm_mask != 0`` (whether or not a switch happens), and only
:meth:`GTSU.reset` clears it.

Reset state: ``task = IDLE``, ``ready``, nothing enabled, not gating, counters 0, no
error; registers at their reset values: ``dlm_mask`` the low ``ranks // 2`` ranks,
``tlm_mask`` the others, ``t_off``/``t_on`` from :class:`~ahasd.params.GTSUParams`.
"""

from __future__ import annotations

import numbers

from ahasd.golden.ports import check_port
from ahasd.params import GTSUParams

__all__ = ["GTSU", "SWITCH_COUNTER_BITS", "TASKS", "TASK_CODES", "switch_cycles"]

#: The three tasks, in the order of their output code.
TASKS = ("IDLE", "DRAFT", "PREVERIFY")

#: Output encoding of ``task`` (the value of the RTL's ``task`` port).
TASK_CODES = {name: code for code, name in enumerate(TASKS)}

#: Width of the saturating switch counter (``GTSUParams`` has no field for it).
SWITCH_COUNTER_BITS = 32

_DEFAULT_PARAMS = GTSUParams()  # frozen, so one shared default is safe


def _check_bit(name: str, value: object) -> bool:
    """Accept a bool or the integers 0 and 1 (what a testbench reads from a 1-bit port)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool or 0 or 1, not {value!r}")


def _check_task(name: str, value: object) -> str:
    if value not in TASKS:
        raise ValueError(f"{name} must be one of {', '.join(TASKS)}, not {value!r}")
    return str(value)


def switch_cycles(
    from_task: str,
    to_task: str,
    params: GTSUParams = _DEFAULT_PARAMS,
    *,
    t_off: int | None = None,
    t_on: int | None = None,
) -> int:
    """Latency in PIM cycles of a switch, from the decision to ``ready``.

    Parameters
    ----------
    from_task, to_task : ``"IDLE"``, ``"DRAFT"`` or ``"PREVERIFY"``.
    params : the parameter set; its ``t_off``/``t_on`` (the registers' reset values) are
        used unless overridden.
    t_off, t_on : programmed register values, if not the reset values.

    Returns
    -------
    int
        ``0`` when ``from_task == to_task`` (no switch); ``t_off`` when ``to_task`` is
        ``IDLE`` (nothing to turn on); else ``t_off + t_on``. This is the true latency;
        the unit's ``last_switch_cycles`` register reports it saturated to ``timer_bits``.
    """
    if not isinstance(params, GTSUParams):
        raise TypeError(f"params must be a GTSUParams, not {params!r}")
    from_task = _check_task("from_task", from_task)
    to_task = _check_task("to_task", to_task)
    off = params.t_off if t_off is None else check_port("t_off", t_off, params.timer_bits)
    on = params.t_on if t_on is None else check_port("t_on", t_on, params.timer_bits)
    if from_task == to_task:
        return 0
    if to_task == "IDLE":
        return off
    return off + on


class GTSU:
    """Gated task scheduling unit, cycle accurate (see the module docstring for timing).

    Parameters
    ----------
    params : the shared parameter set (ranks, reset values of ``t_off``/``t_on``,
        timer width).

    Attributes
    ----------
    dlm_mask, tlm_mask : int
        Rank masks (``ranks`` bits) registers; assigning validates the width.
    t_off, t_on : int
        Gate-off and gate-on waits in cycles (``timer_bits`` bits) registers.
    task : str
        ``"IDLE"``, ``"DRAFT"`` or ``"PREVERIFY"``: the task the unit is in, or is
        switching to.
    ready : bool
        No switch in progress; the inputs are looked at.
    dlm_enable, tlm_enable : int
        Ranks enabled this cycle for the DLM (``DRAFT``) and TLM (``PREVERIFY``) roles.
    gating : bool
        Between a decision and the end of its ``t_off`` wait (all ranks off).
    last_switch_cycles : int
        Measured latency of the last completed switch (saturating at ``timer_bits``).
    switches : int
        Completed switches (saturating at ``SWITCH_COUNTER_BITS``).
    config_error : bool
        Sticky: the masks have overlapped in some cycle.
    """

    def __init__(self, params: GTSUParams = _DEFAULT_PARAMS) -> None:
        if not isinstance(params, GTSUParams):
            raise TypeError(f"params must be a GTSUParams, not {params!r}")
        self.params = params
        self.reset()

    def reset(self) -> None:
        """Synchronous reset: IDLE, ready, nothing enabled, registers to reset values."""
        p = self.params
        all_ranks = (1 << p.ranks) - 1
        self._dlm_mask = (1 << (p.ranks // 2)) - 1
        self._tlm_mask = all_ranks & ~self._dlm_mask
        self._t_off = p.t_off
        self._t_on = p.t_on
        self.task = "IDLE"
        self.ready = True
        self.dlm_enable = 0
        self.tlm_enable = 0
        self.gating = False
        self.last_switch_cycles = 0
        self.switches = 0
        self.config_error = False
        # State of the switch in progress (meaningless while ready).
        self._phase = "READY"  # "READY" | "OFF" (t_off wait) | "ON" (t_on wait)
        self._remaining = 0  # cycles left in the current wait
        self._elapsed = 0  # edges since the decision (the latency counter)
        self._latched_t_on = 0
        self._target_dlm = 0  # enable vectors of the target task, latched at the decision
        self._target_tlm = 0

    # -- registers -------------------------------------------------------------------------

    @property
    def dlm_mask(self) -> int:
        """Ranks holding DLM weights (enabled in ``DRAFT`` unless also in ``tlm_mask``)."""
        return self._dlm_mask

    @dlm_mask.setter
    def dlm_mask(self, value: int) -> None:
        self._dlm_mask = check_port("dlm_mask", value, self.params.ranks)

    @property
    def tlm_mask(self) -> int:
        """Ranks holding TLM weights (enabled in ``PREVERIFY`` unless also in ``dlm_mask``)."""
        return self._tlm_mask

    @tlm_mask.setter
    def tlm_mask(self, value: int) -> None:
        self._tlm_mask = check_port("tlm_mask", value, self.params.ranks)

    @property
    def t_off(self) -> int:
        """Cycles between gating off the old ranks and enabling the new ones."""
        return self._t_off

    @t_off.setter
    def t_off(self, value: int) -> None:
        self._t_off = check_port("t_off", value, self.params.timer_bits)

    @property
    def t_on(self) -> int:
        """Cycles between enabling the new ranks and ``ready``."""
        return self._t_on

    @t_on.setter
    def t_on(self, value: int) -> None:
        self._t_on = check_port("t_on", value, self.params.timer_bits)

    # -- clock -----------------------------------------------------------------------------

    def step(self, want_draft: bool, want_preverify: bool) -> None:
        """One rising edge: sample the inputs of the current cycle, move to the next cycle.

        Parameters
        ----------
        want_draft : the PIM wants to draft (a level).
        want_preverify : a pre-verification order is pending (a level; wins over drafting).
        """
        want_draft = _check_bit("want_draft", want_draft)
        want_preverify = _check_bit("want_preverify", want_preverify)
        # Sticky error from this cycle's register values, visible next cycle.
        if self._dlm_mask & self._tlm_mask:
            self.config_error = True

        if self._phase == "READY":
            if want_preverify:
                target = "PREVERIFY"
            elif want_draft:
                target = "DRAFT"
            else:
                target = "IDLE"
            if target != self.task:
                self._decide(target)
            return

        self._elapsed = min(self._elapsed + 1, (1 << self.params.timer_bits) - 1)
        self._remaining -= 1
        if self._remaining == 0:
            if self._phase == "OFF":
                self._end_off_wait()
            else:
                self._complete()

    def _decide(self, target: str) -> None:
        """The decision edge: latch the registers, gate everything off, start the waits."""
        overlap = self._dlm_mask & self._tlm_mask
        self._target_dlm = self._dlm_mask & ~overlap if target == "DRAFT" else 0
        self._target_tlm = self._tlm_mask & ~overlap if target == "PREVERIFY" else 0
        self._latched_t_on = 0 if target == "IDLE" else self._t_on
        self.task = target
        self.ready = False
        self.dlm_enable = 0
        self.tlm_enable = 0
        self._elapsed = 0
        if self._t_off > 0:
            self._phase = "OFF"
            self._remaining = self._t_off
            self.gating = True
        else:
            self._end_off_wait()

    def _end_off_wait(self) -> None:
        """End of ``t_off``: enable the target's ranks; wait ``t_on`` unless it is 0."""
        self.gating = False
        self.dlm_enable = self._target_dlm
        self.tlm_enable = self._target_tlm
        if self._latched_t_on > 0:
            self._phase = "ON"
            self._remaining = self._latched_t_on
        else:
            self._complete()

    def _complete(self) -> None:
        """End of the switch: ready, report the measured latency, count the switch."""
        self._phase = "READY"
        self._remaining = 0
        self.ready = True
        self.last_switch_cycles = self._elapsed
        self.switches = min(self.switches + 1, (1 << SWITCH_COUNTER_BITS) - 1)

    # -- observation -----------------------------------------------------------------------

    def outputs(self) -> dict[str, int]:
        """Every output port as the RTL presents it in the current cycle (all integers).

        ``task`` is encoded by :data:`TASK_CODES` (``IDLE`` 0, ``DRAFT`` 1,
        ``PREVERIFY`` 2); 1-bit outputs are 0 or 1.
        """
        return {
            "task": TASK_CODES[self.task],
            "ready": int(self.ready),
            "dlm_enable": self.dlm_enable,
            "tlm_enable": self.tlm_enable,
            "gating": int(self.gating),
            "last_switch_cycles": self.last_switch_cycles,
            "switches": self.switches,
            "config_error": int(self.config_error),
        }
