"""Hardware report smoke test: a small queue set synthesised onto the sky130 subset."""

from __future__ import annotations

import pytest

from ahasd.cli import main
from ahasd.hw.area import footprint_um2, liberty_text, synthesize
from ahasd.hw.blocks import lookup
from ahasd.params import QueueParams


def test_footprints_come_from_the_sky130_lef_files():
    # sky130_fd_sc_hd cell sizes (hd site 0.46 x 2.72 um): nand2_1 is 3 sites, dfxtp_1 16.
    assert footprint_um2("nand2_1") == pytest.approx(3 * 0.46 * 2.72)
    assert footprint_um2("dfxtp_1") == pytest.approx(16 * 0.46 * 2.72)
    assert footprint_um2("mux2_1") == pytest.approx(9 * 0.46 * 2.72)


def test_liberty_names_every_cell_with_its_area():
    text = liberty_text()
    assert "cell(sky130_fd_sc_hd__nand2_1) { area : 3.7536;" in text
    assert 'function : "!(A&B)"' in text
    assert 'clocked_on : "CLK"' in text


@pytest.mark.slow
def test_small_queues_synthesise_with_their_storage_in_flip_flops(tmp_path):
    params = QueueParams(draft_depth=4, feedback_depth=2, preverify_depth=2)
    report = synthesize(lookup("queues"), tmp_path, params)
    # Storage alone: depth x entry width for each queue (widths from QueueParams' defaults).
    storage = 4 * (8 + 8 + 16 + 5 + 3) + 2 * (8 + 5 + 1) + 2 * (8 + 5)
    assert report.flip_flops >= storage
    assert report.cells > report.flip_flops
    assert report.area_um2 > report.flip_flops * footprint_um2("dfxtp_1")
    assert report.area_28nm_um2 < report.area_um2


def test_area_doc_without_markers_is_a_user_error(tmp_path, capsys):
    doc = tmp_path / "hardware.md"
    doc.write_text("# no markers here\n")
    assert main(["area", "nope", "--doc", str(doc)]) == 2
    assert "unknown block 'nope'" in capsys.readouterr().err
