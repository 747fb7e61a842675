"""Build and run the controller's firmware on a RISC-V core in simulation (``make firmware``).

1. The controller's Verilog (``ahasd verilog``'s ``ahasd_top.v``) and C driver
   (``ahasd_driver.h``), and the tie-offs of the top's event and queue inputs
   (``ahasd_tieoff.vh``, from the top's port list).
2. The firmware (``start.S``, ``main.c`` on the driver, ``link.ld``) cross-compiled for RV32I
   with Debian's ``riscv64-unknown-elf-gcc`` (``make tools`` installs it), freestanding,
   into ``firmware.hex`` (one 32-bit word a line, for ``$readmemh``).
3. ``soc.v`` (PicoRV32 from the ``pythondata-cpu-picorv32`` wheel, RAM, a bridge to the
   controller's AXI4-Lite port) simulated by Icarus; the firmware's console lines and its
   result are read back.

Usage: ``python firmware/build.py [--out build/firmware] [--no-run]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CC = "riscv64-unknown-elf-gcc"
OBJCOPY = "riscv64-unknown-elf-objcopy"
#: Cycles after which the simulation gives up (the firmware needs about 2,500).
MAX_CYCLES = 200_000
#: The SoC's RAM (soc.v, link.ld).
RAM_BYTES = 16 * 1024
#: The ports the SoC connects; every other input of the top is tied to 0.
CONNECTED = re.compile(r"^(pim|npu|cpu)_(clk|rst)$|^s_axi__")


def missing_tools() -> list[str]:
    """The tools this flow needs that are not installed (``make tools`` installs them)."""
    return [tool for tool in (CC, OBJCOPY, "iverilog", "vvp") if shutil.which(tool) is None]


def tieoff(verilog: str, top: str) -> str:
    """``.port('0),`` for every input of ``top`` the SoC does not drive (the last without
    its comma: the include closes the instance's port list)."""
    body = verilog.split(f"module {top}(", 1)[1].split("\nendmodule", 1)[0]
    inputs = re.findall(r"^\s+input (?:\[\d+:\d+\] )?(\w+);", body, re.MULTILINE)
    lines = [f"        .{name}('0)" for name in inputs if not CONNECTED.match(name)]
    return ",\n".join(lines) + "\n"


def build_firmware(out: Path) -> Path:
    """Cross-compile the firmware; returns ``firmware.hex``."""
    from ahasd.regmap import c_driver

    (out / "ahasd_driver.h").write_text(c_driver())
    elf = out / "firmware.elf"
    command = [
        CC,
        "-march=rv32i",
        "-mabi=ilp32",
        "-Os",
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-ffreestanding",
        "-nostdlib",
        "-nostartfiles",
        f"-I{out}",
        "-T",
        str(HERE / "link.ld"),
        str(HERE / "start.S"),
        str(HERE / "main.c"),
        "-lgcc",
        "-o",
        str(elf),
    ]
    subprocess.run(command, check=True, capture_output=True, text=True)
    binary = out / "firmware.bin"
    subprocess.run([OBJCOPY, "-O", "binary", str(elf), str(binary)], check=True)
    data = binary.read_bytes()
    if len(data) > RAM_BYTES:
        raise ValueError(f"the firmware ({len(data)} bytes) does not fit the RAM ({RAM_BYTES})")
    data += bytes(RAM_BYTES - len(data))  # the whole RAM: $readmemh then fills every word
    words = [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)]
    hex_file = out / "firmware.hex"
    hex_file.write_text("".join(f"{word:08x}\n" for word in words))
    return hex_file


@dataclass(frozen=True)
class FirmwareRun:
    """What the simulated SoC printed: the console values, the cycles from each rise of irq
    to the write that answered it, the result, the cycles."""

    console: list[int]
    irq_to_answer: list[int]
    result: int | None
    cycles: int | None
    log: str


def run_soc(out: Path, hex_file: Path) -> FirmwareRun:
    """Compile the SoC with Icarus and run it until the firmware exits."""
    import pythondata_cpu_picorv32

    from ahasd.hw.blocks import lookup
    from ahasd.hw.verilog import convert, module_name

    top = module_name("top")
    text = convert(lookup("top"))
    (out / f"{top}.v").write_text(text)
    (out / "ahasd_tieoff.vh").write_text(tieoff(text, top))
    picorv32 = Path(pythondata_cpu_picorv32.data_location) / "picorv32.v"
    vvp = out / "soc.vvp"
    subprocess.run(
        [
            "iverilog",
            "-g2012",
            "-s",
            "tb",
            f'-DFIRMWARE_HEX="{hex_file}"',
            f"-DMAX_CYCLES={MAX_CYCLES}",
            f"-I{out}",
            "-o",
            str(vvp),
            str(HERE / "soc.v"),
            str(out / f"{top}.v"),
            str(picorv32),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    done = subprocess.run(["vvp", "-n", str(vvp)], capture_output=True, text=True, check=True)
    log = done.stdout
    console = [int(v) for v in re.findall(r"^FW console (\d+)$", log, re.MULTILINE)]
    answers = [int(v) for v in re.findall(r"^FW irq to answer (\d+) cycles$", log, re.MULTILINE)]
    found = re.search(r"^FW result (\d+) after (\d+) cycles$", log, re.MULTILINE)
    result, cycles = (int(found[1]), int(found[2])) if found else (None, None)
    return FirmwareRun(console, answers, result, cycles, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/firmware"))
    parser.add_argument("--no-run", action="store_true", help="build the firmware only")
    args = parser.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"missing: {', '.join(missing)} (make tools installs them)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    hex_file = build_firmware(args.out)
    print(f"firmware: {hex_file}")
    if args.no_run:
        return 0
    run = run_soc(args.out, hex_file)
    print(run.log, end="")
    return 0 if run.result == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
