"""Build the controller's firmware and the SoC that runs it in simulation.

1. The firmware (``start.S``, ``main.c`` on the C driver ``ahasd_driver.h``, ``link.ld``)
   cross-compiled for RV32I with Debian's ``riscv64-unknown-elf-gcc`` (``make tools``
   installs it), freestanding, into ``firmware.hex`` (one 32-bit word a line, the whole RAM,
   for ``$readmemh``). ``planted`` builds it with a planted fault (``main.c``,
   ``AHASD_PLANTED_FAULT``), for the test that shows the testbench catches it.
2. The SoC's Verilog (:func:`soc_verilog`): ``soc.v`` with every event and queue port of the
   controller top, but the pre-verification queue's writer (the firmware's), made a port of
   the SoC, for the testbench's NPU and PIM sides.

``tests/firmware/test_firmware.py`` runs the SoC (PicoRV32 from the
``pythondata-cpu-picorv32`` wheel, the top's Verilog, the firmware) under cocotb
(``tests/firmware/tb_firmware.py``); ``make firmware`` runs that test.

Usage: ``python firmware/build.py [--out build/firmware] [--planted]`` (the firmware only).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CC = "riscv64-unknown-elf-gcc"
OBJCOPY = "riscv64-unknown-elf-objcopy"
#: The SoC's RAM (soc.v, link.ld).
RAM_BYTES = 16 * 1024
#: Ports of the top the SoC itself drives or reads (clocks, resets, the bus, the interrupt,
#: the pre-verification queue's writer); every other one becomes a port of the SoC.
SOC_DRIVEN = re.compile(r"^(pim|npu|cpu)_(clk|rst)$|^s_axi__|^irq$|^preverify_w")
#: The SoC's top module.
SOC_TOP = "ahasd_soc"


def missing_tools() -> list[str]:
    """The tools this flow needs that are not installed (``make tools`` installs them)."""
    return [tool for tool in (CC, OBJCOPY) if shutil.which(tool) is None]


def build_firmware(out: Path, *, batch_id_bits: int, planted: bool = False) -> Path:
    """Cross-compile the firmware into ``out``; returns ``firmware.hex``.

    ``batch_id_bits`` is the width of a queue entry's batch id (``QueueParams``): the
    firmware packs a pre-verification order as the queue's layout has it, the batch id in
    the low bits and the token count above.
    """
    from ahasd.regmap import c_driver

    out.mkdir(parents=True, exist_ok=True)
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
        f"-DAHASD_BATCH_ID_BITS={batch_id_bits}u",
        *(["-DAHASD_PLANTED_FAULT"] if planted else []),
        f"-I{out}",
        "-T",
        str(HERE / "link.ld"),
        str(HERE / "start.S"),
        str(HERE / "main.c"),
        "-lgcc",
        "-o",
        str(elf),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)}\n{done.stdout}{done.stderr}")
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


def top_ports(verilog: str, top: str) -> list[tuple[str, int, str]]:
    """``(direction, width, name)`` of every port of module ``top`` in the Verilog text."""
    body = verilog.split(f"module {top}(", 1)[1].split("\nendmodule", 1)[0]
    found = re.findall(r"^\s+(input|output) (?:reg |wire )?(?:\[(\d+):0\] )?(\w+);", body, re.M)
    return [(direction, int(high or 0) + 1, name) for direction, high, name in found]


def soc_verilog(verilog: str, top: str) -> str:
    """``soc.v`` with the event and queue ports of module ``top`` (the controller, in the
    Verilog text ``verilog``) made ports of the SoC."""
    ports = top_ports(verilog, top)
    widths = {name: width for _, width, name in ports}
    ports = [port for port in ports if not SOC_DRIVEN.match(port[2])]
    declarations = "".join(
        f"    {direction} {f'[{width - 1}:0] ' if width > 1 else ''}{name};\n"
        for direction, width, name in ports
    )
    order_bits = widths["preverify_w__payload"]
    connections = f",\n        .preverify_w__payload(order_payload[{order_bits - 1}:0])"
    connections += "".join(f",\n        .{name}({name})" for _, _, name in ports)
    text = (HERE / "soc.v").read_text()
    text = text.replace("/*PORTS*/", "".join(f", {name}" for _, _, name in ports))
    text = text.replace("/*DECLARATIONS*/\n", declarations)
    return text.replace("/*CONNECTIONS*/", connections)


def picorv32_verilog() -> str:
    """PicoRV32's Verilog, from the ``pythondata-cpu-picorv32`` wheel."""
    import pythondata_cpu_picorv32

    return (Path(pythondata_cpu_picorv32.data_location) / "picorv32.v").read_text()


def main(argv: list[str] | None = None) -> int:
    from ahasd.params import TopParams

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/firmware"))
    parser.add_argument("--planted", action="store_true", help="with the planted fault")
    args = parser.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"missing: {', '.join(missing)} (make tools installs them)", file=sys.stderr)
        return 2
    bits = TopParams().queues.batch_id_bits
    print(f"firmware: {build_firmware(args.out, batch_id_bits=bits, planted=args.planted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
