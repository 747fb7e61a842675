"""The register map: the committed docs/registers.md is what `ahasd regmap` generates, the
compiled SystemRDL map is well formed for every parameter set, and fields that cannot fit are
refused with a message naming the parameter."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ahasd.cli import regmap as regmap_cli
from ahasd.params import EDCParams, GTSUParams, QueueParams, TopParams, TVCParams
from ahasd.regmap import ACCESS_KINDS, ADDR_BITS, DATA_BITS, rdl_source, register_map

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "registers.md"


def run_cli(argv: list[str]) -> int:
    # Through the module's own parser hook, as `ahasd regmap` builds it.
    parser = argparse.ArgumentParser(prog="ahasd")
    regmap_cli.register(parser.add_subparsers())
    args = parser.parse_args(["regmap", *argv])
    return args.func(args)


def test_committed_register_doc_is_current(tmp_path):
    out = tmp_path / "registers.md"
    assert run_cli(["--out", str(out)]) == 0
    assert DOC.read_text() == out.read_text(), (
        "docs/registers.md is stale: run `ahasd regmap --out docs/registers.md`"
    )


def test_cli_prints_to_stdout(capsys):
    assert run_cli([]) == 0
    assert capsys.readouterr().out == regmap_cli.render()


def test_the_source_is_the_repository_rdl():
    assert rdl_source().read_text() == (ROOT / "hw" / "regmap.rdl").read_text()


WIDEST = TopParams(
    edc=EDCParams(stats_bits=32, llr_bits=6),
    tvc=TVCParams(depth=64, ratio_bits=64, cycle_bits=48, n_bits=16, n_max=1000),
    gtsu=GTSUParams(ranks=32, timer_bits=32),
    queues=QueueParams(draft_depth=4096),
)


@pytest.mark.parametrize(
    "params",
    [TopParams(), WIDEST, TopParams(tvc=TVCParams(depth=1, ratio_bits=9, frac_bits=3))],
    ids=["default", "widest", "narrowest_tvc"],
)
def test_map_is_well_formed(params):
    regs = register_map(params)
    words = [address for reg in regs for address in reg.word_addresses]
    assert len(set(words)) == len(words)
    assert all(0 <= a < 1 << ADDR_BITS and a % 4 == 0 for a in words)
    for reg in regs:
        assert reg.width in (DATA_BITS, 2 * DATA_BITS), reg.name
        assert reg.address % (reg.width // 8) == 0, reg.name  # naturally aligned
        covered = 0
        for field in reg.fields:
            assert field.access in ACCESS_KINDS, reg.name
            assert field.lsb + field.width <= reg.width, reg.name
            assert 0 <= field.reset < 1 << field.width, reg.name
            assert not covered & field.mask, reg.name
            covered |= field.mask
    # Parameter-dependent parts follow the parameters.
    assert len([r for r in regs if r.group == "TVC_NVCT"]) == params.tvc.depth
    assert regs.get("TVC_NVCT[0]").field("ratio").width == params.tvc.ratio_bits
    assert regs.get("TVC_NCR").field("ncr").width == params.tvc.cycle_bits
    assert regs.get("EDC_HMAX").field("hmax").reset == params.edc.hmax
    assert regs.get("TVC_N_MAX").field("n_max").reset == params.tvc.n_max
    assert regs.get("GTSU_T_ON").field("cycles").reset == params.gtsu.t_on


def test_documented_layout():
    # Spot checks of the layout docs/integration.md describes (byte addresses).
    regs = register_map()
    assert regs.get("ID").address == 0x000
    assert regs.get("IRQ_STATUS").address == 0x014
    assert regs.get("EDC_HMAX").address == 0x040
    assert regs.get("TVC_NCR").address == 0x088
    assert regs.get("TVC_NVCT[0]").address == 0x200
    assert regs.get("TVC_PDCT[3]").address == 0x418
    assert regs.get("TVC_PVCT[1]").word_addresses == (0x608, 0x60C)
    assert regs.at(0x0C0)[0].name == "GTSU_DLM_MASK"
    assert regs.at(0x20C) == (regs.get("TVC_NVCT[1]"), 1)
    assert regs.at(0x01C) is None
    ncr = regs.get("TVC_NCR")
    assert (ncr.buffer_reads, ncr.buffer_writes, ncr.writable) == (True, False, False)
    entry = regs.get("TVC_PVCT[2]")
    assert (entry.buffer_reads, entry.buffer_writes, entry.external) == (True, True, True)
    assert [f.access for f in regs.get("IRQ_STATUS").fields] == ["w1c"] * 5
    assert [f.access for f in regs.get("SOFT_RESET").fields] == ["w1p"] * 3
    with pytest.raises(KeyError, match=r"no register named 'TVC_NVCT_0'"):
        regs.get("TVC_NVCT_0")
    with pytest.raises(ValueError, match=r"^address must be between 0 and 4095, not 4096$"):
        regs.at(4096)


def test_rejects_fields_wider_than_their_register():
    with pytest.raises(
        ValueError, match=r"^edc.stats_bits must be at most 32 to fit its 32-bit register, not 33$"
    ):
        register_map(TopParams(edc=EDCParams(stats_bits=33)))
    with pytest.raises(
        ValueError, match=r"^gtsu.ranks must be at most 32 to fit its 32-bit register, not 48$"
    ):
        register_map(TopParams(gtsu=GTSUParams(ranks=48)))
    with pytest.raises(TypeError, match=r"^params must be a TopParams, not 1$"):
        register_map(1)


def test_regmap_is_an_ahasd_subcommand():
    from ahasd.cli import COMMAND_MODULES

    assert "ahasd.cli.regmap" in COMMAND_MODULES


# A firmware file that uses every kind of macro the header defines, and the register struct:
# it must compile cleanly, and its static asserts pin the layout to the map's addresses.
FIRMWARE = r"""
#include <stddef.h>
#include <stdint.h>
#include "ahasd_controller.h"

static_assert(offsetof(ahasd_controller_t, IRQ_STATUS) == 0x014, "IRQ_STATUS");
static_assert(offsetof(ahasd_controller_t, TVC_NCR) == 0x088, "TVC_NCR");
static_assert(offsetof(ahasd_controller_t, TVC_PVCT) == 0x600, "TVC_PVCT");
static_assert(AHASD_CONTROLLER__TVC_NCR__NCR_bw == 40, "NCR width");
static_assert(AHASD_CONTROLLER__TVC_PVCT__RATIO_bm == 0xffffffffffULL, "ratio mask");

/* Bring-up steps of docs/integration.md, on a register block at `regs`. */
uint32_t bring_up(volatile ahasd_controller_t *regs, uint64_t pvct) {
    /* 32-bit words of a 64-bit register: from the base and offsetof (the struct is packed,
       so &regs->TVC_PVCT[0] would be an unaligned-pointer warning). */
    volatile uint32_t *entry = (volatile uint32_t *)((uintptr_t)regs
        + offsetof(ahasd_controller_t, TVC_PVCT));
    entry[0] = (uint32_t)pvct;          /* low word: buffered */
    entry[1] = (uint32_t)(pvct >> 32);  /* high word: writes the entry whole */
    regs->EDC_HMAX = (40960u << AHASD_CONTROLLER__EDC_HMAX__HMAX_bp)
        & AHASD_CONTROLLER__EDC_HMAX__HMAX_bm;
    regs->IRQ_ENABLE = AHASD_CONTROLLER__IRQ_ENABLE__PREVERIFY_bm;
    uint32_t status = regs->IRQ_STATUS;
    regs->IRQ_STATUS = status;  /* write 1 to clear */
    return (regs->ID == AHASD_CONTROLLER__ID__ID_reset) ? status : 0;
}
"""


def test_c_header_compiles_and_matches_the_map(tmp_path):
    import shutil
    import subprocess

    from ahasd.cli.hw import C_HEADER, HTML_FOLDER, register_outputs
    from ahasd.output import OutputSet

    def write_register_outputs():
        outputs = OutputSet()
        for path, data in register_outputs(tmp_path).items():
            outputs.add(path, data)
        outputs.commit()

    gcc = shutil.which("gcc")
    assert gcc, "gcc is needed (the README lists a C/C++ compiler among the requirements)"
    write_register_outputs()
    header, html = tmp_path / C_HEADER, tmp_path / HTML_FOLDER
    assert header.is_file()
    assert (html / "index.html").is_file()
    source = tmp_path / "firmware.c"
    source.write_text(FIRMWARE)
    done = subprocess.run(
        [gcc, "-Wall", "-Werror", "-std=c11", "-c", str(source), "-o", str(tmp_path / "fw.o")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Unchanged outputs keep their mtimes (downstream builds stay cached).
    import os

    os.utime(header, (1_000_000, 1_000_000))
    os.utime(html / "index.html", (1_000_000, 1_000_000))
    write_register_outputs()
    assert header.stat().st_mtime == 1_000_000
    assert (html / "index.html").stat().st_mtime == 1_000_000


def test_golden_controller_bus_rules():
    # Expected values worked out by hand from the RDL's texts (docs/integration.md).
    from ahasd.golden.top import GoldenTop

    golden = GoldenTop()
    assert golden.reg_read("ID") == 0x41485344
    assert golden.reg_read("VERSION") == 0x0002_0000
    assert golden.reg_read("EDC_HMAX") == 40960
    assert golden.reg_read("STATUS") == 0b000100  # GTSU idle and ready
    # Refused: an unmapped word, a write to a read-only register (nothing changes).
    assert golden.bus_read(0x01C) == (0, False)
    assert golden.bus_write(0x000, 0) is False
    assert golden.bus_write(0x08C, 1) is False  # NCR's high word
    # A write keeps the field's bits; a byte strobe keeps the other bytes.
    golden.reg_write("GTSU_T_OFF", 0xFFFF_F402)
    assert golden.reg_read("GTSU_T_OFF") == 2  # 10 bits
    assert golden.bus_write(0x0C4, 0x1234_3355, 0b0010)
    assert golden.reg_read("GTSU_TLM_MASK") == 0x3300  # 0xFF00 with byte 1 := 0x33
    # 64-bit: the low word waits in the buffer until the high word is written.
    assert golden.bus_write(0x408, 0x1111_2222)
    assert golden.reg_read("TVC_PDCT[1]") == 0
    assert golden.bus_write(0x40C, 0x33)
    assert golden.reg_read("TVC_PDCT[1]") == 0x33_1111_2222
    assert golden.tvc.tables["pdct"][1] == 0x33_1111_2222
    # The high word of NCR is the snapshot its low word's read took.
    golden.tvc_npu_start(64)
    for _ in range(10):
        golden.step(want_draft=False)
    assert golden.bus_read(0x088) == (10, True)
    for _ in range(5):
        golden.step(want_draft=False)
    assert golden.bus_read(0x08C) == (0, True)
    assert golden.bus_read(0x088) == (15, True)
    # An EDC error: its cause rises at the next edge; irq once enabled; write 1 clears.
    golden.reg_write("EDC_HMAX", 0)
    assert golden.reg_read("EDC_HMAX") == 40960
    assert golden.reg_read("ERROR") == 0b001
    golden.step(want_draft=False)
    assert golden.reg_read("IRQ_STATUS") == 0b00100
    assert not golden.irq
    golden.reg_write("IRQ_ENABLE", 0b00100)
    assert golden.irq
    # A clearing write at the edge that sets the cause leaves it set: clear one edge later.
    golden.reg_write("IRQ_STATUS", 0b00100)
    assert golden.irq
    golden.step(want_draft=False)
    golden.reg_write("IRQ_STATUS", 0)
    assert golden.reg_read("IRQ_STATUS") == 0b00100
    golden.reg_write("IRQ_STATUS", 0b00100)
    assert not golden.irq
    # Write 1 to pulse: the EDC back to reset (its flag cleared); reads 0.
    golden.reg_write("SOFT_RESET", 0b001)
    assert golden.reg_read("ERROR") == 0
    assert golden.reg_read("SOFT_RESET") == 0
