"""The register map: the committed docs/registers.md is what `ahasd regmap` generates, the map
is well formed, and the golden controller reads and writes it as documented."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ahasd.cli import regmap as regmap_cli
from ahasd.golden.top import GoldenTop
from ahasd.params import EDCParams, GTSUParams, TopParams, TVCParams
from ahasd.regmap import ADDR_BITS, DATA_BITS, register_map

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


@pytest.mark.parametrize(
    "params",
    [TopParams(), TopParams(tvc=TVCParams(depth=64), gtsu=GTSUParams(ranks=32))],
    ids=["default", "widest"],
)
def test_map_is_well_formed(params):
    regs = register_map(params)
    addresses = [reg.address for reg in regs]
    assert len(set(addresses)) == len(addresses)
    assert all(0 <= a < 1 << ADDR_BITS for a in addresses)
    for reg in regs:
        assert reg.access in ("RO", "RW", "W1P")
        assert 1 <= reg.width <= DATA_BITS, reg.name
        assert 0 <= reg.reset < 1 << reg.width, reg.name
    assert len([r for r in regs if r.name.startswith("TVC_NVCT_")]) == params.tvc.depth


def test_documented_addresses():
    # Spot checks of the layout docs/top.md describes (word addresses).
    regs = register_map()
    assert regs.get("ID").address == 0x00
    assert regs.get("EDC_HMAX").address == 0x10
    assert regs.get("TVC_NVCT_0").address == 0x40
    assert regs.get("TVC_PDCT_3").address == 0x83
    assert regs.get("TVC_PVCT_1").address == 0xC1
    assert regs.get(0x30).name == "GTSU_DLM_MASK"
    with pytest.raises(KeyError, match="no register at address 0x05"):
        regs.get(0x05)


def test_rejects_fields_wider_than_the_bus():
    with pytest.raises(ValueError, match=r"^tvc.ratio_bits must be at most 32 .*, not 48$"):
        register_map(TopParams(tvc=TVCParams(ratio_bits=48)))
    with pytest.raises(ValueError, match=r"^edc.stats_bits must be at most 32 .*, not 33$"):
        register_map(TopParams(edc=EDCParams(stats_bits=33)))
    with pytest.raises(TypeError, match=r"^params must be a TopParams, not 1$"):
        register_map(1)


def test_golden_controller_register_semantics():
    golden = GoldenTop()
    for reg in golden.regmap:
        assert golden.reg_read(reg.name) == (reg.reset if reg.readable else 0), reg.name
    # Writes keep the register's width; N_max saturates; RO ignores; 0 Hmax is an error.
    golden.reg_write("GTSU_T_OFF", 0xFFFF_F402)
    assert golden.reg_read(0x32) == 2
    golden.reg_write("TVC_N_MAX", 1000)
    assert golden.reg_read("TVC_N_MAX") == 255
    golden.reg_write("ID", 0)
    assert golden.reg_read("ID") == 0x41485344
    golden.reg_write("EDC_HMAX", 0)
    assert golden.reg_read("EDC_HMAX") == 40960
    assert golden.reg_read("ERROR") == 1
    golden.reg_write("SOFT_RESET", 1)
    assert golden.reg_read("ERROR") == 0
    # NCR counts PIM cycles from the NPU_START's acceptance cycle.
    golden.tvc_npu_start(64)
    for _ in range(10):
        golden.step(want_draft=False)
    assert golden.reg_read("TVC_NCR") == 10


def test_regmap_is_an_ahasd_subcommand():
    from ahasd.cli import COMMAND_MODULES

    assert "ahasd.cli.regmap" in COMMAND_MODULES
