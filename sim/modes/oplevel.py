"""Operator-level synchronous NPU + PIM on one chip: SpecPIM's mapping on AHASD's hardware.

The baseline the paper's claim is about (paper sections 2 and 3, Figure 3; spec 4): the
draft and the target model run in synchronous rounds (draft K tokens, then verify them), and
every matrix operator of both models is mapped to the NPU, to the PIM, or split between
them, as SpecPIM's design-space exploration does, so that the two take the same time for a
*planned* draft length. The adaptive policy then drafts other lengths and the split,
fixed offline, leaves one device waiting for the other.

The physically consistent reading on a shared LPDDR5-PIM (docs/system-model.md,
"Operator-level synchronous NPU + PIM"):

- An operator's PIM part computes on the ranks of its model (the run's rank split,
  :mod:`~ahasd.sim.modes.ranks`); its NPU part is stored on the other model's ranks and
  streamed over the off-chip bus. Rounds are synchronous, so the other model's ranks are
  idle while an operator runs: the two parts run concurrently and never contend (a rank in
  PIM compute mode serves no host reads, and none is asked of it).
- A split operator takes ``max((1 - p) * t_npu, p * t_pim)``, with ``t_npu`` and ``t_pim``
  the operator's whole roofline time on each side; the PIM fraction ``p`` is chosen per
  operator and model as ``t_npu / (t_npu + t_pim)`` at the planned pass size (1 token for a
  draft step, ``planned + 1`` for a verification), which equalises the two sides; ``p``
  near 0 or 1 is a placement on one device.
- Nonlinear operators and reductions run on the NPU's vector unit (there is no AAU in this
  design), and every layer has two hand-offs between the devices (after attention, after
  the FFN) at the NPU's ``pim_request_latency_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ahasd.sim.cost import Cost, Executor, MemoisedPassModel, operators
from ahasd.sim.library.specs import ModelSpec

__all__ = ["OperatorSplitPassModel", "balanced_fractions", "operator_times", "round_shares"]

SYNC_POINTS_PER_LAYER = 2  # after attention, after the FFN


def _roofline(ex: Executor, macs: float, nbytes: float) -> float:
    return max(macs / ex.macs_per_s, nbytes / ex.bytes_per_s)


def operator_times(npu: Executor, pim: Executor, model: ModelSpec, tokens: int, context: int):
    """``(name, count, macs, bytes, t_npu, t_pim)`` of every matrix operator of a pass."""
    matrix, _, _ = operators(model, tokens, context)
    return [
        (name, count, macs, nbytes, _roofline(npu, macs, nbytes), _roofline(pim, macs, nbytes))
        for name, count, macs, nbytes in matrix
    ]


def balanced_fractions(
    npu: Executor, pim: Executor, model: ModelSpec, tokens: int, context: int
) -> dict[str, float]:
    """Per operator, the PIM fraction that equalises both sides for a pass of ``tokens``."""
    return {
        name: t_npu / (t_npu + t_pim)
        for name, _, _, _, t_npu, t_pim in operator_times(npu, pim, model, tokens, context)
    }


@dataclass(frozen=True)
class _Sides:
    host: Executor
    pim: Executor
    sync_latency_s: float
    host_device: str


class OperatorSplitPassModel(MemoisedPassModel):
    """Cost of one pass of ``model`` with its operators split between a host processor (the
    NPU here; the GPU of the GPU-hosted SpecPIM) and the PIM by ``fractions`` (PIM share per
    operator), memoised by ``(tokens, context)``. Nonlinear operators run on the host;
    :class:`Cost.parts` gives each device's busy time (the other waits)."""

    def __init__(
        self,
        host: Executor,
        pim: Executor,
        model: ModelSpec,
        fractions: dict[str, float],
        sync_latency_s: float,
        host_device: str = "npu",
    ) -> None:
        super().__init__()
        self.sides = _Sides(host, pim, sync_latency_s, host_device)
        self.model = model
        self.fractions = fractions

    def compute(self, tokens: int, context: int) -> Cost:
        """The cost of one split pass (not memoised: call the object instead)."""
        npu, pim = self.sides.host, self.sides.pim
        seconds = macs = memory_bytes = energy = npu_busy = pim_busy = 0.0
        for name, count, op_macs, op_bytes, t_npu, t_pim in operator_times(
            npu, pim, self.model, tokens, context
        ):
            p = self.fractions[name]
            seconds += count * max((1 - p) * t_npu, p * t_pim)
            npu_busy += count * (1 - p) * t_npu
            pim_busy += count * p * t_pim
            macs += count * op_macs
            memory_bytes += count * op_bytes
            energy += count * (
                (1 - p) * (op_macs * npu.pj_per_mac + op_bytes * npu.pj_per_byte)
                + p * (op_macs * pim.pj_per_mac + op_bytes * pim.pj_per_byte)
            )
        _, elements, _ = operators(self.model, tokens, context)
        path = npu.nonlinear
        nonlinear = elements / path.elements_per_s
        sync = self.model.layers * SYNC_POINTS_PER_LAYER * self.sides.sync_latency_s
        energy += elements * path.pj_per_element
        return Cost(
            seconds + nonlinear + sync,
            energy * 1e-12,
            macs,
            memory_bytes,
            0.0,
            elements,
            parts=((self.sides.host_device, npu_busy + nonlinear), ("pim", pim_busy)),
        )


def round_shares(hardware, drafts: int, context: int) -> tuple[float, float, float]:
    """One synchronous round of ``drafts`` draft steps and their verification on an
    operator-level hardware (``hardware.draft_pass``/``verify_pass`` are
    :class:`OperatorSplitPassModel`): ``(round seconds, PIM busy share, NPU busy share)``
    of the round's latency (the paper's Figure 3 quantity: the PIM's share of latency)."""
    passes = [hardware.draft_pass(1, context + i) for i in range(drafts)]
    passes.append(hardware.verify_pass(drafts + 1, context))
    seconds = sum(cost.seconds for cost in passes)
    busy = {"npu": 0.0, "pim": 0.0}
    for cost in passes:
        for device, part in cost.parts:
            busy[device] += part
    return seconds, busy["pim"] / seconds, busy["npu"] / seconds
