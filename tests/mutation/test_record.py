"""The campaign record that ``run.py --sample`` checks against: written per block, read back
only for the very netlist and list it was made of."""

from __future__ import annotations

import json

import pytest
from mutation import run


@pytest.fixture
def record(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    monkeypatch.setattr(run, "RECORD", path)
    return path


def _mutant(number: int, killed_by: str) -> run.Mutant:
    mutant = run.Mutant(number, f"mutate -mode inv -module dut -cell m_{number} -port Y")
    mutant.outcome = "killed"
    if "cocotb" in killed_by:
        mutant.cocotb = "killed"
    if "formal" in killed_by:
        mutant.formal = "killed"
        mutant.formal_kills = [{"node": "tests/x/test_formal.py::t", "check": "t", "seconds": 9}]
    return mutant


def test_a_record_is_read_back_for_its_own_netlist_and_list_only(record):
    mutants = [_mutant(1, "cocotb"), _mutant(2, "formal")]
    run.write_record("edc", "abc123", 20, 1, ("cocotb", "formal"), mutants)
    found = run.recorded("edc", "abc123", 20, 1)
    assert [found[m.key]["killed_by"] for m in mutants] == ["cocotb", "formal"]
    assert found[mutants[1].key]["formal_kills"][0]["check"] == "t"
    # Another netlist (the RTL changed), another list, another block: nothing to go by.
    assert run.recorded("edc", "def456", 20, 1) is None
    assert run.recorded("edc", "abc123", 40, 1) is None
    assert run.recorded("edc", "abc123", 20, 2) is None
    assert run.recorded("tvc", "abc123", 20, 1) is None


def test_a_campaign_replaces_its_own_block_and_keeps_the_others(record):
    run.write_record("edc", "e1", 20, 1, ("cocotb",), [_mutant(1, "cocotb")])
    run.write_record("tvc", "t1", 20, 1, ("cocotb",), [_mutant(1, "cocotb")])
    run.write_record("edc", "e2", 20, 1, ("cocotb",), [_mutant(3, "cocotb")])
    blocks = json.loads(record.read_text())["blocks"]
    assert sorted(blocks) == ["edc", "tvc"]
    assert blocks["edc"]["netlist"] == "e2"
    assert [m["number"] for m in blocks["edc"]["mutants"]] == [3]


def test_without_a_record_file_there_is_nothing_to_go_by(record):
    assert not record.exists()
    assert run.recorded("edc", "abc123", 20, 1) is None


def test_the_page_shows_the_record_with_the_equivalents_applied():
    """docs/verification.md's campaign table is the one ``doc_tables.py`` generates from
    record.json and equivalent.toml (regenerate with ``doc_tables.py --write``)."""
    from mutation import doc_tables

    page = doc_tables.DOC.read_text()
    assert doc_tables.documented(page) == doc_tables.table(), (
        "docs/verification.md's campaign table differs from record.json + equivalent.toml: "
        "run .venv/bin/python tests/mutation/doc_tables.py --write"
    )


def test_a_recorded_survivor_listed_as_equivalent_counts_as_equivalent(monkeypatch):
    from mutation import doc_tables

    listed = "mutate -mode const1 -module dut -cell m_2 -port Y -portbit 0"
    monkeypatch.setattr(run, "load_equivalent", lambda block: {listed: "why"})
    entry = {
        "seed": 1,
        "tiers": ["cocotb", "formal"],
        "mutants": [
            {"number": 1, "mutation": "mutate -mode inv -module dut -cell m_1 -port Y",
             "outcome": "killed", "killed_by": "cocotb+formal"},
            {"number": 2, "mutation": listed, "outcome": "survived", "killed_by": "-"},
            {"number": 3, "mutation": "mutate -mode inv -module dut -cell m_3 -port Y",
             "outcome": "survived", "killed_by": "-"},
        ],
    }  # fmt: skip
    counts = doc_tables.tally("edc", entry)
    assert counts["cocotb+formal"] == 1
    assert counts["equivalent"] == [2]
    assert counts["survived"] == [3]
    row = doc_tables.table({"blocks": {"edc": entry}}).splitlines()[-1]
    assert row == "| edc | 3 (1) | cocotb + formal | 0 | 0 | 1 | 1 | 1 (`#3`) |"
