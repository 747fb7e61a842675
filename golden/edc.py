"""Golden model of EDC, the entropy-history-aware drafting control (spec 2.1).

A transaction-level, bit-accurate model written from ``docs/spec.md`` section
2.1 and ``docs/spec-decisions.md`` (section "EDC"), never from the RTL. One method call is
one event of the CPU's ordered event stream; the effect of an event is visible to the next
call, as in the hardware (one event per cycle, in order). Cycle timing (the 2-cycle
decision latency) is not modelled.

Integer formulas (all exact, no floating point):

- ``bucket(S, L) = min(7, (8*S) // (L*Hmax))``, ``S`` a sum of UQ4.12 entropies, ``L >= 1``;
- with ``N = history_len`` and ``h = N/2``:
  ``hi = sum(LEHT[h .. N-1]) >> log2(h)``, ``lo = sum(LEHT[0 .. h-1]) >> log2(h)``,
  ``index = (hi << (3 + llr_bits)) | (lo << llr_bits) | LLR``;
- PHT counters are ``counter_bits`` wide, reset to ``2**(counter_bits-1)``, saturate at
  ``0`` and ``2**counter_bits - 1``; "continue" is the counter's MSB.

Arguments are values on hardware ports: one that does not fit its port (negative, too
wide, not an integer) is a testbench bug and raises ``ValueError``/``TypeError``. Protocol
errors the hardware must survive (``DRAFT`` with ``L == 0``, ``VERIFY`` with nothing
outstanding) set the sticky :attr:`EDC.error` flag and change nothing else.
"""

from __future__ import annotations

import collections

import numpy as np

from ahasd.golden.ports import check_port, is_integer
from ahasd.params import ENTROPY_BITS, EDCParams

__all__ = ["COUNTER_NAMES", "EDC", "bucket"]

#: Event counters, in the order the register interface lists them.
COUNTER_NAMES = ("drafts", "continues", "suppressions", "verifies", "rollbacks")

_BUCKET_MAX = (1 << EDCParams.BUCKET_BITS) - 1  # 7
_DEFAULT_PARAMS = EDCParams()  # frozen, so one shared default is safe


def bucket(s: int, length: int, hmax: int) -> int:
    """Entropy bucket of a batch: ``min(7, (8*s) // (length*hmax))``.

    Parameters
    ----------
    s : sum of the batch's per-token entropies, UQ4.12 nats (non-negative integer).
    length : tokens in the batch, at least 1.
    hmax : programmed maximum entropy, UQ4.12 nats, at least 1.

    Returns
    -------
    The bucket, 0..7. Bucket ``k`` holds mean entropies in ``[k*hmax/8, (k+1)*hmax/8)``;
    everything at or above ``7*hmax/8`` (including above ``hmax``) lands in bucket 7.
    """
    for name, value, low in (("s", s, 0), ("length", length, 1), ("hmax", hmax, 1)):
        if not is_integer(value):
            raise TypeError(f"{name} must be an integer, not {value!r}")
        if value < low:
            raise ValueError(f"{name} must be at least {low}, not {value!r}")
    return min(_BUCKET_MAX, (8 * int(s)) // (int(length) * int(hmax)))


class EDC:
    """Entropy-history-aware drafting control, transaction level.

    Parameters
    ----------
    params : the shared parameter set (widths, reset values, update mode).

    Attributes
    ----------
    hmax : int
        Programmable maximum entropy (UQ4.12), reset ``params.hmax``. Assigning validates
        the value against the 16-bit register (1..65535; 0 would make every bucket a
        division by zero, so it is treated as a testbench bug).
    leht, lceht : list[int]
        Speculative and committed entropy histories, ``history_len`` buckets each,
        index 0 newest, reset all zeros.
    llr : int
        Leading length register: batches drafted and not yet verified.
    pht : numpy.ndarray
        Pattern history table, ``params.pht_entries`` saturating counters.
    inflight : collections.deque[int]
        PHT index of every outstanding batch, oldest first; always ``len == llr``.
    counters : dict[str, int]
        ``drafts``, ``continues``, ``suppressions``, ``verifies``, ``rollbacks``, each
        saturating at ``2**stats_bits - 1``.
    error : bool
        Sticky protocol-error flag (cleared by :meth:`reset` only).

    Notes
    -----
    Back-pressure: when ``llr == 2**llr_bits - 1`` a ``DRAFT`` is refused (:meth:`draft`
    returns ``None``) before it is examined, so a refused ``DRAFT`` with ``L == 0`` does not
    flag an error: it has not been accepted yet.
    """

    def __init__(self, params: EDCParams = _DEFAULT_PARAMS) -> None:
        if not isinstance(params, EDCParams):
            raise TypeError(f"params must be an EDCParams, not {params!r}")
        self.params = params
        self.reset()

    # -- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        """Synchronous reset: every table, register, counter and flag to its reset value."""
        p = self.params
        self._hmax = p.hmax
        self.leht = [0] * p.history_len
        self.lceht = [0] * p.history_len
        self.llr = 0
        self.pht = np.full(p.pht_entries, 1 << (p.counter_bits - 1), dtype=np.int64)
        self.inflight: collections.deque[int] = collections.deque()
        self.counters = dict.fromkeys(COUNTER_NAMES, 0)
        self.error = False

    @property
    def hmax(self) -> int:
        """Programmed maximum entropy, UQ4.12 nats."""
        return self._hmax

    @hmax.setter
    def hmax(self, value: int) -> None:
        self._hmax = check_port("hmax", value, ENTROPY_BITS, low=1)

    def full(self) -> bool:
        """True when ``LLR == 2**llr_bits - 1``: the next ``DRAFT`` would be refused."""
        return self.llr == self.params.llr_max

    def index(self) -> int:
        """PHT index ``{avg(older half of LEHT), avg(newer half), LLR}`` from the current state."""
        p = self.params
        half = p.history_len // 2
        shift = half.bit_length() - 1  # log2(half); history_len is a power of two
        lo = sum(self.leht[:half]) >> shift
        hi = sum(self.leht[half:]) >> shift
        return (hi << (EDCParams.BUCKET_BITS + p.llr_bits)) | (lo << p.llr_bits) | self.llr

    def predicts_continue(self, index: int) -> bool:
        """MSB of ``PHT[index]``: the counter's vote for "continue drafting"."""
        return bool((int(self.pht[index]) >> (self.params.counter_bits - 1)) & 1)

    def state(self) -> dict:
        """A plain-data snapshot (for comparisons with the RTL and for debugging)."""
        return {
            "hmax": self.hmax,
            "leht": list(self.leht),
            "lceht": list(self.lceht),
            "llr": self.llr,
            "inflight": list(self.inflight),
            "counters": dict(self.counters),
            "error": self.error,
        }

    # -- events ----------------------------------------------------------------------------

    def draft(self, s: int, length: int) -> bool | None:
        """``DRAFT(S, L)``: a batch was drafted; answer whether to keep drafting ahead.

        Parameters
        ----------
        s : sum of the batch's per-token entropies, UQ4.12, ``params.sum_bits`` wide.
        length : batch length ``L``, ``params.length_bits`` wide.

        Returns
        -------
        ``True`` (continue) or ``False`` (suppress) for an accepted event; ``None`` when
        the event is refused because EDC is full (nothing changes, nothing is counted;
        the caller retries after a ``VERIFY``) or when ``length == 0`` (protocol error:
        :attr:`error` is set, the event is consumed, nothing else changes).
        """
        p = self.params
        s = check_port("s", s, p.sum_bits)
        length = check_port("length", length, p.length_bits)
        if self.full():
            return None
        if length == 0:
            self.error = True
            return None
        self._push(self.leht, bucket(s, length, self.hmax))
        self.llr += 1
        index = self.index()
        self.inflight.append(index)
        decision = self.predicts_continue(index)
        self._count("drafts")
        self._count("continues" if decision else "suppressions")
        return decision

    def verify(self, full: bool, s_acc: int, n_acc: int) -> None:
        """``VERIFY(full, S_acc, n_acc)``: the oldest outstanding batch was verified.

        Parameters
        ----------
        full : the whole batch was accepted (a 1-bit port: ``bool`` or 0/1).
        s_acc : entropy sum of the accepted tokens, UQ4.12, ``params.sum_bits`` wide.
        n_acc : accepted tokens, ``params.length_bits`` wide (0 pushes nothing to LCEHT).

        Notes
        -----
        ``update="predicted"``: train the PHT entry that made the prediction, push the
        accepted bucket into LCEHT, roll back on a rejection. ``update="current"``: the
        authors' C++ model; commit the whole LEHT on a full accept, and train the entry at
        the index recomputed *after* the commit or rollback. Exact step order in
        ``docs/spec-decisions.md``. With nothing outstanding (``LLR == 0``) the event is a
        protocol error: :attr:`error` is set and nothing else changes.
        """
        p = self.params
        if isinstance(full, bool):
            accepted = full
        else:
            accepted = bool(check_port("full", full, 1))
        s_acc = check_port("s_acc", s_acc, p.sum_bits)
        n_acc = check_port("n_acc", n_acc, p.length_bits)
        if self.llr == 0:
            self.error = True
            return
        if p.update == "predicted":
            self._train(self.inflight.popleft(), accepted)
            self.llr -= 1
            if n_acc > 0:
                self._push(self.lceht, bucket(s_acc, n_acc, self.hmax))
            if not accepted:
                self._rollback()
        else:
            self.inflight.popleft()
            self.llr -= 1
            if accepted:
                self.lceht = list(self.leht)
            else:
                if n_acc > 0:
                    self._push(self.lceht, bucket(s_acc, n_acc, self.hmax))
                self._rollback()
            self._train(self.index(), accepted)
        self._count("verifies")

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _push(history: list[int], value: int) -> None:
        # A shift register: every entry one place older, the oldest falls off.
        history.insert(0, value)
        history.pop()

    def _rollback(self) -> None:
        # Everything drafted after the rejected token is void: restart from the committed
        # history; the void batches' PHT entries are not trained.
        self.leht = list(self.lceht)
        self.llr = 0
        self.inflight.clear()
        self._count("rollbacks")

    def _train(self, index: int, accepted: bool) -> None:
        top = (1 << self.params.counter_bits) - 1
        value = int(self.pht[index])
        self.pht[index] = min(top, value + 1) if accepted else max(0, value - 1)

    def _count(self, name: str) -> None:
        top = (1 << self.params.stats_bits) - 1
        self.counters[name] = min(top, self.counters[name] + 1)
