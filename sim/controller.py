"""The controller the system model asks for EDC, TVC and GTSU decisions.

The engine never looks inside the controller: it sends the events the CPU would send to the
hardware (``DRAFT``, ``VERIFY``, ``LEARN``, ``NPU_START``, ``NPU_DONE``, ``ASK``) and a task
request to the rank scheduler, and uses the answers. :class:`GoldenController` (the default)
forwards them to the golden models (``ahasd.golden.edc.EDC``, ``ahasd.golden.tvc.TVC``); a
co-simulation plugs the RTL in by passing any object with the same methods
(:class:`Controller` is the protocol).

GTSU: :class:`PriorityGTSUStandIn` is a small transaction-level stand-in for the GTSU (the
cycle-level golden model, ``ahasd.golden.gtsu.GTSU``, is stepped per clock, which a system
model does not do). It keeps the spec's two rules that matter at system level (section 2.5):
a pending pre-verification order wins over drafting, and a change of rank role costs the
golden model's switch latency (:func:`ahasd.golden.gtsu.switch_cycles`: ``t_off + t_on`` PIM
cycles, defaults from :class:`ahasd.params.GTSUParams`).

Units: every cycle count here is a PIM-clock cycle (800 MHz by default); entropies are UQ4.12
integers (:func:`ahasd.params.entropy_to_fixed`).
"""

from __future__ import annotations

from typing import Protocol

from ahasd.golden.edc import EDC
from ahasd.golden.gtsu import switch_cycles
from ahasd.golden.tvc import TVC
from ahasd.params import EDCParams, GTSUParams, TVCParams

__all__ = ["Controller", "GoldenController", "PriorityGTSUStandIn", "Task"]


class Task:
    """PIM task kinds (GTSU roles)."""

    IDLE = "idle"
    DRAFT = "draft"
    PREVERIFY = "preverify"


class Controller(Protocol):
    """What the engine needs from the controller hardware (or its model)."""

    def edc_full(self) -> bool: ...

    def edc_draft(self, entropy_sum: int, length: int) -> bool | None: ...

    def edc_verify(self, full: bool, entropy_sum: int, accepted: int) -> None: ...

    def tvc_learn(self, table: str, cycles: int, length: int) -> None: ...

    def tvc_npu_start(self, l_kv: int, cycle: int) -> None: ...

    def tvc_npu_done(self, cycle: int) -> None: ...

    def tvc_ask(self, available: int, cycle: int) -> int: ...

    def gtsu_switch(self, task: str) -> int: ...

    def gtsu_next(self, preverify_pending: bool, draft_wanted: bool) -> str: ...

    def counters(self) -> dict: ...


class PriorityGTSUStandIn:
    """Stand-in for the GTSU golden model (later issue): role switching at system level.

    Parameters
    ----------
    params : ``t_off``/``t_on`` of the gating sequence (PIM cycles).

    Attributes
    ----------
    role : ``Task.DRAFT`` or ``Task.PREVERIFY``: which rank set is enabled. DLM ranks start
        enabled. ``Task.IDLE`` keeps the current role (gating off and on again for an idle
        period would only add switches).
    switches : number of role changes so far.
    """

    def __init__(self, params: GTSUParams | None = None) -> None:
        self.params = params or GTSUParams()
        self.role = Task.DRAFT
        self.switches = 0

    @staticmethod
    def next_task(preverify_pending: bool, draft_wanted: bool) -> str:
        """Spec 2.5: pending pre-verification orders win over drafting."""
        if preverify_pending:
            return Task.PREVERIFY
        return Task.DRAFT if draft_wanted else Task.IDLE

    def switch(self, task: str) -> int:
        """Enable the rank set for ``task``; returns the switch latency in PIM cycles."""
        if task == Task.IDLE or task == self.role:
            return 0
        cycles = switch_cycles(self.role.upper(), task.upper(), self.params)
        self.role = task
        self.switches += 1
        return cycles


class GoldenController:
    """Default controller: the golden EDC and TVC models and the GTSU stand-in.

    Parameters
    ----------
    edc_params, tvc_params, gtsu_params : parameter sets (project defaults when None).
    tvc_presets : ``{table: ratio}`` written into every entry of each TVC table at start
        (UQ24.8 PIM cycles per token, from "offline profiling": the engine passes its own
        cost model's figures, spec 2.2 / paper 4.3).
    """

    def __init__(
        self,
        edc_params: EDCParams | None = None,
        tvc_params: TVCParams | None = None,
        gtsu_params: GTSUParams | None = None,
        tvc_presets: dict[str, int] | None = None,
    ) -> None:
        self.edc = EDC(edc_params or EDCParams())
        self.tvc = TVC(tvc_params or TVCParams())
        self.gtsu = PriorityGTSUStandIn(gtsu_params)
        limit = (1 << self.tvc.params.ratio_bits) - 1
        for table, ratio in (tvc_presets or {}).items():
            for index in range(self.tvc.params.depth):
                self.tvc.write(table, index, min(limit, max(0, int(ratio))))
        self.asks = 0
        self.preverify_orders = 0

    @property
    def max_batch(self) -> int:
        """Longest batch the EDC's length port takes."""
        return (1 << self.edc.params.length_bits) - 1

    def edc_full(self) -> bool:
        return self.edc.full()

    def edc_draft(self, entropy_sum: int, length: int) -> bool | None:
        limit = (1 << self.edc.params.sum_bits) - 1
        return self.edc.draft(min(entropy_sum, limit), length)

    def edc_verify(self, full: bool, entropy_sum: int, accepted: int) -> None:
        limit = (1 << self.edc.params.sum_bits) - 1
        self.edc.verify(full, min(entropy_sum, limit), accepted)

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        limit = (1 << self.tvc.params.cycle_bits) - 1
        self.tvc.learn(table, min(cycles, limit), length)

    def tvc_npu_start(self, l_kv: int, cycle: int) -> None:
        self.tvc.npu_start(min(l_kv, (1 << self.tvc.params.length_bits) - 1), cycle)

    def tvc_npu_done(self, cycle: int) -> None:
        self.tvc.npu_done(cycle)

    def tvc_ask(self, available: int, cycle: int) -> int:
        self.asks += 1
        answer = self.tvc.ask(min(available, (1 << self.tvc.params.length_bits) - 1), cycle)
        if answer:
            self.preverify_orders += 1
        return answer

    def gtsu_switch(self, task: str) -> int:
        return self.gtsu.switch(task)

    def gtsu_next(self, preverify_pending: bool, draft_wanted: bool) -> str:
        return self.gtsu.next_task(preverify_pending, draft_wanted)

    def counters(self) -> dict:
        """Event counters for the run's results."""
        result = {f"edc_{k}": v for k, v in self.edc.counters.items()}
        result.update(
            edc_error=bool(self.edc.error),
            tvc_error=bool(self.tvc.error),
            tvc_asks=self.asks,
            tvc_preverify_orders=self.preverify_orders,
            gtsu_switches=self.gtsu.switches,
        )
        return result
