"""Tests of the queue golden models and checkers (spec 2.3, docs/spec-decisions.md "Queues").

The checkers must accept a correct transcript and catch each kind of fault (lost,
reordered, corrupted, duplicated, stale-delivered entries); the fault transcripts are
built by hand.
"""

from __future__ import annotations

import random
import re

import pytest
from harness.seeds import choose_seed

from ahasd.golden.queues import (
    DRAFT_FIELDS,
    FEEDBACK_FIELDS,
    PREVERIFY_FIELDS,
    DraftEntry,
    DraftQueueModel,
    DraftQueueScoreboard,
    FeedbackEntry,
    FifoModel,
    check_entry,
    check_fifo_output,
    check_output,
    field_widths,
    make_entry,
    pack,
    unpack,
)
from ahasd.params import QueueParams


def draft(batch_id: int, epoch: int) -> DraftEntry:
    return DraftEntry(batch_id=batch_id, epoch=epoch, first_pos=4 * batch_id, length=4, bucket=1)


# -- entries ----------------------------------------------------------------------------------


def test_field_names_follow_the_spec():
    assert DRAFT_FIELDS == ("batch_id", "epoch", "first_pos", "length", "bucket")
    assert FEEDBACK_FIELDS == ("batch_id", "n_accepted", "full")
    assert PREVERIFY_FIELDS == ("batch_id", "n_tokens")


def test_default_widths():
    assert field_widths("draft") == {
        "batch_id": 8,
        "epoch": 8,
        "first_pos": 16,
        "length": 5,
        "bucket": 3,
    }
    assert sum(field_widths("feedback").values()) == 8 + 5 + 1
    assert sum(field_widths("preverify").values()) == 8 + 5


def test_pack_puts_the_first_field_lowest():
    # batch_id 0x12 in bits 0-7, epoch 0x34 in 8-15, first_pos 0x5678 in 16-31,
    # length 3 in 32-36, bucket 7 in 37-39.
    entry = DraftEntry(0x12, 0x34, 0x5678, 3, 7)
    expected = 0x12 | 0x34 << 8 | 0x5678 << 16 | 3 << 32 | 7 << 37
    assert pack("draft", entry) == expected
    assert unpack("draft", expected) == entry
    assert pack("feedback", {"batch_id": 1, "n_accepted": 2, "full": 1}) == 1 | 2 << 8 | 1 << 13


def test_make_entry_accepts_dicts_and_tuples():
    want = FeedbackEntry(5, 3, 0)
    assert make_entry("feedback", {"batch_id": 5, "n_accepted": 3, "full": 0}) == want
    assert make_entry("feedback", (5, 3, 0)) == want
    assert make_entry("feedback", batch_id=5, n_accepted=3, full=0) == want


@pytest.mark.parametrize(
    ("kind", "entry", "error", "message"),
    [
        ("draft", (256, 0, 0, 1, 0), ValueError,
         "draft.batch_id must be between 0 and 255, not 256"),
        ("draft", (0, 0, 0, 1, 8), ValueError, "draft.bucket must be between 0 and 7, not 8"),
        ("feedback", (0, 0, 2), ValueError, "feedback.full must be between 0 and 1, not 2"),
        ("preverify", (0,), ValueError, "a preverify entry has 2 fields, not 1"),
        ("queue", (0,), ValueError, "kind must be one of draft, feedback, preverify, not 'queue'"),
    ],
)  # fmt: skip
def test_check_entry_rejects(kind, entry, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        check_entry(kind, entry)


def test_check_entry_with_narrow_params():
    params = QueueParams(epoch_bits=1)
    check_entry("draft", (0, 1, 0, 1, 0), params)
    with pytest.raises(ValueError, match=r"^draft\.epoch must be between 0 and 1, not 2$"):
        check_entry("draft", (0, 2, 0, 1, 0), params)


# -- FifoModel --------------------------------------------------------------------------------


def test_fifo_keeps_order_and_refuses_when_full():
    fifo = FifoModel(4)
    assert fifo.is_empty
    assert fifo.pop() is None
    for value in range(4):
        assert fifo.push(value) is True
        assert fifo.level == value + 1
    assert fifo.is_full
    assert fifo.push(99) is False  # back-pressure: refused, nothing dropped
    assert fifo.entries() == [0, 1, 2, 3]
    assert fifo.pop() == 0
    assert fifo.push(4) is True
    assert [fifo.pop() for _ in range(5)] == [1, 2, 3, 4, None]
    assert fifo.level == 0


def test_fifo_depth_is_validated():
    with pytest.raises(ValueError, match=r"^depth must be at least 1, not 0$"):
        FifoModel(0)


# -- DraftQueueModel --------------------------------------------------------------------------


def test_draft_queue_squashes_stale_head_entries():
    queue = DraftQueueModel(8)
    for entry in (draft(0, 0), draft(1, 0), draft(2, 1), draft(3, 1)):
        assert queue.push(entry)
    assert queue.pop(epoch=0) == draft(0, 0)
    # The reader bumps its epoch (batch 1 was built on a rejected token): batch 1 is stale.
    assert queue.pop(epoch=1) == draft(2, 1)
    assert queue.dropped == [draft(1, 0)]
    assert queue.pop(epoch=1) == draft(3, 1)
    assert queue.pop(epoch=1) is None


def test_draft_queue_drops_everything_stale_and_counts_stale_in_level():
    queue = DraftQueueModel(4)
    for batch in range(4):
        queue.push(draft(batch, 0))
    assert queue.is_full  # stale entries still occupy the queue until the reader drops them
    assert queue.push(draft(9, 1)) is False
    assert queue.squash(epoch=1) == 4
    assert queue.level == 0
    assert queue.pop(epoch=1) is None


def test_draft_queue_accepts_dict_entries():
    queue = DraftQueueModel(2)
    queue.push(dict(draft(0, 0)._asdict()))
    queue.push(dict(draft(1, 1)._asdict()))
    assert queue.pop(epoch=1) == draft(1, 1)._asdict()


# -- checkers ---------------------------------------------------------------------------------


WRITTEN = [draft(0, 0), draft(1, 0), draft(2, 0), draft(3, 1), draft(4, 1)]


def test_checker_accepts_a_correct_squash():
    # Batch 0 read at epoch 0; the reader moves to epoch 1; batches 1 and 2 are dropped.
    assert check_output(WRITTEN, [draft(0, 0), draft(3, 1), draft(4, 1)], [0, 1, 1]) == []
    # Dicts and plain tuples work too; entries still queued are not checked without
    # final_epoch.
    assert check_output(WRITTEN, [tuple(draft(0, 0))], [0]) == []
    assert check_output([w._asdict() for w in WRITTEN], [draft(0, 0)._asdict()], [0]) == []


def test_checker_catches_a_lost_entry():
    errors = check_output(WRITTEN, [draft(0, 0), draft(2, 0)], [0, 0])
    assert len(errors) == 1
    assert "written #1" in errors[0]
    assert "lost" in errors[0]


def test_checker_catches_a_stale_entry_coming_out():
    errors = check_output(WRITTEN, [draft(0, 0), draft(1, 0)], [0, 1])
    assert errors == [
        "read #1: stale DraftEntry(batch_id=1, epoch=0, first_pos=4, length=4, bucket=1) "
        "came out at reader epoch 1"
    ]


def test_checker_catches_reorder_corruption_and_duplication():
    reorder = check_output(WRITTEN, [draft(1, 0), draft(0, 0)], [0, 0])
    assert any("written #0" in e and "lost" in e for e in reorder)
    assert any("read #1" in e and "matches no pending" in e for e in reorder)
    corrupt = draft(1, 0)._replace(bucket=2)
    corrupted = check_output(WRITTEN, [draft(0, 0), corrupt], [0, 0])
    assert len(corrupted) == 1
    assert "read #1" in corrupted[0]
    assert "matches no pending" in corrupted[0]
    duplicate = check_output(WRITTEN, [draft(0, 0), draft(0, 0)], [0, 0])
    assert len(duplicate) == 1
    assert "read #1" in duplicate[0]


def test_checker_final_epoch_demands_a_drained_queue():
    read = [draft(0, 0)]
    assert check_output(WRITTEN[:3], read, [0], final_epoch=1) == []  # 1 and 2 were stale
    errors = check_output(WRITTEN, read, [0], final_epoch=1)
    assert len(errors) == 2  # batches 3 and 4 are current at epoch 1 and never came out
    assert all("never came out" in e for e in errors)


def test_checker_length_mismatch_is_a_usage_error():
    with pytest.raises(ValueError, match=r"^read and epoch_at_read must have the same length"):
        check_output(WRITTEN, [draft(0, 0)], [])


def test_fifo_checker():
    sent = [FeedbackEntry(i, i % 5, i % 2) for i in range(6)]
    assert check_fifo_output(sent, sent[:4]) == []
    assert check_fifo_output(sent, sent, drained=True) == []
    assert len(check_fifo_output(sent, sent[:4], drained=True)) == 1
    assert check_fifo_output(sent, [sent[0], sent[2]]) == [
        f"read #1: got {sent[2]}, expected {sent[1]}"
    ]
    assert check_fifo_output(sent, [tuple(s) for s in sent], kind="feedback") == []
    assert len(check_fifo_output([], [sent[0]])) == 1  # out of an empty queue


@pytest.mark.seeded
def test_random_traffic_through_the_model_passes_the_checker():
    # Random pushes, pops and epoch bumps through DraftQueueModel, observed by a streaming
    # scoreboard; then one injected fault per kind must be caught.
    rng = random.Random(choose_seed(1129))
    queue = DraftQueueModel(16)
    board = DraftQueueScoreboard()
    written, read, epochs = [], [], []
    writer_epoch = reader_epoch = 0
    batch = 0
    for _ in range(3000):
        action = rng.random()
        if action < 0.45:
            # first_pos carries the full sequence number, so every entry is unique.
            entry = DraftEntry(batch % 256, writer_epoch % 256, batch, 1 + batch % 31, batch % 8)
            if queue.push(entry):
                written.append(entry)
                board.write(entry)
                batch += 1
        elif action < 0.9:
            entry = queue.pop(reader_epoch % 256)
            if entry is not None:
                read.append(entry)
                epochs.append(reader_epoch % 256)
                board.read(entry, reader_epoch % 256)
        elif action < 0.95:
            reader_epoch += 1  # a rejection: the reader bumps first
        else:
            writer_epoch = reader_epoch  # the writer learns through the feedback queue
    while (entry := queue.pop(reader_epoch % 256)) is not None:
        read.append(entry)
        epochs.append(reader_epoch % 256)
        board.read(entry, reader_epoch % 256)
    assert board.finish(final_epoch=reader_epoch % 256) == []
    assert board.delivered == len(read)
    assert board.delivered + board.dropped == len(written)
    assert board.dropped == len(queue.dropped) > 0  # the traffic did squash something
    assert check_output(written, read, epochs, final_epoch=reader_epoch % 256) == []
    # Faults: drop a delivered entry, swap two, corrupt one, deliver a dropped one.
    # (drop one whose successor is read at the same epoch, so the gap cannot be a squash)
    k = next(k for k in range(len(read) - 1) if epochs[k] == epochs[k + 1])
    lost = check_output(written, read[:k] + read[k + 1 :], epochs[:k] + epochs[k + 1 :])
    assert any("lost" in e for e in lost)
    swapped = [*read[:5], read[6], read[5], *read[7:]]
    assert check_output(written, swapped, epochs) != []
    corrupted = [*read[:5], read[5]._replace(first_pos=read[5].first_pos ^ 1), *read[6:]]
    assert check_output(written, corrupted, epochs) != []
    stale = queue.dropped[0]
    position = written.index(stale)
    later = next(k for k, entry in enumerate(read) if written.index(entry) > position)
    injected = [*read[:later], stale, *read[later:]]
    injected_epochs = [*epochs[:later], epochs[later], *epochs[later:]]
    assert any("stale" in e for e in check_output(written, injected, injected_epochs))
