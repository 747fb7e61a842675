"""cocotb integration test of the controller top against the golden controller.

Three free-running clocks: ``pim`` 1250 ps (800 MHz), ``npu`` 1000 ps, ``cpu`` 1500 ps. One
coroutine per clock, each doing all of its domain's driving and checking once per cycle
(drive after the falling edge, sample in ``ReadOnly``, see ``harness/tb.py``):

``pim``
    The scripted CPU on the register bus (presets first, then random reads and occasional
    writes and soft resets during the traffic), the EDC event and decision streams, the TVC
    command and answer streams, the GTSU's ``want_draft`` level, the draft queue's writer and
    the feedback and pre-verification queues' readers. After each cycle's transfers are
    applied to :class:`ahasd.golden.top.GoldenTop` it steps the golden controller (the GTSU
    with the ``want_preverify`` the RTL shows, since the queue's synchroniser latency is not
    modelled), then applies the bus write taken at that edge.
``npu``
    The draft queue's reader (random stalls, random epoch bumps = rejections) and the
    feedback queue's writer.
``cpu``
    The pre-verification queue's writer.

Checked against the golden controller: every EDC decision (all fields), every TVC answer
(``n`` and ``C_left``), every entry out of every queue, the GTSU's outputs in every cycle,
and every register read. Reads of EDC registers are issued when the EDC is quiet (no event
taken in the previous cycle, none presented in this one) and reads of TVC registers are
compared when the TVC is idle: the golden EDC and TVC apply an event at once, the RTL a few
cycles later (``ahasd.golden.top``). Queue levels read through the bus are compared with the
level ports of the same cycle (the golden queues have no synchroniser lag).

Environment: ``AHASD_TB_PARAMS`` (TopParams as nested JSON), ``AHASD_TB_SEED``, ``AHASD_EVENTS``
(default 20,000: EDC events + TVC commands + queue entries written).
"""

from __future__ import annotations

import json
import os
import time
from collections import deque

import cocotb
from amaranth.lib import data
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, Timer
from harness.tb import report, rng_from_env

from ahasd.golden.queues import pack, unpack
from ahasd.golden.top import GoldenTop
from ahasd.hw.edc import decode_decision, encode_draft, encode_verify
from ahasd.hw.tvc import Op, Table, answer_layout, command_layout
from ahasd.params import TopParams

EVENTS = int(os.environ.get("AHASD_EVENTS", "20000"))
PERIODS_PS = {"pim": 1250, "npu": 1000, "cpu": 1500}
TABLES = {"nvct": Table.NVCT, "pdct": Table.PDCT, "pvct": Table.PVCT}


def encode(layout, value) -> int:
    """Bits of a (nested) dict ``value`` in ``layout`` (struct or union; enums by value)."""
    if isinstance(layout, data.Layout):
        bits = 0
        for name, field_value in value.items():
            field = layout[name]
            bits |= encode(field.shape, field_value) << field.offset
        return bits
    return int(getattr(value, "value", value))


def decode_answer(layout: data.StructLayout, bits: int) -> dict[str, int]:
    fields = {}
    for name, field in layout:
        raw = (bits >> field.offset) & ((1 << field.width) - 1)
        if name == "c_left" and raw >> (field.width - 1):
            raw -= 1 << field.width
        fields[name] = raw
    return fields


class Stream:
    """Handles of one stream port (``name__valid/ready/payload``)."""

    def __init__(self, dut, name: str):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")


class TB:
    def __init__(self, dut, params: TopParams):
        self.dut = dut
        self.p = params
        self.golden = GoldenTop(params)
        self.readable = [reg.name for reg in self.golden.regmap if reg.readable]
        self.rng = rng_from_env("top-pim")
        self.errors: list[str] = []
        self.cycle = 0
        self.switches_before_resets = 0  # GTSU switches counted before soft resets
        self.stop = False  # no new traffic (drain)
        # Streams.
        self.edc_in = Stream(dut, "edc_event")
        self.edc_out = Stream(dut, "edc_decision")
        self.tvc_in = Stream(dut, "tvc_cmd")
        self.tvc_out = Stream(dut, "tvc_ans")
        self.draft_w = Stream(dut, "draft_w")
        self.draft_r = Stream(dut, "draft_r")
        self.feedback_w = Stream(dut, "feedback_w")
        self.feedback_r = Stream(dut, "feedback_r")
        self.preverify_w = Stream(dut, "preverify_w")
        self.preverify_r = Stream(dut, "preverify_r")
        self.command_layout = command_layout(params.tvc)
        self.answer_layout = answer_layout(params.tvc)
        # Pending work and expectations.
        self.edc_event: tuple | None = None  # (kind, args, bits, probe_cycles_left)
        self.tvc_cmd: tuple | None = None  # (op, args, bits)
        self.draft_entry: dict | None = None
        self.feedback_entry: dict | None = None
        self.preverify_entry: dict | None = None
        self.decisions: deque[dict] = deque()
        self.answers: deque[dict] = deque()
        self.bus_write: tuple[str, int] | None = None
        self.read_pending: tuple[str, int | None] | None = None
        self.last_edc_accept = -10
        self.tvc_idle_before = False
        self.next_soft_reset = 0  # set when the traffic starts
        # Traffic state.
        self.want_draft = 0
        self.edc_rate = 0.5
        self.decision_stall = 0.1
        self.answer_stall = 0.2
        self.preverify_take = 0.05
        self.npu_busy_until = 0
        self.reader_epoch = 0
        self.writer_epoch = 0
        self.live_epochs: deque[int] = deque()
        self.reader_stall = 0.2
        # Counts.
        self.counts = dict.fromkeys(
            [
                "edc_events",
                "tvc_commands",
                "draft_written",
                "feedback_written",
                "preverify_written",
                "decisions",
                "answers",
                "nonzero_answers",
                "draft_read",
                "feedback_read",
                "preverify_read",
                "reads_checked",
                "reads_unchecked",
                "writes",
                "soft_resets",
                "refusals",
                "squashed",
                "epoch_bumps",
                "preverify_cycles",
            ],
            0,
        )

    # -- bookkeeping ------------------------------------------------------------------------

    def error(self, message: str) -> None:
        if len(self.errors) < 40:
            self.errors.append(f"pim cycle {self.cycle}: {message}")

    @property
    def events(self) -> int:
        c = self.counts
        return (
            c["edc_events"]
            + c["tvc_commands"]
            + c["draft_written"]
            + c["feedback_written"]
            + c["preverify_written"]
        )

    async def start(self) -> None:
        dut = self.dut
        for name, period in PERIODS_PS.items():
            Clock(getattr(dut, f"{name}_clk"), period, unit="ps").start(start_high=False)
            getattr(dut, f"{name}_rst").value = 1
        for handle in (
            dut.bus__we,
            dut.bus__re,
            dut.bus__addr,
            dut.bus__wdata,
            dut.want_draft,
            dut.draft_r_epoch,
        ):
            handle.value = 0
        for stream in (
            self.edc_in,
            self.tvc_in,
            self.draft_w,
            self.feedback_w,
            self.preverify_w,
        ):
            stream.valid.value = 0
            stream.payload.value = 0
        for stream in (self.edc_out, self.tvc_out, self.draft_r, self.feedback_r, self.preverify_r):
            stream.ready.value = 0
        await Timer(8 * max(PERIODS_PS.values()), unit="ps")
        for name in PERIODS_PS:
            getattr(dut, f"{name}_rst").value = 0
        await Timer(4 * max(PERIODS_PS.values()), unit="ps")

    # -- register traffic ------------------------------------------------------------------

    def depends_on_edc(self, name: str) -> bool:
        return name.startswith("EDC_") or name == "ERROR"

    def depends_on_tvc(self, name: str) -> bool:
        return (name.startswith("TVC_") and name != "TVC_NCR") or name in ("ERROR", "STATUS")

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
        if roll < 0.55:
            return rng.choice(["GTSU_T_OFF", "GTSU_T_ON"]), rng.choice(
                [0, 0, 1, 2, *(rng.randrange(3, 40) for _ in range(5)), rng.randrange(1 << 32)]
            )
        if roll < 0.7:
            return "EDC_HMAX", 0 if rng.random() < 0.05 else rng.randrange(8000, 65536)
        if roll < 0.8:
            return "TVC_N_MAX", rng.choice([rng.randrange(0, 17), rng.randrange(1 << 32)])
        table = rng.choice(list(TABLES))
        return f"TVC_{table.upper()}_{rng.randrange(p.tvc.depth)}", self.ratio(table)

    def ratio(self, table: str) -> int:
        """A plausible UQ24.8 table entry (cycles per token)."""
        low, high = {"nvct": (4, 40), "pdct": (30, 200), "pvct": (60, 400)}[table]
        return self.rng.randrange(low << 8, high << 8)

    def choose_bus_access(self) -> tuple[str, str, int] | None:
        """("read", name, 0), ("write", name, value) or None; sets EDC/TVC holds."""
        rng = self.rng
        if self.bus_write is not None:
            return None
        roll = rng.random()
        if roll < 0.004 and not self.stop:
            return ("write", *self.random_write())
        if self.cycle >= self.next_soft_reset and not self.stop and self.can_soft_reset():
            # Maintenance: the CPU resets some blocks (clearing their sticky errors).
            self.next_soft_reset = self.cycle + rng.randrange(2000, 5000)
            return ("write", "SOFT_RESET", rng.randrange(1, 8))
        if roll < 0.25:
            reg = rng.choice(self.readable)
            if self.depends_on_edc(reg) and not self.edc_quiet():
                return None
            return ("read", reg, 0)
        return None

    def edc_quiet(self) -> bool:
        """The RTL EDC has executed every event taken: none taken at the last edge, none
        presented now, and no decision outstanding (a DRAFT can wait in the EDC's stage 1
        for room in its decision buffer; once its decision has been taken it has executed;
        a VERIFY never waits)."""
        return (
            self.edc_event is None and self.last_edc_accept != self.cycle - 1 and not self.decisions
        )

    def can_soft_reset(self) -> bool:
        return (
            self.edc_quiet()
            and not self.decisions
            and self.tvc_cmd is None
            and self.tvc_idle_before
            and not self.answers
        )

    # -- traffic generators ----------------------------------------------------------------

    def new_edc_event(self) -> tuple:
        rng, p, golden = self.rng, self.p.edc, self.golden
        max_length = (1 << p.length_bits) - 1
        hmax = golden.edc.hmax
        llr = golden.edc.llr
        full = golden.edc_refuses_draft()
        if full and rng.random() < 0.2:
            # A DRAFT against a full EDC: it must be refused for a few cycles (then it is
            # withdrawn and the VERIFY that frees a slot goes first).
            length = rng.randrange(1, max_length + 1)
            return ("draft", (0, length), encode_draft(p, 0, length), rng.randrange(1, 5))
        verify_share = 0.2 + 0.6 * llr / p.llr_max
        if full or rng.random() < verify_share:
            if llr == 0 and rng.random() < 0.9:
                pass  # mostly avoid the protocol error; draft instead
            else:
                n_acc = rng.randrange(0, max_length + 1)
                full_accept = rng.random() < 0.7
                s_acc = min((1 << p.sum_bits) - 1, n_acc * rng.randrange(0, hmax + hmax // 4))
                args = (full_accept, s_acc, n_acc)
                return ("verify", args, encode_verify(p, *args), 0)
        length = 0 if rng.random() < 0.002 else rng.randrange(1, max_length + 1)
        # Entropy sums spread over every bucket (and past the top one).
        per_token = rng.randrange(0, hmax + hmax // 4)
        s = min((1 << p.sum_bits) - 1, max(1, length) * per_token)
        return ("draft", (s, length), encode_draft(p, s, length), 0)

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
                table = rng.choice(list(TABLES))
                length = rng.randrange(1, 64)
                cycles = (length * self.ratio(table)) >> 8
                cycles = min((1 << p.cycle_bits) - 1, cycles + rng.randrange(0, 50))
                args = {"table": TABLES[table], "cycles": cycles, "length": length}
            return (Op.LEARN, args)
        return (Op.ASK, {"p": rng.randrange(0, 40)})

    def encode_command(self, op: Op, args: dict) -> int:
        member = {Op.LEARN: "learn", Op.NPU_START: "npu_start", Op.ASK: "ask"}.get(op)
        value = {"op": op}
        if member is not None:
            value["args"] = {member: args}
        return encode(self.command_layout, value)

    def random_draft_entry(self) -> dict:
        rng, q = self.rng, self.p.queues
        if rng.random() < 0.1:
            self.writer_epoch = self.reader_epoch  # learned through the feedback path
        return {
            "batch_id": rng.randrange(1 << q.batch_id_bits),
            "epoch": self.writer_epoch & ((1 << q.epoch_bits) - 1),
            "first_pos": rng.randrange(1 << q.pos_bits),
            "length": rng.randrange(1 << q.length_bits),
            "bucket": rng.randrange(8),
        }

    # -- the PIM clock ---------------------------------------------------------------------

    async def pim_loop(self) -> None:
        dut, rng, golden, p = self.dut, self.rng, self.golden, self.p
        edc_in, edc_out, tvc_in, tvc_out = self.edc_in, self.edc_out, self.tvc_in, self.tvc_out
        ranks_regs = ("gtsu_task", "gtsu_ready", "gtsu_gating")
        while True:
            await FallingEdge(dut.pim_clk)
            # ---- drive ----
            access = self.choose_bus_access() if self.bus_write is None else None
            hold_edc = access is not None and (
                access[1] == "SOFT_RESET" or self.depends_on_edc(access[1])
            )
            hold_tvc = access is not None and access[1] == "SOFT_RESET"
            reading = None
            if access is not None and access[0] == "write":
                self.bus_write = (access[1], access[2])
            elif access is not None:
                reading = access[1]
            if self.bus_write is not None:
                name, value = self.bus_write
                dut.bus__addr.value = golden.regmap.get(name).address
                dut.bus__wdata.value = value
                dut.bus__we.value = 1
                dut.bus__re.value = 0
            elif reading is not None:
                dut.bus__addr.value = golden.regmap.get(reading).address
                dut.bus__we.value = 0
                dut.bus__re.value = 1
            else:
                dut.bus__we.value = 0
                dut.bus__re.value = 0

            if self.edc_event is None and not hold_edc and not self.stop:
                if rng.random() < 0.002:
                    self.edc_rate = rng.choice([0.1, 0.5, 0.9])
                if rng.random() < self.edc_rate:
                    self.edc_event = self.new_edc_event()
                    edc_in.payload.value = self.edc_event[2]
            edc_in.valid.value = int(self.edc_event is not None)
            if rng.random() < 0.002:
                self.decision_stall = rng.choice([0.0, 0.3, 0.9])
            decision_ready = int(self.stop or rng.random() >= self.decision_stall)
            edc_out.ready.value = decision_ready

            if self.tvc_cmd is None and not hold_tvc and not self.stop and rng.random() < 0.12:
                op, args = self.new_tvc_command()
                self.tvc_cmd = (op, args)
                tvc_in.payload.value = self.encode_command(op, args)
            tvc_in.valid.value = int(self.tvc_cmd is not None)
            answer_ready = int(self.stop or rng.random() >= self.answer_stall)
            tvc_out.ready.value = answer_ready

            if rng.random() < 0.01:
                self.want_draft ^= 1
            dut.want_draft.value = self.want_draft

            if self.draft_entry is None and not self.stop and rng.random() < 0.25:
                self.draft_entry = self.random_draft_entry()
                self.draft_w.payload.value = pack("draft", self.draft_entry, p.queues)
            self.draft_w.valid.value = int(self.draft_entry is not None)
            feedback_ready = int(self.stop or rng.random() < 0.4)
            self.feedback_r.ready.value = feedback_ready
            if rng.random() < 0.001:
                self.preverify_take = rng.choice([0.01, 0.05, 0.3])
            preverify_ready = int(self.stop or rng.random() < self.preverify_take)
            self.preverify_r.ready.value = preverify_ready

            await ReadOnly()
            # ---- sample and check ----
            if self.read_pending is not None:
                name, expected = self.read_pending
                self.read_pending = None
                if not int(dut.bus__rvalid.value):
                    self.error(f"no rvalid for the read of {name}")
                elif expected is not None:
                    got = int(dut.bus__rdata.value)
                    if got != expected:
                        self.error(f"read {name}: RTL {got:#x}, golden {expected:#x}")
            bus_ready = int(dut.bus__ready.value)
            tvc_ready = int(tvc_in.ready.value)
            if reading is not None:
                self.read_pending = (reading, self.expected_read(reading, tvc_ready))

            outputs = golden.gtsu_outputs()
            rtl = [int(getattr(dut, name).value) for name in ranks_regs]
            if rtl != [outputs["task"], outputs["ready"], outputs["gating"]]:
                self.error(f"GTSU task/ready/gating: RTL {rtl}, golden {outputs}")
            enables = (int(dut.gtsu_dlm_enable.value), int(dut.gtsu_tlm_enable.value))
            if enables != (outputs["dlm_enable"], outputs["tlm_enable"]):
                self.error(f"GTSU enables: RTL {enables}, golden {outputs}")
            want_preverify = int(dut.want_preverify.value)
            if want_preverify and not golden.want_preverify():
                self.error("want_preverify high with the golden pre-verification queue empty")
            self.counts["preverify_cycles"] += outputs["task"] == 2

            if self.edc_event is not None:
                kind, args, _, probe = self.edc_event
                if int(edc_in.ready.value):
                    self.take_edc(kind, args)
                    self.edc_event = None
                    self.last_edc_accept = self.cycle
                elif kind == "draft" and golden.edc_refuses_draft():
                    self.counts["refusals"] += 1
                    if probe:
                        probe -= 1
                        self.edc_event = (kind, args, self.edc_event[2], probe)
                        if probe == 0:
                            self.edc_event = None  # withdrawn (see new_edc_event)
            if decision_ready and int(edc_out.valid.value):
                got = decode_decision(p.edc, int(edc_out.payload.value))
                if not self.decisions:
                    self.error(f"unexpected EDC decision {got}")
                else:
                    expected = self.decisions.popleft()
                    if got != expected:
                        self.error(f"EDC decision: RTL {got}, golden {expected}")
                self.counts["decisions"] += 1

            if self.tvc_cmd is not None and tvc_ready:
                self.take_tvc(*self.tvc_cmd)
                self.tvc_cmd = None
                self.tvc_idle_before = False
            else:
                self.tvc_idle_before = bool(tvc_ready) and self.bus_write is None
            if answer_ready and int(tvc_out.valid.value):
                got = decode_answer(self.answer_layout, int(tvc_out.payload.value))
                if not self.answers:
                    self.error(f"unexpected TVC answer {got}")
                else:
                    expected = self.answers.popleft()
                    if got != expected:
                        self.error(f"TVC answer: RTL {got}, golden {expected}")
                self.counts["answers"] += 1
                self.counts["nonzero_answers"] += got["n"] > 0

            if self.draft_entry is not None and int(self.draft_w.ready.value):
                if not golden.draft_push(self.draft_entry):
                    self.error("draft queue took an entry with the golden queue full")
                self.live_epochs.append(self.writer_epoch)
                self.draft_entry = None
                self.counts["draft_written"] += 1
            if feedback_ready and int(self.feedback_r.valid.value):
                got = unpack("feedback", int(self.feedback_r.payload.value), p.queues)
                expected = golden.feedback_pop()
                if got != expected:
                    self.error(f"feedback queue: RTL {got}, golden {expected}")
                self.counts["feedback_read"] += 1
            if preverify_ready and int(self.preverify_r.valid.value):
                got = unpack("preverify", int(self.preverify_r.payload.value), p.queues)
                expected = golden.preverify_pop()
                if got != expected:
                    self.error(f"pre-verification queue: RTL {got}, golden {expected}")
                self.counts["preverify_read"] += 1

            # ---- the edge ----
            golden.step(self.want_draft, want_preverify)
            if self.bus_write is not None and bus_ready:
                name, value = self.bus_write
                switches = golden.gtsu.switches
                golden.reg_write(name, value)
                if golden.gtsu.switches < switches:  # a soft reset of the GTSU clears its count
                    self.switches_before_resets += switches
                self.bus_write = None
                self.counts["soft_resets" if name == "SOFT_RESET" else "writes"] += 1
                if name == "SOFT_RESET":
                    self.tvc_idle_before = False
            self.cycle += 1

    def expected_read(self, name: str, tvc_idle: int) -> int | None:
        """What the read of ``name`` issued this cycle must return (None: not comparable)."""
        dut = self.dut
        levels = {
            "DRAFT_QUEUE_LEVEL": dut.draft_w_level,
            "FEEDBACK_QUEUE_LEVEL": dut.feedback_r_level,
            "PREVERIFY_QUEUE_LEVEL": dut.preverify_r_level,
        }
        if name in levels:
            self.counts["reads_checked"] += 1
            return int(levels[name].value)
        if self.depends_on_tvc(name) and not tvc_idle:
            self.counts["reads_unchecked"] += 1
            return None
        self.counts["reads_checked"] += 1
        return self.golden.reg_read(name)

    def take_edc(self, kind: str, args: tuple) -> None:
        golden = self.golden
        self.counts["edc_events"] += 1
        if kind == "draft":
            if golden.edc_refuses_draft():
                self.error("EDC took a DRAFT while full")
                return
            decision = golden.edc_draft(*args)
            if decision is not None:
                self.decisions.append(decision)
        else:
            golden.edc_verify(*args)

    def take_tvc(self, op: Op, args: dict) -> None:
        golden = self.golden
        self.counts["tvc_commands"] += 1
        if op == Op.LEARN:
            table = "n_max" if args["table"] == Table.N_MAX else args["table"].name.lower()
            golden.tvc_learn(table, args["cycles"], args["length"])
        elif op == Op.NPU_START:
            golden.tvc_npu_start(args["l_kv"])
        elif op == Op.NPU_DONE:
            golden.tvc_npu_done()
        else:
            self.answers.append(golden.tvc_ask(args["p"]))

    # -- the NPU and CPU clocks ------------------------------------------------------------

    async def npu_loop(self) -> None:
        dut, golden, p = self.dut, self.golden, self.p
        rng = rng_from_env("top-npu")
        mask = (1 << p.queues.epoch_bits) - 1
        while True:
            await FallingEdge(dut.npu_clk)
            if rng.random() < 0.002:
                self.reader_stall = rng.choice([0.0, 0.3, 0.95])
            if not self.stop and rng.random() < 0.004 and self.bump_is_unambiguous(mask):
                self.reader_epoch += 1
                self.counts["epoch_bumps"] += 1
            dut.draft_r_epoch.value = self.reader_epoch & mask
            draft_ready = int(self.stop or rng.random() >= self.reader_stall)
            self.draft_r.ready.value = draft_ready
            if self.feedback_entry is None and not self.stop and rng.random() < 0.2:
                self.feedback_entry = {
                    "batch_id": rng.randrange(1 << p.queues.batch_id_bits),
                    "n_accepted": rng.randrange(1 << p.queues.length_bits),
                    "full": rng.randrange(2),
                }
                self.feedback_w.payload.value = pack("feedback", self.feedback_entry, p.queues)
            self.feedback_w.valid.value = int(self.feedback_entry is not None)
            await ReadOnly()
            if draft_ready and int(self.draft_r.valid.value):
                got = unpack("draft", int(self.draft_r.payload.value), p.queues)
                expected = golden.draft_pop(self.reader_epoch & mask)
                if got != expected:
                    self.error(f"draft queue: RTL {got}, golden {expected}")
                self.counts["draft_read"] += 1
            if int(dut.draft_r_squashed.value):
                self.counts["squashed"] += 1
                if golden.draft_squash_one(self.reader_epoch & mask) is None:
                    self.error(f"draft queue squashed a live entry: {golden.draft_queue.peek()}")
            while len(self.live_epochs) > golden.draft_queue.level:
                self.live_epochs.popleft()
            if self.feedback_entry is not None and int(self.feedback_w.ready.value):
                if not golden.feedback_push(self.feedback_entry):
                    self.error("feedback queue took an entry with the golden queue full")
                self.feedback_entry = None
                self.counts["feedback_written"] += 1

    def bump_is_unambiguous(self, mask: int) -> bool:
        """One more bump keeps every live epoch distinct from the reader's after wrapping."""
        oldest = self.writer_epoch
        if self.live_epochs:
            oldest = min(oldest, self.live_epochs[0])
        return self.reader_epoch + 1 - oldest <= mask

    async def cpu_loop(self) -> None:
        dut, golden, p = self.dut, self.golden, self.p
        rng = rng_from_env("top-cpu")
        while True:
            await FallingEdge(dut.cpu_clk)
            if self.preverify_entry is None and not self.stop and rng.random() < 0.03:
                self.preverify_entry = {
                    "batch_id": rng.randrange(1 << p.queues.batch_id_bits),
                    "n_tokens": rng.randrange(1 << p.queues.length_bits),
                }
                self.preverify_w.payload.value = pack("preverify", self.preverify_entry, p.queues)
            self.preverify_w.valid.value = int(self.preverify_entry is not None)
            await ReadOnly()
            if self.preverify_entry is not None and int(self.preverify_w.ready.value):
                if not golden.preverify_push(self.preverify_entry):
                    self.error("pre-verification queue took an entry with the golden queue full")
                self.preverify_entry = None
                self.counts["preverify_written"] += 1

    # -- the scripted CPU's presets --------------------------------------------------------

    def preset_script(self) -> list[tuple[str, str, int]]:
        """Read every register (reset values), program every preset, read them back."""
        p, rng = self.p, self.rng
        script = [("read", name, 0) for name in self.readable]
        script += [("write", "EDC_HMAX", 0), ("read", "ERROR", 0), ("write", "SOFT_RESET", 1)]
        for table in TABLES:
            for index in range(p.tvc.depth):
                script.append(("write", f"TVC_{table.upper()}_{index}", self.ratio(table)))
        half = p.gtsu.ranks // 2
        script += [
            ("write", "TVC_N_MAX", 6),
            ("write", "EDC_HMAX", rng.randrange(30000, 50000)),
            ("write", "GTSU_DLM_MASK", rng.randrange(1, 1 << half)),
            ("write", "GTSU_TLM_MASK", rng.randrange(1, 1 << (p.gtsu.ranks - half)) << half),
            ("write", "GTSU_T_OFF", rng.randrange(1, 20)),
            ("write", "GTSU_T_ON", rng.randrange(1, 40)),
        ]
        script += [("read", name, 0) for name in self.readable]
        return script


async def run_preset(tb: TB) -> None:
    """The scripted CPU: one access per cycle through the same loop as the traffic."""
    script = deque(tb.preset_script())
    original = tb.choose_bus_access
    tb.choose_bus_access = lambda: script.popleft() if script else None
    tb.stop = True  # no traffic while presetting
    while script or tb.bus_write is not None or tb.read_pending is not None:
        await FallingEdge(tb.dut.pim_clk)
    tb.choose_bus_access = original
    tb.stop = False


@cocotb.test(timeout_time=600, timeout_unit="ms")
async def integration(dut):
    """Presets through the bus, then random PIM/NPU/CPU traffic checked against the golden."""
    params = TopParams.from_dict(json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))
    tb = TB(dut, params)
    await tb.start()
    started = time.perf_counter()
    cocotb.start_soon(tb.pim_loop())
    await run_preset(tb)
    preset_errors = list(tb.errors)
    assert not preset_errors, "preset phase:\n" + "\n".join(preset_errors)
    tb.next_soft_reset = tb.cycle + 2000
    cocotb.start_soon(tb.npu_loop())
    cocotb.start_soon(tb.cpu_loop())
    while tb.events < EVENTS and not tb.errors:
        await FallingEdge(dut.pim_clk)
    # Drain: no new traffic, every sink ready; the NPU reader squashes what is stale.
    tb.stop = True
    golden = tb.golden
    for _ in range(20000):
        await FallingEdge(dut.pim_clk)
        pending = [tb.edc_event, tb.tvc_cmd, tb.draft_entry, tb.feedback_entry]
        pending += [tb.preverify_entry, tb.decisions, tb.answers, tb.bus_write]
        levels = [golden.draft_queue.level, golden.feedback_queue.level]
        busy = any(pending) or any(levels) or golden.preverify_queue.level
        if not busy and not int(dut.draft_r_level.value):
            break
    for _ in range(16):
        await FallingEdge(dut.pim_clk)
    # Final register check, everything quiet.
    final = deque(("read", name, 0) for name in tb.readable)
    tb.choose_bus_access = lambda: final.popleft() if final else None
    while final or tb.read_pending is not None:
        await FallingEdge(dut.pim_clk)
    await FallingEdge(dut.pim_clk)
    wall = time.perf_counter() - started

    errors = list(tb.errors)
    c = tb.counts
    if tb.decisions or tb.answers:
        errors.append(f"{len(tb.decisions)} decisions, {len(tb.answers)} answers never came")
    for name in ("draft", "feedback", "preverify"):
        level = getattr(golden, f"{name}_queue").level
        if level:
            errors.append(f"{level} entries left in the golden {name} queue")
    golden_squashed = len(golden.draft_queue.dropped)
    if c["squashed"] != golden_squashed:
        errors.append(f"squashed: RTL {c['squashed']}, golden {golden_squashed}")
    assert not errors, f"{len(errors)} error(s):\n" + "\n".join(errors[:40])
    # The traffic did what it claims.
    assert tb.events >= EVENTS, c
    minimums = {
        "decisions": 1000,
        "nonzero_answers": 50,
        "refusals": 1,
        "squashed": 1,
        "soft_resets": 3,  # the preset's and some during the traffic
        "preverify_cycles": 1,
        "reads_checked": 1000,
    }
    too_few = {name: c[name] for name, low in minimums.items() if c[name] < low}
    assert not too_few, f"traffic too thin: {too_few} (all counts: {c})"
    switches = tb.switches_before_resets + golden.gtsu.switches
    assert switches > 10, f"only {switches} GTSU switches"
    report(
        dut,
        f"{tb.events} events ({c['edc_events']} EDC, {c['tvc_commands']} TVC, "
        f"{c['draft_written']}/{c['feedback_written']}/{c['preverify_written']} queue entries) "
        f"in {tb.cycle} pim cycles, {wall:.1f} s wall = {tb.events / wall:.0f} events/s, "
        f"{tb.cycle / wall:.0f} pim cycles/s; {c['decisions']} decisions, {c['answers']} answers "
        f"({c['nonzero_answers']} nonzero), {c['reads_checked']} reads checked "
        f"({c['reads_unchecked']} skipped: TVC busy), {c['writes']} writes, "
        f"{c['soft_resets']} soft resets, {c['refusals']} refused DRAFT cycles, "
        f"{c['squashed']} squashed drafts, {switches} GTSU switches",
    )
