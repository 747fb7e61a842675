"""AXI4-Lite subordinate, formal tier (yowasp-sby): the handshake rules for every input
sequence a manager may legally drive.

The manager's side is free (``AnySeq``) under the protocol's rules for what it drives: a
``VALID`` stays up, with its payload unchanged, until its ``READY``. The register side
(``ready``, ``rdata``, ``error``) is free in every cycle. Properties, in a wrapper that keeps
the RTL free of verification code:

- ``BVALID``/``RVALID`` and their payloads (``BRESP``; ``RDATA``, ``RRESP``) stay unchanged
  until ``BREADY``/``RREADY``;
- no answer without a request, none twice, none lost: the requests accepted and not yet
  answered are exactly the ones held (their ``READY`` low) plus the ones answered and
  waiting (``BVALID``/``RVALID`` high);
- one register access per transaction: a write access only with an address and a beat
  held, a read access only with an address held, and each answered once;
- every request is answered: with ``BREADY``, ``RREADY`` and the register side always ready,
  a held request reaches the register side within 4 cycles (bounded model checking; covers
  show the slowest case, a write and a read held at once, happens).
"""

from __future__ import annotations

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, Signal
from harness.formal import check

from ahasd.hw.axi_lite import AXI4LiteSubordinate

ADDR_BITS = 4  # two word-address bits: small state, same logic


class Properties(Elaboratable):
    """The bridge with free inputs and the properties of this module's docstring;
    ``always_ready`` assumes every ready the environment drives high and adds liveness."""

    def __init__(self, *, always_ready: bool = False):
        self.always_ready = always_ready

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = AXI4LiteSubordinate(addr_bits=ADDR_BITS)
        axi, access = dut.axi, dut.access

        def held_until_ready(valid, ready, payload, rule):
            """``rule(VALID)`` and ``rule(payload unchanged)`` in the cycle after one where
            ``VALID`` was high and ``READY`` low."""
            waiting = Signal()
            before = [Signal.like(s) for s in payload]
            m.d.sync += waiting.eq(valid & ~ready)
            m.d.sync += [b.eq(s) for b, s in zip(before, payload, strict=True)]
            with m.If(waiting):
                m.d.comb += rule(valid)
                m.d.comb += [rule(s == b) for s, b in zip(payload, before, strict=True)]

        for valid, ready, payload in (
            (axi.awvalid, axi.awready, [axi.awaddr, axi.awprot]),
            (axi.wvalid, axi.wready, [axi.wdata, axi.wstrb]),
            (axi.arvalid, axi.arready, [axi.araddr, axi.arprot]),
        ):
            m.d.comb += valid.eq(AnySeq(1))
            m.d.comb += [s.eq(AnySeq(len(s))) for s in payload]
            held_until_ready(valid, ready, payload, Assume)  # the manager's rule
        for ready in (axi.bready, axi.rready, access.ready):
            m.d.comb += ready.eq(AnySeq(1))
            if self.always_ready:
                m.d.comb += Assume(ready)
        m.d.comb += [access.rdata.eq(AnySeq(32)), access.error.eq(AnySeq(1))]

        # The subordinate's rule.
        held_until_ready(axi.bvalid, axi.bready, [axi.bresp.as_value()], Assert)
        held_until_ready(axi.rvalid, axi.rready, [axi.rdata, axi.rresp.as_value()], Assert)

        # Balances: requests accepted minus responses given (a few signed bits, bounded by
        # the properties themselves, so k-induction needs no counter that could wrap).
        def balance(up, down):
            value = Signal(range(-4, 4))
            m.d.sync += value.eq(value + up - down)
            return value

        b_taken = axi.bvalid & axi.bready
        r_taken = axi.rvalid & axi.rready
        taken = access.valid & access.ready
        aw_open = balance(axi.awvalid & axi.awready, b_taken)
        w_open = balance(axi.wvalid & axi.wready, b_taken)
        ar_open = balance(axi.arvalid & axi.arready, r_taken)
        write_accesses = balance(taken & access.write, b_taken)
        read_accesses = balance(taken & ~access.write, r_taken)
        m.d.comb += [
            Assert(aw_open == (~axi.awready).as_unsigned() + axi.bvalid),
            Assert(w_open == (~axi.wready).as_unsigned() + axi.bvalid),
            Assert(ar_open == (~axi.arready).as_unsigned() + axi.rvalid),
            Assert(write_accesses == axi.bvalid),
            Assert(read_accesses == axi.rvalid),
        ]
        with m.If(taken & access.write):
            m.d.comb += [Assert(~axi.awready), Assert(~axi.wready), Assert(~axi.bvalid)]
        with m.If(taken & ~access.write):
            m.d.comb += [Assert(~axi.arready), Assert(~axi.rvalid)]

        if self.always_ready:
            write_wait, read_wait = Signal(4), Signal(4)
            write_held = ~axi.awready & ~axi.wready
            read_held = ~axi.arready
            m.d.sync += [
                write_wait.eq(Mux(write_held, write_wait + 1, 0)),
                read_wait.eq(Mux(read_held, read_wait + 1, 0)),
            ]
            m.d.comb += [Assert(write_wait < 4), Assert(read_wait < 4)]
            m.d.comb += [
                Cover(write_wait == 2),
                Cover(read_wait == 2),
                Cover(b_taken & axi.arvalid & axi.arready),
            ]
        return m


@pytest.mark.formal
def test_handshake_rules_proved():
    """k-induction: the rules hold in every reachable state."""
    check(Properties(), name="axi_lite_handshake", mode="prove", depth=8)


@pytest.mark.formal
def test_every_request_is_answered():
    check(Properties(always_ready=True), name="axi_lite_liveness", mode="bmc", depth=20)


@pytest.mark.formal
def test_slowest_answers_are_reachable():
    check(Properties(always_ready=True), name="axi_lite_cover", mode="cover", depth=12)
