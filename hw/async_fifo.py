"""An asynchronous FIFO whose writer's reset reaches the reader by a handshake.

:class:`HandshakeAsyncFIFO` is Amaranth's :class:`amaranth.lib.fifo.AsyncFIFO` (the same
interface, pointers, synchronisers and signal names; its design is style 2 of Cummings,
"Simulation and Synthesis Techniques for Asynchronous FIFO Design", SNUG 2002) with one
change: how the writer's reset empties the reader's side.

``AsyncFIFO`` empties its reader's side by setting the reader's pointer to the writer's as
it arrives through the pointer synchroniser, for as long as the writer's reset, brought into
the reader's clock by an async-assert, sync-release synchroniser, holds: until two
read-clock edges after the reset's release. That is wrong twice over:

- a reset shorter than about two read-clock periods is released in the reader before the
  writer's reset pointer has crossed, so the reader's pointer stays at the writer's old one
  and the queue presents entries never written since (up to ``2 * depth - 1``);
- an entry written within those two read-clock edges after the release crosses while the
  reader still copies the writer's pointer: it is taken as read and lost, with ``w_rdy``
  high when it was written.

Here the writer's reset sets a request, a register of the writer's domain that is not itself
reset, which the reader acknowledges through a two-flop synchroniser and the writer sees
back through another: the request holds the writer's side in reset (pointers, levels,
``w_rdy`` low) and drives the reader's reset synchroniser with the writer's reset, so the
reader's side is reset until two read-clock edges after the request's release, long after
the writer's reset pointer crossed; and ``w_rdy`` stays low until the release has been
acknowledged too, by when the reader has left its reset. A four-phase handshake: after a
writer's reset ``w_rdy`` is low for about four edges of each clock more than the reset.
Power-up, with every handshake register at its initial 0, needs no handshake (the pointers
start equal, as in ``AsyncFIFO``). A reset during a handshake extends it: the writer is held
off throughout, so no entry is ever written between the two.

No clock is derived: both sides run on the domains' own clocks (a clock passed through an
assignment would let a testbench that drives at the clock edge race the FIFO's registers).

The code follows ``amaranth/lib/fifo.py`` (Amaranth HDL contributors, BSD-2-Clause) line for
line except for the handshake.
"""

from __future__ import annotations

from amaranth.asserts import Initial
from amaranth.hdl import Assume, Cat, Const, Module, ResetSignal, Signal
from amaranth.lib.cdc import AsyncFFSynchronizer, FFSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.memory import Memory

__all__ = ["HandshakeAsyncFIFO"]


def _gray_encode(value):
    return value ^ value[1:]


def _gray_decode(value):
    bits, running = [None] * len(value), Const(0)
    for index in reversed(range(len(value))):
        running = running ^ value[index]
        bits[index] = running
    return Cat(*bits)


class HandshakeAsyncFIFO(AsyncFIFO):
    """``AsyncFIFO`` whose writer's reset, of any length, empties it and loses no later entry.

    Parameters and members as :class:`amaranth.lib.fifo.AsyncFIFO` (``width``, ``depth``, a
    power of two, ``r_domain``, ``w_domain``, ``exact_depth``; ``w_data``/``w_en``/``w_rdy``/
    ``w_level``, ``r_data``/``r_en``/``r_rdy``/``r_level``, ``r_rst``).

    Latency: an entry written at a write-clock edge is visible to the reader 3 to 4
    read-clock edges later. Throughput: one entry per cycle on each side. Backpressure:
    ``w_rdy`` is low while the FIFO is full and from the writer's reset until the handshake
    is done (module docstring); ``r_rdy`` is low while empty and while the reader's side is
    reset. The levels are meaningless while the writer's side is reset.
    """

    def elaborate(self, platform):
        m = Module()
        w_domain, r_domain, bits = self._w_domain, self._r_domain, self._ctr_bits

        # The reset handshake (module docstring). Reset-less, so that power-up, with all
        # of it at 0, needs no handshake.
        writer_reset = ResetSignal(w_domain)
        reset_request = Signal(reset_less=True)
        reset_ack_in_reader, reset_ack = Signal(), Signal()
        m.submodules.reset_to_reader = FFSynchronizer(
            reset_request, reset_ack_in_reader, o_domain=r_domain
        )
        m.submodules.reset_ack_to_writer = FFSynchronizer(
            reset_ack_in_reader, reset_ack, o_domain=w_domain
        )
        with m.If(writer_reset):
            m.d[w_domain] += reset_request.eq(1)
        with m.Elif(reset_ack):
            m.d[w_domain] += reset_request.eq(0)
        writer_held = Signal()
        m.d.comb += writer_held.eq(reset_request | reset_ack)

        do_write = self.w_rdy & self.w_en
        do_read = self.r_rdy & self.r_en

        produce_w_bin = Signal(bits)
        produce_w_nxt = Signal(bits)
        m.d.comb += produce_w_nxt.eq(produce_w_bin + do_write)
        m.d[w_domain] += produce_w_bin.eq(produce_w_nxt)

        # Both read-domain counters are reset-less: the writer's reset resets them (below).
        consume_r_bin = Signal(bits, reset_less=True)
        consume_r_nxt = Signal(bits)
        m.d.comb += consume_r_nxt.eq(consume_r_bin + do_read)
        m.d[r_domain] += consume_r_bin.eq(consume_r_nxt)

        produce_w_gry = Signal(bits)
        produce_r_gry = Signal(bits)
        m.submodules.produce_cdc = FFSynchronizer(produce_w_gry, produce_r_gry, o_domain=r_domain)
        m.d[w_domain] += produce_w_gry.eq(_gray_encode(produce_w_nxt))

        consume_r_gry = Signal(bits, reset_less=True)
        consume_w_gry = Signal(bits)
        m.submodules.consume_cdc = FFSynchronizer(consume_r_gry, consume_w_gry, o_domain=w_domain)
        m.d[r_domain] += consume_r_gry.eq(_gray_encode(consume_r_nxt))

        consume_w_bin = Signal(bits)
        m.d[w_domain] += consume_w_bin.eq(_gray_decode(consume_w_gry))

        produce_r_bin = Signal(bits)
        m.d.comb += produce_r_bin.eq(_gray_decode(produce_r_gry))

        w_full = Signal()
        r_empty = Signal()
        m.d.comb += [
            w_full.eq(
                (produce_w_gry[-1] != consume_w_gry[-1])
                & (produce_w_gry[-2] != consume_w_gry[-2])
                & (produce_w_gry[:-2] == consume_w_gry[:-2])
            ),
            r_empty.eq(consume_r_gry == produce_r_gry),
        ]

        m.d[w_domain] += self.w_level.eq(produce_w_bin - consume_w_bin)
        m.d.comb += self.r_level.eq(produce_r_bin - consume_r_bin)

        # The request holds the writer's side as its reset does (these assignments come
        # last, so they win).
        with m.If(reset_request):
            m.d[w_domain] += [
                produce_w_bin.eq(0),
                produce_w_gry.eq(0),
                consume_w_bin.eq(0),
                self.w_level.eq(0),
            ]

        storage = m.submodules.storage = Memory(shape=self.width, depth=self.depth, init=[])
        w_port = storage.write_port(domain=w_domain)
        r_port = storage.read_port(domain=r_domain)
        m.d.comb += [
            w_port.addr.eq(produce_w_bin[:-1]),
            w_port.data.eq(self.w_data),
            w_port.en.eq(do_write),
            self.w_rdy.eq(~w_full & ~writer_held),
        ]
        m.d.comb += [
            r_port.addr.eq(consume_r_nxt[:-1]),
            self.r_data.eq(r_port.data),
            r_port.en.eq(1),
            self.r_rdy.eq(~r_empty),
        ]

        # The reader's side is reset from the writer's reset (asynchronous assertion) until
        # two read-clock edges after the request's release.
        r_rst = Signal()
        m.submodules.rst_cdc = AsyncFFSynchronizer(
            writer_reset | reset_request, r_rst, o_domain=r_domain
        )
        with m.If(r_rst):
            m.d.comb += r_empty.eq(1)
            m.d[r_domain] += consume_r_gry.eq(produce_r_gry)
            m.d[r_domain] += consume_r_bin.eq(_gray_decode(produce_r_gry))
            m.d[r_domain] += self.r_rst.eq(1)
        with m.Else():
            m.d[r_domain] += self.r_rst.eq(0)

        if platform == "formal":
            with m.If(Initial()):
                m.d.comb += Assume(produce_w_gry == (produce_w_bin ^ produce_w_bin[1:]))
                m.d.comb += Assume(consume_r_gry == (consume_r_bin ^ consume_r_bin[1:]))

        return m
