"""Per-operator roofline latency and energy of one forward pass.

A forward pass of ``tokens`` new tokens over a KV cache of ``context`` earlier tokens is a
list of operators. Each matrix operator costs

    t = max(macs / (peak * eta_compute), bytes / (bandwidth * eta_memory))

with the weights read once whatever ``tokens`` is (verification of K tokens is an M = K
GEMM) and the KV cache read once per pass. Nonlinear operators and reductions (softmax,
layer/RMS norms, the FFN activation, the logits' softmax/entropy) run on a *nonlinear path*:
the device's vector unit, the PIM's AAU, or (PIM without AAU) a request over the off-chip bus
to the NPU's vector unit (paper section 4.1) or, as an option, to the host CPU. Conventions,
applied everywhere:

- **1 MAC = 1 op**; peaks in the spec files are MAC/s.
- A vector unit spends ``VECTOR_OPS_PER_ELEMENT`` ops per nonlinear element; the host CPU
  its ``nonlinear_elements_per_s``. The AAU takes each operator's measured cycles
  (:data:`AAU_OPERATOR_CYCLES`: two passes for softmax and the norms, one for the
  activations and the logits' statistics, plus each mode's fixed latency per vector;
  ``docs/aau.md``), the model's own norm and activation (its spec file), and is charged its
  energy per element for every one of those cycles (its power over its clock).
- Without the AAU every element crosses the bus twice at ``LINK_BYTES_PER_ELEMENT`` (INT16
  out, INT16 back) and every nonlinear operator pays the hand-off latency of one request
  (the NPU's ``pim_request_latency_s`` or the CPU's ``transfer_latency_s``). The pass's
  :class:`Cost` says how much of it the other device and the bus did (``offload_*``): the
  asynchronous engine makes that work contend with the NPU's verification.
- A pass's ``memory_bound_s`` is the time of its memory-bound matrix operators (bytes over
  bandwidth at least MACs over peak): the part a stalled memory stream extends.
- Energy = MACs x pJ/MAC + weight/KV bytes x pJ/B of the memory level (+ SRAM pJ/B where the
  bytes stream through a scratchpad) + nonlinear elements x pJ/element (+ link bytes x pJ/B).
  Static power is charged by the engine over the run time, not here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ahasd.errors import UserError
from ahasd.sim.library.specs import DeviceSpec, ModelSpec, PowerSpec

__all__ = [
    "AAU_OPERATOR_CYCLES",
    "LINK_BYTES_PER_ELEMENT",
    "VECTOR_OPS_PER_ELEMENT",
    "Cost",
    "Executor",
    "MemoisedPassModel",
    "NonlinearPath",
    "OffloadPassModel",
    "PassModel",
    "aau_cycles",
    "executor_for",
    "nonlinear_operators",
    "operators",
]

VECTOR_OPS_PER_ELEMENT = 4  # max-subtract, exp (table), accumulate, scale
LINK_BYTES_PER_ELEMENT = 4  # an INT16 element to the NPU (or CPU), its INT16 result back

#: AAU cycles of one operator over a vector of ``N`` elements, ``passes * N + fixed``: from
#: the cycle that takes the first element to the one that delivers the last output (or the
#: result), both included, back to back from an idle unit, one element per cycle per pass.
#: Measured on the RTL (``docs/aau.md`` section 15, "Throughput per mode"; asserted against
#: it by ``tests/aau/test_amaranth.py``).
AAU_OPERATOR_CYCLES = {
    "softmax": (2, 44),  # STATS, then SOFTMAX over the same vector once the result is out
    "stats": (1, 41),  # the logits: top-1 probability and entropy, one pass
    "layernorm": (2, 130),  # LAYERNORM, its post pass (square root, division), NORM
    "rmsnorm": (2, 130),
    "relu": (1, 10),
    "gelu": (1, 10),
    "silu": (1, 10),
}


@dataclass(frozen=True)
class Cost:
    """Latency and dynamic energy of one task, with the traffic behind them.

    ``seconds`` is the task's own latency with no other task in the way. A PIM pass without
    AAU sends its nonlinear operators elsewhere: ``offload_device`` (``"cpu"`` or ``"npu"``)
    computed them for ``offload_compute_s``, their activations crossed the off-chip bus for
    ``offload_link_s`` in ``offload_requests`` requests (all included in ``seconds``).
    """

    seconds: float
    energy_j: float
    macs: float = 0.0
    memory_bytes: float = 0.0
    link_bytes: float = 0.0
    nonlinear_elements: float = 0.0
    memory_bound_s: float = 0.0  # time of the memory-bound matrix operators
    longest_nonlinear_s: float = 0.0  # the longest single nonlinear operator on its path
    offload_device: str = ""
    offload_compute_s: float = 0.0
    offload_link_s: float = 0.0
    offload_requests: int = 0
    parts: tuple = ()  # split passes: ((device, busy seconds), ...)


@dataclass(frozen=True)
class NonlinearPath:
    """Where nonlinear elements are computed and what that costs.

    kind : ``"vector"`` (the device's vector unit), ``"aau"`` (in the PIM), ``"npu"`` (a PIM
        without AAU: over the off-chip bus to the NPU's vector unit and back) or ``"host"``
        (the same to the host CPU).
    latency_s : hand-off latency of one request (``"npu"``, ``"host"``).
    """

    kind: str
    elements_per_s: float
    pj_per_element: float
    link_bytes_per_s: float = 0.0
    pj_per_link_byte: float = 0.0
    latency_s: float = 0.0


@dataclass(frozen=True)
class Executor:
    """A device (or the share of one, e.g. the DLM ranks of a PIM) as the roofline sees it.

    Rates are already multiplied by the efficiency factors.
    """

    name: str
    macs_per_s: float
    bytes_per_s: float
    pj_per_mac: float
    pj_per_byte: float
    nonlinear: NonlinearPath


def executor_for(
    device: DeviceSpec,
    power: PowerSpec,
    *,
    share: float = 1.0,
    aau: bool = True,
    host: DeviceSpec | None = None,
    host_power: PowerSpec | None = None,
) -> Executor:
    """Build the roofline view of ``device``.

    Parameters
    ----------
    share : fraction of a PIM's units that compute (its DLM or TLM ranks).
    aau : PIM only: nonlinear ops in the AAU; otherwise on ``host`` over the off-chip bus:
        an NPU (its vector unit; each operator is one request costing the NPU's
        ``pim_request_latency_s``) or a CPU (its ``nonlinear_elements_per_s``; each operator
        costs its ``transfer_latency_s``).
    """
    macs = device.matrix_macs_per_s * device.eta_compute * share
    bandwidth = device.memory_bandwidth * device.eta_memory * share
    pj_per_byte = power.pj_per_byte_memory + power.pj_per_byte_sram
    if device.kind == "pim":
        if aau and device.aau_elements_per_cycle:
            units = device.units * share
            path = NonlinearPath(
                "aau",
                elements_per_s=units * device.clock_hz * device.aau_elements_per_cycle,
                pj_per_element=power.pj_per_aau_element,
            )
        else:
            if host is None or host_power is None:
                raise ValueError("a PIM without AAU needs a device for its nonlinear ops")
            # The off-chip bus is the NPU's weight stream's bus: its efficiency is the NPU's
            # (make validate), not the PIM's in-bank schedule's; toward the CPU, the PIM's.
            bus_eta = host.eta_memory if host.kind == "npu" else device.eta_memory
            link = device.offchip_bandwidth * bus_eta
            if host.kind == "npu":
                if host.pim_request_latency_s is None:
                    raise UserError(
                        f"device {host.name!r}: field 'pim_request_latency_s' is needed to "
                        f"serve the nonlinear operators of a PIM without AAU"
                    )
                kind, latency = "npu", host.pim_request_latency_s
                elements_per_s = host.vector_ops_per_s * host.eta_compute / VECTOR_OPS_PER_ELEMENT
                pj_per_element = host_power.pj_per_vector_op * VECTOR_OPS_PER_ELEMENT
            else:
                kind, latency = "host", host.transfer_latency_s
                elements_per_s = host.nonlinear_elements_per_s
                pj_per_element = host_power.pj_per_cpu_element
            path = NonlinearPath(
                kind,
                elements_per_s=elements_per_s,
                pj_per_element=pj_per_element,
                link_bytes_per_s=link,
                pj_per_link_byte=power.pj_per_byte_link,
                latency_s=latency,
            )
    else:
        path = NonlinearPath(
            "vector",
            elements_per_s=device.vector_ops_per_s * device.eta_compute / VECTOR_OPS_PER_ELEMENT,
            pj_per_element=power.pj_per_vector_op * VECTOR_OPS_PER_ELEMENT,
        )
    return Executor(device.name, macs, bandwidth, power.pj_per_mac, pj_per_byte, path)


def nonlinear_operators(model: ModelSpec, tokens: int, context: int):
    """The nonlinear operators of one pass: ``(name, count, elements)`` per instance.

    Per layer the attention softmax (every head over every key), two norms and the FFN
    activation; once the final norm and the logits' softmax/entropy.
    """
    k, length = tokens, context + tokens
    h, layers = model.hidden, model.layers
    return [
        ("attention_softmax", layers, k * model.heads * length),
        ("norm", 2 * layers, k * h),
        ("ffn_activation", layers, k * model.ffn),
        ("final_norm", 1, k * h),
        ("logits_softmax", 1, k * model.vocab),
    ]


def operators(model: ModelSpec, tokens: int, context: int):
    """The operators of one pass: ``(name, count, macs, bytes)`` and the nonlinear load.

    Returns
    -------
    matrix : list of ``(name, count, macs, bytes)``, per instance (``count`` instances).
    nonlinear_elements : total nonlinear elements of the pass.
    nonlinear_ops : number of nonlinear operator invocations (requests without AAU).
    """
    k, length = tokens, context + tokens  # keys attended by the new tokens
    h, q, kv, f = model.hidden, model.q_dim, model.kv_dim, model.ffn
    wb, kb = model.weight_bytes, model.kv_bytes
    layers = model.layers
    matrix = [
        ("qkv_projection", layers, k * h * (q + 2 * kv), h * (q + 2 * kv) * wb),
        ("attention_scores", layers, k * q * length, length * kv * kb),
        ("attention_values", layers, k * q * length, length * kv * kb),
        ("output_projection", layers, k * q * h, q * h * wb),
        ("ffn", layers, k * h * f * model.ffn_matrices, h * f * model.ffn_matrices * wb),
        ("lm_head", 1, k * h * model.vocab, h * model.vocab * wb),
    ]
    nonlinear = nonlinear_operators(model, tokens, context)
    elements = sum(count * each for _, count, each in nonlinear)
    invocations = sum(count for _, count, _ in nonlinear)
    return matrix, elements, invocations


def aau_cycles(model: ModelSpec, tokens: int, context: int) -> float:
    """AAU cycles of the nonlinear operators of one pass (summed over the AAUs that share
    them): per new token and layer, the attention softmax of each head over the keys, the
    two norms over the hidden vector and the activation over the FFN width; then the final
    norm and the logits' statistics (:data:`AAU_OPERATOR_CYCLES`)."""

    def cycles(operator: str, length: int) -> int:
        passes, fixed = AAU_OPERATOR_CYCLES[operator]
        return passes * length + fixed

    keys = context + tokens
    per_layer = (
        model.heads * cycles("softmax", keys)
        + 2 * cycles(model.norm, model.hidden)
        + cycles(model.activation, model.ffn)
    )
    final = cycles(model.norm, model.hidden) + cycles("stats", model.vocab)
    return tokens * (model.layers * per_layer + final)


class MemoisedPassModel:
    """The cost of a forward pass, memoised by ``(tokens, context)``: a run asks for the same
    pass shape thousands of times. Calling it returns the memoised :meth:`compute`, which a
    subclass implements (the roofline :class:`PassModel`; the operator-split pass of
    :mod:`ahasd.sim.modes.oplevel`)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], Cost] = {}

    def __call__(self, tokens: int, context: int) -> Cost:
        key = (tokens, context)
        cost = self._cache.get(key)
        if cost is None:
            cost = self._cache[key] = self.compute(tokens, context)
        return cost

    def compute(self, tokens: int, context: int) -> Cost:
        """The cost of one pass of ``tokens`` new tokens over ``context`` cached ones (not
        memoised: call the object instead)."""
        raise NotImplementedError


class PassModel(MemoisedPassModel):
    """Roofline cost of forward passes of one model on one executor (memoised).

    A subclass with another cost model (e.g. the phone's tiered memories) overrides
    :meth:`compute`.
    """

    def __init__(self, executor: Executor, model: ModelSpec) -> None:
        super().__init__()
        self.executor = executor
        self.model = model

    def matrix_seconds(self, tokens: int, context: int) -> float:
        matrix, _, _ = operators(self.model, tokens, context)
        ex = self.executor
        return sum(n * max(m / ex.macs_per_s, b / ex.bytes_per_s) for _, n, m, b in matrix)

    def compute(self, tokens: int, context: int) -> Cost:
        """The roofline cost of one pass (not memoised: call the object instead)."""
        ex = self.executor
        matrix, elements, invocations = operators(self.model, tokens, context)
        seconds = 0.0
        macs = 0.0
        memory_bytes = 0.0
        memory_bound = 0.0
        for _, count, op_macs, op_bytes in matrix:
            compute_s, memory_s = op_macs / ex.macs_per_s, op_bytes / ex.bytes_per_s
            seconds += count * max(compute_s, memory_s)
            if memory_s >= compute_s:
                memory_bound += count * memory_s
            macs += count * op_macs
            memory_bytes += count * op_bytes
        energy = macs * ex.pj_per_mac + memory_bytes * ex.pj_per_byte
        path = ex.nonlinear
        # the AAU is busy for its operators' cycles, the other paths per element
        busy = aau_cycles(self.model, tokens, context) if path.kind == "aau" else elements
        nonlinear_seconds = busy / path.elements_per_s
        largest = max(each for _, _, each in nonlinear_operators(self.model, tokens, context))
        energy += busy * path.pj_per_element
        link_bytes = 0.0
        offload = {}
        if path.kind in ("host", "npu"):
            link_bytes = elements * LINK_BYTES_PER_ELEMENT
            link_seconds = link_bytes / path.link_bytes_per_s
            offload = {
                "offload_device": "cpu" if path.kind == "host" else "npu",
                "offload_compute_s": nonlinear_seconds,
                "offload_link_s": link_seconds,
                "offload_requests": invocations,
            }
            nonlinear_seconds += link_seconds + invocations * path.latency_s
            energy += link_bytes * path.pj_per_link_byte
        return Cost(
            seconds=seconds + nonlinear_seconds,
            energy_j=energy * 1e-12,
            macs=macs,
            memory_bytes=memory_bytes,
            link_bytes=link_bytes,
            nonlinear_elements=elements,
            memory_bound_s=memory_bound,
            longest_nonlinear_s=largest / path.elements_per_s,
            **offload,
        )


class OffloadPassModel(PassModel):
    """A GPU pass whose weights are partly in host memory (they do not all fit the GPU).

    A fraction ``resident`` of every weight matrix is in the GPU's memory; the rest streams
    over the host link (``link_bytes_per_s``, ``pj_per_link_byte``) on every pass,
    overlapped with the resident reads and the compute (a prefetching offload runtime):
    an operator costs ``max(macs / peak, resident bytes and KV / bandwidth, offloaded bytes
    / link)``. The KV cache stays on the GPU.
    """

    def __init__(
        self,
        executor: Executor,
        model: ModelSpec,
        *,
        resident: float,
        link_bytes_per_s: float,
        pj_per_link_byte: float,
    ) -> None:
        super().__init__(executor, model)
        self.resident = resident
        self.link_bytes_per_s = link_bytes_per_s
        self.pj_per_link_byte = pj_per_link_byte

    def _split(self, name: str, op_bytes: float) -> tuple[float, float]:
        """(bytes read from GPU memory, bytes over the link) of one operator instance."""
        if name.startswith("attention_"):  # KV cache
            return op_bytes, 0.0
        return op_bytes * self.resident, op_bytes * (1 - self.resident)

    def _seconds(self, name: str, op_macs: float, op_bytes: float) -> float:
        local, remote = self._split(name, op_bytes)
        ex = self.executor
        return max(op_macs / ex.macs_per_s, local / ex.bytes_per_s, remote / self.link_bytes_per_s)

    def matrix_seconds(self, tokens: int, context: int) -> float:
        matrix, _, _ = operators(self.model, tokens, context)
        return sum(n * self._seconds(name, m, b) for name, n, m, b in matrix)

    def compute(self, tokens: int, context: int) -> Cost:
        base = super().compute(tokens, context)
        matrix, _, _ = operators(self.model, tokens, context)
        offloaded = sum(count * self._split(name, b)[1] for name, count, _, b in matrix)
        extra = self.matrix_seconds(tokens, context) - super().matrix_seconds(tokens, context)
        # Offloaded bytes are read from host memory instead of the GPU's: the link's
        # energy figure (host DRAM plus the link) replaces the GPU memory's.
        energy = offloaded * (self.pj_per_link_byte - self.executor.pj_per_byte) * 1e-12
        return dataclasses.replace(
            base,
            seconds=base.seconds + extra,
            energy_j=base.energy_j + energy,
            link_bytes=base.link_bytes + offloaded,
        )
