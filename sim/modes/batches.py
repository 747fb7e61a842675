"""What the asynchronous ladder engine (:mod:`ahasd.sim.modes.ladder`) tracks: a drafted
batch in the unverified-draft queue (:class:`Batch`) and the verification pass running on the
NPU (:class:`NpuPass`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Batch", "NpuPass"]


@dataclass(eq=False)
class Batch:
    """A drafted batch (one policy round) in the unverified-draft queue."""

    first_pos: int
    start: float  # when its drafting started (the policy's round time starts here)
    epoch: int
    length: int = 0  # kept tokens (a known-rejected last token included)
    entropy_sum: int = 0  # UQ4.12 sum over the kept tokens
    tracked: bool = False  # has an EDC in-flight entry
    in_pass: bool = False
    alive: bool = True
    known_reject: int | None = None  # position found rejected by a pre-verification
    preverified_end: int = 0  # positions < this were pre-verified (and accepted)
    # Taken into an NPU pass with the pre-verification's correction already in place (so the
    # pass verifies what follows it), rather than with the rejected draft.
    correction_in_pass: bool = False
    # A VERIFY(full, S_acc, n_acc) the EDC is owed for this batch, sent as soon as the
    # batch is the EDC's oldest outstanding one (a pre-verified rejection, spec 2.1).
    edc_report: tuple[bool, int, int] | None = None

    @property
    def end(self) -> int:
        return self.first_pos + self.length


@dataclass(eq=False)
class NpuPass:
    """A verification pass (or autoregressive step) running on the NPU."""

    batches: list[Batch]
    l_kv: int
    start: float
    nominal: float  # its roofline cost with nothing in the way
    memory_bound: float  # fraction of ``nominal`` in memory-bound operators
    longest_nonlinear_s: float  # its longest vector operator (what a PIM request waits for)
    name: str
    tokens: int
    energy_j: float
    lost: dict = field(default_factory=dict)
    scheduled_with: int = 0  # interference items known when its end was last computed
