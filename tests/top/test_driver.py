"""The C driver ``ahasd_driver.h`` (generated from the map, ``ahasd.regmap.c_driver``).

- It compiles warning-free (``-Wall -Wextra -Werror -pedantic``) as C99, C11, C++98 and
  C++11, with gcc and clang (Debian's, which ``make tools`` installs; skipped, saying so,
  without it); it uses no C11 feature.
- Compiled for RV32 at ``-O2``, freestanding, by Debian's ``riscv64-unknown-elf-gcc`` and by
  clang (``--target=riscv32-unknown-elf``: no sysroot needed, the driver includes only
  ``<stdint.h>`` and ``<stddef.h>``, which clang's resource directory has): every load and
  store of the driver is a word access (``lw``/``sw``), never a byte or half-word one.
- A host run on a fake register block (``driver/host.c``, every access logged through the
  MMIO hooks): every access is a word of the map; 64-bit registers are written low word
  then high word and read low then high; the bring-up writes what the configuration says;
  the GTSU mask changes never let the masks overlap, including a swap of every rank;
  overlapping masks are refused without a write; the interrupt service reads the causes,
  clears exactly them, reads ERROR and soft-resets the blocks that flagged, reads the
  pre-verification level.

Expectations come from the compiled map (``ahasd.regmap.register_map``), not the driver.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ahasd.regmap import c_driver, register_map

HERE = Path(__file__).resolve().parent
HOST = HERE / "driver" / "host.c"
RV32 = "riscv64-unknown-elf-gcc"
#: The RV32 compilers and their target flags (freestanding: no C library, no sysroot).
RV32_COMPILERS = {
    "gcc": (RV32, "-march=rv32imac", "-mabi=ilp32"),
    "clang": ("clang", "--target=riscv32-unknown-elf", "-march=rv32imac", "-mabi=ilp32"),
}

# Every function of the driver, so that each static inline one is compiled.
USES = r"""
#include "ahasd_driver.h"
uint32_t use_all(uintptr_t base, const ahasd_config_t *config, ahasd_irq_t *irq);
uint32_t use_all(uintptr_t base, const ahasd_config_t *config, ahasd_irq_t *irq)
{
    uint64_t ncr;
    uint32_t sum = 0u;
    sum += (uint32_t)ahasd_bring_up(base, config);
    sum += (uint32_t)ahasd_edc_configure(base, 40960u);
    sum += (uint32_t)ahasd_tvc_configure(base, 8u, config->nvct, config->pdct, config->pvct);
    sum += (uint32_t)ahasd_gtsu_set_masks(base, 0xFF00u, 0x00FFu);
    sum += (uint32_t)ahasd_gtsu_set_timers(base, 16u, 32u);
    ncr = ahasd_tvc_ncr(base);
    ahasd_write64(base, AHASD_TVC_PVCT_OFFSET(1), ncr);
    ahasd_soft_reset(base, AHASD_SOFT_RESET_EDC_MASK);
    sum += ahasd_irq_service(base, irq);
    return sum + (uint32_t)ahasd_probe(base);
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("driver")
    (folder / "ahasd_driver.h").write_text(c_driver())
    (folder / "use_all.c").write_text(USES)
    return folder


def compile_c(compiler: str, folder: Path, source: Path, *flags: str, out: Path | None = None):
    out = out or folder / "out.o"
    command = [compiler, *flags, "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{folder}"]
    command += ["-c", str(source), "-o", str(out)] if "-c" not in flags else [str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}{done.stderr}"
    return out


COMPILERS = [
    (compiler, standard)
    for compiler in ("gcc", "clang")
    for standard in ("c99", "c11", "c++98", "c++11")
]


@pytest.mark.parametrize(
    ("compiler", "standard"), COMPILERS, ids=[f"{c}-{s}" for c, s in COMPILERS]
)
def test_compiles_warning_free(driver, compiler, standard):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed: `make tools` installs Debian's")
    language = ["-x", "c++"] if standard.startswith("c++") else ["-x", "c"]
    compile_c(compiler, driver, driver / "use_all.c", *language, f"-std={standard}", "-O2")


@pytest.mark.parametrize("family", sorted(RV32_COMPILERS))
def test_rv32_accesses_are_words_only(driver, family):
    compiler, *target = RV32_COMPILERS[family]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed: `make tools` installs it")
    # Freestanding: the driver needs only the compiler's own <stdint.h> and <stddef.h>.
    flags = (*target, "-std=c99", "-O2", "-ffreestanding")
    out = driver / f"rv32-{family}.o"
    obj = compile_c(compiler, driver, driver / "use_all.c", *flags, out=out)
    objdump = shutil.which("riscv64-unknown-elf-objdump")
    if objdump is None:
        pytest.skip("riscv64-unknown-elf-objdump is not installed: `make tools` installs it")
    listing = subprocess.run(
        [objdump, "-d", "-M", "no-aliases", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    mnemonics = re.findall(r"^\s*[0-9a-f]+:\s+[0-9a-f]+\s+([a-z.]+)", listing, re.MULTILINE)
    memory = [m for m in mnemonics if re.fullmatch(r"(c\.)?[ls][bhwd]u?(sp)?", m)]
    assert memory, "no load or store found: the listing's format changed"
    assert set(memory) <= {"lw", "sw", "c.lw", "c.sw", "c.lwsp", "c.swsp"}, sorted(set(memory))


def run_host(driver: Path) -> dict[str, list[str]]:
    exe = driver / "host"
    command = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{driver}"]
    subprocess.run([*command, str(HOST), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    sections: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("# "):
            current = line[2:]
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


def accesses(lines: list[str]) -> list[tuple[str, int, int]]:
    return [(k, int(a, 16), int(v, 16)) for k, a, v in (x.split() for x in lines if x[0] in "RW")]


def test_host_run_on_a_fake_register_block(driver):
    regs = register_map()
    log = run_host(driver)
    every = [line for lines in log.values() for line in lines]
    assert "OVERLAP" not in every
    assert not [line for line in every if line.startswith("BAD")]
    # Every access is a mapped word.
    for kind, address, _ in accesses(every):
        assert regs.at(address) is not None, f"{kind} {address:#05x} is no register word"
    # 64-bit registers: low word then high word, in consecutive accesses.
    trace = accesses(every)
    for i, (kind, address, _) in enumerate(trace):
        reg, word = regs.at(address)
        if reg.words == 2:
            pair = trace[i + 1] if word == 0 else trace[i - 1]
            other = (pair[0], pair[1])
            assert other == (kind, reg.address + (4 if word == 0 else 0)), (
                f"{reg.name} word {word} not next to its other word"
            )

    bring_up = accesses(log["bring_up"])
    assert log["bring_up"][-1] == "= 0"
    assert bring_up[0][:2] == ("R", regs.get("ID").address)
    written = {}
    for kind, address, value in bring_up:
        if kind == "W":
            written[address] = value
    soft_reset = regs.get("SOFT_RESET")
    assert written[soft_reset.address] == soft_reset.write_mask
    assert written[regs.get("EDC_HMAX").address] == 40960
    assert written[regs.get("TVC_N_MAX").address] == 8
    pvct = regs.get("TVC_PVCT[2]")
    assert (written[pvct.address], written[pvct.address + 4]) == (0xB000_0002, 0x22)
    dlm, tlm = regs.get("GTSU_DLM_MASK"), regs.get("GTSU_TLM_MASK")
    assert (written[dlm.address], written[tlm.address]) == (tlm.reset, dlm.reset)
    status, enable = regs.get("IRQ_STATUS"), regs.get("IRQ_ENABLE")
    assert written[status.address] == status.write_mask
    enabled = enable.field("preverify").mask | enable.field("edc_error").mask
    assert written[enable.address] == enabled
    assert bring_up[-1][:2] == ("W", enable.address)

    # Mask changes: the final masks are the asked ones; a refused change writes nothing.
    masks = accesses(log["masks"])
    final = {a: v for k, a, v in masks if k == "W"}
    assert (final[dlm.address], final[tlm.address]) == (0x0003, 0x0004)
    assert log["masks"].count("= 0") == 3
    assert log["masks_refused"] == ["= -1"]

    assert accesses(log["ncr"]) == [
        ("R", regs.get("TVC_NCR").address, 0x89AB_CDEF),
        ("R", regs.get("TVC_NCR").address + 4, 0x12),
    ]
    assert log["ncr"][-1] == "= 1289abcdef"

    # Interrupt service: read causes, clear them, ERROR, soft reset of the TVC, the level.
    causes = status.field("preverify").mask | status.field("tvc_error").mask
    error, level = regs.get("ERROR"), regs.get("PREVERIFY_QUEUE_LEVEL")
    assert accesses(log["irq"]) == [
        ("R", status.address, causes),
        ("W", status.address, causes),
        ("R", error.address, error.field("tvc").mask),
        ("W", soft_reset.address, soft_reset.field("tvc").mask),
        ("R", level.address, 3),
    ]
    reset_tvc = soft_reset.field("tvc").mask
    assert log["irq"][-1] == f"= {causes:x} {causes:x} {error.field('tvc').mask:x} {reset_tvc:x} 3"

    # Refused without a write: Hmax 0; a bring-up with overlapping masks (after the probe);
    # a block that is not the controller.
    probe = [f"R {regs.get(n).address:03x} {regs.get(n).reset:08x}" for n in ("ID", "VERSION")]
    assert log["refused"] == [
        "= -1",
        *probe,
        "= -2",
        f"R {regs.get('ID').address:03x} 00000000",
        "= -1",
    ]
