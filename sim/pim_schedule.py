"""A per-bank DRAM command schedule of a GEMV on the LPDDR5-PIM, from Table 2's timing.

The AHASD paper's Table 2 gives the LPDDR5-PIM's timing parameters in cycles (tRP 32,
tRCD 32, tRAS 64, tRRD_L 8, tWR 24, tCCD_S 4, tCCD_L 6, tREFI 6240, tFAW 64, tRFC 560) but
its PIM rate ("102.4 GOPS") and internal bandwidth ("256 GB/s") without saying whether they
are per PIM unit or for the whole memory. This module schedules the commands of a GEMV
``y = W x`` on one rank, command by command, and derives from the schedule the MAC rate one
PIM unit and one rank sustain. ``docs/validation.md`` gives the derivation with its numbers
(``bench/validate.py`` writes it) and the assumptions:

- **Organisation** (:class:`PimOrganisation`): a rank is an LPDDR5 die of 16 banks in 4 bank
  groups (LPDDR5's bank-group mode), with one PIM unit per two banks (the organisation of
  Samsung's HBM-PIM, Lee et al. ISCA 2021, which the LPDDR5-PIM of Kim et al., Hot Chips
  2022, carries over): 8 units per rank. A column access moves 32 bytes (an x16 device at
  burst length 16, the 256 bits HBM-PIM's 16-lane FP16 SIMD consumes per command), i.e. 32
  INT8 weights: 32 MACs per access. A unit's two banks sit in different bank groups.
- **All-unit mode** (HBM-PIM's all-bank PIM mode): every column command reaches the same
  bank slot of every unit of the rank at once, so the 8 units run in lock step and one
  command stream describes the rank; each activation is 8 ACT commands (one per unit's
  bank) under the rank's tRRD and four-activation window tFAW.
- **The GEMV**: the rank holds ``rows x cols`` INT8 weights, rows split evenly over the
  units; a 2 KB DRAM row holds 2 KB of one weight row. The input vector is written into
  each unit's input buffer in chunks of ``input_buffer_bytes`` (broadcast column writes at
  tCCD_L, then tWR before the next read; the buffer as SK hynix AiM's 2 KB global buffer);
  for each chunk the unit reads the matching 2 KB of every one of its weight rows. The
  results (4-byte accumulators) leave each unit by column reads at tCCD_S, unit by unit.
- **Refresh**: all-bank refresh every tREFI: every bank precharged, tRFC blocked, open rows
  lost.
- **Not modelled**: the command bus's one command per cycle (ACTs and reads overlap), the
  read-to-precharge delay beyond one burst (Table 2 does not give tRTP), refresh
  postponement, the bus transfer of the results to the SoC.

Two read orders are scheduled (:data:`ORDERS`): ``sequential`` reads a unit's weight rows
one after another, alternating its two banks (same bank group within a row: tCCD_L between
reads; the next row is activated in the other bank while this one is read); ``interleaved``
reads two rows (one per bank) column by column in turn (different bank groups: tCCD_S),
then both banks change rows together. :func:`gemv_schedule` returns the better one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "ORDERS",
    "TABLE2_TIMING",
    "DramTiming",
    "GemvSchedule",
    "PimOrganisation",
    "gemv_schedule",
    "model_gemvs",
    "schedule_gemv",
]

ORDERS = ("sequential", "interleaved")


@dataclass(frozen=True)
class DramTiming:
    """DRAM timing parameters in cycles of ``clock_hz`` (the command clock)."""

    tRP: int = 32
    tRCD: int = 32
    tRAS: int = 64
    tRRD: int = 8
    tWR: int = 24
    tCCD_S: int = 4
    tCCD_L: int = 6
    tREFI: int = 6240
    tFAW: int = 64
    tRFC: int = 560
    clock_hz: float = 1.6e9


#: Table 2's LPDDR5-PIM timing. The clock: Table 2 gives cycles, not nanoseconds. At
#: 1.6 GHz (0.625 ns, the WCK/2 clock of LPDDR5-6400) they are tREFI 3.9 us (LPDDR5's
#: all-bank refresh interval), tRCD = tRP = 20 ns, tRAS 40 ns, tRRD 5 ns, tFAW 40 ns,
#: tRFC 350 ns: LPDDR5-like values. At 800 MHz (the PIM clock of the authors'
#: configuration) tRCD would be 40 ns and tRAS 80 ns, twice any LPDDR5 datasheet's.
TABLE2_TIMING = DramTiming()


@dataclass(frozen=True)
class PimOrganisation:
    """The rank and its PIM units (see the module docstring for the sources)."""

    banks: int = 16
    bank_groups: int = 4
    banks_per_unit: int = 2
    access_bytes: int = 32
    row_bytes: int = 2048
    input_buffer_bytes: int = 2048
    result_bytes: int = 4
    weight_bytes: int = 1

    @property
    def units(self) -> int:
        return self.banks // self.banks_per_unit

    @property
    def macs_per_access(self) -> int:
        return self.access_bytes // self.weight_bytes


@dataclass
class GemvSchedule:
    """The outcome of one scheduled GEMV on one rank (cycles of the command clock)."""

    rows: int
    cols: int
    order: str
    cycles: int
    reads: int  # weight column reads per unit
    activations: int  # ACT commands of the rank
    refreshes: int
    input_writes: int
    result_reads: int
    acts: list[int] = field(default_factory=list, repr=False)  # ACT issue cycles
    weight_reads: list[int] = field(default_factory=list, repr=False)  # read issue cycles

    def macs(self) -> int:
        return self.rows * self.cols


class _Rank:
    """Command-timing state of one rank in all-unit mode (one bank slot per unit half)."""

    def __init__(self, timing: DramTiming, org: PimOrganisation) -> None:
        self.t = timing
        self.org = org
        slots = org.banks_per_unit
        self.open_row = [None] * slots
        self.act_time = [-(10**9)] * slots  # when the slot's row was activated (last unit)
        self.pre_ready = [0] * slots  # earliest precharge (after its last read)
        self.acts: list[int] = []
        self.last_read = -(10**9)
        self.last_read_slot: int | None = None
        self.last_read_by_slot = [-(10**9)] * slots
        self.blocked_until = 0  # refresh or buffer writes
        self.next_refresh = timing.tREFI
        self.refreshes = 0
        self.reads: list[int] = []

    def _act(self, earliest: int) -> int:
        """Issue one ACT at or after ``earliest`` under tRRD and tFAW; its cycle."""
        t = earliest
        if self.acts:
            t = max(t, self.acts[-1] + self.t.tRRD)
        if len(self.acts) >= 4:
            t = max(t, self.acts[-4] + self.t.tFAW)
        self.acts.append(t)
        return t

    def _refresh_if_due(self, t: int) -> int:
        """An all-bank refresh when ``t`` passes the refresh deadline; the cycle reads may
        resume from."""
        while t >= self.next_refresh:
            start = max(self.next_refresh, self.last_read + self.t.tCCD_S)
            for slot in range(len(self.open_row)):
                if self.open_row[slot] is not None:
                    start = max(start, self.act_time[slot] + self.t.tRAS)
            start += self.t.tRP  # precharge all, then REF
            self.blocked_until = start + self.t.tRFC
            self.open_row = [None] * len(self.open_row)
            self.pre_ready = [self.blocked_until] * len(self.open_row)
            self.refreshes += 1
            self.next_refresh += self.t.tREFI
            t = max(t, self.blocked_until)
        return t

    def open(self, slot: int, row: int) -> None:
        """Make ``row`` the open row of bank ``slot`` in every unit (PRE, then one ACT per
        unit)."""
        if self.open_row[slot] == row:
            return
        ready = self.pre_ready[slot]
        if self.open_row[slot] is not None:
            ready = max(ready, self.act_time[slot] + self.t.tRAS) + self.t.tRP
        ready = max(ready, self.blocked_until)
        last = ready
        for _ in range(self.org.units):
            last = self._act(ready)
        self.act_time[slot] = last
        self.open_row[slot] = row

    def read(self, slot: int, row: int) -> int:
        """One weight column read from ``row`` in bank ``slot`` of every unit; its cycle."""
        self.open(slot, row)
        t = max(self.act_time[slot] + self.t.tRCD, self.blocked_until)
        t = max(t, self.last_read + self.t.tCCD_S, self.last_read_by_slot[slot] + self.t.tCCD_L)
        resumed = self._refresh_if_due(t)
        if resumed != t:  # the refresh closed the row: open it again
            self.open(slot, row)
            t = max(resumed, self.act_time[slot] + self.t.tRCD)
        self.last_read = self.last_read_by_slot[slot] = t
        self.pre_ready[slot] = t + self.t.tCCD_S
        self.reads.append(t)
        return t

    def write_buffer(self, writes: int) -> None:
        """``writes`` broadcast column writes into the units' input buffers."""
        t = max(self.last_read + self.t.tCCD_S, self.blocked_until)
        t = self._refresh_if_due(t)
        end = t + (writes - 1) * self.t.tCCD_L + self.t.tWR
        self.blocked_until = max(self.blocked_until, end)

    def read_results(self, reads: int) -> int:
        """``reads`` result reads, unit by unit, at tCCD_S; the cycle the last one ends."""
        t = max(self.last_read + self.t.tCCD_S, self.blocked_until)
        t = self._refresh_if_due(t)
        return t + reads * self.t.tCCD_S


def schedule_gemv(
    rows: int,
    cols: int,
    *,
    order: str = "sequential",
    timing: DramTiming = TABLE2_TIMING,
    org: PimOrganisation | None = None,
) -> GemvSchedule:
    """Schedule ``y = W x`` with ``W`` of ``rows x cols`` weights on one rank.

    Rows are split evenly over the rank's units (a unit takes ``ceil(rows / units)``); each
    input chunk of ``org.input_buffer_bytes`` is written to the units' buffers, then every
    unit reads the chunk's part of each of its rows (``ceil(chunk / access_bytes)`` column
    reads from one DRAM row). Returns the whole schedule's cycles (from the first command to
    the last result read) and its command counts.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    if rows <= 0 or cols <= 0:
        raise ValueError(f"a GEMV needs positive dimensions, not {rows} x {cols}")
    org = org or PimOrganisation()
    rank = _Rank(timing, org)
    unit_rows = math.ceil(rows / org.units)
    chunk_elems = org.input_buffer_bytes // org.weight_bytes
    row_elems = org.row_bytes // org.weight_bytes
    if chunk_elems > row_elems:
        raise ValueError("the input buffer must not exceed a DRAM row")
    dram_row = 0  # DRAM rows are numbered in the order the unit reads them
    input_writes = 0
    reads = 0
    for start in range(0, cols, chunk_elems):
        chunk = min(chunk_elems, cols - start)
        accesses = math.ceil(chunk * org.weight_bytes / org.access_bytes)
        writes = math.ceil(chunk * org.weight_bytes / org.access_bytes)
        rank.write_buffer(writes)
        input_writes += writes
        if order == "sequential":
            for _ in range(unit_rows):
                slot = dram_row % org.banks_per_unit
                for _ in range(accesses):
                    rank.read(slot, dram_row)
                    reads += 1
                dram_row += 1
        else:
            for first in range(0, unit_rows, org.banks_per_unit):
                group = list(range(first, min(first + org.banks_per_unit, unit_rows)))
                for _ in range(accesses):
                    for index in group:
                        rank.read(
                            (dram_row + index - first) % org.banks_per_unit,
                            dram_row + index - first,
                        )
                        reads += 1
                dram_row += len(group)
    result_reads = org.units * math.ceil(unit_rows * org.result_bytes / org.access_bytes)
    end = rank.read_results(result_reads)
    return GemvSchedule(
        rows=rows,
        cols=cols,
        order=order,
        cycles=end,
        reads=reads,
        activations=len(rank.acts),
        refreshes=rank.refreshes,
        input_writes=input_writes,
        result_reads=result_reads,
        acts=rank.acts,
        weight_reads=rank.reads,
    )


def gemv_schedule(rows: int, cols: int, **kwargs) -> GemvSchedule:
    """The faster of the two read orders (:data:`ORDERS`) for ``rows x cols``."""
    return min(
        (schedule_gemv(rows, cols, order=o, **kwargs) for o in ORDERS), key=lambda s: s.cycles
    )


def model_gemvs(model, ranks: int):
    """The weight matrices of one decode step of ``model`` (a ``ModelSpec``) as the share
    of one rank when its weights are spread over ``ranks`` ranks: ``(name, count, rows,
    cols)``, each matrix's output rows split over the ranks (``ceil(rows / ranks)``)."""
    h, q, kv, f = model.hidden, model.q_dim, model.kv_dim, model.ffn

    def share(rows):
        return math.ceil(rows / ranks)

    gemvs = [
        ("qkv_projection", model.layers, share(q + 2 * kv), h),
        ("output_projection", model.layers, share(h), q),
        ("ffn_up", model.layers * (model.ffn_matrices - 1), share(f), h),
        ("ffn_down", model.layers, share(h), f),
        ("lm_head", 1, share(model.vocab), h),
    ]
    return gemvs
