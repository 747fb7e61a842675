"""Arithmetic structures for short critical paths (``docs/hardware.md``, "Timing").

Yosys builds every ``+``, ``-`` and comparison as its own carry-propagate adder, and a
product as a chain of them. Where several of those are chained on a critical path, these
helpers build the sum in carry-save form instead (rows of full adders, a Wallace tree: a
constant few gate levels per row, whatever the width) and propagate a carry once, at the end.

Every intermediate row is a named signal: Amaranth expressions are trees, and a row used by
the next full-adder row three times over would otherwise be written out three times, level
after level. Every arithmetic operator sees operands of equal width (lint-clean Verilog).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal, Value, signed

__all__ = [
    "at_least",
    "at_least_sum",
    "carry_save",
    "decoded",
    "equals",
    "partial_products",
    "product",
    "sum_of",
    "widen",
    "widened",
]


def widened(m: Module, value, width: int, name: str) -> Signal:
    """A ``width``-bit signal holding ``value`` (zero-extended or truncated)."""
    signal = Signal(width, name=name)
    m.d.comb += signal.eq(value)
    return signal


def carry_save(m: Module, operands, width: int, name: str) -> tuple[Signal, Signal]:
    """Two signals whose sum equals the sum of ``operands`` modulo ``2**width``.

    Operands are unsigned (zero-extended, or truncated, to ``width`` bits). Full-adder rows
    take three operands to two until two are left: about ``log1.5(n)`` rows of two gate
    levels each, independent of ``width``.
    """
    rows = [widened(m, operand, width, f"{name}_in{i}") for i, operand in enumerate(operands)]
    level = 0
    while len(rows) > 2:
        reduced = []
        while len(rows) >= 3:
            a, b, c = rows.pop(0), rows.pop(0), rows.pop(0)
            index = len(reduced) // 2
            total = widened(m, a ^ b ^ c, width, f"{name}_l{level}s{index}")
            carry = (a & b) | (a & c) | (b & c)
            shifted = widened(
                m, Cat(Const(0, 1), carry[: width - 1]), width, f"{name}_l{level}c{index}"
            )
            reduced += [total, shifted]
        rows = reduced + rows
        level += 1
    while len(rows) < 2:
        rows.append(widened(m, 0, width, f"{name}_zero{len(rows)}"))
    return rows[0], rows[1]


def sum_of(m: Module, operands, width: int, name: str) -> Signal:
    """The sum of ``operands`` modulo ``2**width``: carry-save rows, one carry propagation.

    With fewer than three operands a zero joins them, so that the final adder's operands are
    full-adder outputs of ``width`` bits (equal widths in the Verilog, see the module doc).
    """
    operands = list(operands)
    while len(operands) < 3:
        operands.append(Const(0, width))
    total, carry = carry_save(m, operands, width, name)
    return widened(m, total + carry, width, f"{name}_result")


def partial_products(multiplicand, multiplier) -> list[Value]:
    """The rows of ``multiplicand * multiplier``: ``multiplicand << i`` where bit ``i`` of
    ``multiplier`` is set, zero elsewhere (unsigned, ``len(a) + len(b)`` bits each)."""
    multiplicand = Value.cast(multiplicand)
    multiplier = Value.cast(multiplier)
    width = len(multiplicand) + len(multiplier)
    rows = []
    for i in range(len(multiplier)):
        shifted = Cat(Const(0, i), multiplicand, Const(0, width - i - len(multiplicand)))
        rows.append(shifted & multiplier[i].replicate(width))
    return rows


def product(m: Module, a, b, name: str) -> Signal:
    """``a * b``, unsigned, ``len(a) + len(b)`` bits: carry-save rows, one carry propagation."""
    width = len(Value.cast(a)) + len(Value.cast(b))
    return sum_of(m, partial_products(a, b), width, name)


def at_least_sum(m: Module, value, operands, name: str) -> Signal:
    """``value >= sum(operands)`` for unsigned values, with one carry propagation.

    ``value - sum(operands)`` is formed in two's complement, wide enough never to overflow:
    the operands' carry-save pair ``(s, c)`` and ``value`` go through one more full-adder row
    as ``value + ~s + ~c + 2``, and the sign of the result is the answer.
    """
    value = Value.cast(value)
    operands = [Value.cast(operand) for operand in operands]
    largest_sum = sum((1 << len(operand)) - 1 for operand in operands)
    # Room for the value, the largest sum and a sign bit.
    width = max(len(value), largest_sum.bit_length()) + 2
    total, carry = carry_save(m, operands, width, f"{name}_sum")
    low, high = carry_save(m, [value, ~total, ~carry, Const(2, width)], width, f"{name}_diff")
    difference = widened(m, low + high, width, f"{name}_difference")
    result = Signal(name=name)
    m.d.comb += result.eq(~difference[width - 1])
    return result


def widen(m: Module, value, width: int) -> Signal:
    """``value`` zero- or sign-extended to ``width`` bits in a wire of its own, so that both
    operands of an add have the same width (Verilator's lint wants that, and the synthesiser
    narrows them back). Call it inside the ``m.If`` that uses it: the assignment is then
    conditional and the wire reaches the Verilog (0 outside the condition); an
    unconditional one is folded back into a narrow operand."""
    value = Value.cast(value)
    if width < len(value):
        raise ValueError(f"cannot extend {len(value)} bits to {width}")
    wide = Signal(signed(width) if value.shape().signed else width)
    m.d.comb += wide.eq(value)
    return wide


def decoded(m: Module, value, *members) -> Signal:
    """A bit that is high while ``value`` (an enum-shaped signal) is one of ``members``,
    decoded by a ``Switch`` with a ``Default``. A ``==`` against an enum member reaches the
    Verilog as a constant narrower than the signal (or as ``!`` for code 0), which
    Verilator's lint reports; case patterns keep the full width."""
    flag = Signal()
    with m.Switch(value):
        with m.Case(*members):
            m.d.comb += flag.eq(1)
        with m.Default():
            m.d.comb += flag.eq(0)
    return flag


def equals(value, constant: int):
    """``value == constant`` as an AND of bits (no operand-width mismatch in the Verilog)."""
    return Cat(*(value[i] if (constant >> i) & 1 else ~value[i] for i in range(len(value)))).all()


def at_least(a, b):
    """``a >= b`` for unsigned values of any widths, comparing equal widths only."""
    if len(a) > len(b):
        return a[len(b) :].any() | (a[: len(b)] >= b)
    if len(a) < len(b):
        return ~b[len(a) :].any() & (a >= b[: len(a)])
    return a >= b
