"""The testbench library's pure parts (no simulator): payload packing, the checker pieces
and the top driver's argument checks. Expected bit patterns are worked out by hand."""

from __future__ import annotations

import pytest
from amaranth.hdl import signed
from amaranth.lib import data, enum

from ahasd.hw.tb.checker import ErrorLog, InOrderChecker
from ahasd.hw.tb.streams import decode, encode, pack, unpack
from ahasd.hw.tb.top import ControllerTopDriver

PAIR = data.StructLayout({"low": 3, "high": 5})  # low in bits 0-2, high in bits 3-7


class Kind(enum.Enum, shape=2):
    A = 1
    B = 2


def test_pack_places_fields_lsb_first_and_unpack_inverts_it():
    assert pack(PAIR, {"low": 5, "high": 2}) == 0b00010_101
    assert unpack(PAIR, 0b00010_101) == {"low": 5, "high": 2}


def test_pack_rejects_a_field_that_does_not_fit():
    with pytest.raises(ValueError, match="field high=32 does not fit 5 bits"):
        pack(PAIR, {"low": 0, "high": 32})


def test_decode_sign_extends_signed_fields_only():
    layout = data.StructLayout({"n": 4, "c": signed(4)})
    assert decode(layout, 0b1111_1111) == {"n": 15, "c": -1}
    assert decode(layout, 0b0111_1000) == {"n": 8, "c": 7}
    assert unpack(layout, 0b1111_1111) == {"n": 15, "c": 15}


def test_encode_nests_structs_unions_and_enums():
    layout = data.StructLayout(
        {
            "op": Kind,
            "args": data.UnionLayout(
                {"x": data.StructLayout({"a": 2, "b": 3}), "y": data.StructLayout({"c": 4})}
            ),
        }
    )
    # op in bits 0-1, the union from bit 2: x.a bits 2-3, x.b bits 4-6; y.c bits 2-5.
    assert encode(layout, {"op": Kind.B, "args": {"x": {"a": 3, "b": 5}}}) == 0b101_11_10
    assert encode(layout, {"op": Kind.A, "args": {"y": {"c": 9}}}) == 0b1001_01
    assert encode(layout, {"op": Kind.A}) == 0b01


def test_in_order_checker_reports_mismatch_surprise_and_leftovers():
    cycle = [7]
    errors = ErrorLog(lambda: f"cycle {cycle[0]}")
    checker = InOrderChecker("answer", errors)
    checker.expect(1)
    checker.expect(2)
    checker.check(1)
    assert not errors
    checker.check(3)
    cycle[0] = 9
    checker.check(4)
    assert errors.messages == ["cycle 7: answer: RTL 3, golden 2", "cycle 9: unexpected answer 4"]
    checker.expect(5)
    assert checker.pending == 1
    assert checker.checked == 3


def test_error_log_keeps_the_first_messages_only():
    errors = ErrorLog(lambda: "here", limit=2)
    for n in range(5):
        errors.add(str(n))
    assert errors.messages == ["here: 0", "here: 1"]


def test_top_driver_rejects_clock_periods_that_miss_a_domain():
    driver = ControllerTopDriver.__new__(ControllerTopDriver)  # no simulator: no handles
    with pytest.raises(
        ValueError, match=r"periods_ps must name the domains \('cpu', 'npu', 'pim'\)"
    ):
        driver.start_clocks({"pim": 1250, "npu": 1000})
