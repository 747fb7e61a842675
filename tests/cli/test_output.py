"""``ahasd.output``: output sets commit whole or not at all, keep unchanged files, honour the
umask, and refuse bad paths with one line naming them."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ahasd import output
from ahasd.errors import UserError
from ahasd.output import Journal, OutputSet, check_file, check_folder, write_file


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (temporary files included) with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_set_is_written_with_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        outputs = OutputSet()
        outputs.add(tmp_path / "new" / "deeper" / "a.txt", "alpha\n")
        outputs.add(tmp_path / "new" / "b.bin", b"\x00\x01")
        assert outputs.commit() == {
            tmp_path / "new" / "deeper" / "a.txt": True,
            tmp_path / "new" / "b.bin": True,
        }
    finally:
        os.umask(old)
    assert (tmp_path / "new" / "deeper" / "a.txt").read_text() == "alpha\n"
    assert stat.S_IMODE((tmp_path / "new" / "b.bin").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "new" / "deeper").stat().st_mode) == 0o750
    assert sorted(_files(tmp_path)) == ["new/b.bin", "new/deeper/a.txt"]


def test_unchanged_files_keep_their_mtime_and_changed_ones_are_replaced(tmp_path):
    same, other = tmp_path / "same.txt", tmp_path / "other.txt"
    write_file(same, "one\n")
    write_file(other, "two\n")
    os.utime(same, (1_000_000, 1_000_000))
    os.utime(other, (1_000_000, 1_000_000))
    outputs = OutputSet()
    outputs.add(same, "one\n")
    outputs.add(other, "three\n")
    assert outputs.commit() == {same: False, other: True}
    assert same.stat().st_mtime == 1_000_000
    assert other.stat().st_mtime != 1_000_000
    assert other.read_text() == "three\n"


def test_a_failure_while_staging_leaves_the_previous_set_and_no_debris(tmp_path, monkeypatch):
    folder = tmp_path / "out"
    first = {folder / name: f"old {name}\n" for name in ("a.txt", "b.txt", "c.txt")}
    for path, text in first.items():
        write_file(path, text)
    before = _files(tmp_path)
    staged = []
    real_stage = output._stage

    def stage_until_the_disk_is_full(path, data, mode):
        if len(staged) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        staged.append(path)
        return real_stage(path, data, mode)

    monkeypatch.setattr(output, "_stage", stage_until_the_disk_is_full)
    outputs = OutputSet(option="--out")
    for path in first:
        outputs.add(path, "new\n")
    outputs.add(folder / "fresh" / "d.txt", "new\n")
    with pytest.raises(UserError) as caught:
        outputs.commit()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--out {folder / 'c.txt'}: cannot write (No space left on device)")
    assert _files(tmp_path) == before  # the old set, no temporary file left behind
    assert not (folder / "fresh").exists()


def test_an_interrupt_while_staging_leaves_nothing_half_written(tmp_path, monkeypatch):
    real_stage = output._stage
    calls = []

    def interrupted(path, data, mode):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_stage(path, data, mode)

    monkeypatch.setattr(output, "_stage", interrupted)
    outputs = OutputSet()
    outputs.add(tmp_path / "new" / "a.txt", "a")
    outputs.add(tmp_path / "new" / "b.txt", "b")
    with pytest.raises(KeyboardInterrupt):
        outputs.commit()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("make", "target", "message"),
    [
        (lambda d: (d / "f").write_text("x"), "f", "--out {d}/f: is a file, not a folder"),
        (
            lambda d: (d / "f").write_text("x"),
            "f/sub/deeper",
            "--out {d}/f/sub/deeper: {d}/f is a file, not a folder",
        ),
    ],
)
def test_check_folder_refuses_a_file_in_the_way(tmp_path, make, target, message):
    make(tmp_path)
    with pytest.raises(UserError, match="^" + message.format(d=tmp_path) + "$"):
        check_folder(tmp_path / target, option="--out")


def test_check_folder_tries_to_write_rather_than_trusting_permission_bits():
    # /proc takes no new files, whoever asks (root included, who passes permission bits).
    with pytest.raises(UserError, match=r"^--out /proc/ahasd-x/y: cannot write in /proc \("):
        check_folder(Path("/proc/ahasd-x/y"), option="--out")


def test_check_folder_accepts_a_missing_folder_and_creates_nothing(tmp_path):
    assert check_folder(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []


def test_a_folder_where_a_file_should_go_is_refused(tmp_path):
    (tmp_path / "run.png").mkdir()
    with pytest.raises(UserError, match=r"run\.png: is a folder, not a file$"):
        check_file(tmp_path / "run.png")
    with pytest.raises(UserError, match=r"^--out .*run\.png: is a folder, not a file$"):
        OutputSet(option="--out").add(tmp_path / "run.png", b"png")


def test_journal_drops_a_half_line_and_appends_whole_lines(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    with Journal(path, valid_bytes=len(b'{"a": 1}\n{"b": 2}\n')) as journal:
        journal.append('{"c": 3}')
    assert path.read_text() == '{"a": 1}\n{"b": 2}\n{"c": 3}\n'


def test_journal_refuses_a_folder_in_its_place(tmp_path):
    (tmp_path / "results.jsonl").mkdir()
    with pytest.raises(UserError, match=r"^--out .*results\.jsonl: is a folder, not a file$"):
        Journal(tmp_path / "results.jsonl", valid_bytes=0, option="--out")
