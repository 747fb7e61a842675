"""Golden model of the three asynchronous queues (spec 2.3), transaction level.

Written from ``docs/spec.md`` section 2.3 and ``docs/spec-decisions.md``
(section "Queues"), never from the RTL. Clock domains, synchroniser latency and the
one-drop-per-read-cycle timing are not modelled: what is modelled is *which* entries come
out of a queue, in what order, and when a writer is back-pressured.

- :class:`FifoModel`: a bounded FIFO; a full queue refuses a push (the writer waits),
  nothing is ever dropped. Used for the feedback and pre-verification queues.
- :class:`DraftQueueModel`: the unverified-draft queue with squash: a read at reader epoch
  ``e`` first drops every head entry whose ``epoch != e``.
- :class:`DraftQueueScoreboard` / :func:`check_output`: an in-order checker for a
  testbench (pure Python, no cocotb import) that, given what was written and what came
  out with the reader's epoch at each read, proves every non-stale entry came out once,
  in order and intact, and no stale entry came out. :class:`FifoScoreboard` /
  :func:`check_fifo_output` do the same for the plain queues (no drops allowed).

Entries are :class:`typing.NamedTuple` s with the spec's field names in the spec's order
(so they are also plain tuples and convert to dicts with ``_asdict()``); the checkers
accept NamedTuples, dicts or plain tuples in field order.
"""

from __future__ import annotations

import collections
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ahasd.golden.ports import is_integer
from ahasd.params import QueueParams

__all__ = [
    "DRAFT_FIELDS",
    "ENTRY_TYPES",
    "FEEDBACK_FIELDS",
    "PREVERIFY_FIELDS",
    "DraftEntry",
    "DraftQueueModel",
    "DraftQueueScoreboard",
    "FeedbackEntry",
    "FifoModel",
    "FifoScoreboard",
    "PreverifyEntry",
    "check_entry",
    "check_fifo_output",
    "check_output",
    "field_widths",
    "make_entry",
    "pack",
    "unpack",
]


class DraftEntry(NamedTuple):
    """Unverified-draft queue entry (PIM to NPU)."""

    batch_id: int
    epoch: int
    first_pos: int
    length: int
    bucket: int


class FeedbackEntry(NamedTuple):
    """Feedback queue entry (NPU to PIM)."""

    batch_id: int
    n_accepted: int
    full: int


class PreverifyEntry(NamedTuple):
    """Pre-verification queue entry (CPU to PIM)."""

    batch_id: int
    n_tokens: int


#: Entry type per queue kind.
ENTRY_TYPES: dict[str, type] = {
    "draft": DraftEntry,
    "feedback": FeedbackEntry,
    "preverify": PreverifyEntry,
}
DRAFT_FIELDS = DraftEntry._fields
FEEDBACK_FIELDS = FeedbackEntry._fields
PREVERIFY_FIELDS = PreverifyEntry._fields

_DEFAULT_PARAMS = QueueParams()  # frozen, so one shared default is safe


def _check_kind(kind: object) -> str:
    if kind not in ENTRY_TYPES:
        raise ValueError(f"kind must be one of {', '.join(ENTRY_TYPES)}, not {kind!r}")
    return str(kind)


def field_widths(kind: str, params: QueueParams = _DEFAULT_PARAMS) -> dict[str, int]:
    """Bit width of every field of a ``kind`` entry, in field order.

    The spec names the fields; the widths are this model's reading of ``QueueParams``:
    ``n_accepted`` and ``n_tokens`` are counts of tokens in a batch, so ``length_bits``
    wide; ``full`` is one bit; ``bucket`` three.
    """
    return dict(_field_widths(_check_kind(kind), params))


# (params, {kind: widths}) by id(params), the params kept so that the id stays theirs.
_WIDTHS: dict[int, tuple[QueueParams, dict[str, tuple[tuple[str, int], ...]]]] = {}


def _field_widths(kind: str, params: QueueParams) -> tuple[tuple[str, int], ...]:
    """:func:`field_widths` as ``(name, width)`` pairs, computed once per kind and
    parameter set (``QueueParams`` is frozen): a testbench packs and checks an entry per
    cycle, and even hashing the parameters costs a microsecond."""
    known = _WIDTHS.get(id(params))
    if known is None or known[0] is not params:
        known = _WIDTHS[id(params)] = (params, {})
    widths = known[1].get(kind)
    if widths is None:
        widths = known[1][kind] = _widths(kind, params)
    return widths


def _widths(kind: str, params: QueueParams) -> tuple[tuple[str, int], ...]:
    if kind == "draft":
        widths = {
            "batch_id": params.batch_id_bits,
            "epoch": params.epoch_bits,
            "first_pos": params.pos_bits,
            "length": params.length_bits,
            "bucket": QueueParams.BUCKET_BITS,
        }
    elif kind == "feedback":
        widths = {"batch_id": params.batch_id_bits, "n_accepted": params.length_bits, "full": 1}
    else:
        widths = {"batch_id": params.batch_id_bits, "n_tokens": params.length_bits}
    return tuple(widths.items())


def make_entry(kind: str, entry: Any = None, /, **fields: int) -> NamedTuple:
    """Normalise ``entry`` (NamedTuple, dict or tuple in field order) or ``fields``.

    >>> make_entry("preverify", batch_id=3, n_tokens=2)
    PreverifyEntry(batch_id=3, n_tokens=2)
    """
    entry_type = ENTRY_TYPES[_check_kind(kind)]
    if entry is None:
        entry = fields
    elif fields:
        raise TypeError("give an entry or fields, not both")
    if type(entry) is entry_type or isinstance(entry, entry_type):
        return entry
    if isinstance(entry, Mapping):
        names = entry_type._fields
        if set(entry) != set(names):
            raise ValueError(
                f"a {kind} entry has fields {', '.join(names)}, not {', '.join(entry)}"
            )
        return entry_type(**{name: int(entry[name]) for name in names})
    if isinstance(entry, Sequence) and not isinstance(entry, str):
        if len(entry) != len(entry_type._fields):
            raise ValueError(
                f"a {kind} entry has {len(entry_type._fields)} fields, not {len(entry)}"
            )
        return entry_type(*(int(value) for value in entry))
    raise TypeError(f"a {kind} entry must be a {entry_type.__name__}, dict or tuple")


def check_entry(kind: str, entry: Any, params: QueueParams = _DEFAULT_PARAMS) -> NamedTuple:
    """Normalise ``entry`` and check every field fits its width (ValueError if not)."""
    entry = make_entry(kind, entry)
    for (name, bits), value in zip(_field_widths(kind, params), entry, strict=True):
        if not is_integer(value):
            raise TypeError(f"{kind}.{name} must be an integer, not {value!r}")
        if not 0 <= value < (1 << bits):
            raise ValueError(
                f"{kind}.{name} must be between 0 and {(1 << bits) - 1}, not {value!r}"
            )
    return entry


def pack(kind: str, entry: Any, params: QueueParams = _DEFAULT_PARAMS) -> int:
    """Pack an entry into an integer, first field in the least significant bits.

    That is the bit order of an Amaranth ``data.StructLayout`` with the fields in spec
    order, provided the RTL uses the widths of :func:`field_widths`.
    """
    entry = check_entry(kind, entry, params)
    bits, offset = 0, 0
    for (_, width), value in zip(_field_widths(kind, params), entry, strict=True):
        bits |= value << offset
        offset += width
    return bits


def unpack(kind: str, bits: int, params: QueueParams = _DEFAULT_PARAMS) -> NamedTuple:
    """Inverse of :func:`pack`."""
    widths = _field_widths(_check_kind(kind), params)
    total = sum(width for _, width in widths)
    if not is_integer(bits):
        raise TypeError(f"bits must be an integer, not {bits!r}")
    if not 0 <= bits < (1 << total):
        raise ValueError(f"bits must be between 0 and {(1 << total) - 1}, not {bits!r}")
    values, offset = [], 0
    for _, width in widths:
        values.append((int(bits) >> offset) & ((1 << width) - 1))
        offset += width
    return ENTRY_TYPES[kind](*values)


# -- queue models ---------------------------------------------------------------------------


def _check_depth(depth: object) -> int:
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral):
        raise TypeError(f"depth must be an integer, not {depth!r}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth!r}")
    return int(depth)


class FifoModel:
    """A bounded first-in first-out queue that never drops an entry.

    Parameters
    ----------
    depth : capacity in entries.

    Attributes
    ----------
    level : int (read-only)
        Entries held (the hardware's fill level, without synchroniser lag).
    is_full, is_empty : bool (read-only)
    """

    def __init__(self, depth: int) -> None:
        self.depth = _check_depth(depth)
        self._entries: collections.deque = collections.deque()

    @property
    def level(self) -> int:
        return len(self._entries)

    @property
    def is_full(self) -> bool:
        return len(self._entries) >= self.depth

    @property
    def is_empty(self) -> bool:
        return not self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def push(self, entry: Any) -> bool:
        """Append ``entry``; return ``False`` (and keep nothing) when the queue is full."""
        if self.is_full:
            return False
        self._entries.append(entry)
        return True

    def pop(self) -> Any:
        """Remove and return the oldest entry, or ``None`` when empty."""
        return self._entries.popleft() if self._entries else None

    def peek(self) -> Any:
        """The oldest entry without removing it, or ``None`` when empty."""
        return self._entries[0] if self._entries else None

    def entries(self) -> list:
        """The held entries, oldest first (a copy)."""
        return list(self._entries)


def _epoch_of(entry: Any) -> int:
    if type(entry) is DraftEntry:
        return entry.epoch
    if isinstance(entry, Mapping):
        return entry["epoch"]
    return make_entry("draft", entry).epoch


class DraftQueueModel(FifoModel):
    """The unverified-draft queue: a :class:`FifoModel` whose reader squashes stale entries.

    Attributes
    ----------
    dropped : list
        Every entry the reader dropped as stale, in drop order.

    Notes
    -----
    An entry at the head whose ``epoch`` differs from the reader's current epoch is stale
    and is dropped. The hardware drops one per read-domain cycle whether or not the reader
    is ready; at transaction level :meth:`pop` drops all stale head entries at once, which
    yields the same sequence of delivered entries.
    """

    def __init__(self, depth: int) -> None:
        super().__init__(depth)
        self.dropped: list = []

    def pop(self, epoch: int) -> Any:  # type: ignore[override]
        """Drop stale head entries (``entry.epoch != epoch``), return the next one or ``None``."""
        while self._entries and _epoch_of(self._entries[0]) != epoch:
            self.dropped.append(self._entries.popleft())
        return self._entries.popleft() if self._entries else None

    def squash(self, epoch: int) -> int:
        """Drop stale head entries without reading (the reader idles); return how many."""
        before = len(self.dropped)
        while self._entries and _epoch_of(self._entries[0]) != epoch:
            self.dropped.append(self._entries.popleft())
        return len(self.dropped) - before


# -- checkers --------------------------------------------------------------------------------


class DraftQueueScoreboard:
    """In-order checker for the draft queue; feed it as a testbench's monitors see traffic.

    Call :meth:`write` for every entry accepted by the queue (in order), :meth:`read` for
    every entry the reader receives together with the reader's epoch at that read, and
    :meth:`finish` at the end. Problems accumulate in :attr:`errors` (a list of messages);
    an empty list after :meth:`finish` means the queue behaved.

    Rules (spec 2.3 and the decisions; epochs compare for equality only, so they may wrap):

    - a delivered entry must equal, field for field, the oldest written entry not yet
      delivered or skipped (after skipping stale ones), and its epoch must equal the
      reader's epoch at that read (no stale entry comes out);
    - an entry may be skipped (dropped) only if it is stale for the read that follows it;
    - at :meth:`finish` with ``final_epoch``, every entry not delivered must be stale for
      ``final_epoch`` (use it after draining the queue).

    Attributes
    ----------
    errors : list[str]
    delivered, dropped : int
        Entries matched as delivered, and entries accepted as legitimately dropped.
    """

    def __init__(self) -> None:
        self._written: list[DraftEntry] = []
        self._next = 0  # first written entry not yet delivered or skipped
        self._reads = 0
        self.errors: list[str] = []
        self.delivered = 0
        self.dropped = 0

    @property
    def pending(self) -> int:
        """Written entries neither delivered nor skipped yet."""
        return len(self._written) - self._next

    def write(self, entry: Any) -> None:
        self._written.append(make_entry("draft", entry))

    def read(self, entry: Any, epoch: int) -> None:
        got = make_entry("draft", entry)
        number = self._reads
        self._reads += 1
        try:
            match = self._written.index(got, self._next)
        except ValueError:
            self.errors.append(
                f"read #{number}: {got} matches no pending written entry "
                "(corrupted, duplicated, out of order or never written)"
            )
            return
        for position in range(self._next, match):
            skipped = self._written[position]
            if skipped.epoch == epoch:
                self.errors.append(
                    f"written #{position}: {skipped} was lost: its epoch {skipped.epoch} is "
                    f"current at read #{number} (reader epoch {epoch})"
                )
            else:
                self.dropped += 1
        if got.epoch != epoch:
            self.errors.append(f"read #{number}: stale {got} came out at reader epoch {epoch}")
        else:
            self.delivered += 1
        self._next = match + 1

    def finish(self, final_epoch: int | None = None) -> list[str]:
        """Check what never came out; return :attr:`errors`.

        With ``final_epoch`` (the reader's epoch after draining the queue) every such
        entry must be stale; with ``None`` they are assumed still queued and not checked.
        """
        if final_epoch is not None:
            for position in range(self._next, len(self._written)):
                left = self._written[position]
                if left.epoch == final_epoch:
                    self.errors.append(
                        f"written #{position}: {left} never came out "
                        f"(current at final epoch {final_epoch})"
                    )
                else:
                    self.dropped += 1
            self._next = len(self._written)
        return self.errors


def check_output(
    written: Iterable[Any],
    read: Iterable[Any],
    epoch_at_read: Iterable[int],
    *,
    final_epoch: int | None = None,
) -> list[str]:
    """Check a draft-queue transcript; return the list of problems (empty when correct).

    Parameters
    ----------
    written : entries the writer pushed, in order.
    read : entries the reader received, in order.
    epoch_at_read : the reader's epoch at each read (same length as ``read``).
    final_epoch : the reader's epoch after the queue was drained, or ``None`` if entries
        may still be queued (they are then not checked).
    """
    read = list(read)
    epochs = list(epoch_at_read)
    if len(read) != len(epochs):
        raise ValueError(
            f"read and epoch_at_read must have the same length, not {len(read)} and {len(epochs)}"
        )
    board = DraftQueueScoreboard()
    for entry in written:
        board.write(entry)
    for entry, epoch in zip(read, epochs, strict=True):
        board.read(entry, epoch)
    return board.finish(final_epoch)


class FifoScoreboard:
    """In-order checker for a queue that never drops (feedback, pre-verification).

    Parameters
    ----------
    kind : ``"feedback"`` or ``"preverify"`` to normalise entries to their NamedTuple
        (so dicts and tuples compare equal), or ``None`` to compare entries as given.
    """

    def __init__(self, kind: str | None = None) -> None:
        self.kind = None if kind is None else _check_kind(kind)
        self._expected: collections.deque = collections.deque()
        self._reads = 0
        self.errors: list[str] = []
        self.delivered = 0

    def _norm(self, entry: Any) -> Any:
        return entry if self.kind is None else make_entry(self.kind, entry)

    @property
    def pending(self) -> int:
        return len(self._expected)

    def write(self, entry: Any) -> None:
        self._expected.append(self._norm(entry))

    def read(self, entry: Any) -> None:
        got = self._norm(entry)
        number = self._reads
        self._reads += 1
        if not self._expected:
            self.errors.append(f"read #{number}: {got} came out of an empty queue")
            return
        want = self._expected.popleft()
        if got != want:
            self.errors.append(f"read #{number}: got {got}, expected {want}")
        else:
            self.delivered += 1

    def finish(self, drained: bool = False) -> list[str]:
        """Return :attr:`errors`; with ``drained`` every written entry must have come out."""
        if drained and self._expected:
            self.errors.append(
                f"{len(self._expected)} written entries never came out, first {self._expected[0]}"
            )
        return self.errors


def check_fifo_output(
    written: Iterable[Any], read: Iterable[Any], *, kind: str | None = None, drained: bool = False
) -> list[str]:
    """Check a plain-queue transcript: ``read`` must be a prefix of ``written`` (all of it
    when ``drained``). Returns the list of problems (empty when correct)."""
    board = FifoScoreboard(kind)
    for entry in written:
        board.write(entry)
    for entry in read:
        board.read(entry)
    return board.finish(drained)
