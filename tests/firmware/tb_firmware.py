"""cocotb testbench of the SoC: the firmware on PicoRV32 plays the CPU, this plays the rest.

The SoC (``firmware/soc.v``): PicoRV32 running the firmware (``firmware/main.c``), RAM, the
controller top on the core's bus (AXI4-Lite through a bridge), its ``irq`` on the core's
interrupt 3, and a doorbell (interrupt 4, with a mailbox word) from the PIM side to the CPU.
One clock for the core and the controller's three domains.

driver
    :class:`TraceTraffic`, the PIM and NPU sides of the protocol (spec section 1) from a
    seeded synthetic drafting trace (``ahasd.sim.traces.synthetic``), through the testbench
    library's drivers of the top (:class:`ahasd.hw.tb.top.ControllerTopDriver`). The PIM drafts
    batches while the GTSU gives it the DLM ranks (3 cycles a token), reports each to the EDC
    (``DRAFT``, the entropy sum of the trace's positions) and queues it for the NPU; on
    *suppress* it asks the TVC (``ASK``) and hands the answer to the CPU through the
    doorbell; it takes the CPU's pre-verification orders when the GTSU gives it the TLM
    ranks (4 cycles a token); it turns every feedback into a ``VERIFY``. The NPU verifies one
    batch at a time (``NPU_START``, 1.5 cycles per KV token, ``NPU_DONE``, ``LEARN``), its
    accepted tokens the trace's realised accept flags, and bumps its epoch on a rejection
    (the stale drafts are squashed). The PIM learns its own costs too (``LEARN``).
monitor
    :class:`ahasd.hw.tb.top.ControllerTopMonitor` on the controller inside the SoC (every
    transfer, the interrupt, the register accesses rebuilt from the handshakes at the
    controller's own AXI4-Lite port, which the SoC's bridge drives), the SoC's console and
    order words; ``harness.top_accesses.AccessCrossCheck`` watches the register file's
    access port inside the controller too.
model and checker
    ``harness.top_scoreboard.Scoreboard``, the top integration test's (the golden controller,
    in-order checkers of every EDC decision, TVC answer and queue entry, the GTSU's outputs
    every cycle, every register access of the firmware with its AXI response, the
    interrupt); besides, that the accesses rebuilt from the AXI port are the register file's
    (each with its data and response, at the same edge), and the firmware's decisions: an
    order exactly for each TVC answer of at least one token (its batch and token count),
    within ``ORDER_LIMIT`` cycles.

Measured: the cycles from the rise of ``irq`` to the AW handshake of the write that answers
it (the clear of ``IRQ_STATUS``), per cause; from the doorbell to the order's write.

Environment: ``AHASD_TB_PARAMS``, ``AHASD_TB_SEED``, ``AHASD_TRACE_POSITIONS`` (trace
length).
"""

from __future__ import annotations

import json
import os
import statistics
from collections import deque

import cocotb
from cocotb.triggers import Timer
from harness.tb import report, rng_from_env
from harness.top_accesses import AccessCrossCheck
from harness.top_scoreboard import EdcEvent, Scoreboard, depends_on_edc, depends_on_tvc

from ahasd.golden.edc import bucket
from ahasd.golden.gtsu import TASK_CODES
from ahasd.golden.queues import DraftEntry, FeedbackEntry, PreverifyEntry, pack, unpack
from ahasd.hw.tb.clocking import EdgeLoop, start_clock, wait_until
from ahasd.hw.tb.pins import Pin, write_immediately
from ahasd.hw.tb.top import ControllerTopDriver, ControllerTopMonitor
from ahasd.hw.tvc import Op, Table
from ahasd.params import TopParams
from ahasd.sim.traces.synthetic import PRESETS, generate

PERIOD_PS = 1250
POSITIONS = int(os.environ.get("AHASD_TRACE_POSITIONS", "200"))
#: The firmware's console codes (firmware/main.c).
CONSOLE_BRING_UP, CONSOLE_READY, CONSOLE_RECONFIGURED = 1, 2, 3
CONSOLE_ORDERS, CONSOLE_SERVED = 4, 5
#: The SoC's core runs PicoRV32 at 3 to 6 cycles an instruction: generous waits.
ORDER_LIMIT = 3000
PHASE_LIMIT = 2_000_000
#: The PIM's and the NPU's costs (cycles per drafted, pre-verified, KV token; UQ.8).
DRAFT_CYCLES, PREVERIFY_CYCLES, NPU_RATIO = 3, 4, 0x600
#: Batch lengths the PIM drafts (the adaptive choice of spec section 4 is not modelled).
BATCH_LENGTHS = (2, 8)
#: The interrupt causes by IRQ_STATUS bit.
CAUSES = ("preverify", "edc_backpressure", "edc_error", "tvc_error", "gtsu_error")
#: The event kind the system model's CPU service time stands for: every doorbell, and those
#: that found the core idle (no controller irq, no answer in the last IDLE_CYCLES cycles:
#: no handler running), as the system model's CPU is (its events are microseconds apart,
#: this testbench's PIM and NPU a few hundred cycles).
ORDER_KIND = "TVC pre-verification order (doorbell to the order's write)"
ORDER_IDLE = "the same, the core idle at the doorbell"
IDLE_CYCLES = 400


class SocPorts:
    """The controller's ports as the SoC exposes them, else the controller instance's own
    (the AXI4-Lite port, the interrupt, the CPU's queue writer, the register file's access
    port)."""

    def __init__(self, soc) -> None:
        self._soc = soc

    def __getattr__(self, name: str):
        try:
            return getattr(self._soc, name)
        except AttributeError:
            return getattr(self._soc.controller, name)


class Channel:
    """One input stream of the top: items presented in order, each until taken."""

    def __init__(self, port) -> None:
        self.port = port
        self.items: deque = deque()  # (bits, item)

    def drive(self) -> None:
        if self.items:
            self.port.present(self.items[0][0])
        else:
            self.port.withdraw()

    def taken(self, transfer: int | None):
        """The item taken at this edge (None if none)."""
        if transfer is None or not self.items:
            return None
        return self.items.popleft()[1]


class Batch:
    """A drafted batch: its id, epoch, trace positions and the trace's verdict on it."""

    def __init__(self, batch_id: int, epoch: int, first: int, length: int, trace) -> None:
        self.batch_id, self.epoch, self.first, self.length = batch_id, epoch, first, length
        entropy = trace.draft_entropy[first : first + length]
        self.sums = [min(0xFFFF, round(h * 4096)) for h in entropy]
        accepted = 0
        while accepted < length and trace.accept[first + accepted]:
            accepted += 1
        self.accepted = accepted

    @property
    def s(self) -> int:
        return sum(self.sums)

    @property
    def full(self) -> bool:
        return self.accepted == self.length


class TraceTraffic:
    """The PIM and NPU sides, from the trace; checks the firmware's answers."""

    def __init__(self, dut, params: TopParams, trace) -> None:
        self.dut, self.p, self.trace = dut, params, trace
        self.driver = ControllerTopDriver(SocPorts(dut), params)
        # The accesses are rebuilt from the controller's own AXI port, driven by the bridge.
        awvalid = self.driver.bus.awvalid.handle
        assert awvalid._path == dut.controller.s_axi__awvalid._path, awvalid._path
        self.monitor = ControllerTopMonitor(self.driver)
        self.accesses = AccessCrossCheck(SocPorts(dut))
        self.board = Scoreboard(params, lambda: f"cycle {self.cycle}")
        self.golden = self.board.golden
        self.rng = rng_from_env("firmware-pim")
        d = self.driver
        self.edc = Channel(d.edc.event)
        self.tvc = Channel(d.tvc.command)
        self.drafts = Channel(d.queues.draft_w)
        self.feedback = Channel(d.queues.feedback_w)
        self.soc = {name: Pin(getattr(dut, name)) for name in ("doorbell", "mailbox", "stop")}
        self.console = (Pin(dut.console_valid), Pin(dut.console_data))
        self.order_valid = Pin(dut.controller.preverify_w__valid)
        self.cycle = 0
        self.errors = self.board.errors
        self.console_log: list[tuple[int, int]] = []
        # The PIM side.
        self.started = False  # the protocol traffic runs (after the firmware's bring-up)
        self.pos = 0
        self.batch_ids = 0
        self.epoch = 0  # the writer's; the NPU reader's is npu_epoch
        self.outstanding: deque[Batch] = deque()  # drafted, not yet verified
        self.mode = "draft"  # draft | ask | voided | order | preverify | wait
        self.drafting: Batch | None = None
        self.left = 0  # cycles of drafting or pre-verifying left
        self.expected_order: PreverifyEntry | None = None
        self.order_deadline = 0
        self.preverified = 0
        self.asked = False  # the ASK after a suppress is sent
        self.undecided = 0  # DRAFTs queued whose decision has not come
        self.ring: int | None = None  # a mailbox message to ring the doorbell with
        self.stop_requested = False
        self.want_draft = 0
        self.last_edc_accept = -10
        self.tvc_idle_run = 0
        # The NPU side.
        self.npu_epoch = 0
        self.verifying: Batch | None = None
        self.npu_batches: dict[int, Batch] = {}  # batch id -> batch, for the NPU's verdicts
        self.npu_started = self.npu_done_at = 0
        self.l_kv = 0
        self.feedback_entry: FeedbackEntry | None = None
        # Measurements.
        self.irq_before = False
        self.irq_rose: int | None = None
        kinds = (*CAUSES, ORDER_KIND, ORDER_IDLE)
        self.latencies: dict[str, list[int]] = {kind: [] for kind in kinds}
        self.doorbell_at: int | None = None
        self.doorbell_idle = False
        self.last_answer = -IDLE_CYCLES
        self.order_seen = False
        self.counts = dict.fromkeys(("decisions", "suppress", "asks", "orders", "rejections"), 0)
        self.irq_status = self.golden.regmap.get("IRQ_STATUS").address

    # -- settling (when a read or the interrupt can be compared; tb_top's rules) ----------
    def edc_settled(self) -> bool:
        return (
            not self.edc.items
            and self.last_edc_accept < self.cycle - 3
            and not self.board.decisions.pending
        )

    def tvc_settled(self) -> bool:
        return not self.tvc.items and self.tvc_idle_run >= 3 and not self.board.answers.pending

    def settled(self, name: str) -> bool:
        if depends_on_edc(name) and not self.edc_settled():
            return False
        return not (depends_on_tvc(name) and not self.tvc_settled())

    # -- the writable phase ---------------------------------------------------------------
    def quiet(self) -> None:
        d = self.driver
        for port in (d.edc.event, d.tvc.command, d.queues.draft_w, d.queues.feedback_w):
            port.quiet()
        for port in (d.edc.decision, d.tvc.answer, d.queues.feedback_r, d.queues.draft_r):
            port.accept(1)
        d.queues.preverify_r.accept(0)
        d.queues.set_reader_epoch(0)
        d.gtsu.request_draft(0)
        for pin in self.soc.values():
            pin.write(0)

    def drive(self) -> bool:
        if self.doorbell_at == self.cycle - 1:
            self.soc["doorbell"].write(0)
        if self.ring is not None:
            self.soc["mailbox"].write(self.ring)
            self.soc["doorbell"].write(1)
            self.doorbell_at, self.order_seen, self.ring = self.cycle, False, None
            idle = self.cycle - self.last_answer >= IDLE_CYCLES
            self.doorbell_idle = idle and not self.irq_before
        if self.stop_requested:
            self.soc["stop"].write(1)
        if self.started:
            self.pim_step()
            self.npu_step()
        for channel in (self.edc, self.tvc, self.drafts, self.feedback):
            channel.drive()
        gtsu = self.driver.gtsu
        self.want_draft = int(self.mode == "draft" and self.started and self.pos < POSITIONS)
        gtsu.request_draft(self.want_draft)
        preverify_ready = self.mode == "order" and self.expected_order is not None
        self.driver.queues.preverify_r.accept(
            preverify_ready and gtsu.task() == TASK_CODES["PREVERIFY"] and gtsu.ready()
        )
        self.driver.queues.draft_r.accept(self.verifying is None)
        self.driver.queues.set_reader_epoch(self.npu_epoch & self.epoch_mask)
        return True

    @property
    def epoch_mask(self) -> int:
        return (1 << self.p.queues.epoch_bits) - 1

    def pim_step(self) -> None:
        gtsu = self.driver.gtsu
        drafting_ranks = gtsu.task() == TASK_CODES["DRAFT"] and gtsu.ready()
        if self.mode == "draft" and self.drafting is None and self.pos < POSITIONS:
            room = len(self.outstanding) < 2 * self.p.edc.llr_max
            if drafting_ranks and room and not self.undecided:
                length = self.rng.randint(*BATCH_LENGTHS)
                length = min(length, POSITIONS - self.pos)
                self.drafting = Batch(
                    self.batch_ids & 0xFF, self.epoch, self.pos, length, self.trace
                )
                self.batch_ids += 1
                self.left = DRAFT_CYCLES * length
        elif self.mode == "draft" and self.drafting is not None and drafting_ranks:
            self.left -= 1
            if self.left == 0:
                self.drafted(self.drafting)
                self.drafting = None
        elif self.mode == "preverify":
            self.left -= 1
            if self.left == 0:
                n = self.preverified
                self.learn(Table.PVCT, PREVERIFY_CYCLES * n, n)
                self.mode = "draft"
        elif self.mode == "ask" and not self.asked and self.verifying is not None:
            # The TVC's answer is the time left in the NPU's verification: asked once the NPU
            # has started one (its NPU_START goes first).
            pending = sum(batch.length for batch in self.outstanding)
            self.send_tvc(Op.ASK, {"p": min(pending, (1 << self.p.tvc.length_bits) - 1)})
            self.asked = True
        elif self.mode == "order" and self.cycle >= self.order_deadline:
            self.errors.add(f"no pre-verification order for {self.expected_order} in time")
            self.expected_order = None
            self.mode = "wait"
        # A DRAFT the full EDC refuses waits behind the VERIFY that frees a slot.
        items = self.edc.items
        if len(items) > 1 and items[0][1].kind == "draft" and self.golden.edc_refuses_draft():
            verify = next((i for i, item in enumerate(items) if item[1].kind == "verify"), None)
            if verify is not None:
                item = items[verify]
                del items[verify]
                items.appendleft(item)

    def drafted(self, batch: Batch) -> None:
        p, edc = self.p, self.driver.edc
        entry = DraftEntry(
            batch_id=batch.batch_id,
            epoch=batch.epoch & self.epoch_mask,
            first_pos=batch.first & ((1 << p.queues.pos_bits) - 1),
            length=batch.length,
            bucket=bucket(batch.s, batch.length, self.golden.edc.hmax),
        )
        self.drafts.items.append((pack("draft", entry, p.queues), entry))
        event = EdcEvent("draft", (batch.s, batch.length), edc.draft_bits(batch.s, batch.length), 0)
        self.edc.items.append((event.bits, event))
        self.learn(Table.PDCT, DRAFT_CYCLES * batch.length, batch.length)
        self.outstanding.append(batch)
        self.undecided += 1
        self.npu_batches[batch.batch_id] = batch
        self.pos += batch.length

    def send_tvc(self, op: Op, args: dict) -> None:
        self.tvc.items.append((self.driver.tvc.command_bits(op, args), (op, args)))

    def learn(self, table: Table, cycles: int, length: int) -> None:
        self.send_tvc(Op.LEARN, {"table": table, "cycles": cycles, "length": length})

    def npu_step(self) -> None:
        batch = self.verifying
        if batch is None or self.cycle < self.npu_done_at or self.feedback_entry is not None:
            return
        cycles = self.npu_done_at - self.npu_started
        self.send_tvc(Op.NPU_DONE, {})
        self.learn(Table.NVCT, cycles, self.l_kv)
        entry = FeedbackEntry(
            batch_id=batch.batch_id, n_accepted=batch.accepted, full=int(batch.full)
        )
        self.feedback_entry = entry
        self.feedback.items.append((pack("feedback", entry, self.p.queues), entry))
        if not batch.full:
            self.npu_epoch += 1  # the drafts after the rejected token are stale
        self.verifying = None

    # -- the read-only phase --------------------------------------------------------------
    def sample(self) -> None:
        board, d = self.board, self.driver
        sample = self.monitor.pim()
        self.accesses.sample(self.cycle, sample)
        self.measure(sample)
        if self.console[0].read():
            self.console_log.append(divmod(self.console[1].read(), 1 << 24))
        board.check_cycle(sample, self.edc_settled() and self.tvc_settled(), self.settled, d.queues)
        head = self.edc.items[0][1] if self.edc.items else None
        if head is not None and head.kind == "draft" and sample.edc_event is None:
            self.golden.edc_draft_held()
        event = self.edc.taken(sample.edc_event)
        if event is not None:
            board.edc_event(event)
            self.last_edc_accept = self.cycle
        if sample.edc_decision is not None:
            self.decided(d.edc.decode_decision(sample.edc_decision))
        command = self.tvc.taken(sample.tvc_command)
        if command is not None:
            board.tvc_command(*command)
            self.tvc_idle_run = 0
        elif sample.tvc_ready and not board.answers.pending:
            self.tvc_idle_run += 1
        else:
            self.tvc_idle_run = 0
        if sample.tvc_answer is not None:
            self.answered(d.tvc.decode_answer(sample.tvc_answer))
        entry = self.drafts.taken(sample.draft_written)
        if entry is not None:
            board.draft_written(entry)
        if sample.feedback_read is not None:
            board.feedback_read(sample.feedback_read)
            self.verified(unpack("feedback", sample.feedback_read, self.p.queues))
        if sample.preverify_read is not None:
            board.preverify_read(sample.preverify_read)
            self.order_taken(unpack("preverify", sample.preverify_read, self.p.queues))
        board.edge(self.want_draft, sample.want_preverify)
        self.npu_sample()
        cpu = self.monitor.cpu()
        if cpu.preverify_written is not None:
            self.order_written(cpu)
        self.cycle += 1

    def npu_sample(self) -> None:
        npu = self.monitor.npu()
        entry = self.feedback.taken(npu.feedback_written)
        if npu.draft_read is not None or npu.squashed or entry is not None:
            self.board.npu(npu, self.npu_epoch & self.epoch_mask, entry)
        if entry is not None:
            self.feedback_entry = None
        if npu.draft_read is not None:
            read = unpack("draft", npu.draft_read, self.p.queues)
            self.verifying = self.npu_batches.pop(read.batch_id, None)
            if self.verifying is None:
                self.errors.add(f"the NPU read {read}, a batch it should not verify")
                return
            self.l_kv = 64 + read.first_pos % 192
            self.npu_started = self.cycle + 1
            self.npu_done_at = self.npu_started + (self.l_kv * NPU_RATIO >> 8)
            self.send_tvc(Op.NPU_START, {"l_kv": self.l_kv})

    def decided(self, decision: dict[str, int]) -> None:
        self.board.edc_decision(decision)
        self.counts["decisions"] += 1
        self.undecided = max(0, self.undecided - 1)
        if not decision["keep_drafting"] and self.mode == "draft":
            self.counts["suppress"] += 1
            self.mode, self.asked = "ask", False

    def answered(self, answer: dict[str, int]) -> None:
        self.board.tvc_answer(answer)
        if self.mode == "voided":
            self.mode = "draft"  # a rejection voided what the ASK was about
            return
        if not self.outstanding:
            self.mode = "draft"
            return
        self.counts["asks"] += 1
        batch_id, n = self.outstanding[0].batch_id, answer["n"]
        self.ring = batch_id | n << 16
        if n:
            self.expected_order = PreverifyEntry(batch_id=batch_id, n_tokens=n)
            self.order_deadline = self.cycle + ORDER_LIMIT
            self.mode = "order"
        else:
            self.mode = "wait"  # for the NPU

    def order_written(self, cpu) -> None:
        entry = unpack("preverify", cpu.preverify_written, self.p.queues)
        self.board.cpu(cpu, entry)
        self.counts["orders"] += 1
        if entry != self.expected_order:
            self.errors.add(f"the firmware ordered {entry}, the TVC's answer {self.expected_order}")

    def order_taken(self, order: PreverifyEntry) -> None:
        if self.mode != "order" or order != self.expected_order:
            self.errors.add(f"pre-verification order {order} unexpected (mode {self.mode})")
            return
        self.expected_order = None
        self.mode, self.preverified = "preverify", order.n_tokens
        self.left = PREVERIFY_CYCLES * order.n_tokens

    def verified(self, entry: FeedbackEntry) -> None:
        if not self.outstanding or self.outstanding[0].batch_id != entry.batch_id:
            self.errors.add(f"feedback {entry} for no outstanding batch")
            return
        batch = self.outstanding.popleft()
        s_acc = sum(batch.sums[: entry.n_accepted])
        event = EdcEvent(
            "verify",
            (bool(entry.full), s_acc, entry.n_accepted),
            self.driver.edc.verify_bits(bool(entry.full), s_acc, entry.n_accepted),
            0,
        )
        if not entry.full:
            # The EDC rolls the later batches back; their drafts are squashed by epoch.
            self.counts["rejections"] += 1
            voided = {b.batch_id for b in self.outstanding}
            if self.drafting is not None:
                voided.add(self.drafting.batch_id)
            self.edc.items = deque(
                item for item in self.edc.items if item[1].kind == "verify"
            )  # undelivered DRAFTs of voided batches (all later) are dropped
            self.drafts.items = deque(i for i in self.drafts.items if i[1].batch_id not in voided)
            for batch_id in voided:
                self.npu_batches.pop(batch_id, None)
            self.outstanding.clear()
            self.drafting = None
            self.undecided = 0
            self.epoch += 1
            self.pos = batch.first + entry.n_accepted + 1
            if self.mode == "wait" or (self.mode == "ask" and not self.asked):
                self.mode = "draft"
            elif self.mode == "ask":
                self.mode = "voided"  # the answer comes for batches no longer there
        elif self.mode == "wait":
            self.mode = "draft"
        self.edc.items.append((event.bits, event))

    # -- measurements ---------------------------------------------------------------------
    def measure(self, sample) -> None:
        irq = sample.irq
        if irq and not self.irq_before:
            self.irq_rose = self.cycle
        self.irq_before = irq
        bus = self.driver.bus
        clear = bus.awvalid.read() and bus.awready.read() and bus.awaddr.read() == self.irq_status
        if clear and self.irq_rose is not None:  # the clear of the causes that raised irq
            data = bus.wdata.read()
            for bit, cause in enumerate(CAUSES):
                if data >> bit & 1:
                    self.latencies[cause].append(self.cycle - self.irq_rose)
            self.irq_rose = None
        if clear:
            self.last_answer = self.cycle
        if self.doorbell_at is not None and not self.order_seen and self.order_valid.read():
            self.order_seen = True
            self.last_answer = self.cycle
            self.latencies[ORDER_KIND].append(self.cycle - self.doorbell_at)
            if self.doorbell_idle:
                self.latencies[ORDER_IDLE].append(self.cycle - self.doorbell_at)

    def console_codes(self, code: int) -> list[int]:
        return [value for kind, value in self.console_log if kind == code]

    @property
    def idle(self) -> bool:
        channels = (self.edc, self.tvc, self.drafts, self.feedback)
        return (
            self.pos >= POSITIONS
            and not self.outstanding
            and self.drafting is None
            and self.verifying is None
            and self.mode in ("draft", "wait")
            and not any(channel.items for channel in channels)
            and not self.board.decisions.pending
            and not self.board.answers.pending
        )


@cocotb.test(timeout_time=120, timeout_unit="ms")
async def firmware_against_a_drafting_trace(dut):
    """Bring-up by the firmware, then the trace's traffic with the firmware serving it."""
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    seed = int(os.environ.get("AHASD_TB_SEED", "0"))
    preset = sorted(PRESETS)[seed % len(PRESETS)]
    trace = generate(preset, POSITIONS + 1, seed % (1 << 31), realise=True)
    write_immediately()
    tb = TraceTraffic(dut, params, trace)
    report(dut, f"seed {seed}, trace {preset}: {POSITIONS} positions")
    start_clock(dut.clk, PERIOD_PS)
    dut.rst.value = 1
    tb.quiet()
    await Timer(8 * PERIOD_PS, unit="ps")
    dut.rst.value = 0
    await Timer(PERIOD_PS // 2, unit="ps")
    loop = EdgeLoop(dut.clk, PERIOD_PS, tb.drive, tb.sample).start()
    poll = Timer(64 * PERIOD_PS, unit="ps")

    async def until(condition, what: str) -> None:
        limit = tb.cycle + PHASE_LIMIT

        def done() -> bool:
            return condition() or tb.cycle >= limit or bool(tb.errors)

        await wait_until(done, (loop,), poll)
        assert not tb.errors, "\n".join(tb.errors.messages[:40])
        assert condition(), f"cycle {tb.cycle}: {what} never happened"

    try:
        await until(lambda: tb.console_codes(CONSOLE_READY), "the firmware's bring-up")
        # A TVC protocol error (LEARN of 0 tokens): the firmware resets and configures the TVC.
        tb.learn(Table.PDCT, 5, 0)
        reconfigured = tb.console_codes
        await until(lambda: len(reconfigured(CONSOLE_RECONFIGURED)) == 3, "the TVC's reset")
        tb.started = True
        await until(lambda: tb.idle, "the end of the trace")
        tb.stop_requested = True
        await until(lambda: int(dut.done.value), "the firmware's exit")
        await Timer(4 * PERIOD_PS, unit="ps")
    finally:
        loop.stop()
    result = int(dut.result.value)
    assert result == 0, f"the firmware's check {result} failed"
    errors = tb.errors.messages + tb.board.leftovers(tb.board.counts["squashed"])
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:40])
    accesses = tb.accesses.check()
    c = tb.counts
    (orders,) = tb.console_codes(CONSOLE_ORDERS)
    assert orders == c["orders"] > 0, (orders, c)
    too_few = {name: c[name] for name in ("decisions", "suppress", "rejections") if c[name] < 5}
    assert not too_few, f"traffic too thin: {c}"
    assert tb.console_codes(CONSOLE_RECONFIGURED) == [1, 4, 2], tb.console_log
    (bring_up,) = tb.console_codes(CONSOLE_BRING_UP)
    (served,) = tb.console_codes(CONSOLE_SERVED)
    b = tb.board.counts
    report(
        dut,
        f"{tb.cycle} cycles; firmware bring-up {bring_up} CPU cycles, {served} controller "
        f"interrupts served; {c['decisions']} EDC "
        f"decisions ({c['suppress']} suppress), {c['asks']} TVC answers to the CPU, "
        f"{c['orders']} orders, {c['rejections']} rejections, {accesses} register accesses "
        f"(the AXI port's and the access port's agree), {b['reads_checked']} firmware "
        f"reads checked ({b['reads_unchecked']} not compared: EDC/TVC busy), {b['writes']} writes, "
        f"{b['soft_resets']} soft resets, {b['irq_checked']} cycles of irq checked",
    )
    for kind, cycles in tb.latencies.items():
        if cycles:
            report(
                dut,
                f"irq to answer, {kind}: {len(cycles)} events, median "
                f"{statistics.median(cycles):g}, min {min(cycles)}, max {max(cycles)} cycles",
            )
    assert tb.latencies[ORDER_KIND], tb.latencies
    assert tb.latencies["edc_error"], tb.latencies
