"""The repository stands alone: no tracked file points into the team's private material.

The team keeps working notes outside the repository; a source string, comment or doc that
names one of them (or a path into that shared folder) sends a reader to a file they do not
have. Original sources belong in the text itself and in ``docs/sources.md``.

The forbidden words are assembled from pieces so that this file does not match itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Note file names, matched with or without ".md".
PRIVATE_NOTE_STEMS = tuple(
    "-".join(words)
    for words in (
        ("system", "model", "numbers"),
        ("platforms", "and", "baselines"),
        ("drafting", "algorithms"),
    )
)
SHARED_FOLDER = "shared"
PRIVATE_PATHS = ("../" + SHARED_FOLDER, "/work/" + SHARED_FOLDER)

PRIVATE_REFERENCE = re.compile(
    "|".join(re.escape(word) for word in PRIVATE_NOTE_STEMS + PRIVATE_PATHS)
)


def private_references(text: str) -> list[tuple[int, str]]:
    """``(line number, matched text)`` of every mention of a private note or path in ``text``."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), start=1)
        for match in PRIVATE_REFERENCE.finditer(line)
    ]


def tracked_text_files() -> list[Path]:
    """Files git tracks in this checkout that are text (UTF-8 without NUL bytes)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    files = []
    for name in listed.decode().split("\0"):
        path = REPO / name
        # A tracked file deleted in the work tree is not part of what a reader gets.
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


@pytest.mark.parametrize(
    "text",
    [
        'source = "AttAcc factors (' + PRIVATE_NOTE_STEMS[0] + '.md)"',
        "# see " + PRIVATE_NOTE_STEMS[1],
        "from the sources in ``" + PRIVATE_NOTE_STEMS[2] + ".md``",
        "cat " + PRIVATE_PATHS[0] + "/notes/style.md",
        "open('" + PRIVATE_PATHS[1] + "/spec/ahasd.md')",
    ],
    ids=["source-string", "comment", "docstring", "relative-path", "absolute-path"],
)
def test_the_detector_finds_each_kind_of_private_reference(text):
    assert len(private_references("first line\n" + text)) == 1
    assert private_references("first line\n" + text)[0][0] == 2


def test_the_detector_leaves_the_repository_s_own_references_alone():
    text = 'source = "Samsung 4 nm NPU, 11.59 TOPS/W INT8, JSSC 2023; docs/sources.md"\n'
    text += "docs/system-model.md, the shared off-chip bus, shared memory\n"
    assert private_references(text) == []


def test_the_listing_sees_the_repository_s_text_files():
    files = {path.relative_to(REPO).as_posix() for path in tracked_text_files()}
    assert {"README.md", "docs/sources.md", "sim/specs/devices/npu-mobile.toml"} <= files
    # The PNG figures in docs/img are tracked but binary: left out, not decoded.
    figures = {path.relative_to(REPO).as_posix() for path in (REPO / "docs" / "img").glob("*.png")}
    assert figures
    assert figures.isdisjoint(files)


def test_no_tracked_file_refers_to_private_notes_or_paths():
    offenders = [
        f"{path.relative_to(REPO).as_posix()}:{line}: {found}"
        for path in tracked_text_files()
        for line, found in private_references(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "private references (cite the original source instead):\n" + "\n".join(
        offenders
    )
