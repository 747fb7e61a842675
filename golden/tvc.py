"""Golden model of TVC, the time-aware pre-verification control (spec 2.2).

A transaction-level, bit-accurate model written from ``docs/spec.md`` section
2.2 and ``docs/spec-decisions.md`` (section "TVC"), never from the RTL. Commands that
depend on time (``NPU_START``, ``NPU_DONE``, ``ASK``) take the PIM-clock cycle at which
the hardware accepts them, so the NPU current-execution-cycle register (NCR) is exact.
The ASK latency (a sequential divider, up to 40 cycles) is not modelled: the answer is
the value the hardware returns for an ASK accepted at that cycle.

With ``F = frac_bits``, ``D = depth`` and ``s = F + log2(D)`` (``F + 2`` by default):

- ``LEARN(table, cycles, length)``: ``ratio = min(2**ratio_bits - 1, (cycles << F) // length)``
  shifted in at index 0 (FIFO replacement); ``length == 0`` is a protocol error;
- ``C_npu  = min(2**cycle_bits - 1, (sum(NVCT) * L_kv) >> s)`` (saturates);
- ``C_d1   = sum(PDCT) >> s`` (exact, never saturates: it is below
  ``2**(ratio_bits - F)``, ``2**32`` with the default widths);
- ``C_left = C_npu - NCR - C_d1`` (signed, exact);
- ``n = 0`` if the NPU is not busy or ``C_left <= 0``; else ``min(P, N_max)`` if
  ``sum(PVCT) == 0``; else ``min(P, N_max, (C_left << s) // sum(PVCT))``.

NCR: ``NPU_START`` at cycle ``t0`` clears it; while busy it reads ``min(2**cycle_bits - 1,
t - t0)`` at cycle ``t``. ``NPU_DONE`` at ``t1`` freezes it at its value for cycle ``t1``.

Arguments are port values: one that does not fit its port raises ``ValueError`` (a
testbench bug). Cycles passed to the commands must not go backwards.
"""

from __future__ import annotations

import numbers

from ahasd.golden.ports import check_port
from ahasd.params import TVCParams

__all__ = ["TABLES", "TVC"]

#: The three cycle tables: NPU cycles per KV token, PIM cycles per drafted token, PIM
#: cycles per pre-verified token.
TABLES = ("nvct", "pdct", "pvct")

_DEFAULT_PARAMS = TVCParams()  # frozen, so one shared default is safe


def _check_cycle(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"cycle must be an integer, not {value!r}")
    if value < 0:
        raise ValueError(f"cycle must be at least 0, not {value!r}")
    return int(value)


class TVC:
    """Time-aware pre-verification control, transaction level.

    Parameters
    ----------
    params : the shared parameter set (table depth, fixed-point and port widths, N_max).

    Attributes
    ----------
    tables : dict[str, list[int]]
        ``"nvct"``, ``"pdct"``, ``"pvct"``: ``depth`` UQ(ratio_bits-F).F ratios each,
        index 0 newest, reset all zeros ("empty table").
    n_max : int
        Clamp on the answer, a register (reset ``params.n_max``); assigning validates it
        against ``n_bits``.
    error : bool
        Sticky protocol-error flag (``LEARN`` with ``length == 0``); cleared by
        :meth:`reset` only.
    busy : bool
        An NPU verification is running (between ``NPU_START`` and ``NPU_DONE``).
    l_kv : int
        KV-cache length latched by the last ``NPU_START``.

    Notes
    -----
    ``NPU_DONE`` while not busy changes nothing and is not an error (the spec and the
    decisions name no error for it; NCR stays frozen).
    """

    def __init__(self, params: TVCParams = _DEFAULT_PARAMS) -> None:
        if not isinstance(params, TVCParams):
            raise TypeError(f"params must be a TVCParams, not {params!r}")
        self.params = params
        self.reset()

    def reset(self) -> None:
        """Synchronous reset: tables empty, NCR 0, NPU idle, ``N_max`` to its reset value."""
        p = self.params
        self.tables = {name: [0] * p.depth for name in TABLES}
        self._n_max = p.n_max
        self.error = False
        self.busy = False
        self.l_kv = 0
        self._start_cycle = 0  # t0 of the running (or last) NPU task
        self._frozen_ncr = 0  # NCR while not busy
        self._last_cycle = 0  # commands must not go back in time

    # -- registers -------------------------------------------------------------------------

    @property
    def n_max(self) -> int:
        """Programmable clamp on the number of tokens to pre-verify."""
        return self._n_max

    @n_max.setter
    def n_max(self, value: int) -> None:
        self._n_max = check_port("n_max", value, self.params.n_bits)

    def write(self, table: str, index: int, value: int) -> None:
        """Register-interface preset: ``tables[table][index] := value`` (no shifting)."""
        name = self._check_table(table)
        index = self._check_index(index)
        self.tables[name][index] = check_port("value", value, self.params.ratio_bits)

    # -- commands --------------------------------------------------------------------------

    def learn(self, table: str, cycles: int, length: int) -> None:
        """``LEARN``: shift ``min(2**ratio_bits - 1, (cycles << F) // length)`` into ``table``.

        ``length == 0`` is a protocol error: :attr:`error` is set, the table is unchanged.
        """
        p = self.params
        name = self._check_table(table)
        cycles = check_port("cycles", cycles, p.cycle_bits)
        length = check_port("length", length, p.length_bits)
        if length == 0:
            self.error = True
            return
        ratio = min((1 << p.ratio_bits) - 1, (cycles << p.frac_bits) // length)
        entries = self.tables[name]
        entries.insert(0, ratio)
        entries.pop()

    def npu_start(self, l_kv: int, cycle: int) -> None:
        """``NPU_START(L_kv)`` accepted at ``cycle``: latch ``L_kv``, restart NCR, mark busy."""
        l_kv = check_port("l_kv", l_kv, self.params.length_bits)
        cycle = self._advance(cycle)
        self.l_kv = l_kv
        self._start_cycle = cycle
        self.busy = True

    def npu_done(self, cycle: int) -> None:
        """``NPU_DONE`` accepted at ``cycle``: freeze NCR at its value for ``cycle``, idle."""
        cycle = self._advance(cycle)
        if self.busy:
            self._frozen_ncr = self.ncr(cycle)
            self.busy = False

    def ncr(self, cycle: int) -> int:
        """NCR as seen at ``cycle``: cycles since ``NPU_START`` (saturating), frozen when idle."""
        cycle = _check_cycle(cycle)
        if not self.busy:
            return self._frozen_ncr
        if cycle < self._start_cycle:
            raise ValueError(
                f"cycle must not be before the NPU_START at {self._start_cycle}, not {cycle!r}"
            )
        return min((1 << self.params.cycle_bits) - 1, cycle - self._start_cycle)

    def ask(self, p: int, cycle: int) -> int:
        """``ASK(P)`` accepted at ``cycle``: tokens to pre-verify now (0 = keep drafting)."""
        cycle = self._advance(cycle)
        return self.terms(p, cycle)["n"]

    def terms(self, p: int, cycle: int) -> dict:
        """Every intermediate of ``ASK(P)`` at ``cycle`` (for docs and debugging; no side effect).

        Returns
        -------
        dict with ``busy``, ``NCR``, ``L_kv``, ``P``, ``N_max``, ``sum_NVCT``, ``sum_PDCT``,
        ``sum_PVCT``, ``C_npu_unsaturated``, ``C_npu``, ``C_d1``, ``C_left``, ``quotient``
        (``(C_left << s) // sum(PVCT)``, or ``None`` when it is not needed: NPU idle,
        ``C_left <= 0`` or ``sum(PVCT) == 0``) and ``n`` (the answer).
        """
        params = self.params
        p = check_port("p", p, params.length_bits)
        cycle = _check_cycle(cycle)
        shift = params.frac_bits + params.depth_log2
        ncr = self.ncr(cycle)
        sum_nvct = sum(self.tables["nvct"])
        sum_pdct = sum(self.tables["pdct"])
        sum_pvct = sum(self.tables["pvct"])
        c_npu_unsaturated = (sum_nvct * self.l_kv) >> shift
        c_npu = min((1 << params.cycle_bits) - 1, c_npu_unsaturated)
        c_d1 = sum_pdct >> shift
        c_left = c_npu - ncr - c_d1
        quotient = None
        if not self.busy or c_left <= 0:
            n = 0
        elif sum_pvct == 0:
            n = min(p, self.n_max)
        else:
            quotient = (c_left << shift) // sum_pvct
            n = min(p, self.n_max, quotient)
        return {
            "busy": self.busy,
            "NCR": ncr,
            "L_kv": self.l_kv,
            "P": p,
            "N_max": self.n_max,
            "sum_NVCT": sum_nvct,
            "sum_PDCT": sum_pdct,
            "sum_PVCT": sum_pvct,
            "C_npu_unsaturated": c_npu_unsaturated,
            "C_npu": c_npu,
            "C_d1": c_d1,
            "C_left": c_left,
            "quotient": quotient,
            "n": n,
        }

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _check_table(table: object) -> str:
        if table not in TABLES:
            raise ValueError(f"table must be one of {', '.join(TABLES)}, not {table!r}")
        return str(table)

    def _check_index(self, index: object) -> int:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an integer, not {index!r}")
        if not 0 <= index < self.params.depth:
            raise ValueError(f"index must be between 0 and {self.params.depth - 1}, not {index!r}")
        return int(index)

    def _advance(self, cycle: object) -> int:
        cycle = _check_cycle(cycle)
        if cycle < self._last_cycle:
            raise ValueError(f"cycle must not go backwards: {cycle!r} after {self._last_cycle}")
        self._last_cycle = cycle
        return cycle
