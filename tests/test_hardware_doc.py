"""docs/hardware.md's tables stay true: each block's rows carry the digest of the RTL they
were measured on (``ahasd.hw.verilog.block_digest``: the SHA-256 of its Verilog), and this
test fails when a committed table's digest no longer matches the RTL, naming the command
that measures it again. Also: a partial re-measurement (``ahasd timing top --doc``) replaces
that block's rows and digest and keeps the others with theirs.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from ahasd.cli.hw import (
    AREA_BEGIN,
    AREA_END,
    DIGEST_BLOCK,
    TIMING_BEGIN,
    TIMING_END,
    merged_table,
    parse_table,
)
from ahasd.hw.blocks import lookup
from ahasd.hw.verilog import block_digest

DOC = Path(__file__).resolve().parents[1] / "docs" / "hardware.md"
TABLES = {"area": (AREA_BEGIN, AREA_END), "timing": (TIMING_BEGIN, TIMING_END)}


@functools.cache
def current_digest(block: str) -> str:
    return block_digest(lookup(block))


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_committed_table_was_measured_on_this_rtl(kind):
    begin, end = TABLES[kind]
    text = DOC.read_text().split(begin, 1)[1].split(end, 1)[0]
    _header, rows, digests = parse_table(text)
    assert rows, f"no rows in the {kind} table"
    missing = sorted(set(rows) - set(digests))
    assert not missing, f"{kind} table rows without an RTL digest: {missing}"
    for name, digest in digests.items():
        now = current_digest(DIGEST_BLOCK.get(name, name))
        assert digest == now, (
            f"docs/hardware.md: the {kind} rows of {name} were measured on RTL {digest}, the "
            f"RTL is now {now}: run `ahasd {kind} {name} --doc docs/hardware.md`"
        )


def test_a_partial_measurement_keeps_the_other_blocks_rows_and_digests(monkeypatch):
    import ahasd.hw.verilog

    fake = {"edc": "ed0000000000", "top": "70b000000000"}
    monkeypatch.setattr(ahasd.hw.verilog, "block_digest", lambda block: fake[block.name])
    header = "| block | x |\n|---|---:|"
    old = merged_table(f"{header}\n| edc | 1 |\n| top | 2 |\n| top | 3 |", None, ["edc", "top"])
    _, _, digests = parse_table(old)
    assert digests == fake
    old = old.replace(fake["edc"], "0123456789ab")
    new = merged_table(f"{header}\n| top | 4 |", old, ["edc", "top"])
    _, rows, digests = parse_table(new)
    assert rows == {"edc": ["| edc | 1 |"], "top": ["| top | 4 |"]}
    assert digests == {"edc": "0123456789ab", "top": fake["top"]}
    # Rows of a table without digests are not kept: nothing says what they were measured on.
    _, rows, _ = parse_table(merged_table(f"{header}\n| top | 5 |", f"{header}\n| edc | 1 |", []))
    assert rows == {"top": ["| top | 5 |"]}
