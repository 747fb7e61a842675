"""Parameter dataclasses shared by the RTL (`ahasd.hw`) and the golden models (`ahasd.golden`).

One frozen dataclass per block. Both readings of the spec (RTL and golden) take the same
object, so a parameter set names one design. Every field is validated at construction with
an exact message; the tests match those messages.

Fixed-point conventions (spec ``docs/spec.md``):

- entropies are UQ4.12 nats (``ENTROPY_FRAC_BITS = 12``), 16 bits wide;
- TVC ratios are UQ(ratio_bits - F).F, default UQ32.8 (40 bits), cycle counts 40 bits;
- AAU logits are Q8.8 (INT16).

This module imports nothing from Amaranth: the golden models depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = [
    "CLOCK_TARGETS_MHZ",
    "ENTROPY_BITS",
    "ENTROPY_FRAC_BITS",
    "AAUParams",
    "EDCParams",
    "GTSUParams",
    "QueueParams",
    "TVCParams",
    "TopParams",
    "entropy_to_fixed",
]

#: Clock targets per domain: the spec's PIM clock (800 MHz) and NPU clock (1 GHz). The spec
#: names no clock for the CPU side of the pre-verification queue; it is held to 1 GHz, the
#: faster of the two it names (a phone SoC's system-bus clock is in that range). Used by
#: ``ahasd timing`` (the targets) and the crossings' SDC (the default periods).
CLOCK_TARGETS_MHZ = {"pim": 800.0, "npu": 1000.0, "cpu": 1000.0}

ENTROPY_FRAC_BITS = 12
ENTROPY_BITS = 16


def entropy_to_fixed(nats: float) -> int:
    """Round an entropy in nats to UQ4.12, saturating at the largest code (15.9998 nats)."""
    if nats != nats or nats < 0:
        raise ValueError(f"entropy must be a non-negative number of nats, not {nats!r}")
    return min((1 << ENTROPY_BITS) - 1, round(nats * (1 << ENTROPY_FRAC_BITS)))


def _check_int(owner: object, name: str, low: int, high: int | None = None) -> None:
    value = getattr(owner, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bound}, not {value!r}")


def _check_power_of_two(owner: object, name: str) -> None:
    value = getattr(owner, name)
    if value & (value - 1):
        raise ValueError(f"{name} must be a power of two, not {value!r}")


class _Params:
    def as_dict(self) -> dict[str, object]:
        """The fields as a plain dict (for JSON, cocotb parameters and build-dir names)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def tag(self) -> str:
        """A short, stable, filesystem-safe name for this parameter set."""
        defaults = type(self)()
        changed = [
            f"{name}{value}".replace(".", "p")
            for name, value in self.as_dict().items()
            if value != getattr(defaults, name)
        ]
        return "default" if not changed else "_".join(changed)


@dataclass(frozen=True)
class EDCParams(_Params):
    """Entropy-history-aware drafting control (spec 2.1).

    Attributes
    ----------
    counter_bits : PHT saturating-counter width; counters reset to ``2**(counter_bits-1)``
        (weakly "continue") and predict "continue" when their MSB is 1.
    llr_bits : width of the leading-length register LLR. At most ``2**llr_bits - 1`` batches
        are outstanding; the in-flight index queue has that depth.
    history_len : entries in LEHT and LCEHT (even, power of two). The PHT index is
        ``{avg(older half), avg(newer half), LLR}``, each average a 3-bit bucket.
    hmax : reset value of the programmable maximum entropy, UQ4.12 nats (10.0 nats).
    length_bits : width of a batch length ``L`` and of ``n_acc`` (max batch 31 tokens).
    stats_bits : width of the event counters (drafts, continues, suppressions, verifies,
        rollbacks); they saturate at ``2**stats_bits - 1``.
    update : ``"predicted"`` trains the PHT entry whose index made the prediction and pushes
        the accepted batch's bucket into LCEHT; ``"current"`` reproduces the authors' C++
        model (see ``docs/edc.md``).
    """

    counter_bits: int = 2
    llr_bits: int = 3
    history_len: int = 8
    hmax: int = 40960
    length_bits: int = 5
    stats_bits: int = 32
    update: str = "predicted"

    BUCKET_BITS = 3  # eight buckets, fixed by the spec

    def __post_init__(self) -> None:
        _check_int(self, "counter_bits", 1, 8)
        _check_int(self, "llr_bits", 1, 6)
        _check_int(self, "history_len", 2, 64)
        _check_power_of_two(self, "history_len")
        _check_int(self, "hmax", 1, (1 << ENTROPY_BITS) - 1)
        _check_int(self, "length_bits", 1, 16)
        _check_int(self, "stats_bits", 1, 64)
        if self.update not in ("predicted", "current"):
            raise ValueError(f"update must be 'predicted' or 'current', not {self.update!r}")

    @property
    def llr_max(self) -> int:
        """Outstanding batches at which a DRAFT is refused."""
        return (1 << self.llr_bits) - 1

    @property
    def index_bits(self) -> int:
        return 2 * self.BUCKET_BITS + self.llr_bits

    @property
    def pht_entries(self) -> int:
        return 1 << self.index_bits

    @property
    def sum_bits(self) -> int:
        """Width of ``S``, a sum of up to ``2**length_bits - 1`` UQ4.12 entropies."""
        return ENTROPY_BITS + self.length_bits


@dataclass(frozen=True)
class TVCParams(_Params):
    """Time-aware pre-verification control (spec 2.2).

    Attributes
    ----------
    depth : entries per cycle table (NVCT, PDCT, PVCT); the spec's formulas divide the sum
        by 4 as ``>> 2``, so the depth is a power of two and the shift is ``log2(depth)``.
    frac_bits : ``F``, fraction bits of the ratios (UQ(ratio_bits-F).F).
    cycle_bits : width of cycle counts (LEARN's ``cycles``, NCR, C_npu); saturating. 40 by
        default (spec 2.2: 32 bits saturate at 5.4 s of PIM cycles, 40 at 23 min).
    length_bits : width of lengths (``L_kv``, LEARN's ``length``, ``P``).
    ratio_bits : width of a table entry: 40 by default, UQ32.8 (spec 2.2: UQ24.8 saturates at
        2**24 PIM cycles, 21 ms, per token, below what a target token costs on the PIM).
    n_max : reset value of the programmable clamp on the answer.
    n_bits : width of the answer and of the ``N_max`` register.
    """

    depth: int = 4
    frac_bits: int = 8
    cycle_bits: int = 40
    length_bits: int = 16
    ratio_bits: int = 40
    n_max: int = 8
    n_bits: int = 8

    def __post_init__(self) -> None:
        _check_int(self, "depth", 1, 64)
        _check_power_of_two(self, "depth")
        _check_int(self, "frac_bits", 0, 16)
        _check_int(self, "cycle_bits", 8, 48)
        _check_int(self, "length_bits", 1, 32)
        _check_int(self, "ratio_bits", self.frac_bits + 1, 64)
        _check_int(self, "n_bits", 1, 16)
        _check_int(self, "n_max", 0, (1 << self.n_bits) - 1)

    @property
    def depth_log2(self) -> int:
        return self.depth.bit_length() - 1


@dataclass(frozen=True)
class QueueParams(_Params):
    """The three asynchronous queues (spec 2.3).

    Attributes
    ----------
    draft_depth, feedback_depth, preverify_depth : entries (powers of two, as ``AsyncFIFO``
        requires for its Gray-coded pointers).
    batch_id_bits, epoch_bits, pos_bits, length_bits : entry field widths.
    """

    draft_depth: int = 64
    feedback_depth: int = 32
    preverify_depth: int = 16
    batch_id_bits: int = 8
    epoch_bits: int = 8
    pos_bits: int = 16
    length_bits: int = 5

    BUCKET_BITS = 3

    def __post_init__(self) -> None:
        for name in ("draft_depth", "feedback_depth", "preverify_depth"):
            _check_int(self, name, 2, 4096)
            _check_power_of_two(self, name)
        _check_int(self, "batch_id_bits", 1, 32)
        _check_int(self, "epoch_bits", 1, 16)
        _check_int(self, "pos_bits", 1, 32)
        _check_int(self, "length_bits", 1, 16)


@dataclass(frozen=True)
class AAUParams(_Params):
    """Attention algorithm unit (spec 2.4, ``docs/aau.md``).

    Attributes
    ----------
    max_length : longest vector (elements); sets the accumulator widths.
    exp_table_bits : address bits of the 2**-f lookup table used by exp.
    ln_table_bits : address bits of the log2(1+m) lookup table used by ln.
    gate_table_bits : address bits of the SILU and GELU gate tables (``2**bits + 1``
        entries each over ``|x| < 16`` and ``|x| < 4``), 1 to 10.
    norm_eps : the LayerNorm/RMSNorm epsilon as a code, ``eps = norm_eps / 2**32`` (in the
        units of ``x**2``), 1 to 65535; the default 42950 is ``1e-5``.
    """

    max_length: int = 65536
    exp_table_bits: int = 6
    ln_table_bits: int = 6
    gate_table_bits: int = 6
    norm_eps: int = 42950

    LOGIT_BITS = 16  # Q8.8
    LOGIT_FRAC_BITS = 8

    def __post_init__(self) -> None:
        _check_int(self, "max_length", 1, 1 << 20)
        _check_int(self, "exp_table_bits", 1, 12)
        _check_int(self, "ln_table_bits", 1, 12)
        _check_int(self, "gate_table_bits", 1, 10)
        _check_int(self, "norm_eps", 1, (1 << 16) - 1)


@dataclass(frozen=True)
class GTSUParams(_Params):
    """Gated task scheduling unit (spec 2.5).

    Attributes
    ----------
    ranks : PIM ranks under control.
    t_off, t_on : reset values of the programmable gate-off and gate-on waits (cycles).
    timer_bits : width of the ``t_off``/``t_on`` registers and the latency counter.
    """

    ranks: int = 16
    t_off: int = 16
    t_on: int = 32
    timer_bits: int = 10

    def __post_init__(self) -> None:
        _check_int(self, "ranks", 2, 64)
        _check_int(self, "timer_bits", 1, 32)
        _check_int(self, "t_off", 0, (1 << self.timer_bits) - 1)
        _check_int(self, "t_on", 0, (1 << self.timer_bits) - 1)


@dataclass(frozen=True)
class TopParams(_Params):
    """The controller top (spec 2.6): the parameters of every block it holds.

    Attributes
    ----------
    edc, tvc, gtsu, queues : the blocks' parameter sets.
    """

    edc: EDCParams = EDCParams()
    tvc: TVCParams = TVCParams()
    gtsu: GTSUParams = GTSUParams()
    queues: QueueParams = QueueParams()

    def __post_init__(self) -> None:
        for name, cls in (
            ("edc", EDCParams),
            ("tvc", TVCParams),
            ("gtsu", GTSUParams),
            ("queues", QueueParams),
        ):
            value = getattr(self, name)
            if not isinstance(value, cls):
                raise TypeError(f"{name} must be a {cls.__name__}, not {value!r}")

    @classmethod
    def from_dict(cls, fields_: dict) -> TopParams:
        """Inverse of :meth:`as_dict` (nested dicts become the blocks' dataclasses)."""
        classes = {"edc": EDCParams, "tvc": TVCParams, "gtsu": GTSUParams, "queues": QueueParams}
        return cls(**{name: classes[name](**value) for name, value in fields_.items()})

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name).as_dict() for f in fields(self)}

    def tag(self) -> str:
        changed = [
            f"{f.name}-{getattr(self, f.name).tag()}"
            for f in fields(self)
            if getattr(self, f.name).tag() != "default"
        ]
        return "default" if not changed else "_".join(changed)
