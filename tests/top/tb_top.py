"""cocotb integration test of the controller top against the golden controller.

Three free-running clocks: ``pim`` 1250 ps (800 MHz), ``npu`` 1000 ps, ``cpu`` 1500 ps. One
loop per clock, each doing all of its domain's work once per cycle (drive after the falling
edge, sample in ``ReadOnly``: :mod:`ahasd.hw.tb.clocking`), run by the simulator's callbacks
(:class:`~ahasd.hw.tb.clocking.EdgeLoop`, no cocotb task; the test body polls them). The NPU
and CPU sides sample at the falling edge itself where what they read is a function of their
domain's registers (:meth:`TB.npu_drive`, :meth:`TB.cpu_drive`), and the CPU side sleeps
between its orders. The testbench has the usual four parts:

driver
    :class:`Stimulus`, random traffic through the testbench library's drivers of the top
    (:class:`ahasd.hw.tb.top.ControllerTopDriver`, the ones ``ahasd cosim`` uses). ``pim``:
    the scripted CPU on the register bus (presets first, then random reads and occasional
    writes and soft resets during the traffic), EDC events, TVC commands, the GTSU's
    ``want_draft`` level, the draft queue's writer, the ready of the EDC decisions, TVC
    answers and the feedback and pre-verification queues' readers. The CPU is a coroutine on
    the AXI4-Lite port (the library's ``RegisterPort``), stepped in the PIM loop's phases by
    a :class:`~ahasd.hw.tb.clocking.LoopTask`: it holds EDC events (and TVC commands) while
    its access depends on them. ``npu``: the draft
    queue's reader (random stalls, random epoch bumps = rejections) and the feedback
    queue's writer. ``cpu``: the pre-verification queue's writer.
monitor
    :class:`ahasd.hw.tb.top.ControllerTopMonitor`: every transfer and output of a domain in
    one cycle, from the top's ports alone; the register accesses rebuilt from the AXI4-Lite
    handshakes (a read at the edge that takes it, a write at its B response, the cycle
    after). ``AHASD_CROSS_CHECK_ACCESSES=1`` also watches the register file's access port
    inside the top and asserts that both saw the same accesses at the same edges
    (``harness.top_accesses.AccessCrossCheck``; not on the mutation campaign's flattened
    netlist).
model
    :class:`ahasd.golden.top.GoldenTop`. Per PIM cycle the scoreboard applies, in the model's
    order: the bus write taken at the last edge, the reads issued, the events and queue
    transfers taken at the edge, then ``step`` (the GTSU with the ``want_preverify`` the RTL
    shows, since the queue's synchroniser latency is not modelled).
checker
    :class:`Scoreboard` (``harness.top_scoreboard``, shared with the firmware's SoC
    testbench): every EDC decision (all fields) and every TVC answer (``n`` and
    ``C_left``) in order, every entry out of every queue and every squash, the GTSU's outputs
    in every cycle, ``want_preverify`` in both directions (never high with no order pending,
    high within the synchroniser's 4 PIM cycles of one becoming pending), every register
    access's AXI response (read data, ``RRESP``/``BRESP``) against the golden model at the
    edge the register file takes it, and the interrupt output. Reads of EDC registers
    and of the interrupt causes are compared when the EDC has settled (no event for 4
    cycles), of TVC registers when the TVC has been idle for 3: the golden EDC and TVC apply
    an event at once, the RTL a few cycles later (``ahasd.golden.top``). Queue levels read through
    the bus are compared with the level ports of the same cycle (the golden queues have no
    synchroniser lag). The test ends asserting that no error was seen and that nothing
    expected is left: no decision or answer outstanding, every golden queue empty.

Register-visible effects: :class:`ChangeRecord` notes, for every event (EDC event, TVC
command, queue transfer, GTSU switch, soft reset, bus write), the registers whose golden
value it changed (a static map from event kind to the registers it can touch, built from
the register map); the CPU reads a changed register first (the one whose bin has the
fewest hits) once the ``settled`` rules allow, so each change is compared through the bus
before the next one overwrites it where the traffic allows. The bins ``"kind -> register"``
count reads that saw the golden value the event left; the everyday events' effects on their
own registers need 10 each, the rarer pairs (a soft reset's, an error's, an interrupt
cause's) are counted and reported, not required (see :func:`coverage_bins`).

Queue entries are packed with the golden model's bit order (``ahasd.golden.queues.pack``),
not the RTL's layouts, so the test also checks that the RTL lays entries out as the spec says.

Environment: ``AHASD_TB_PARAMS`` (TopParams as nested JSON), ``AHASD_TB_SEED``, ``AHASD_EVENTS``
(default 20,000: EDC events + TVC commands + queue entries written).
"""

from __future__ import annotations

import gc
import json
import math
import os
import time
from collections import deque

import cocotb
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time
from harness.tb import report, rng_from_env
from harness.top_accesses import AccessCrossCheck
from harness.top_scoreboard import LEVELS, EdcEvent, Scoreboard, depends_on_edc, depends_on_tvc

from ahasd.golden.queues import DraftEntry, FeedbackEntry, PreverifyEntry, pack
from ahasd.hw.tb.clocking import EdgeLoop, LoopTask, wait_until
from ahasd.hw.tb.pins import write_immediately
from ahasd.hw.tb.top import (
    TABLE_CODES,
    WORD_SHIFT,
    ControllerTopDriver,
    ControllerTopMonitor,
    CpuCycle,
    NpuCycle,
    PimCycle,
)
from ahasd.hw.tvc import Op, Table
from ahasd.params import TopParams

EVENTS = int(os.environ.get("AHASD_EVENTS", "20000"))
# Compare the accesses the monitor rebuilds from the AXI port with the register file's
# access port inside the top (the generated Verilog has it, the mutation netlist does not).
CROSS_CHECK_ACCESSES = os.environ.get("AHASD_CROSS_CHECK_ACCESSES") == "1"
PERIODS_PS = {"pim": 1250, "npu": 1000, "cpu": 1500}
# The CPU writes a pre-verification order in this share of the CPU cycles it may.
PREVERIFY_RATE = 0.03


# The test body looks at the loops' progress every POLL_CYCLES PIM cycles.
POLL_CYCLES = 64
SOFT_RESET_EVERY = 500  # CPU accesses between two scheduled soft resets
# A random write's W this many cycles before its AW (negative: AW first).
WRITE_SKEWS = (0, 0, 1, -1, 2, -3)
FILL_EVERY = 1500  # EDC events between two directed fills (see Stimulus.filling)


# -- driver --------------------------------------------------------------------------------


class Stimulus:
    """The random traffic of the three domains; reads the golden state to stay legal."""

    def __init__(self, driver: ControllerTopDriver, board: Scoreboard) -> None:
        self.driver = driver
        self.board = board
        self.p = driver.params
        self.golden = board.golden
        self.readable = [reg.name for reg in self.golden.regmap if reg.readable]
        self.rng = rng_from_env("top-pim")
        self.cycle = 0
        self.stop = False  # no new traffic (drain)
        self.hold_edc = False  # the CPU's access depends on the EDC: no new event
        self.hold_tvc = False  # ... on the TVC: no new command
        self.pinned = False  # both held across accesses (reading what a soft reset changed)
        self.hold_queues = False  # no new queue transfer: a level read waits for its change
        self.tvc_idle_run = 0  # cycles the TVC has been idle in a row
        # Pending work.
        self.edc_event: EdcEvent | None = None
        self.tvc_cmd: tuple | None = None  # (op, args)
        self.draft_entry: tuple | None = None  # a golden queue entry
        self.feedback_entry: tuple | None = None  # a golden queue entry
        self.preverify_entry: tuple | None = None  # a golden queue entry
        self.last_edc_accept = -10
        # Traffic state.
        self.want_draft = 0
        self.edc_rate = 0.5
        # Every FILL_EVERY EDC events the PIM drafts until the EDC is full and then probes
        # it, so each seed sees refused DRAFTs (the random walk of the LLR may never reach
        # full on its own).
        self.edc_events_made = 0
        self.filling = False
        self.decision_stall = 0.1
        self.answer_stall = 0.2
        self.preverify_take = 0.05
        self.npu_busy_until = 0
        self.reader_epoch = 0
        self.writer_epoch = 0
        self.live_epochs: deque[int] = deque()
        self.reader_stall = 0.2

    @property
    def idle(self) -> bool:
        """Nothing presented and nothing expected (the drain is over on this side)."""
        pending = [self.edc_event, self.tvc_cmd, self.draft_entry, self.feedback_entry]
        pending += [self.preverify_entry]
        return (
            not any(pending)
            and not self.board.decisions.pending
            and not (self.board.answers.pending)
        )

    # -- register traffic (the CPU coroutine, TB.cpu_loop) -----------------------------------

    def random_write(self) -> tuple[str, int]:
        rng, p = self.rng, self.p
        roll = rng.random()
        ranks = p.gtsu.ranks
        if roll < 0.3:
            # Disjoint masks mostly; sometimes an overlap (the sticky config error).
            if rng.random() < 0.05:
                return rng.choice(["GTSU_DLM_MASK", "GTSU_TLM_MASK"]), rng.randrange(1 << ranks)
            split = rng.randrange(1, ranks)
            dlm = rng.randrange(1 << split)
            tlm = rng.randrange(1 << (ranks - split)) << split
            if rng.random() < 0.5:
                return "GTSU_DLM_MASK", dlm
            return "GTSU_TLM_MASK", tlm & ~self.golden.gtsu.dlm_mask
        if roll < 0.5:
            return rng.choice(["GTSU_T_OFF", "GTSU_T_ON"]), rng.choice(
                [0, 0, 1, 2, *(rng.randrange(3, 40) for _ in range(5)), rng.randrange(1 << 32)]
            )
        if roll < 0.6:
            return "EDC_HMAX", 0 if rng.random() < 0.05 else rng.randrange(8000, 65536)
        if roll < 0.7:
            return "TVC_N_MAX", rng.choice([rng.randrange(0, 17), rng.randrange(1 << 32)])
        if roll < 0.8:
            return "IRQ_ENABLE", rng.randrange(32)
        table = rng.choice(list(TABLE_CODES))
        return f"TVC_{table.upper()}[{rng.randrange(p.tvc.depth)}]", self.ratio(table)

    def ratio(self, table: str) -> int:
        """A plausible table entry (cycles per token, UQ.8), sometimes past 32 bits."""
        low, high = {"nvct": (4, 40), "pdct": (30, 200), "pvct": (60, 400)}[table]
        if self.rng.random() < 0.1:
            return self.rng.randrange(1 << self.p.tvc.ratio_bits)
        return self.rng.randrange(low << 8, high << 8)

    def edc_settled(self) -> bool:
        """The RTL EDC has executed every event and its flags and causes have followed: none
        presented, no decision outstanding, the last one taken 4 or more cycles ago."""
        return (
            self.edc_event is None
            and self.last_edc_accept < self.cycle - 3
            and not self.board.decisions.pending
        )

    def tvc_settled(self) -> bool:
        return self.tvc_cmd is None and self.tvc_idle_run >= 3 and not self.board.answers.pending

    def settled(self, name: str) -> bool:
        """Whether a read of ``name`` now can be compared with the golden controller."""
        if depends_on_edc(name) and not self.edc_settled():
            return False
        return not (depends_on_tvc(name) and not self.tvc_settled())

    # -- traffic generators ----------------------------------------------------------------

    def new_edc_event(self) -> EdcEvent:
        rng, p, golden, edc = self.rng, self.p.edc, self.golden, self.driver.edc
        max_length = (1 << p.length_bits) - 1
        hmax = golden.edc.hmax
        llr = golden.edc.llr
        full = golden.edc_refuses_draft()
        self.edc_events_made += 1
        if self.edc_events_made % FILL_EVERY == 0:
            self.filling = True
        if full and (self.filling or rng.random() < 0.5) and self.edc_settled():
            self.filling = False
            # A DRAFT against a full EDC: it must be refused for a few cycles (then it is
            # withdrawn and the VERIFY that frees a slot goes first).
            length = rng.randrange(1, max_length + 1)
            return EdcEvent("draft", (0, length), edc.draft_bits(0, length), rng.randrange(1, 5))
        verify_share = 0.2 + 0.6 * llr / p.llr_max
        # Full and not probing: a VERIFY, never a DRAFT (a DRAFT that is not a probe would
        # wait for a slot that only a later event can free).
        if full or (not self.filling and rng.random() < verify_share):
            if llr == 0 and rng.random() < 0.9:
                pass  # mostly avoid the protocol error; draft instead
            else:
                n_acc = rng.randrange(0, max_length + 1)
                full_accept = rng.random() < 0.7
                s_acc = min((1 << p.sum_bits) - 1, n_acc * rng.randrange(0, hmax + hmax // 4))
                args = (full_accept, s_acc, n_acc)
                return EdcEvent("verify", args, edc.verify_bits(*args), 0)
        length = 0 if rng.random() < 0.002 else rng.randrange(1, max_length + 1)
        # Entropy sums spread over every bucket (and past the top one).
        per_token = rng.randrange(0, hmax + hmax // 4)
        s = min((1 << p.sum_bits) - 1, max(1, length) * per_token)
        return EdcEvent("draft", (s, length), edc.draft_bits(s, length), 0)

    def new_tvc_command(self) -> tuple:
        rng, p = self.rng, self.p.tvc
        npu_busy = self.golden.tvc.busy
        if not npu_busy and rng.random() < 0.3:
            self.npu_busy_until = self.cycle + rng.randrange(200, 12000)
            args = {"l_kv": rng.randrange(16, 2048)}
            return (Op.NPU_START, args)
        if npu_busy and self.cycle >= self.npu_busy_until:
            return (Op.NPU_DONE, {})
        if rng.random() < 0.4:
            roll = rng.random()
            if roll < 0.003:
                args = {"table": Table.N_MAX, "cycles": 5, "length": 1}
            elif roll < 0.006:
                args = {"table": Table.PDCT, "cycles": 5, "length": 0}
            else:
                table = rng.choice(list(TABLE_CODES))
                length = rng.randrange(1, 64)
                cycles = (length * self.ratio(table)) >> 8
                cycles = min((1 << p.cycle_bits) - 1, cycles + rng.randrange(0, 50))
                args = {"table": TABLE_CODES[table], "cycles": cycles, "length": length}
            return (Op.LEARN, args)
        return (Op.ASK, {"p": rng.randrange(0, 40)})

    def random_draft_entry(self) -> tuple:
        rng, q = self.rng, self.p.queues
        if rng.random() < 0.1:
            self.writer_epoch = self.reader_epoch  # learned through the feedback path
        # Built as the golden queue's entry type (the fields in the spec's order, each
        # drawn inside its width), so the golden model takes it without normalising it.
        return DraftEntry(
            batch_id=rng.randrange(1 << q.batch_id_bits),
            epoch=self.writer_epoch & ((1 << q.epoch_bits) - 1),
            first_pos=rng.randrange(1 << q.pos_bits),
            length=rng.randrange(1 << q.length_bits),
            bucket=rng.randrange(8),
        )

    # -- one PIM cycle ---------------------------------------------------------------------

    def drive_pim(self) -> None:
        """Drive every PIM-side input but the AXI port for this cycle (after the falling
        edge)."""
        rng, stop = self.rng, self.stop
        random = rng.random
        edc, tvc, queues = self.driver.edc, self.driver.tvc, self.driver.queues
        hold_edc, hold_tvc = self.hold_edc or self.pinned, self.hold_tvc or self.pinned
        hold_queues = self.hold_queues
        if self.edc_event is None and not hold_edc and not stop:
            if random() < 0.002:
                self.edc_rate = rng.choice([0.1, 0.5, 0.9])
            if self.filling and self.golden.edc_refuses_draft() and not self.edc_settled():
                pass  # full: wait until it settles, so the probe's refusals can be checked
            elif random() < self.edc_rate:
                self.edc_event = self.new_edc_event()
        if self.edc_event is not None:
            edc.event.present(self.edc_event.bits)
        else:
            edc.event.withdraw()
        if random() < 0.002:
            self.decision_stall = rng.choice([0.0, 0.3, 0.9])
        edc.decision.accept(stop or random() >= self.decision_stall)

        if self.tvc_cmd is None and not hold_tvc and not stop and random() < 0.12:
            self.tvc_cmd = self.new_tvc_command()
            tvc.command.present(tvc.command_bits(*self.tvc_cmd))
        elif self.tvc_cmd is None:
            tvc.command.withdraw()
        tvc.answer.accept(stop or random() >= self.answer_stall)

        if random() < 0.01:
            self.want_draft ^= 1
        self.driver.gtsu.request_draft(self.want_draft and not self.pinned)

        if self.draft_entry is None and not stop and random() < 0.25 and not hold_queues:
            self.draft_entry = self.random_draft_entry()
            queues.draft_w.present(pack("draft", self.draft_entry, self.p.queues))
        elif self.draft_entry is None:
            queues.draft_w.withdraw()
        queues.feedback_r.accept((stop or random() < 0.4) and not hold_queues)
        if random() < 0.001:
            self.preverify_take = rng.choice([0.01, 0.05, 0.3])
        queues.preverify_r.accept((stop or random() < self.preverify_take) and not hold_queues)

    def pim_taken(self, sample: PimCycle) -> None:
        """Apply this cycle's register accesses and transfers (sampled in ``ReadOnly``) to the
        scoreboard, then the edge."""
        board, golden, d = self.board, self.golden, self.driver
        soft_reset = (golden.regmap.get("SOFT_RESET"), 0)
        write = sample.write
        if write is not None and golden.regmap.at(write[0] << WORD_SHIFT) == soft_reset:
            # Before the settling rules below: check_cycle applies the write first.
            self.tvc_idle_run = 0
        quiet = self.edc_settled() and self.tvc_settled()
        board.check_cycle(sample, quiet, self.settled, d.queues)
        if (
            self.edc_event is not None
            and self.edc_event.kind == "draft"
            and sample.edc_event is None
        ):
            golden.edc_draft_held()

        event = self.edc_event
        if event is not None:
            if sample.edc_event is not None:
                board.edc_event(event)
                self.edc_event = None
                self.last_edc_accept = self.cycle
            elif event.kind == "draft" and golden.edc_refuses_draft():
                board.counts["refusals"] += 1
                if event.probes:
                    event.probes -= 1
                    if event.probes == 0:
                        self.edc_event = None  # withdrawn (see new_edc_event)
        if sample.edc_decision is not None:
            board.edc_decision(d.edc.decode_decision(sample.edc_decision))

        if self.tvc_cmd is not None and sample.tvc_command is not None:
            board.tvc_command(*self.tvc_cmd)
            self.tvc_cmd = None
            self.tvc_idle_run = 0
        elif sample.tvc_ready and not self.board.answers.pending:
            self.tvc_idle_run += 1
        else:
            self.tvc_idle_run = 0
        if sample.tvc_answer is not None:
            board.tvc_answer(d.tvc.decode_answer(sample.tvc_answer))

        if self.draft_entry is not None and sample.draft_written is not None:
            board.draft_written(self.draft_entry)
            self.live_epochs.append(self.writer_epoch)
            self.draft_entry = None
        if sample.feedback_read is not None:
            board.feedback_read(sample.feedback_read)
        if sample.preverify_read is not None:
            board.preverify_read(sample.preverify_read)

        board.edge(self.want_draft and not self.pinned, sample.want_preverify)
        self.cycle += 1

    # -- the NPU and CPU sides -------------------------------------------------------------

    def drive_npu(self, rng) -> None:
        d, q = self.driver, self.p.queues
        mask = (1 << q.epoch_bits) - 1
        if rng.random() < 0.002:
            self.reader_stall = rng.choice([0.0, 0.3, 0.95])
        if not self.stop and rng.random() < 0.004 and self.bump_is_unambiguous(mask):
            self.reader_epoch += 1
            self.board.counts["epoch_bumps"] += 1
        d.queues.set_reader_epoch(self.reader_epoch & mask)
        held = self.hold_queues
        d.queues.draft_r.accept(int((self.stop or rng.random() >= self.reader_stall) and not held))
        if self.feedback_entry is None and not self.stop and rng.random() < 0.2 and not held:
            self.feedback_entry = FeedbackEntry(
                batch_id=rng.randrange(1 << q.batch_id_bits),
                n_accepted=rng.randrange(1 << q.length_bits),
                full=rng.randrange(2),
            )
            d.queues.feedback_w.present(pack("feedback", self.feedback_entry, q))
        elif self.feedback_entry is None:
            d.queues.feedback_w.withdraw()

    def npu_taken(self, sample: NpuCycle) -> None:
        if sample.draft_read is None and not sample.squashed and sample.feedback_written is None:
            return  # nothing moved: the scoreboard and the golden queues stay as they are
        mask = (1 << self.p.queues.epoch_bits) - 1
        self.board.npu(sample, self.reader_epoch & mask, self.feedback_entry)
        while len(self.live_epochs) > self.golden.draft_queue.level:
            self.live_epochs.popleft()
        if sample.feedback_written is not None:
            self.feedback_entry = None

    def bump_is_unambiguous(self, mask: int) -> bool:
        """One more bump keeps every live epoch distinct from the reader's after wrapping."""
        oldest = self.writer_epoch
        if self.live_epochs:
            oldest = min(oldest, self.live_epochs[0])
        return self.reader_epoch + 1 - oldest <= mask

    def cpu_gap(self, rng) -> int:
        """CPU cycles from now to the next pre-verification order the CPU writes: a
        geometric draw, the failures before the first success of one PREVERIFY_RATE trial per
        cycle (one draw instead of one per cycle, so the CPU loop can sleep through them)."""
        return int(math.log(1.0 - rng.random()) / math.log(1.0 - PREVERIFY_RATE))

    def offer_preverify(self, rng) -> bool:
        """Present a new pre-verification order, unless new traffic is held or stopped;
        whether one is presented."""
        if self.stop or self.hold_queues:
            return False
        q = self.p.queues
        self.preverify_entry = PreverifyEntry(
            batch_id=rng.randrange(1 << q.batch_id_bits),
            n_tokens=rng.randrange(1 << q.length_bits),
        )
        self.driver.queues.preverify_w.present(pack("preverify", self.preverify_entry, q))
        return True

    def cpu_taken(self, sample: CpuCycle) -> None:
        self.board.cpu(sample, self.preverify_entry)
        if sample.preverify_written is not None:
            self.preverify_entry = None

    # -- the scripted CPU's presets --------------------------------------------------------

    def preset_script(self) -> list[tuple[str, str, int, int]]:
        """Read every register (reset values), program every preset, read them back:
        ``(kind, name, value, skew)`` (``skew``: :meth:`RegisterPort.write_word`'s)."""
        p, rng = self.p, self.rng
        script = [("read", name, 0) for name in self.readable]
        script += [("write", "EDC_HMAX", 0), ("read", "ERROR", 0), ("write", "SOFT_RESET", 1)]
        script += [("read", "IRQ_STATUS", 0), ("write", "IRQ_STATUS", 0b11111)]
        # Every table entry with all its bits set, then all clear, W a cycle before AW (the
        # bridge holds the beat a cycle longer than with both together), read back after
        # each: a held bit disturbed by another bit's 1 shows in the first, by another
        # bit's 0 in the second. Then its preset, AW first.
        ones = (1 << p.tvc.ratio_bits) - 1
        for table in TABLE_CODES:
            for index in range(p.tvc.depth):
                name = f"TVC_{table.upper()}[{index}]"
                script += [("write", name, ones, 1), ("read", name, 0)]
                script += [("write", name, 0, 1), ("read", name, 0)]
                script.append(("write", name, self.ratio(table), -1))
        half = p.gtsu.ranks // 2
        script += [
            ("write", "TVC_N_MAX", 6),
            ("write", "EDC_HMAX", rng.randrange(30000, 50000)),
            ("write", "GTSU_DLM_MASK", rng.randrange(1, 1 << half)),
            ("write", "GTSU_TLM_MASK", rng.randrange(1, 1 << (p.gtsu.ranks - half)) << half),
            ("write", "GTSU_T_OFF", rng.randrange(1, 20)),
            ("write", "GTSU_T_ON", rng.randrange(1, 40)),
            ("write", "IRQ_ENABLE", 0b11111),
        ]
        script += [("read", name, 0) for name in self.readable]
        return [step if len(step) == 4 else (*step, 0) for step in script]


class TB:
    """Driver, monitor, model and checker of the top, and one loop per clock domain.

    The three domains' loops are :class:`ahasd.hw.tb.clocking.EdgeLoop` s, run by the
    simulator's callbacks with no cocotb task between; the test body polls them
    (:meth:`wait_until`), which also raises the first error any of them stopped on.
    """

    def __init__(self, dut, params: TopParams) -> None:
        self.dut = dut
        self.driver = ControllerTopDriver(dut, params)
        self.monitor = ControllerTopMonitor(self.driver)
        self.cross_check = AccessCrossCheck(dut) if CROSS_CHECK_ACCESSES else None
        self.board = Scoreboard(params, lambda: f"pim cycle {self.stimulus.cycle}")
        self.stimulus = Stimulus(self.driver, self.board)
        # The CPU's coroutine is stepped by the PIM loop, in its phases (it drives first, so
        # the holds it sets apply to the same cycle's traffic, and samples after the
        # scoreboard): its accesses cost no scheduler wake-ups of their own.
        self.cpu = LoopTask()
        self.clock = self.cpu.clock
        self.script_done = False
        # Set by the PIM loop once the traffic has its events (or an error).
        self.traffic_done = False
        self.events_wanted: int | None = None
        self.random_accesses = 0
        self.npu_rng, self.cpu_rng = rng_from_env("top-npu"), rng_from_env("top-cpu")
        self.cpu_slept = False  # the CPU loop's next call is the end of a sleep
        self.pim = EdgeLoop(dut.pim_clk, PERIODS_PS["pim"], self.pim_drive, self.pim_sample)
        self.npu = EdgeLoop(dut.npu_clk, PERIODS_PS["npu"], self.npu_drive, self.npu_sample)
        self.cpu_side = EdgeLoop(dut.cpu_clk, PERIODS_PS["cpu"], self.cpu_drive)
        self.loops = (self.pim, self.npu, self.cpu_side)
        self.poll = Timer(POLL_CYCLES * PERIODS_PS["pim"], unit="ps")

    async def start(self) -> None:
        self.driver.start_clocks(PERIODS_PS)
        self.driver.hold_reset(1)
        self.driver.quiet_inputs()
        await Timer(8 * max(PERIODS_PS.values()), unit="ps")
        self.driver.hold_reset(0)
        await Timer(4 * max(PERIODS_PS.values()), unit="ps")

    async def wait_until(self, condition) -> None:
        """Poll until ``condition()`` holds; raise the error a domain's loop stopped on."""
        await wait_until(condition, self.loops, self.poll)

    def stop(self) -> None:
        for loop in self.loops:
            loop.stop()

    def pim_drive(self) -> bool:
        board = self.board
        wanted = self.events_wanted
        if wanted is not None and (board.events >= wanted or board.errors):
            self.events_wanted = None
            self.traffic_done = True
        self.cpu.drive()
        self.stimulus.drive_pim()
        return True

    def pim_sample(self) -> None:
        sample = self.monitor.pim()
        if self.cross_check is not None:
            self.cross_check.sample(self.stimulus.cycle, sample)
        self.stimulus.pim_taken(sample)
        self.cpu.sample()

    def npu_drive(self) -> bool:
        """The NPU side, sampled at the falling edge unless the reader's epoch changed.

        What the monitor reads there (the draft queue's ``valid``, payload and squash flag,
        the feedback queue's ``ready``) is a function of NPU-domain registers (the FIFOs'
        empty and full flags, the synchronous read port's data, ``hw/queues.py``) and of the
        reader's epoch alone, so with the epoch unchanged it is at the falling edge what
        ``ReadOnly`` would show after the other inputs written here; a new epoch changes which
        head entry is stale, combinationally, so that cycle waits for ``ReadOnly``.
        """
        stimulus = self.stimulus
        epoch = stimulus.reader_epoch
        stimulus.drive_npu(self.npu_rng)
        if stimulus.reader_epoch != epoch:
            return True
        stimulus.npu_taken(self.monitor.npu())
        return False

    def npu_sample(self) -> None:
        self.stimulus.npu_taken(self.monitor.npu())

    def cpu_drive(self) -> bool:
        """The CPU's pre-verification orders, sampled at the falling edge, asleep between.

        The queue's ``ready`` on the CPU side is a function of CPU-domain registers alone (the
        FIFO's full flag), so a transfer at the coming edge is known at the falling edge.
        Between orders the loop sleeps through the cycles of the geometric draw
        (:meth:`Stimulus.cpu_gap`) and offers one when it wakes.
        """
        stimulus, rng = self.stimulus, self.cpu_rng
        if self.cpu_slept:
            self.cpu_slept = False
            if not stimulus.offer_preverify(rng):
                return False
        elif stimulus.preverify_entry is None:
            self.driver.queues.preverify_w.withdraw()
            gap = stimulus.cpu_gap(rng)
            if gap:
                self.cpu_slept = True
                self.cpu_side.sleep(gap)
                return False
            if not stimulus.offer_preverify(rng):
                return False
        stimulus.cpu_taken(self.monitor.cpu())
        return False

    # -- the CPU on the AXI4-Lite port ------------------------------------------------------

    async def _settle(self, edc: bool, tvc: bool) -> None:
        """Hold new EDC events / TVC commands and wait until those blocks have settled."""
        stimulus = self.stimulus
        stimulus.hold_edc, stimulus.hold_tvc = edc, tvc

        def settled() -> bool:
            return (not edc or stimulus.edc_settled()) and (not tvc or stimulus.tvc_settled())

        if settled():
            return
        if not await self.clock.until(settled, 20000):
            raise AssertionError("the blocks never settled for a register access")

    async def _level_settle(self, name: str) -> None:
        """Hold the queue traffic until the RTL's level of ``name`` shows the golden one
        (the synchronisers' latency), for a few cycles at most (an entry presented to a
        full queue keeps waiting)."""
        self.stimulus.hold_queues = True
        port, view = LEVELS[name], self.board.record.views[name]

        def caught_up() -> bool:
            return self.driver.queues.level(port) == view()

        if not caught_up():
            await self.clock.until(caught_up, 12)

    async def access(
        self,
        kind: str,
        name: str,
        value: int = 0,
        strobe: int = 0xF,
        settle: bool = False,
        skew: int = 0,
    ) -> int:
        """One register access of the CPU (a 64-bit register: its words, low first), holding
        the blocks it depends on; SOFT_RESET and IRQ_STATUS writes wait for them to settle,
        and so does a read with ``settle``; a write's W and AW ``skew`` cycles apart
        (:meth:`RegisterPort.write_word`). Returns the data read."""
        bus, regmap = self.driver.bus, self.board.golden.regmap
        reg = regmap.get(name) if isinstance(name, str) else None
        addresses = reg.word_addresses if reg else (name,)
        label = reg.name if reg else hex(name)
        if kind == "write" and label in ("SOFT_RESET", "IRQ_STATUS"):
            await self._settle(edc=True, tvc=True)
        elif kind == "read" and (settle or self.stimulus.rng.random() < 0.8):
            # Mostly let the blocks it shows settle first, so that the read can be compared.
            await self._settle(edc=depends_on_edc(label), tvc=depends_on_tvc(label))
            if settle and label in LEVELS:
                await self._level_settle(label)
        else:
            self.stimulus.hold_edc = depends_on_edc(label)
        total = 0
        for word, address in enumerate(addresses):
            if kind == "read":
                data, _ = await bus.read_word(self.clock, address, 20000)
                total |= data << (32 * word)
            else:
                data = (value >> (32 * word)) & 0xFFFF_FFFF
                await bus.write_word(self.clock, address, data, 20000, strobe, skew)
        self.stimulus.hold_edc = self.stimulus.hold_tvc = self.stimulus.hold_queues = False
        return total

    async def soft_reset(self, value: int) -> None:
        """A soft reset, then a read of every register it changed, the blocks held until
        the last (a later event would overwrite the reset values before they are seen)."""
        stimulus, pending = self.stimulus, self.board.record.pending
        await self.access("write", "SOFT_RESET", value)
        stimulus.pinned = True
        # The GTSU's first: it moves on its own (held idle: want_draft low meanwhile).
        names = [name for name, (kinds, _) in pending.items() if "SOFT_RESET" in kinds]
        names.sort(key=lambda name: not name.startswith(("STATUS", "GTSU_")))
        for name in names:
            if name in pending and "SOFT_RESET" in pending[name][0]:
                await self.access("read", name, settle=True)
        stimulus.pinned = False

    async def read_changes(self) -> None:
        """Read a register an event changed (once settled), and, as an interrupt handler
        would, clear the causes IRQ_STATUS showed: an error cause rises again only then."""
        stimulus, record = self.stimulus, self.board.record
        # Mostly the change in the least observed bin (a rare event's is overwritten soon).
        rare = stimulus.rng.random() < 0.7
        name = record.rarest() if rare else stimulus.rng.choice(list(record.pending))
        data = await self.access("read", name, settle=True)
        if name == "IRQ_STATUS" and data and stimulus.rng.random() < 0.5:
            await self.access("write", "IRQ_STATUS", data)

    async def random_access(self) -> None:
        rng, stimulus = self.stimulus.rng, self.stimulus
        self.random_accesses += 1
        roll = rng.random()
        if self.random_accesses % SOFT_RESET_EVERY == 0:
            # Besides the random ones: every seed resets during the traffic a few times.
            await self.soft_reset(rng.randrange(1, 8))
        elif roll < 0.03:
            name, value = stimulus.random_write()
            strobe = rng.choice([0xF, 0xF, 0xF, rng.randrange(16)])
            await self.access("write", name, value, strobe, skew=rng.choice(WRITE_SKEWS))
        elif roll < 0.04:
            # A wide register's words out of the rule's order, or a high word alone.
            reg = self.board.golden.regmap.get(rng.choice(["TVC_NVCT[0]", "TVC_PVCT[1]"]))
            address = rng.choice(reg.word_addresses)
            value, strobe = rng.randrange(1 << 32), rng.randrange(16)
            await self.access("write", address, value, strobe, skew=rng.choice(WRITE_SKEWS))
        elif roll < 0.045:
            await self.access("write", "IRQ_STATUS", rng.randrange(32))
        elif roll < 0.047:
            await self.soft_reset(rng.randrange(1, 8))
        elif roll < 0.06:
            # Refused: an unmapped word, a write to a read-only register.
            if rng.random() < 0.5:
                await self.access("read", rng.choice([0x01C, 0x084, 0x620, 0xFFC]))
            else:
                await self.access("write", rng.choice(["ID", "EDC_LLR", "TVC_NCR"]), 1)
        elif roll < 0.3 or not self.board.record.pending:
            await self.access("read", rng.choice(stimulus.readable))
        else:
            # What the events changed, in preference to any register, so that each change
            # is seen through the bus before the next event overwrites it.
            await self.read_changes()

    async def register_loop(self, script: list[tuple[str, str, int, int]]) -> None:
        """The presets (``script``), then random accesses until the traffic stops."""
        for kind, name, value, skew in script:
            await self.access(kind, name, value, skew=skew)
        self.script_done = True
        while self.stimulus.stop:  # until the test starts the traffic
            await self.clock.next()
        while not self.stimulus.stop:
            await self.random_access()
            await self.clock.next(self.stimulus.rng.choice([0, 0, 1, 3, 10]) or 1)

    async def read_every_register(self) -> None:
        for name in self.stimulus.readable:
            await self.access("read", name)


# 20,000 events take about 35 us of simulated time: a mutant that stalls the traffic fails
# at 2 ms (the campaign's time limit per mutant would otherwise be spent on it).
@cocotb.test(timeout_time=2, timeout_unit="ms")
async def integration(dut):
    """Presets through the bus, then random PIM/NPU/CPU traffic checked against the golden."""
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    write_immediately()  # every agent drives after its own clock's falling edge
    tb = TB(dut, params)
    # What exists now (the design's handles, the golden model, the register map) lives until
    # the end: the collector's full passes need not walk it again (a twentieth of the run's
    # instructions went there).
    gc.freeze()
    stimulus, board, golden = tb.stimulus, tb.board, tb.board.golden
    await tb.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    start_ps = get_sim_time("ps")
    stimulus.stop = True  # no traffic while presetting
    tb.cpu.start(tb.register_loop(stimulus.preset_script()))
    tb.pim.start()
    try:
        await tb.wait_until(lambda: tb.script_done)
        stimulus.stop = False
        assert not board.errors, "preset phase:\n" + "\n".join(board.errors.messages)
        tb.npu.start()
        tb.cpu_side.start()
        tb.events_wanted = EVENTS
        await tb.wait_until(lambda: tb.traffic_done)
        # Drain: no new traffic, every sink ready; the NPU reader squashes what is stale.
        stimulus.stop = True
        await tb.wait_until(lambda: tb.cpu.done)
        give_up = stimulus.cycle + 20000

        def drained() -> bool:
            levels = [golden.draft_queue.level, golden.feedback_queue.level]
            busy = not stimulus.idle or any(levels) or golden.preverify_queue.level
            quiet = not busy and not tb.driver.queues.level("draft_r")
            return quiet or stimulus.cycle >= give_up

        await tb.wait_until(drained)
        await Timer(16 * PERIODS_PS["pim"], unit="ps")
        # Final register check, everything quiet (the traffic stays stopped).
        tb.cpu.start(tb.read_every_register())
        await tb.wait_until(lambda: tb.cpu.done)
        await FallingEdge(dut.pim_clk)
    finally:
        tb.stop()
    wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    edges = sum((get_sim_time("ps") - start_ps) / period for period in PERIODS_PS.values())

    c = board.counts
    errors = board.errors.messages + board.leftovers(c["squashed"])
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:40])
    # The traffic did what it claims.
    assert board.events >= EVENTS, c
    minimums = {
        "decisions": 1000,
        "nonzero_answers": 50,
        "refusals": 1,
        "squashed": 1,
        "soft_resets": 3,  # the preset's and some during the traffic
        "preverify_cycles": 1,
        "preverify_wanted": 100,
        "reads_checked": 1000,
        "slverr": 10,
        # The CPU now clears the causes an IRQ_STATUS read shows half the time (so the sticky
        # causes rise again), and the output is high for fewer of the checked cycles: seed
        # 817639482 saw it high in 52 of 1,709. Checked high at all is what counts.
        "irq_high": 20,
    }
    too_few = {name: c[name] for name, low in minimums.items() if c[name] < low}
    assert not too_few, f"traffic too thin: {too_few} (all counts: {c})"
    switches = board.switches_before_resets + golden.gtsu.switches
    assert switches > 10, f"only {switches} GTSU switches"
    if tb.cross_check is not None:
        agreed = tb.cross_check.check()
        report(dut, f"{agreed} register accesses: the AXI port's and the access port's agree")
    report(
        dut,
        f"{board.events} events ({c['edc_events']} EDC, {c['tvc_commands']} TVC, "
        f"{c['draft_written']}/{c['feedback_written']}/{c['preverify_written']} queue entries) "
        f"in {stimulus.cycle} pim cycles, {wall:.1f} s wall = {board.events / wall:.0f} "
        f"events/s, {stimulus.cycle / wall:.0f} pim cycles/s, {edges / wall:.0f} clock edges/s "
        f"(rising, three clocks), {edges / cpu_s:.0f} per CPU-second; {c['decisions']} decisions, "
        f"{c['answers']} answers ({c['nonzero_answers']} nonzero), {c['reads_checked']} reads "
        f"checked ({c['reads_unchecked']} skipped: EDC or TVC busy), {c['slverr']} SLVERR, "
        f"{c['irq_checked']} cycles of irq checked ({c['irq_high']} high), {c['writes']} writes, "
        f"{c['soft_resets']} soft resets, {c['refusals']} refused DRAFT cycles, "
        f"{c['squashed']} squashed drafts, {switches} GTSU switches",
    )
    record, coverage = board.record, board.coverage
    report(
        dut,
        f"{record.observed} event changes observed through the bus, {record.overwritten} "
        "overwritten before a read; bins: "
        + ", ".join(
            f"{name} {hits}{'' if name in coverage.required else ' (not required)'}"
            for name, hits in record.hits.items()
        ),
    )
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()
