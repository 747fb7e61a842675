"""Directed tests of the TVC golden model (spec 2.2, docs/spec-decisions.md "TVC").

Expected values are hand-computed in the comments. Default parameters: depth 4, F = 8, so
the shift in C_npu, C_d1 and the quotient is F + log2(4) = 10, and a table of four equal
ratios ``r*256`` averages to ``r`` cycles per token.
"""

from __future__ import annotations

import re

import pytest

from ahasd.golden.tvc import TABLES, TVC
from ahasd.params import TVCParams


def preset(tvc: TVC, nvct: int, pdct: int, pvct: int) -> None:
    """Fill every entry of each table with the given cycles-per-token ratio (8 fraction bits)."""
    for name, per_token in zip(TABLES, (nvct, pdct, pvct), strict=True):
        for index in range(tvc.params.depth):
            tvc.write(name, index, per_token << 8)


def test_reset_state():
    tvc = TVC()
    assert tvc.tables == {"nvct": [0] * 4, "pdct": [0] * 4, "pvct": [0] * 4}
    assert tvc.n_max == 8
    assert not tvc.error
    assert not tvc.busy
    assert tvc.ncr(0) == 0


def test_empty_tables_answer_zero():
    # All sums 0: C_npu = 0, C_d1 = 0, C_left = 0 - 0 - 0 = 0 <= 0 -> n = 0.
    tvc = TVC()
    tvc.npu_start(100, cycle=0)
    assert tvc.ask(5, cycle=0) == 0
    terms = tvc.terms(5, 0)
    assert (terms["C_npu"], terms["C_d1"], terms["C_left"], terms["quotient"]) == (0, 0, 0, None)


def test_preset_tables_worked_example():
    # NVCT 10 cycles/token: sum 10240; L_kv 100 -> 1024000 >> 10 = 1000 = C_npu.
    # PDCT 50: sum 51200 >> 10 = 50 = C_d1.  PVCT 100: sum 102400.
    tvc = TVC()
    preset(tvc, 10, 50, 100)
    tvc.npu_start(100, cycle=1000)
    terms = tvc.terms(20, 1100)
    assert terms["NCR"] == 100
    assert (terms["C_npu"], terms["C_d1"]) == (1000, 50)
    assert terms["C_left"] == 850  # 1000 - 100 - 50
    assert terms["quotient"] == 8  # (850 << 10) // 102400 = 870400 // 102400 = 8 (8.5)
    assert tvc.ask(20, cycle=1100) == 8  # min(20, 8, 8)
    assert tvc.ask(3, cycle=1100) == 3  # min(3, 8, 8)
    # NCR 500: C_left 450 -> 460800 // 102400 = 4.
    assert tvc.ask(20, cycle=1500) == 4
    # NCR 949: C_left 1 -> 1024 // 102400 = 0 -> n = 0 although C_left > 0.
    assert tvc.terms(20, 1949)["C_left"] == 1
    assert tvc.ask(20, cycle=1949) == 0
    # NCR 950: C_left 0; NCR 2000: C_left -1050 (signed, exact).
    assert tvc.ask(20, cycle=1950) == 0
    assert tvc.terms(20, 3000)["C_left"] == -1050
    assert tvc.ask(20, cycle=3000) == 0


def test_p_zero_answers_zero():
    tvc = TVC()
    preset(tvc, 10, 50, 100)
    tvc.npu_start(100, cycle=0)
    assert tvc.ask(0, cycle=0) == 0


def test_n_max_clamps():
    tvc = TVC()
    preset(tvc, 10, 50, 100)
    tvc.npu_start(100, cycle=0)
    tvc.n_max = 2
    assert tvc.ask(20, cycle=100) == 2  # min(20, 2, 8)
    tvc.n_max = 0
    assert tvc.ask(20, cycle=100) == 0
    tvc.n_max = 255
    assert tvc.ask(20, cycle=100) == 8  # NCR 100: still 8
    with pytest.raises(ValueError, match=r"^n_max must be between 0 and 255, not 256$"):
        tvc.n_max = 256


def test_n_max_above_the_quotient():
    tvc = TVC()
    preset(tvc, 10, 50, 100)
    tvc.n_max = 20
    tvc.npu_start(100, cycle=0)
    assert tvc.ask(31, cycle=0) == 9  # quotient 9 (see above) is the binding limit


def test_zero_pvct_sum_answers_min_of_p_and_n_max():
    tvc = TVC()
    preset(tvc, 10, 50, 0)
    tvc.npu_start(100, cycle=0)
    terms = tvc.terms(5, 10)
    assert terms["C_left"] == 940
    assert terms["quotient"] is None
    assert tvc.ask(5, cycle=10) == 5  # min(5, 8)
    assert tvc.ask(50, cycle=10) == 8  # min(50, 8)
    # C_left <= 0 still wins over the zero-sum rule.
    assert tvc.ask(50, cycle=950) == 0


def test_no_npu_task_answers_zero():
    tvc = TVC()
    preset(tvc, 10, 50, 100)
    assert tvc.ask(20, cycle=0) == 0  # never started
    tvc.npu_start(100, cycle=10)
    assert tvc.ask(20, cycle=10) == 8
    tvc.npu_done(cycle=20)
    assert not tvc.busy
    assert tvc.ask(20, cycle=20) == 0  # finished: nothing to hide behind


def test_ncr_across_start_and_done():
    tvc = TVC()
    tvc.npu_start(7, cycle=1000)
    assert tvc.ncr(1000) == 0
    assert tvc.ncr(1500) == 500
    tvc.npu_done(cycle=1700)
    assert tvc.ncr(2000) == 700  # frozen at the value for cycle 1700
    tvc.npu_done(cycle=2100)  # not busy: no effect
    assert tvc.ncr(2200) == 700
    tvc.npu_start(9, cycle=3000)  # restart
    assert tvc.ncr(3000) == 0
    assert tvc.ncr(3001) == 1
    tvc.npu_start(9, cycle=3005)  # a second NPU_START while busy restarts too
    assert tvc.ncr(3010) == 5
    assert tvc.l_kv == 9


def test_ncr_saturates():
    tvc = TVC(TVCParams(cycle_bits=8))
    tvc.npu_start(1, cycle=0)
    assert tvc.ncr(255) == 255
    assert tvc.ncr(10_000) == 255


def test_learn_shifts_in_newest_first():
    tvc = TVC()
    tvc.learn("pdct", 1000, 3)  # (1000 << 8) // 3 = 256000 // 3 = 85333
    assert tvc.tables["pdct"] == [85333, 0, 0, 0]
    for cycles in (2, 3, 4, 5):
        tvc.learn("pdct", cycles, 1)  # cycles << 8
    assert tvc.tables["pdct"] == [1280, 1024, 768, 512]  # 85333 fell out
    assert tvc.tables["nvct"] == [0, 0, 0, 0]


def test_learn_length_zero_is_a_protocol_error():
    tvc = TVC()
    tvc.learn("nvct", 100, 1)
    tvc.learn("nvct", 100, 0)
    assert tvc.error
    assert tvc.tables["nvct"] == [25600, 0, 0, 0]


# The first version's widths (UQ24.8 ratios, 32-bit cycles): the reduced set.
W32 = TVCParams(ratio_bits=32, cycle_bits=32)


def test_learn_saturates_ratio_at_32_bits():
    # (2**32 - 1) << 8 does not fit 32 bits: the ratio saturates at 2**32 - 1.
    tvc = TVC(W32)
    tvc.learn("pvct", 2**32 - 1, 1)
    assert tvc.tables["pvct"][0] == 2**32 - 1
    # (2**32 - 1) << 8 // 2**16 - 1 = 1099511627520 // 65535 = 16777472 fits.
    tvc.learn("pvct", 2**32 - 1, 2**16 - 1)
    assert tvc.tables["pvct"][0] == 16777472


def test_learn_at_40_bits_keeps_what_32_bits_saturated():
    # Spec 2.2: a target token on the PIM costs hundreds of ms. 300 ms at 800 MHz is
    # 240,000,000 cycles per token: 240e6 << 8 = 61,440,000,000 >= 2**32 (UQ24.8 saturates),
    # < 2**40 (UQ32.8 holds it exactly).
    cycles = 240_000_000
    narrow, wide = TVC(W32), TVC()
    narrow.learn("pvct", cycles, 1)
    wide.learn("pvct", cycles, 1)
    assert narrow.tables["pvct"][0] == 2**32 - 1
    assert wide.tables["pvct"][0] == 61_440_000_000
    # The widest LEARN at 40 bits: (2**40 - 1) << 8 needs 48 bits, saturates at 2**40 - 1.
    wide.learn("pvct", 2**40 - 1, 1)
    assert wide.tables["pvct"][0] == 2**40 - 1


def test_widest_values_saturate_c_npu_at_32_bits():
    tvc = TVC(W32)
    widest = 2**32 - 1
    for name in ("nvct", "pdct"):
        for index in range(4):
            tvc.write(name, index, widest)
    for index in range(4):
        tvc.write("pvct", index, 1)
    tvc.npu_start(2**16 - 1, cycle=0)
    terms = tvc.terms(2**16 - 1, 0)
    # sum(NVCT) * L_kv >> 10 = 4 (2**32 - 1)(2**16 - 1) >> 10
    # = (2**50 - 2**34 - 2**18 + 4) >> 10 = 2**40 - 2**24 - 2**8, far above 2**32 - 1.
    assert terms["C_npu_unsaturated"] == 2**40 - 2**24 - 2**8
    assert terms["C_npu"] == widest
    # C_d1 = (4 * 4294967295) >> 10 = 17179869180 >> 10 = 16777215.
    assert terms["C_d1"] == 16777215
    assert terms["C_left"] == widest - 16777215  # 4278190080
    # Quotient (4278190080 << 10) // 4 = 1095216660480, far above N_max.
    assert terms["quotient"] == 1095216660480
    assert terms["n"] == 8
    # NCR at its own saturation (2**32 - 1) leaves C_left = -C_d1.
    assert tvc.ask(2**16 - 1, cycle=2**40) == 0
    assert tvc.terms(1, 2**40)["C_left"] == -16777215


def test_widest_values_saturate_c_npu_at_40_bits():
    tvc = TVC()
    widest = 2**40 - 1
    for name in ("nvct", "pdct"):
        for index in range(4):
            tvc.write(name, index, widest)
    for index in range(4):
        tvc.write("pvct", index, 1)
    tvc.npu_start(2**16 - 1, cycle=0)
    terms = tvc.terms(2**16 - 1, 0)
    # 4 (2**40 - 1)(2**16 - 1) >> 10 = (2**58 - 2**42 - 2**18 + 4) >> 10
    # = 2**48 - 2**32 - 2**8, above 2**40 - 1: C_npu saturates.
    assert terms["C_npu_unsaturated"] == 2**48 - 2**32 - 2**8
    assert terms["C_npu"] == widest
    # C_d1 = 4 (2**40 - 1) >> 10 = (2**42 - 4) >> 10 = 2**32 - 1.
    assert terms["C_d1"] == 2**32 - 1
    assert terms["C_left"] == widest - (2**32 - 1)
    assert terms["n"] == 8
    # NCR saturates at 2**40 - 1 (after 23 minutes of PIM cycles): C_left = -C_d1.
    assert tvc.terms(1, 2**41)["C_left"] == -(2**32 - 1)


def test_non_default_depth_and_fraction():
    # depth 8, F = 4: shift 4 + 3 = 7. NVCT all 3<<4 = 48: sum 384; L_kv 50 -> 19200 >> 7
    # = 150. PDCT all 10<<4 = 160: sum 1280 >> 7 = 10. PVCT all 20<<4: sum 2560.
    tvc = TVC(TVCParams(depth=8, frac_bits=4))
    for index in range(8):
        tvc.write("nvct", index, 3 << 4)
        tvc.write("pdct", index, 10 << 4)
        tvc.write("pvct", index, 20 << 4)
    tvc.npu_start(50, cycle=0)
    terms = tvc.terms(31, 40)
    assert (terms["C_npu"], terms["C_d1"], terms["C_left"]) == (150, 10, 100)
    assert terms["quotient"] == 5  # (100 << 7) // 2560 = 12800 // 2560
    assert tvc.ask(31, cycle=40) == 5


TOP40 = 2**40 - 1  # the widest table entry and cycle count by default


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: t.write("xyz", 0, 1), ValueError,
         "table must be one of nvct, pdct, pvct, not 'xyz'"),
        (lambda t: t.write("nvct", 4, 1), ValueError, "index must be between 0 and 3, not 4"),
        (lambda t: t.write("nvct", 0, TOP40 + 1), ValueError,
         f"value must be between 0 and {TOP40}, not {TOP40 + 1}"),
        (lambda t: t.learn("pvct", TOP40 + 1, 1), ValueError,
         f"cycles must be between 0 and {TOP40}, not {TOP40 + 1}"),
        (lambda t: t.learn("pvct", 1, 2**16), ValueError,
         "length must be between 0 and 65535, not 65536"),
        (lambda t: t.npu_start(2**16, 0), ValueError,
         "l_kv must be between 0 and 65535, not 65536"),
        (lambda t: t.npu_start(1, -1), ValueError, "cycle must be at least 0, not -1"),
        (lambda t: t.ask(-1, 0), ValueError, "p must be between 0 and 65535, not -1"),
        (lambda t: t.ask(1, 0.5), TypeError, "cycle must be an integer, not 0.5"),
    ],
)  # fmt: skip
def test_port_values_are_validated(call, error, message):
    tvc = TVC()
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call(tvc)
    assert not tvc.error


def test_cycles_must_not_go_backwards():
    tvc = TVC()
    tvc.npu_start(1, cycle=100)
    with pytest.raises(ValueError, match=r"^cycle must not go backwards: 50 after 100$"):
        tvc.ask(1, cycle=50)
