"""The register accesses the top's monitor rebuilds from the AXI4-Lite port alone
(:class:`ahasd.hw.tb.top.RegisterAccesses`), on hand-written port traces with the timing
``docs/integration.md`` states: an access presented in cycle 1 after its handshake in cycle
0, decoded in cycle 1, taken at the end of cycle 2 (later while a write waits for a block),
its response valid from the next cycle."""

from __future__ import annotations

import pytest

from ahasd.hw.tb.top import RegisterAccesses

PINS = (
    "awvalid", "awready", "awaddr", "wvalid", "wready", "wdata", "wstrb", "bvalid", "bresp",
    "arvalid", "arready", "araddr", "rvalid", "rdata", "rresp",
)  # fmt: skip
IDLE = dict.fromkeys(PINS, 0) | {"awready": 1, "wready": 1, "arready": 1}


class FakePin:
    def __init__(self, bus: FakeBus, name: str) -> None:
        self.bus, self.name = bus, name

    def read(self) -> int:
        return self.bus.now[self.name]


class FakeBus:
    """The AXI port's signals of one cycle at a time (``now``), as ``RegisterPort`` pins."""

    def __init__(self) -> None:
        self.now = dict(IDLE)
        for name in PINS:
            setattr(self, name, FakePin(self, name))


def run(cycles: list[dict]) -> list[tuple]:
    """``(read, read_answer, write)`` per cycle of ``cycles`` (changes from idle)."""
    bus = FakeBus()
    accesses = RegisterAccesses(bus)
    seen = []
    for changes in cycles:
        bus.now = IDLE | changes
        seen.append(accesses.sample())
    return seen


HELD_READ = {"arready": 0}
HELD_WRITE = {"awready": 0, "wready": 0}


def test_a_read_is_taken_two_cycles_after_its_handshake_and_answered_the_next():
    seen = run(
        [
            {"arvalid": 1, "araddr": 0x104},  # cycle 0: the AR handshake
            HELD_READ,  # cycle 1: presented, decoded
            HELD_READ,  # cycle 2: taken at its end
            {"rvalid": 1, "rdata": 0xCAFE, "rresp": 0},  # cycle 3: the R handshake
            {},
        ]
    )
    assert seen == [
        (None, None, None),
        (None, None, None),
        (0x41, None, None),
        (None, (0xCAFE, 0), None),
        (None, None, None),
    ]


def test_a_write_is_seen_at_its_response_with_the_beat_the_bridge_took():
    seen = run(
        [
            # cycle 0: AW and W together; the manager changes WDATA afterwards
            {"awvalid": 1, "awaddr": 0x20C, "wvalid": 1, "wdata": 0x1234_5678, "wstrb": 0b0110},
            HELD_WRITE | {"wdata": 0xFFFF_FFFF, "wstrb": 0xF},
            HELD_WRITE,  # cycle 2: decoded, but the block behind the register waits
            HELD_WRITE,  # cycle 3: taken at its end
            {"bvalid": 1, "bresp": 2},  # cycle 4: refused (SLVERR)
            {},
        ]
    )
    assert [cycle[2] for cycle in seen] == [None] * 4 + [(0x83, 0x1234_5678, 0b0110, 2), None]
    assert all(read is None and answer is None for read, answer, _ in seen)


def test_a_write_and_a_read_held_together_go_in_turn_each_with_its_decode_cycle():
    # Both handshakes in cycle 0: the bridge presents the read first (it alternates,
    # starting with reads), then the write, which needs a decode cycle of its own.
    seen = run(
        [
            {"awvalid": 1, "wvalid": 1, "arvalid": 1, "araddr": 0x8, "wdata": 7, "wstrb": 1},
            HELD_WRITE | HELD_READ,  # cycle 1: the read presented and decoded
            HELD_WRITE | HELD_READ,  # cycle 2: the read taken
            HELD_WRITE | {"rvalid": 1, "rdata": 9},  # cycle 3: the write presented, decoded
            HELD_WRITE,  # cycle 4: the write taken
            {"bvalid": 1},
        ]
    )
    assert [cycle[0] for cycle in seen] == [None, None, 0x2, None, None, None]
    assert seen[3][1] == (9, 0)
    assert [cycle[2] for cycle in seen] == [None] * 5 + [(0, 7, 1, 0)]


def test_an_r_response_that_no_read_was_taken_for_fails():
    with pytest.raises(AssertionError, match="cycle 1: an R response with no read taken"):
        run([{}, {"rvalid": 1}])


def test_a_read_taken_with_no_r_response_after_it_fails():
    with pytest.raises(AssertionError, match="cycle 3: a read without R"):
        run([{"arvalid": 1}, HELD_READ, HELD_READ, HELD_READ])


def test_a_b_response_with_no_write_decoded_fails():
    with pytest.raises(AssertionError, match="cycle 2: a B response with no write presented"):
        run([{"awvalid": 1, "wvalid": 1}, HELD_WRITE, {"bvalid": 1}])
