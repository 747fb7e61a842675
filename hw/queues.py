"""The three asynchronous queues between PIM, NPU and CPU (spec 2.3).

Each queue is an asynchronous FIFO (:class:`ahasd.hw.async_fifo.HandshakeAsyncFIFO`,
Amaranth's ``AsyncFIFO`` with a reset handshake) behind two stream ports whose payload
is a :class:`amaranth.lib.data.StructLayout` defined here once; the golden model
(``ahasd.golden.queues``) and the testbenches use the same field names.

=======================  ============  =============  =====================================
queue                    writer        reader         entry
=======================  ============  =============  =====================================
unverified-draft         ``pim``       ``npu``        batch_id, epoch, first_pos, length,
                                                      bucket
feedback                 ``npu``       ``pim``        batch_id, n_accepted, full
pre-verification         ``cpu``       ``pim``        batch_id, n_tokens
=======================  ============  =============  =====================================

Clock domains are named after the device that drives them, so the generated Verilog has
``pim_clk``/``pim_rst``, ``npu_clk``/``npu_rst`` and ``cpu_clk``/``cpu_rst``. The queues hold
at any ratio of the clocks: all crossing is done by the FIFOs' Gray-coded pointers and
reset handshakes.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ahasd.hw.async_fifo import HandshakeAsyncFIFO
from ahasd.params import QueueParams

__all__ = [
    "QUEUE_DOMAINS",
    "AsyncQueues",
    "DraftQueue",
    "Queue",
    "draft_entry_layout",
    "feedback_entry_layout",
    "preverify_entry_layout",
]


#: ``{queue: (writer domain, reader domain)}``: every clock-domain crossing of
#: :class:`AsyncQueues` (and so of the controller top).
QUEUE_DOMAINS = {"draft": ("pim", "npu"), "feedback": ("npu", "pim"), "preverify": ("cpu", "pim")}


def draft_entry_layout(params: QueueParams) -> data.StructLayout:
    """``{batch_id, epoch, first_pos, length, bucket}``, in the spec's order (LSB first)."""
    return data.StructLayout(
        {
            "batch_id": params.batch_id_bits,
            "epoch": params.epoch_bits,
            "first_pos": params.pos_bits,
            "length": params.length_bits,
            "bucket": params.BUCKET_BITS,
        }
    )


def feedback_entry_layout(params: QueueParams) -> data.StructLayout:
    """``{batch_id, n_accepted, full}``."""
    return data.StructLayout(
        {"batch_id": params.batch_id_bits, "n_accepted": params.length_bits, "full": 1}
    )


def preverify_entry_layout(params: QueueParams) -> data.StructLayout:
    """``{batch_id, n_tokens}``."""
    return data.StructLayout({"batch_id": params.batch_id_bits, "n_tokens": params.length_bits})


def _rejected(component: wiring.Component, error: Exception) -> Exception:
    """``error``, after telling Amaranth that the half-built ``component`` is not a forgotten one.

    Amaranth warns about every elaboratable that is created and never elaborated; one whose
    constructor rejected its arguments never existed as far as the design is concerned.
    """
    component._MustUse__silence = True
    return error


class Queue(wiring.Component):
    """A clock-domain-crossing FIFO with stream ports and fill levels on both sides.

    Parameters
    ----------
    layout : data.StructLayout
        Entry layout (the stream payload).
    depth : int
        Entries; a power of two (``AsyncFIFO`` Gray-codes its pointers).
    w_domain, r_domain : str
        Writer and reader clock domains.

    Members
    -------
    w : In(stream.Signature(layout)), in ``w_domain``
        Entries in. ``w.ready`` is low while the queue is full: the writer waits, nothing is
        dropped.
    r : Out(stream.Signature(layout)), in ``r_domain``
        Entries out, first-word-fall-through.
    w_level : Out(range(depth + 1)), in ``w_domain``
        Fill level as the writer sees it, registered: it shows the state of the previous
        write-clock cycle (and may over-count by the synchroniser latency of reads).
    r_level : Out(range(depth + 1)), in ``r_domain``
        Fill level as the reader sees it (it may under-count by the synchroniser latency).

    Latency: an entry written at a write-clock edge is visible to the reader after the pointer
    synchroniser, 3 to 4 read-clock edges. Throughput: one entry per cycle on each side.

    Reset: the writer's domain reset, of any length (one write-clock cycle is enough), empties
    the queue, and ``w.ready`` stays low until the reset has reached the reader and come back
    (about four edges of each clock after the reset): :class:`HandshakeAsyncFIFO`, whose
    docstring says why Amaranth's ``AsyncFIFO`` alone is not enough.
    """

    def __init__(
        self,
        layout: data.StructLayout,
        depth: int,
        *,
        w_domain: str,
        r_domain: str,
        extra_members: dict | None = None,
    ):
        if not isinstance(layout, data.StructLayout):
            raise _rejected(self, TypeError(f"layout must be a data.StructLayout, not {layout!r}"))
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
            raise _rejected(
                self, ValueError(f"depth must be an integer of at least 2, not {depth!r}")
            )
        if depth & (depth - 1):
            raise _rejected(self, ValueError(f"depth must be a power of two, not {depth!r}"))
        if w_domain == r_domain:
            raise _rejected(
                self, ValueError(f"w_domain and r_domain must differ, both are {w_domain!r}")
            )
        self.layout = layout
        self.depth = depth
        self.w_domain = w_domain
        self.r_domain = r_domain
        super().__init__(
            {
                "w": In(stream.Signature(layout)),
                "r": Out(stream.Signature(layout)),
                "w_level": Out(range(depth + 1)),
                "r_level": Out(range(depth + 1)),
                **(extra_members or {}),
            }
        )

    def _fifo(self, m: Module) -> HandshakeAsyncFIFO:
        m.submodules.fifo = fifo = HandshakeAsyncFIFO(
            width=self.layout.size,
            depth=self.depth,
            w_domain=self.w_domain,
            r_domain=self.r_domain,
            exact_depth=True,
        )
        m.d.comb += [
            fifo.w_data.eq(self.w.payload),
            fifo.w_en.eq(self.w.valid),
            self.w.ready.eq(fifo.w_rdy),
            self.w_level.eq(fifo.w_level),
            self.r_level.eq(fifo.r_level),
        ]
        return fifo

    def elaborate(self, platform):
        m = Module()
        fifo = self._fifo(m)
        m.d.comb += [
            self.r.payload.eq(fifo.r_data),
            self.r.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.r.ready),
        ]
        return m


class DraftQueue(Queue):
    """The unverified-draft queue (PIM to NPU), with the epoch squash on its reader.

    Members (besides those of :class:`Queue`)
    -----------------------------------------
    r_epoch : In(epoch_bits), in ``r_domain``
        The reader's current epoch, bumped by the NPU side on every rejection. An entry at the
        head whose ``epoch`` differs is stale: it is dropped (one per read-clock cycle, whether
        or not ``r.ready`` is high) and never presented on ``r``.
    r_squashed : Out(1), in ``r_domain``
        High in each cycle that drops a stale entry (for counters).

    The one exception to the stream rule that ``valid`` stays high until the transfer: when the
    reader changes ``r_epoch``, a presented entry of the old epoch is withdrawn. The reader is
    the one changing the epoch, so it knows. Protocol: the writer's epoch never runs ahead of
    the reader's, so an entry that is stale once stays stale.
    """

    def __init__(self, params: QueueParams, *, w_domain: str = "pim", r_domain: str = "npu"):
        if not isinstance(params, QueueParams):
            raise _rejected(self, TypeError(f"params must be a QueueParams, not {params!r}"))
        self.params = params
        super().__init__(
            draft_entry_layout(params),
            params.draft_depth,
            w_domain=w_domain,
            r_domain=r_domain,
            extra_members={"r_epoch": In(params.epoch_bits), "r_squashed": Out(1)},
        )

    def elaborate(self, platform):
        m = Module()
        fifo = self._fifo(m)
        head = data.View(self.layout, fifo.r_data)
        stale = Signal()
        m.d.comb += [
            stale.eq(fifo.r_rdy & (head.epoch != self.r_epoch)),
            self.r_squashed.eq(stale),
            self.r.payload.eq(fifo.r_data),
            self.r.valid.eq(fifo.r_rdy & ~stale),
            fifo.r_en.eq(stale | self.r.ready),
        ]
        return m


class AsyncQueues(wiring.Component):
    """The three queues of spec 2.3 as one block.

    Parameters
    ----------
    params : QueueParams

    Members
    -------
    draft_w : In(stream), ``pim``;  draft_r : Out(stream), ``npu``;  draft_r_epoch : In, ``npu``
    draft_w_level : Out, ``pim``;  draft_r_level : Out, ``npu``;  draft_r_squashed : Out, ``npu``
    feedback_w : In(stream), ``npu``;  feedback_r : Out(stream), ``pim``;  levels likewise
    preverify_w : In(stream), ``cpu``;  preverify_r : Out(stream), ``pim``;  levels likewise

    Latency, throughput and backpressure as :class:`Queue`; squash as :class:`DraftQueue`.
    """

    def __init__(self, params: QueueParams):
        if not isinstance(params, QueueParams):
            raise _rejected(self, TypeError(f"params must be a QueueParams, not {params!r}"))
        self.params = params
        self._queues = {
            "draft": DraftQueue(
                params, w_domain=QUEUE_DOMAINS["draft"][0], r_domain=QUEUE_DOMAINS["draft"][1]
            ),
            "feedback": Queue(
                feedback_entry_layout(params),
                params.feedback_depth,
                w_domain=QUEUE_DOMAINS["feedback"][0],
                r_domain=QUEUE_DOMAINS["feedback"][1],
            ),
            "preverify": Queue(
                preverify_entry_layout(params),
                params.preverify_depth,
                w_domain=QUEUE_DOMAINS["preverify"][0],
                r_domain=QUEUE_DOMAINS["preverify"][1],
            ),
        }
        members = {}
        for name, queue in self._queues.items():
            for member, flow in queue.signature.members.items():
                members[f"{name}_{member}"] = flow
        super().__init__(wiring.Signature(members))

    def member_domains(self) -> dict[str, str]:
        """The clock domain of every member (``draft_w`` -> ``"pim"``, ...)."""
        writer_side = ("w", "w_level")
        return {
            f"{name}_{member}": queue.w_domain if member in writer_side else queue.r_domain
            for name, queue in self._queues.items()
            for member in queue.signature.members
        }

    def elaborate(self, platform):
        m = Module()
        for name, queue in self._queues.items():
            m.submodules[name] = queue
            for member in queue.signature.members:
                ours, theirs = getattr(self, f"{name}_{member}"), getattr(queue, member)
                if member in ("w", "r"):
                    wiring.connect(m, wiring.flipped(ours), theirs)
                elif queue.signature.members[member].flow == wiring.In:
                    m.d.comb += theirs.eq(ours)
                else:
                    m.d.comb += ours.eq(theirs)
        return m
