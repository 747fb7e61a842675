"""Integer access to the simulated design's signals with the fewest Python steps.

cocotb's ``handle.value`` builds a ``LogicArray`` (a ``Range``, a string of bits) on every
read, about 2 us, and range-checks and dispatches every write, about 3 us; a testbench that
samples a dozen ports per cycle spends more there than the simulator spends on the cycle
(``docs/performance.md``). A :class:`Pin` calls the simulator interface behind the handle
directly: about 0.15 us a read on a two-state simulator, 0.5 us on a four-state one, under a
microsecond a write, with the same results.

What stays as cocotb does it:

- a four-state simulator (Icarus) reads through the bit string, so ``X`` or ``Z`` raises
  ``ValueError`` as ``int(handle.value)`` does; Verilator has neither;
- a write out of range raises ``ValueError``;
- writes go to the simulator directly only where cocotb itself does so (the runner sets
  ``COCOTB_TRUST_INERTIAL_WRITES=1`` for Verilator), as inertial deposits; elsewhere they
  go through ``handle.value``, which schedules them. A testbench that drives every input
  right after the falling edge of its domain's clock may make them immediate instead
  (:func:`write_immediately`): Verilator then evaluates the model once per such time step,
  not twice (the inertial writes are applied only after a first evaluation).

The simulator interface is cocotb's ``handle._handle`` (not public API; ``cocotb~=2.1`` is
pinned). ``tests/harness/test_library.py`` checks reads and writes against ``handle.value``.
"""

from __future__ import annotations

import os
from typing import Any

import cocotb

__all__ = ["Pin", "pins", "write_immediately", "writes_scheduled"]

#: cocotb's action codes: a plain (inertial) deposit, and a write applied at once.
_DEPOSIT = 0
_NO_DELAY = 3
#: The action of every Pin write in this process (:func:`write_immediately`).
_write_action = _DEPOSIT


def write_immediately(enabled: bool = True) -> None:
    """Apply every Pin write of this simulator process at once (``vpiNoDelay``), or, with
    ``enabled`` False, inertially again.

    Only for a testbench whose every Pin write happens in the writable phase after the
    falling edge of the clock of the input's domain (:mod:`ahasd.hw.tb.clocking`), the
    project's discipline: the write then changes the input before the model evaluates that
    time step, as an inertial deposit would after a first evaluation that changes nothing.
    A write in a time step where a clock that samples the input rises would be seen by that
    edge, which an inertial one is not: never for an input of another clock domain, which a
    synchronised design samples only through its own domain's registers.
    """
    global _write_action
    _write_action = _NO_DELAY if enabled else _DEPOSIT


def _two_state() -> bool:
    return "verilator" in cocotb.SIM_NAME.lower()


def writes_scheduled() -> bool:
    """Whether Pin writes go through cocotb's scheduled writes (``handle.value``), which
    only cocotb's scheduler applies (a four-state simulator such as Icarus), rather than to
    the simulator directly."""
    return not _writes_at_once()


def _writes_at_once() -> bool:
    return os.environ.get("COCOTB_TRUST_INERTIAL_WRITES") == "1"


class Pin:
    """One signal of the design, read and written as an unsigned integer.

    Parameters
    ----------
    handle : the cocotb handle of a port or register (a vector or a single bit).

    Attributes
    ----------
    handle : the cocotb handle, for everything else (``value_change``, names, waves).
    width : int
    read : () -> int
        The signal's value (unsigned).
    fingerprint : () -> int | str
        A read that tells two values of the signal apart without converting them: the
        simulator's integer where :attr:`read` is one, else its bit string (a wide signal's
        read builds an integer from the string; comparing snapshots needs only equality).
    write : (int) -> None
        Deposit an unsigned value (inputs; registers only where the design allows it).
    """

    __slots__ = ("fingerprint", "handle", "max", "raw", "read", "width", "write")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.raw = handle._handle  # the simulator object behind the handle (module docstring)
        self.width = len(handle)
        self.max = (1 << self.width) - 1
        if _two_state() and self.width < 32:
            self.read = self.raw.get_signal_val_long
            self.fingerprint = self.read
        elif _two_state() and self.width == 32:
            # The simulator gives a 32-bit value as a signed C long: masked, it is the value
            # (a fifth of the bit string's cost); wider ones need the bits.
            self.read = self._read_word
            self.fingerprint = self.raw.get_signal_val_long
        else:
            self.read = self._read_bits
            self.fingerprint = self.raw.get_signal_val_binstr
        if not _writes_at_once():
            self.write = self._write_scheduled
        elif self.width <= 32:
            self.write = self._write_int
        else:
            self.write = self._write_bits

    def _read_word(self) -> int:
        return self.raw.get_signal_val_long() & 0xFFFF_FFFF

    def _read_bits(self) -> int:
        return int(self.raw.get_signal_val_binstr(), 2)

    def _check(self, value: int) -> None:
        if not 0 <= value <= self.max:
            raise ValueError(f"{value!r} does not fit the {self.width}-bit {self.handle._name}")

    def _write_int(self, value: int) -> None:
        if not 0 <= value <= self.max:
            self._check(value)
        self.raw.set_signal_val_int(_write_action, value)

    def _write_bits(self, value: int) -> None:
        if not 0 <= value <= self.max:
            self._check(value)
        self.raw.set_signal_val_binstr(_write_action, format(value, f"0{self.width}b"))

    def _write_scheduled(self, value: int) -> None:
        self._check(value)
        self.handle.value = value


def pins(dut: Any, *names: str) -> tuple[Pin, ...]:
    """:class:`Pin` s of ``dut``'s signals ``names``, in that order."""
    return tuple(Pin(getattr(dut, name)) for name in names)
