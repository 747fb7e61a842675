"""The controller top's register accesses seen twice: rebuilt from its AXI4-Lite port (the
monitor's :class:`~ahasd.hw.tb.top.RegisterAccesses`) and at the register file's access port
inside the top; the two must agree edge by edge.

Used by the top's integration testbench (``tests/top/tb_top.py``, on request) and the SoC
testbench of the firmware (``tests/firmware/tb_firmware.py``). Needs the generated Verilog
of the top (the mutation campaign's flattened netlist has no access port).
"""

from __future__ import annotations

from ahasd.hw.axi_lite import Resp
from ahasd.hw.tb.pins import Pin
from ahasd.hw.tb.top import PimCycle

OKAY = Resp.OKAY.value


class AccessCrossCheck:
    """The monitor's register accesses (rebuilt from the AXI port) against the register
    file's access port inside the top (``registers.access__*``), edge by edge.

    Each side lists ``(pim cycle the access is taken at, write, word address, WDATA, WSTRB,
    RDATA, refused)`` (WDATA/WSTRB 0 for a read, RDATA 0 for a write or a refused read).
    """

    def __init__(self, dut) -> None:
        regs = dut.registers
        self._valid, self._ready = Pin(regs.access__valid), Pin(regs.access__ready)
        self._fields = tuple(
            Pin(getattr(regs, f"access__{name}"))
            for name in ("write", "addr", "wdata", "wstrb", "rdata", "error")
        )
        self.inside: list[tuple] = []
        self.port: list[tuple] = []
        self._read: tuple[int, int] | None = None  # (cycle, word) waiting for its R response

    def sample(self, cycle: int, sample: PimCycle) -> None:
        """Both views of pim cycle ``cycle`` (``ReadOnly``)."""
        if self._valid.read() and self._ready.read():
            write, word, wdata, wstrb, rdata, error = (pin.read() for pin in self._fields)
            if write:
                self.inside.append((cycle, True, word, wdata, wstrb, 0, bool(error)))
            else:
                self.inside.append((cycle, False, word, 0, 0, 0 if error else rdata, bool(error)))
        if sample.write is not None:
            word, wdata, wstrb, bresp = sample.write
            self.port.append((cycle - 1, True, word, wdata, wstrb, 0, bresp != OKAY))
        if sample.read_answer is not None:
            rdata, rresp = sample.read_answer
            cycle_taken, word = self._read
            self.port.append((cycle_taken, False, word, 0, 0, rdata, rresp != OKAY))
            self._read = None
        if sample.read is not None:
            self._read = (cycle, sample.read)

    def check(self) -> int:
        """Assert that both sides saw the same accesses; returns how many."""
        for number, (port, inside) in enumerate(zip(self.port, self.inside, strict=False)):
            if port != inside:
                raise AssertionError(
                    f"access {number}: rebuilt from the AXI port {port}, inside the top {inside}"
                )
        if len(self.port) != len(self.inside):
            raise AssertionError(
                f"{len(self.port)} accesses rebuilt from the AXI port, {len(self.inside)} "
                "inside the top"
            )
        return len(self.port)
