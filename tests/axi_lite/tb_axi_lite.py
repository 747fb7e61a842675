"""cocotb testbench of the AXI4-Lite subordinate (``target.py``): four workers issue reads and
writes concurrently through a manager that pauses every channel at random.

Traffic: four workers run concurrently, so reads and writes interleave on the channels in
random order. Every channel has a random pause generator (the AW, W and AR channels do not
present their next request while paused, the B and R channels hold ``READY`` low), and the
register side stalls writes at random (the target's ``stall``, 20% of the cycles). Each
worker owns its own read/write words and keeps a model of them: every read returns what the
worker last wrote there (strobes applied), every write and read of an owned word is OKAY;
besides, reads of the read-only words return their constants, writes to them and accesses
to unmapped words are SLVERR (a refused read returns zero data). The AW/W order of every
write is counted (AW first, W first, together) and the test asserts that each happened, and
that some writes had partial strobes and some accesses were refused.

The manager behaves as cocotbext-axi's AXI4-Lite manager, which this testbench used before
(``tests/top/tb_registers.py`` still drives the same bridge, inside the top, with it): a
write's AW and W go through channel queues of their own (two waiting requests each, the
write's W queued after its AW), a read's AR likewise; a channel presents its next request
in the cycle after the last one was taken, or after it was queued, unless paused; a request
stays presented until taken; a response is taken in a cycle whose ``READY`` the channel's
pause left high; responses complete the oldest write or read in flight; a worker issues its
next transaction when the response of its last one has come. The workers draw the same
transactions from the same seeds as before, so a seed gives the same 4,000 transactions,
writes, reads, partial writes and refusals; the cycles they take and the AW/W orders differ
from the old manager's, whose channels drew the pauses in the order its coroutines woke.

How it stays fast (``docs/performance.md``, "Testbenches"): the old manager ran a dozen
coroutines per clock edge (five channels, five pause generators, the order monitor, the
stall), each reading and writing through ``handle.value``. Here one coroutine does all of
it, once per cycle, at the rising edge, as the old manager's channels did: what it reads
there is what the edge registers (cocotb runs the edge's callbacks before the simulator
evaluates the edge, and the testbench's writes, inertial deposits as a Pin makes them by
default, apply after it; a write made to apply at once would be seen by the edge itself, so
this testbench must not switch its Pins to immediate writes), and every port is
read and written through a :class:`~ahasd.hw.tb.pins.Pin`, an input only when its value
changes. A transaction is a generator that yields its request and receives its response,
so the workers' code reads as it did with ``await``. A watchdog fails the run when no
response comes for ``WATCHDOG_CYCLES`` cycles while transactions are in flight.

Environment: ``AHASD_TB_SEED``, ``AHASD_TRANSACTIONS`` (default 4,000).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Generator, Iterator
from itertools import repeat
from typing import NamedTuple

import cocotb
from axi_lite.target import READ_ONLY_BASE, READ_WRITE, WORDS
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from harness.tb import report, rng_from_env

from ahasd.hw.axi_lite import Resp
from ahasd.hw.tb.pins import Pin, pins

TRANSACTIONS = int(os.environ.get("AHASD_TRANSACTIONS", "4000"))
WORKERS = 4
CLOCK_NS = 10
NONSECURE = 0b010  # AxPROT of every request (an unprivileged, non-secure data access)
QUEUED = 2  # requests a channel holds besides the one it presents (as cocotbext-axi's)
STALL = 0.2  # share of the cycles in which the register side holds writes off
# No legal wait comes near it (pauses come in runs of at most five cycles, the bridge
# answers within a few cycles of a request), and it is far below the test's timeout.
WATCHDOG_CYCLES = 1000
RESPONSES = {code.value: code for code in Resp}  # BRESP/RRESP (Resp(code) costs more)


class Write(NamedTuple):
    """A write request of a worker: ``data`` from byte ``address`` on, within one word."""

    address: int
    data: bytes


class Read(NamedTuple):
    """A read request of a worker: the word at byte ``address`` (aligned)."""

    address: int


class WriteResponse(NamedTuple):
    resp: Resp


class ReadResponse(NamedTuple):
    data: bytes
    resp: Resp


Transaction = Generator[Write | Read, WriteResponse | ReadResponse, None]


def pauses(rng, busy: float) -> Iterator[int]:
    """A pause generator: runs of pauses (1) and go (0), ``busy`` the share of pauses."""
    while True:
        paused = rng.random() < busy
        yield from repeat(int(paused), rng.randrange(1, 6))


def worker(index: int, counts: dict[str, int], errors: list[str]) -> Transaction:
    """Worker ``index``'s transactions, each checked against its model when answered."""
    own = [w for w in range(READ_WRITE) if w % WORKERS == index]
    model = dict.fromkeys(own, 0)
    wrng = rng_from_env(f"axi-lite-{index}")
    for _ in range(TRANSACTIONS // WORKERS):
        roll = wrng.random()
        word = wrng.choice(own)
        if roll < 0.4:
            value = wrng.randrange(1 << 32)
            offset = wrng.randrange(4) if wrng.random() < 0.3 else 0
            length = wrng.randrange(1, 5 - offset) if offset or wrng.random() < 0.3 else 4
            data = value.to_bytes(4, "little")[offset : offset + length]
            response = yield Write(4 * word + offset, data)
            counts["writes"] += 1
            counts["partial"] += length < 4
            old = model[word].to_bytes(4, "little")
            model[word] = int.from_bytes(old[:offset] + data + old[offset + length :], "little")
            if response.resp != Resp.OKAY:
                errors.append(f"write word {word}: {response.resp}")
        elif roll < 0.85:
            response = yield Read(4 * word)
            counts["reads"] += 1
            got = int.from_bytes(response.data, "little")
            if (got, response.resp) != (model[word], Resp.OKAY):
                errors.append(f"read word {word}: {got:#x} {response.resp}, model {model[word]:#x}")
        elif roll < 0.9:
            ro = wrng.randrange(READ_WRITE, WORDS)
            response = yield Read(4 * ro)
            counts["reads"] += 1
            got = int.from_bytes(response.data, "little")
            if (got, response.resp) != (READ_ONLY_BASE + ro, Resp.OKAY):
                errors.append(f"read-only word {ro}: {got:#x} {response.resp}")
        else:
            refused = wrng.choice(
                [
                    ("write", wrng.randrange(READ_WRITE, WORDS)),
                    ("write", wrng.randrange(WORDS, 64)),
                    ("read", wrng.randrange(WORDS, 64)),
                ]
            )
            if refused[0] == "write":
                response = yield Write(4 * refused[1], b"\xff\xff\xff\xff")
                counts["writes"] += 1
                resp = response.resp
            else:
                response = yield Read(4 * refused[1])
                counts["reads"] += 1
                resp = response.resp
                if response.data != bytes(4):
                    errors.append(f"refused read of {refused[1]} returned {response.data!r}")
            counts["slverr"] += 1
            if resp != Resp.SLVERR:
                errors.append(f"{refused[0]} word {refused[1]}: {resp}, not SLVERR")


class RequestChannel:
    """AW, W or AR: a queue of requests (tuples of payload values) and the one presented.

    Parameters
    ----------
    dut : the design; its ports ``axi__<prefix>valid`` and ``axi__<prefix><field>``.
    prefix : ``"aw"``, ``"w"`` or ``"ar"``.
    fields : the payload's signals, in the order of a request's values.
    """

    def __init__(self, dut, prefix: str, fields: tuple[str, ...]):
        self.valid = Pin(getattr(dut, f"axi__{prefix}valid"))
        self.ready = Pin(getattr(dut, f"axi__{prefix}ready"))
        self.payload = pins(dut, *(f"axi__{prefix}{field}" for field in fields))
        self.queue: deque[tuple[int, ...]] = deque()
        self.presenting = False
        self.driven = (0,) * len(fields)  # the payload on the pins

    def quiet(self) -> None:
        """Nothing presented (before reset ends)."""
        self.valid.write(0)
        for pin in self.payload:
            pin.write(0)

    def advance(self, paused: int) -> None:
        """The next cycle, after the presented request was taken or when none is presented:
        the next request unless the channel is paused or has none; else nothing. (A request
        not taken stays presented: the caller does not call this then.)"""
        if self.queue and not paused:
            request = self.queue.popleft()
            for pin, value, driven in zip(self.payload, request, self.driven, strict=True):
                if value != driven:
                    pin.write(value)
            self.driven = request
            if not self.presenting:
                self.valid.write(1)
                self.presenting = True
        elif self.presenting:
            self.valid.write(0)
            self.presenting = False


class Manager:
    """The AXI4-Lite manager, the register side's stall and the AW/W order count, run by one
    coroutine once per cycle (module docstring)."""

    def __init__(self, dut, rng):
        self.dut = dut
        self.rng = rng
        self.aw = RequestChannel(dut, "aw", ("addr", "prot"))
        self.w = RequestChannel(dut, "w", ("data", "strb"))
        self.ar = RequestChannel(dut, "ar", ("addr", "prot"))
        self.bready, self.bvalid, self.bresp = pins(dut, "axi__bready", "axi__bvalid", "axi__bresp")
        self.rready, self.rvalid, self.rdata, self.rresp = pins(
            dut, "axi__rready", "axi__rvalid", "axi__rdata", "axi__rresp"
        )
        self.stall = Pin(dut.stall)
        # One pause generator per channel (AW, W, B, AR, R: the order the old manager set
        # them up in, so the same seed gives each channel the same share of pauses).
        self.pauses = [pauses(rng, rng.choice([0.1, 0.3, 0.5])) for _ in range(5)]
        self.write_backlog: deque[Write] = deque()  # issued, not yet in the channel queues
        self.read_backlog: deque[Read] = deque()
        self.writes_in_flight: deque[Transaction] = deque()  # oldest first
        self.reads_in_flight: deque[Transaction] = deque()
        self.aw_queued = False  # the oldest backlogged write's AW is queued, its W not yet
        self.orders = {"aw_first": 0, "w_first": 0, "together": 0}
        self.aw_first = self.w_first = False
        self.errors: list[str] = []
        self.cycle = 0

    def quiet(self) -> None:
        """Nothing presented, no response taken, no stall (before reset ends)."""
        for channel in (self.aw, self.w, self.ar):
            channel.quiet()
        for pin in (self.bready, self.rready, self.stall):
            pin.write(0)

    def issue(self, transaction: Transaction, request: Write | Read | None) -> None:
        """Put a worker's request on its way (``None``: the worker is done)."""
        if request is None:
            return
        if isinstance(request, Write):
            self.writes_in_flight.append(transaction)
            self.write_backlog.append(request)
        else:
            self.reads_in_flight.append(transaction)
            self.read_backlog.append(request)

    def answer(self, transactions: deque[Transaction], response, channel: str) -> None:
        """Hand ``response`` to the oldest transaction in flight; issue its worker's next."""
        if not transactions:
            self.errors.append(f"cycle {self.cycle}: {channel} response {response} unasked")
            return
        transaction = transactions.popleft()
        try:
            request = transaction.send(response)
        except StopIteration:
            request = None
        self.issue(transaction, request)

    def fill_queues(self) -> None:
        """Backlogged requests into their channels' queues while there is room, in order (a
        write's AW before its W)."""
        aw, w, ar = self.aw.queue, self.w.queue, self.ar.queue
        backlog = self.write_backlog
        while backlog:
            write = backlog[0]
            if not self.aw_queued:
                if len(aw) >= QUEUED:
                    break
                aw.append((write.address, NONSECURE))
                self.aw_queued = True
            if len(w) >= QUEUED:
                break
            offset = write.address & 3
            data = int.from_bytes(write.data, "little") << (8 * offset)
            strobe = ((1 << len(write.data)) - 1) << offset
            w.append((data, strobe))
            backlog.popleft()
            self.aw_queued = False
        backlog = self.read_backlog
        while backlog and len(ar) < QUEUED:
            ar.append((backlog.popleft().address, NONSECURE))

    def count_order(self, aw: bool, w: bool) -> None:
        """Count how a write's AW and W came: AW first, W first, or in one cycle."""
        if aw and w:
            self.orders["together"] += 1
        elif aw and self.w_first:
            self.orders["w_first"] += 1
            self.w_first = False
        elif w and self.aw_first:
            self.orders["aw_first"] += 1
            self.aw_first = False
        elif aw:
            self.aw_first = True
        elif w:
            self.w_first = True

    async def run(self, transactions: list[Transaction]) -> None:
        """Run ``transactions`` (one per worker, each issuing its next request when answered)
        to their end."""
        for transaction in transactions:
            self.issue(transaction, next(transaction))
        self.fill_queues()
        aw, w, ar = self.aw, self.w, self.ar
        aw_ready, w_ready, ar_ready = aw.ready.read, w.ready.read, ar.ready.read
        bready, bvalid, bresp = self.bready, self.bvalid, self.bresp
        rready, rvalid, rdata, rresp = self.rready, self.rvalid, self.rdata, self.rresp
        aw_pauses, w_pauses, b_pauses, ar_pauses, r_pauses = self.pauses
        stall_pin, random = self.stall, self.rng.random
        b_ready = r_ready = stalled = 0  # as quiet() left them
        answered = 0  # the cycle of the last response
        edge = RisingEdge(self.dut.clk)
        while self.writes_in_flight or self.reads_in_flight:
            await edge
            self.cycle += 1
            # At the rising edge, before the simulator evaluates it: what the edge registers
            # (a request is taken if presented and ready, a response if valid and ready).
            aw_taken = aw.presenting and aw_ready()
            w_taken = w.presenting and w_ready()
            ar_taken = ar.presenting and ar_ready()
            b = bresp.read() if b_ready and bvalid.read() else None
            r = (rdata.read(), rresp.read()) if r_ready and rvalid.read() else None
            if aw_taken or w_taken:
                self.count_order(aw_taken, w_taken)

            # The next cycle's requests, readies and stall (they apply after the edge).
            paused = next(aw_pauses)
            if aw_taken or not aw.presenting:
                aw.advance(paused)
            paused = next(w_pauses)
            if w_taken or not w.presenting:
                w.advance(paused)
            if next(b_pauses) == b_ready:  # ready is the pause inverted: a change
                b_ready ^= 1
                bready.write(b_ready)
            paused = next(ar_pauses)
            if ar_taken or not ar.presenting:
                ar.advance(paused)
            if next(r_pauses) == r_ready:
                r_ready ^= 1
                rready.write(r_ready)
            stall = int(random() < STALL)
            if stall != stalled:
                stall_pin.write(stall)
                stalled = stall

            # The responses to their transactions; the workers' next requests queue up.
            if b is not None:
                self.answer(self.writes_in_flight, WriteResponse(RESPONSES[b]), "B")
                answered = self.cycle
            if r is not None:
                data, resp = r
                self.answer(
                    self.reads_in_flight,
                    ReadResponse(data.to_bytes(4, "little"), RESPONSES[resp]),
                    "R",
                )
                answered = self.cycle
            if self.write_backlog or self.read_backlog:
                self.fill_queues()
            if self.cycle - answered > WATCHDOG_CYCLES:
                self.errors.append(
                    f"cycle {self.cycle}: no response for {WATCHDOG_CYCLES} cycles with "
                    f"{len(self.writes_in_flight)} writes and {len(self.reads_in_flight)} "
                    f"reads in flight"
                )
                return


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def random_interleaved_traffic(dut):
    rng = rng_from_env("axi-lite")
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    dut.rst.value = 1
    manager = Manager(dut, rng)
    manager.quiet()
    for _ in range(4):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    counts = {"writes": 0, "reads": 0, "slverr": 0, "partial": 0}
    errors = manager.errors

    started, cpu_started = time.perf_counter(), time.process_time()
    await manager.run([worker(index, counts, errors) for index in range(WORKERS)])
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    cycles, orders = manager.cycle, manager.orders
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:20])
    transactions = counts["writes"] + counts["reads"]
    assert transactions == WORKERS * (TRANSACTIONS // WORKERS)
    assert min(orders.values()) > 0, f"not every AW/W order happened: {orders}"
    assert counts["partial"] > 0, counts
    assert counts["slverr"] > 0, counts
    report(
        dut,
        f"{transactions} transactions ({counts['writes']} writes, {counts['reads']} reads, "
        f"{counts['partial']} with partial strobes, {counts['slverr']} SLVERR); AW/W orders "
        f"{orders} in {cycles} cycles, {wall:.1f} s wall, {cpu:.1f} s CPU = "
        f"{cycles / wall:.0f} clock edges/s, {cycles / cpu:.0f} per CPU-second",
    )
