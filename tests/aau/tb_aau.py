"""cocotb testbench of the AAU on its generated Verilog, bit for bit against the golden model.

How a run works (``TB.run``): before the clock starts, every vector's elements are packed
into ``i`` payload words and every NORM vector's ``(gamma, beta)`` into ``param`` words, in
one NumPy expression each, with the vector's idle and stall probabilities beside them. One
coroutine then does everything, once per clock cycle, through ``Pin`` s (integer reads and
writes straight through the simulator object, ``ahasd.hw.tb.pins``): after the falling edge
it decides, as before, whether to present the next element and the next parameter entry and
whether ``o`` and ``result`` are ready (the same random draws in the same order, so a seed
gives the same traffic), writes the ports whose value changes, and samples the handshakes; a
transfer happens at the next rising edge iff valid and ready were both high. It waits for
``ReadOnly`` only in a cycle that changes ``o.ready`` or ``param.valid``: every signal it
samples (``i.ready``, ``param.ready``, ``o.valid``, ``o.payload``, ``result.valid``,
``result.payload``) is a function of the AAU's registers and of those two inputs alone
(``hw/aau_front_end.py``, ``hw/aau_back_end.py``), so in any other cycle the values at the
falling edge are what ``ReadOnly`` would show. Back to back, a cycle is one wake-up, one
payload write and a few reads of one bit (and of ``o.payload`` when an element comes out).
Every output word and result is kept and compared at the end of the run with the golden
model's, which is called once per vector (``expected_outputs``); the first mismatch names
its vector and element.

``random_vectors_bit_exact``: ``AHASD_VECTORS`` reduction vectors (``STATS``, ``SUM``,
``MAX``, ``LAYERNORM``, ``RMSNORM``; default 300) of lengths 1 to 4,096 (log-uniform, plus
4,096 itself), with element vectors (``RELU``, ``SILU``, ``GELU``) among them, many
``STATS`` vectors followed by a ``SOFTMAX`` pass and many ``LAYERNORM``/``RMSNORM`` vectors
by a ``NORM`` pass over the same vector (sometimes over a different one, so that
``s_i < 0`` saturates, or ``z`` clamps), with random ``gamma``/``beta`` on the parameter
stream. Directed vectors first: SOFTMAX and NORM before any first pass (the reset state),
length 1, all equal, max first and last, extreme values, ties, an ascending vector (a
rescale at every element), the gates' span ends and every code of their interpolated spans
(:func:`gate_span_vectors`), the reserved mode codes, the NORM post pass's ``U`` with its
leading one at every position and ``N r`` at full scale (:func:`norm_post_pass_vectors`).
A directed vector longer than ``max_length`` is dropped, except an activation vector, which
is cut into pieces that fit (:func:`fitted`: so the mutation campaign's short vectors still
reach the gates' edges). Distributions:
Gaussian logits with sigma 1, 3 and 6 nats, uniform over the whole INT16 range, near
one-hot, heavy-tailed (Student t); for the norms OPT-like activations (Gaussian with a few
channels near +-60) and a mean far above the spread; for the activations pre-activation
values mostly in [-8, 8] with outliers. Traffic alternates, in runs of a few vectors,
between back to back and random valid/ready gaps on the input, the parameter stream and
both outputs (idle and stall probabilities up to 0.5). Every ``result`` field and every
``o`` element is compared, in order, with ``ahasd.golden.aau``. The report line gives the
run's clock cycles, its wall and CPU seconds (of the simulator process) and the clock edges
per second of each (``bench/bench_aau.py`` reads it).

``long_vectors_bit_exact``: vectors of up to ``max_length`` elements (65,536 by default),
back to back: the longest and half of it, lengths one off the powers of two (65,535, 32,769,
16,383, 16,385, 8,191), a SOFTMAX pass over a 65,536- and a 32,768-element vector, the
vectors that fill the widths (equal elements with the largest mantissa, so ``Z`` nears
``2**49``; all ``-32768``, so ``W``, ``SUM``, ``S2`` and ``U`` reach their ends), a
65,536-element LAYERNORM and RMSNORM with their NORM passes, every code once through
RELU, SILU and GELU, a vector of every length class the others miss (1, 2, each power of
two and its neighbours up to ``max_length``, the modes in turn) and a one-element vector in
every mode. Functional coverage (``harness/coverage.py``): every length class, and every mode
at length 1 and at ``max_length``; a missed bin fails the test naming it.

``throughput``: long ``STATS``, ``SOFTMAX``, ``SUM``, NORM and activation vectors back to
back without stalls. Asserts one element per cycle on the input, the result ``N +
RESULT_LATENCY`` cycles after the first element (so ``1 + RESULT_LATENCY / N`` cycles per
element), every element mode's output one element per cycle after ``OUTPUT_LATENCY``, a
NORM's two passes in ``2 N + norm_result_latency + OUTPUT_LATENCY - 1`` cycles; reports
short-vector throughput (limited by the post pass).

Environment: ``AHASD_TB_PARAMS`` (AAUParams as JSON), ``AHASD_TB_SEED``, ``AHASD_VECTORS``.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
from harness.coverage import Coverage
from harness.tb import params_from_env, report, rng_from_env

from ahasd.golden import aau as golden
from ahasd.golden import aau_modes as golden_modes
from ahasd.hw.aau import OUTPUT_LATENCY, REDUCTION_LATENCY, RESULT_LATENCY, norm_result_latency
from ahasd.hw.aau_back_end import element_layout, param_layout
from ahasd.hw.aau_layouts import Mode, input_layout, result_layout
from ahasd.hw.tb.pins import pins
from ahasd.params import AAUParams

VECTORS = int(os.environ.get("AHASD_VECTORS", "300"))
MAX_TEST_LENGTH = 4096
CLOCK_NS = 10
SIGNED_FIELDS = ("max", "sum", "z_exp", "w")
STATS_FIELDS = ("max", "argmax", "z", "z_exp", "w", "recip", "top1", "entropy")
ELEMENT_MODES = (Mode.SOFTMAX, Mode.NORM, Mode.RELU, Mode.SILU, Mode.GELU)
ACTIVATIONS = {
    Mode.RELU: golden_modes.aau_relu,
    Mode.SILU: golden_modes.aau_silu,
    Mode.GELU: golden_modes.aau_gelu,
}
RESERVED_CODES = range(len(Mode), 16)
CODE_MASK = 0xFFFF  # an INT16 code's bit pattern
# where an o payload word holds its element's data and last flag (the same for all params)
OUTPUT_DATA_AT = element_layout(AAUParams())["data"].offset
OUTPUT_LAST_AT = element_layout(AAUParams())["last"].offset


@dataclass
class Vector:
    mode: Mode | int  # an int: a reserved mode code
    codes: np.ndarray
    gamma: np.ndarray | None = None  # NORM: the parameter stream, one entry per element
    beta: np.ndarray | None = None
    in_idle: float = 0.0  # probability of an idle input (and parameter) cycle meanwhile
    out_stall: float = 0.0  # probability of ready low on o and result
    tag: str = ""

    @property
    def code(self) -> int:
        return getattr(self.mode, "value", self.mode)

    @property
    def element(self) -> bool:
        """An element mode: one output per element, no result."""
        return self.mode in ELEMENT_MODES


@dataclass
class Traffic:
    """What came out, with the cycle of each transfer.

    Attributes
    ----------
    inputs : the cycle of every accepted element, in order.
    results : ``(cycle, fields)`` of every result taken.
    element_cycles : the cycle of every ``o`` element taken.
    element_words : the ``o`` payload of every element taken (``data`` and ``last``, as
        :func:`ahasd.hw.aau_back_end.element_layout` packs them).
    cycles : the clock cycles the run took, from its first falling edge to its last.
    """

    inputs: list[int] = field(default_factory=list)
    results: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    element_cycles: list[int] = field(default_factory=list)
    element_words: list[int] = field(default_factory=list)
    cycles: int = 0


@dataclass
class Streams:
    """The stimulus of one run, packed before it starts so that a cycle only indexes lists.

    Attributes
    ----------
    payloads : the ``i`` payload word of every element of every vector, in order.
    in_idle, out_stall : the idle and stall probability of each element's vector.
    params : the ``param`` payload word of every NORM element, in order.
    param_idle : the idle probability of each parameter entry's vector.
    want_results, want_elements : how many results and ``o`` elements the run expects.
    """

    payloads: list[int]
    in_idle: list[float]
    out_stall: list[float]
    params: list[int]
    param_idle: list[float]
    want_results: int
    want_elements: int


class TB:
    """The AAU's ports, its reset and the stream driver and monitor (:meth:`run`).

    Parameters
    ----------
    dut : the cocotb handle of the ``aau`` top level.
    params : AAUParams
        The parameters the Verilog was generated with (payload layouts, result fields).
    """

    def __init__(self, dut, params: AAUParams):
        self.dut = dut
        self.params = params
        self.rng = rng_from_env("aau")
        layout = input_layout(params)
        self.data_at = layout["data"].offset
        self.last_at = layout["last"].offset
        self.mode_at = layout["mode"].offset
        parameters = param_layout(params)
        self.gamma_at = parameters["gamma"].offset
        self.beta_at = parameters["beta"].offset
        self.result_fields = [
            (name, f.offset, f.width, name in SIGNED_FIELDS) for name, f in result_layout(params)
        ]
        self.i_valid, self.i_payload, self.i_ready = pins(dut, "i__valid", "i__payload", "i__ready")
        self.param_valid, self.param_payload, self.param_ready = pins(
            dut, "param__valid", "param__payload", "param__ready"
        )
        self.o_valid, self.o_payload, self.o_ready = pins(dut, "o__valid", "o__payload", "o__ready")
        self.result_valid, self.result_payload, self.result_ready = pins(
            dut, "result__valid", "result__payload", "result__ready"
        )
        # What the testbench drives on each handshake input now: a port is written only when
        # its value changes, and a changed o.ready or param.valid calls for ReadOnly.
        self.driven = {"i_valid": 0, "param_valid": 0, "o_ready": 0, "result_ready": 0}
        self.falling = FallingEdge(dut.clk)

    async def start(self) -> None:
        dut = self.dut
        Clock(dut.clk, CLOCK_NS, unit="ns").start(start_high=False)
        dut.i__valid.value = 0
        dut.i__payload.value = 0  # four-state simulators start every input at X
        dut.param__valid.value = 0
        dut.param__payload.value = 0
        dut.o__ready.value = 0
        dut.result__ready.value = 0
        self.driven = dict.fromkeys(self.driven, 0)
        dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(dut.clk)
        dut.rst.value = 0

    def streams(self, vectors: list[Vector]) -> Streams:
        """Pack ``vectors`` (elements, ``last`` on each vector's final one, the mode on every
        element) and their NORM parameters into payload words."""
        lengths = np.array([len(v.codes) for v in vectors], dtype=np.int64)
        codes = np.concatenate([np.asarray(v.codes, dtype=np.int64) for v in vectors])
        last = np.zeros(codes.size, dtype=np.int64)
        last[np.cumsum(lengths) - 1] = 1
        modes = np.repeat(np.array([v.code for v in vectors], dtype=np.int64), lengths)
        payloads = (
            ((codes & CODE_MASK) << self.data_at) | (last << self.last_at) | (modes << self.mode_at)
        )
        normed = [v for v in vectors if v.gamma is not None]
        if normed:
            gamma = np.concatenate([np.asarray(v.gamma, dtype=np.int64) for v in normed])
            beta = np.concatenate([np.asarray(v.beta, dtype=np.int64) for v in normed])
            params = ((gamma & CODE_MASK) << self.gamma_at) | ((beta & CODE_MASK) << self.beta_at)
            param_idle = np.repeat([v.in_idle for v in normed], [len(v.gamma) for v in normed])
        else:
            params = param_idle = np.zeros(0)
        return Streams(
            payloads=payloads.tolist(),
            in_idle=np.repeat([v.in_idle for v in vectors], lengths).tolist(),
            out_stall=np.repeat([v.out_stall for v in vectors], lengths).tolist(),
            params=params.tolist(),
            param_idle=param_idle.tolist(),
            want_results=sum(1 for v in vectors if not v.element),
            want_elements=sum(len(v.codes) for v in vectors if v.element),
        )

    def unpack_result(self, value: int) -> dict[str, int]:
        fields = {}
        for name, offset, width, is_signed in self.result_fields:
            bits = (value >> offset) & ((1 << width) - 1)
            if is_signed and bits >> (width - 1):
                bits -= 1 << width
            fields[name] = bits
        return fields

    async def run(self, vectors: list[Vector], limit_cycles: int) -> Traffic:
        """Stream ``vectors`` and their parameters; return when every result and element has
        come out and every parameter has been taken."""
        streams = self.streams(vectors)
        payloads, in_idles, out_stalls = streams.payloads, streams.in_idle, streams.out_stall
        param_words, param_idles = streams.params, streams.param_idle
        item_count, param_count = len(payloads), len(param_words)
        want_results, want_elements = streams.want_results, streams.want_elements
        traffic = Traffic()
        inputs, results = traffic.inputs, traffic.results
        element_cycles, element_words = traffic.element_cycles, traffic.element_words
        # the loop below runs once per clock cycle: everything it calls is bound here once
        write_payload, write_param = self.i_payload.write, self.param_payload.write
        write_i_valid, write_param_valid = self.i_valid.write, self.param_valid.write
        write_o_ready, write_result_ready = self.o_ready.write, self.result_ready.write
        read_i_ready, read_param_ready = self.i_ready.read, self.param_ready.read
        read_o_valid, read_o_payload = self.o_valid.read, self.o_payload.read
        read_result_valid, read_result_payload = self.result_valid.read, self.result_payload.read
        falling, read_only = self.falling, ReadOnly()
        random = self.rng.random
        driven = self.driven
        i_valid, param_valid = driven["i_valid"], driven["param_valid"]
        o_ready_driven, result_ready_driven = driven["o_ready"], driven["result_ready"]
        position = param_position = elements_out = 0
        presenting = param_presenting = 0
        out_stall = 0.0
        for cycle in range(limit_cycles):
            await falling
            # The same decisions and random draws, in the same order, as ever: a seed's
            # traffic does not depend on how the ports are written.
            if position < item_count:
                out_stall = out_stalls[position]
                if not presenting:
                    in_idle = in_idles[position]
                    if in_idle == 0.0 or random() >= in_idle:
                        write_payload(payloads[position])
                        presenting = 1
            if not param_presenting and param_position < param_count:
                param_idle = param_idles[param_position]
                if param_idle == 0.0 or random() >= param_idle:
                    write_param(param_words[param_position])
                    param_presenting = 1
            if out_stall == 0.0:
                o_ready = r_ready = 1
            else:
                o_ready = 1 if random() >= out_stall else 0
                r_ready = 1 if random() >= out_stall else 0
            if presenting != i_valid:
                write_i_valid(presenting)
                i_valid = presenting
            if r_ready != result_ready_driven:
                write_result_ready(r_ready)
                result_ready_driven = r_ready
            if param_presenting != param_valid or o_ready != o_ready_driven:
                write_param_valid(param_presenting)
                write_o_ready(o_ready)
                param_valid, o_ready_driven = param_presenting, o_ready
                # i.ready and param.ready follow o.ready and param.valid combinationally
                # (through the back end's ``blocked``): sample them once they have settled.
                await read_only
            # Otherwise no wait: i.ready (the global enable) and param.ready are functions
            # of registers, o.ready and param.valid (hw/aau.py ``en``, hw/aau_back_end.py
            # ``blocked``); o.valid/o.payload are the back end's output register;
            # result.valid/result.payload the post pass's phase and registered fields;
            # i.valid, i.payload, param.payload and result.ready reach only registers. With
            # o.ready and param.valid unchanged since the last rising edge, the values at
            # this falling edge are those ReadOnly would show.
            if presenting and read_i_ready():
                inputs.append(cycle)
                position += 1
                presenting = 0
            if param_presenting and read_param_ready():
                param_position += 1
                param_presenting = 0
            if o_ready and read_o_valid():
                element_cycles.append(cycle)
                element_words.append(read_o_payload())
                elements_out += 1
            if r_ready and read_result_valid():
                results.append((cycle, self.unpack_result(read_result_payload())))
            if (
                position == item_count
                and param_position == param_count
                and elements_out == want_elements
                and len(results) == want_results
            ):
                await falling
                write_i_valid(0)
                write_param_valid(0)
                driven.update(
                    i_valid=0, param_valid=0, o_ready=o_ready_driven, result_ready=r_ready
                )
                traffic.cycles = cycle + 2
                return traffic
        raise AssertionError(
            f"timeout after {limit_cycles} cycles: {position}/{item_count} elements in, "
            f"{param_position}/{param_count} parameters in, "
            f"{len(results)}/{want_results} results, "
            f"{elements_out}/{want_elements} elements out"
        )


def expected_outputs(vectors: list[Vector], params: AAUParams):
    """The golden model's results, and its output elements as ``o`` payload words
    (``data`` | ``last`` << 16, as :func:`ahasd.hw.aau_back_end.element_layout` packs them), in
    stream order; one golden-model call per vector."""
    results, words = [], []
    # Reset state of the unit: R = 0, recip = 0 (docs/aau.md section 6), N = T = r = k = 0
    # (section 9.2).
    held = golden.Stats(max=0, argmax=0, z=0, z_exp=0, w=0, recip=0, top1=0, entropy=0)
    held_norm = golden_modes.NORM_RESET
    for vector in vectors:
        codes = vector.codes
        if vector.element:
            if vector.mode == Mode.SOFTMAX:
                outputs = golden.aau_softmax(codes, params, stats=held)
            elif vector.mode == Mode.NORM:
                outputs = golden_modes.aau_norm(
                    codes, vector.gamma, vector.beta, params, stats=held_norm
                )
            else:
                outputs = ACTIVATIONS[vector.mode](codes, params)
            last = np.zeros(len(codes), dtype=np.int64)
            last[-1] = 1
            bits = np.asarray(outputs, dtype=np.int64) & CODE_MASK
            words.append((bits << OUTPUT_DATA_AT) | (last << OUTPUT_LAST_AT))
            continue
        maximum, argmax = golden.aau_max(codes, params)
        expect = dict.fromkeys(STATS_FIELDS, 0)
        expect.update(
            mode=vector.code,
            max=maximum,
            argmax=argmax,
            sum=golden.aau_sum(codes, params),
            sum_sq=0,
            rstd=0,
            rstd_shift=0,
        )
        if vector.mode in (Mode.LAYERNORM, Mode.RMSNORM):
            # NORM modes: z, z_exp, w, recip, top1, entropy read 0 (docs/aau.md 11)
            held_norm = golden_modes.aau_norm_stats(codes, params, rms=vector.mode == Mode.RMSNORM)
            expect.update(
                sum_sq=held_norm.sum_sq, rstd=held_norm.rstd, rstd_shift=held_norm.rstd_shift
            )
        else:
            # STATS, SUM, MAX and the reserved codes report the accumulators; only STATS
            # runs the dividers (recip, top1 and entropy are 0 otherwise).
            stats = golden.aau_stats(codes, params)
            expect.update({name: int(getattr(stats, name)) for name in STATS_FIELDS})
            assert (stats.max, stats.argmax) == (maximum, argmax)
            if vector.mode == Mode.STATS:
                held = stats
            else:
                expect.update(recip=0, top1=0, entropy=0)
        results.append(expect)
    expected_words = np.concatenate(words) if words else np.zeros(0, dtype=np.int64)
    return results, expected_words


def split_word(word: int) -> tuple[int, int]:
    """``(data, last)`` of an ``o`` payload word."""
    return (word >> OUTPUT_DATA_AT) & CODE_MASK, (word >> OUTPUT_LAST_AT) & 1


def compare(vectors, traffic, expected_results, expected_words) -> list[str]:
    """Every result field and every output element against the golden model's; one line
    per differing result, one for the output elements (how many differ, and the first with
    its vector, its index in the vector, and both values as ``(data, last)``)."""
    errors = []
    got_results = [value for _, value in traffic.results]
    reductions = [v for v in vectors if not v.element]
    for index, (vector, got, want) in enumerate(
        zip(reductions, got_results, expected_results, strict=True)
    ):
        if got != want:
            diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
            errors.append(
                f"result {index} ({vector.tag}, mode {vector.code}, length "
                f"{len(vector.codes)}): (rtl, golden) differ in {diff}"
            )
    got_words = np.asarray(traffic.element_words, dtype=np.int64)
    if got_words.size != expected_words.size:
        errors.append(f"rtl: {got_words.size} output elements, golden: {expected_words.size}")
        return errors
    differ = np.flatnonzero(got_words != expected_words)
    if differ.size:
        first = int(differ[0])
        # the vector (its place in the stream of vectors) and the element within it
        outputs = [n for n, v in enumerate(vectors) if v.element]
        ends = np.cumsum([len(vectors[n].codes) for n in outputs])
        which = int(np.searchsorted(ends, first, side="right"))
        vector = vectors[outputs[which]]
        index = first - int(ends[which]) + len(vector.codes)
        errors.append(
            f"{differ.size} output elements differ; first at stream element {first} "
            f"(element {index} of vector {outputs[which]}: {vector.tag}, mode {vector.code}, "
            f"length {len(vector.codes)}): (data, last) rtl {split_word(int(got_words[first]))}, "
            f"golden {split_word(int(expected_words[first]))}"
        )
    return errors


def clip16(values) -> np.ndarray:
    return np.clip(np.round(values), -32768, 32767).astype(np.int64)


def directed_vectors(rng: np.random.Generator) -> list[Vector]:
    """Edge cases: length 1, all equal, max first/last, extremes, ties, ascending."""
    cases = []
    for code in (0, 1, -1, 32767, -32768, 1000):
        cases.append(("length 1", np.array([code])))
    for code, length in ((0, 4), (-300, 7), (32767, 100), (-32768, 4096), (123, 1000)):
        cases.append(("all equal", np.full(length, code)))
    for length in (2, 100, 4096):
        base = clip16(rng.normal(0, 768, length))
        first = base.copy()
        first[0] = first.max() + 1 if first.max() < 32767 else 32767
        cases.append(("max first", first))
        last = base.copy()
        last[-1] = last.max() + 1 if last.max() < 32767 else 32767
        cases.append(("max last", last))
    cases.append(("extremes", rng.choice([-32768, 32767], 600)))
    cases.append(("extremes, max last", np.array([-32768] * 50 + [32767])))
    cases.append(("extremes, max first", np.array([32767] + [-32768] * 50)))
    cases.append(("ties", np.array([5, 7, 7, 3, 7, -2, 7])))
    cases.append(("ties", np.repeat(clip16(rng.normal(0, 256, 40)), 3)))
    cases.append(("ascending", np.arange(-32768, 32767, 128)))  # R grows at every element
    cases.append(("descending", np.arange(32767, -32768, -97)))
    vectors = []
    for tag, codes in cases:
        vectors.append(Vector(Mode.STATS, codes, tag=tag))
        vectors.append(Vector(Mode.SOFTMAX, codes, tag=tag))
    for tag, codes in cases[::3]:
        vectors.append(Vector(Mode.SUM, codes, tag=tag))
        vectors.append(Vector(Mode.MAX, codes, tag=tag))
    for index, (tag, codes) in enumerate(cases[1::2]):
        first = Mode.RMSNORM if index % 3 == 0 else Mode.LAYERNORM
        vectors.append(Vector(first, codes, tag=tag))
        vectors.append(norm_pass(rng, codes, tag=tag))
    for code in RESERVED_CODES:
        vectors.append(Vector(code, cases[code % len(cases)][1], tag="reserved code"))
    # the gates' span ends (|x| = 4 and 16) and the range's ends, both signs
    edges = np.array([0, 1, -1, 1023, 1024, 1025, 4095, 4096, 4097, 32767, -32768, -32767])
    edges = np.concatenate([edges, -edges[1:-2], np.arange(-1100, 1100, 7)])
    for mode in ACTIVATIONS:
        vectors.append(Vector(mode, edges, tag="span ends"))
    # NORM over another vector: a nearly constant first pass, a wide second one (z clamps)
    vectors.append(Vector(Mode.LAYERNORM, np.array([0, 1] * 20), tag="tiny variance"))
    vectors.append(norm_pass(rng, np.array([-32768, 32767, 0, 1, 1000]), tag="z clamps"))
    return vectors + norm_post_pass_vectors()


def norm_post_pass_vectors() -> list[Vector]:
    """The NORM post pass's datapath at every vector length (all at most 8 long, so they run
    at the mutation campaign's ``max_length`` too).

    ``U``'s leading one through every position: RMSNORM over 1 and over 8 equal codes, ``|X|``
    in steps of ``sqrt 2`` (``U = N**2 (X**2 2**16 + E)``), so each leaf and node of the
    leading-one search decides ``k`` (the ``result``'s ``rstd_shift``) for some vector.
    Every bit of ``N r`` reaching the output: a NORM over its LAYERNORM's own constant
    vector at full scale, ``gamma`` at its maximum: ``c = N X - T = 0`` exactly, so ``y``
    is 0 and an error ``d`` in ``N r`` shows as ``z = X d >> k`` (``k`` is 7 to 10 here: a
    few units of ``z`` for ``d = 2``, tens of units of ``y``).
    """
    vectors = []
    for length in (1, 8):
        for step in range(31):
            code = min(32767, round(2 ** (step / 2)))
            vectors.append(Vector(Mode.RMSNORM, np.full(length, code), tag="U's leading one"))
    for length in range(1, 9):
        codes = np.full(length, 32767)
        vectors.append(Vector(Mode.LAYERNORM, codes, tag="constant, full scale"))
        vectors.append(
            Vector(
                Mode.NORM,
                codes,
                gamma=np.full(length, 32767),
                beta=np.zeros(length, dtype=np.int64),
                tag="constant, full scale",
            )
        )
    return vectors


def gate_span_vectors() -> list[Vector]:
    """Every code of the gate tables' interpolated spans (``|X| < 2**12`` for SILU, ``2**10``
    for GELU, both signs) once: a gate one unit off shows in ``round_shift(X g, 16)`` only
    for the codes whose product lies that close to a rounding step, so only a sweep reaches
    them all (about 10,000 elements, cut to ``max_length`` by :func:`fitted`)."""
    return [
        Vector(Mode.SILU, np.arange(-(1 << 12) + 1, 1 << 12), tag="SILU span"),
        Vector(Mode.GELU, np.arange(-(1 << 10) + 1, 1 << 10), tag="GELU span"),
    ]


def fitted(vectors: list[Vector], longest: int) -> list[Vector]:
    """The vectors of at most ``longest`` elements; a longer activation vector (RELU, SILU,
    GELU: element-wise) cut into pieces of that length, any other longer one dropped (a
    piece of a reduction, or of a NORM pass, would be another test)."""
    fitting = []
    for vector in vectors:
        if len(vector.codes) <= longest:
            fitting.append(vector)
        elif vector.mode in ACTIVATIONS:
            for start in range(0, len(vector.codes), longest):
                piece = vector.codes[start : start + longest]
                fitting.append(Vector(vector.mode, piece, tag=vector.tag))
    return fitting


def norm_pass(rng: np.random.Generator, codes: np.ndarray, tag: str = "") -> Vector:
    """A NORM pass over ``codes`` with gamma around 1 and beta around 0 (Q8.8), and now and
    then a gamma that saturates the output."""
    gamma = clip16(rng.normal(1.0, 0.3, len(codes)) * 256)
    beta = clip16(rng.normal(0.0, 0.2, len(codes)) * 256)
    if rng.random() < 0.1:
        gamma = clip16(rng.normal(0.0, 40.0, len(codes)) * 256)
    return Vector(Mode.NORM, codes, gamma=gamma, beta=beta, tag=tag)


DISTRIBUTIONS = (
    "gauss s=1",
    "gauss s=3",
    "gauss s=6",
    "uniform int16",
    "near one-hot",
    "heavy tail",
)


def codes_of(rng: np.random.Generator, kind: str, length: int) -> np.ndarray:
    """``length`` codes of the distribution ``kind`` (one of :data:`DISTRIBUTIONS`)."""
    if kind.startswith("gauss"):
        sigma = float(kind.removeprefix("gauss s="))
        return clip16(rng.normal(rng.normal(0, 4), sigma, length) * 256)
    if kind == "uniform int16":
        return rng.integers(-32768, 32768, length)
    if kind == "near one-hot":
        codes = clip16(rng.normal(-2, 1, length) * 256)
        codes[rng.integers(length)] = clip16(rng.uniform(8, 40) * 256)
        return codes
    return clip16(rng.standard_t(2.5, length) * 512)


def random_codes(rng: np.random.Generator, length: int) -> tuple[str, np.ndarray]:
    kind = DISTRIBUTIONS[rng.integers(len(DISTRIBUTIONS))]
    return kind, codes_of(rng, kind, length)


def norm_codes(rng: np.random.Generator, length: int) -> tuple[str, np.ndarray]:
    """Inputs of a LayerNorm/RMSNorm: OPT-like activations (Gaussian, a few channels near
    +-60), a mean far above the spread, or any of the logit distributions."""
    kind = rng.integers(3)
    if kind == 0:
        values = rng.normal(0.0, 1.0, length)
        values[rng.integers(length, size=max(1, length // 512))] = rng.choice([-60.0, 60.0])
        return "OPT-like", clip16(values * 256)
    if kind == 1:
        return "offset mean", clip16(rng.normal(rng.uniform(-50, 50), 0.1, length) * 256)
    return random_codes(rng, length)


def activation_codes(rng: np.random.Generator, length: int) -> np.ndarray:
    """Pre-activation FFN values: mostly in [-8, 8], a few outliers anywhere."""
    values = rng.normal(0.0, 2.5, length)
    outliers = rng.random(length) < 0.01
    values[outliers] = rng.uniform(-128, 128, int(outliers.sum()))
    return clip16(values * 256)


def random_vectors(rng: np.random.Generator, count: int, longest: int) -> list[Vector]:
    vectors: list[Vector] = []
    reductions = 0
    modes = [Mode.STATS] * 3 + [Mode.SUM, Mode.MAX, Mode.LAYERNORM, Mode.RMSNORM]
    while reductions < count:
        length = int(np.exp(rng.uniform(0, np.log(longest + 1))))
        length = min(longest, max(1, length))
        if rng.random() < 0.03:
            length = longest
        if rng.random() < 0.2:  # an activation vector between the reductions
            mode = (Mode.RELU, Mode.SILU, Mode.GELU)[rng.integers(3)]
            vectors.append(Vector(mode, activation_codes(rng, length), tag="FFN"))
            continue
        mode = modes[rng.integers(len(modes))]
        if mode in (Mode.LAYERNORM, Mode.RMSNORM):
            tag, codes = norm_codes(rng, length)
        else:
            tag, codes = random_codes(rng, length)
        vectors.append(Vector(mode, codes, tag=tag))
        reductions += 1
        if mode == Mode.STATS and rng.random() < 0.4:
            if rng.random() < 0.1:  # a different vector: some s_i < 0 saturate
                _, codes = random_codes(rng, length)
            vectors.append(Vector(Mode.SOFTMAX, codes, tag=tag))
        if mode in (Mode.LAYERNORM, Mode.RMSNORM) and rng.random() < 0.7:
            if rng.random() < 0.1:  # a different vector: z may clamp
                _, codes = random_codes(rng, length)
            vectors.append(norm_pass(rng, codes, tag=tag))
    return vectors


def assign_traffic(vectors: list[Vector], rng: np.random.Generator) -> None:
    """Runs of a few vectors: back to back, or random gaps on the input, the outputs or
    both."""
    position = 0
    while position < len(vectors):
        run = int(rng.integers(1, 6))
        pattern = rng.integers(4)
        in_idle = float(rng.uniform(0.05, 0.5)) if pattern in (1, 3) else 0.0
        out_stall = float(rng.uniform(0.05, 0.5)) if pattern in (2, 3) else 0.0
        for vector in vectors[position : position + run]:
            vector.in_idle, vector.out_stall = in_idle, out_stall
        position += run


@cocotb.test(timeout_time=600, timeout_unit="sec")
async def random_vectors_bit_exact(dut):
    """Directed and random vectors with random valid/ready gaps, against the golden model."""
    params = params_from_env(AAUParams)
    tb = TB(dut, params)
    rng = np.random.default_rng(tb.rng.randrange(1 << 32))
    await tb.start()

    # SOFTMAX and NORM before any first pass: the reset R = 0, recip = 0, N r = T r = k = 0.
    vectors = [Vector(Mode.SOFTMAX, np.array([0, -100, 177, 178, 32767]), tag="reset")]
    vectors.append(norm_pass(rng, np.array([5, -32768, 32767]), tag="reset"))
    vectors += directed_vectors(rng) + gate_span_vectors()
    vectors = fitted(vectors, params.max_length)
    missing = max(0, VECTORS - sum(not v.element for v in vectors))
    vectors += random_vectors(rng, missing, min(MAX_TEST_LENGTH, params.max_length))
    assign_traffic(vectors[2:], rng)
    expected_results, expected_elements = expected_outputs(vectors, params)

    total = sum(len(v.codes) for v in vectors)
    started, cpu_started = time.perf_counter(), time.process_time()
    traffic = await tb.run(vectors, limit_cycles=20 * total + 100_000)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    errors = compare(vectors, traffic, expected_results, expected_elements)
    assert not errors, f"{len(errors)} mismatch(es):\n" + "\n".join(errors[:20])

    counts = {mode.name: sum(v.mode == mode for v in vectors) for mode in Mode}
    counts["reserved"] = sum(v.code in RESERVED_CODES for v in vectors)
    lengths = [len(v.codes) for v in vectors]
    cycles = traffic.inputs[-1] - traffic.inputs[0] + 1
    report(
        dut,
        f"{len(vectors)} vectors bit-exact ({counts}); lengths {min(lengths)}..{max(lengths)}, "
        f"{total} elements in {cycles} cycles with gaps; the run in {traffic.cycles} cycles, "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU = {traffic.cycles / wall:.0f} clock edges/s, "
        f"{traffic.cycles / cpu:.0f} per CPU-second",
    )


def long_vectors(rng: np.random.Generator, longest: int) -> list[Vector]:
    """Vectors up to the longest the unit takes: ``longest`` itself (65,536 by default) and
    its half, lengths one off the powers of two, and the vectors that fill the widths: equal
    elements with the largest mantissa (``Z`` close to ``2**49``), all ``-32768`` (``W`` and
    ``SUM`` at their negative ends)."""
    # the code whose fraction f of t = X * log2 e is largest: M close to 2 (docs/aau.md 4.1)
    codes = np.arange(-32768, 32768, dtype=np.int64)
    widest = int(codes[np.argmax(((codes * golden.LOG2E_CODE) >> 16) & 0xFFFF)])
    special = {
        "equal, largest M": lambda n: np.full(n, widest),
        "all -32768": lambda n: np.full(n, -32768),
        "ascending": lambda n: np.linspace(-32768, 32767, n).round().astype(np.int64),
    }
    half = max(1, longest // 2)
    specs = [  # (mode, length, distribution, followed by a SOFTMAX pass over it)
        (Mode.STATS, longest, "gauss s=3", True),
        (Mode.STATS, longest, "equal, largest M", False),
        (Mode.SUM, longest, "all -32768", False),
        (Mode.STATS, longest, "all -32768", False),
        (Mode.STATS, longest - 1, "uniform int16", False),
        (Mode.STATS, half, "near one-hot", True),
        (Mode.MAX, half + 1, "uniform int16", False),
        (Mode.MAX, longest, "ascending", False),  # the argmax at the last index
        (Mode.STATS, half + 1, "ascending", False),
        (Mode.STATS, half // 2 - 1, "heavy tail", False),
        (Mode.SUM, half // 2 + 1, "uniform int16", False),
        (Mode.STATS, half // 4 - 1, "gauss s=6", False),
    ]
    specs += [
        (Mode.LAYERNORM, longest, "gauss s=3", True),
        (Mode.RMSNORM, longest, "all -32768", True),  # the largest S2 and U
        (Mode.LAYERNORM, longest, "all -32768", False),  # the largest |T|, var = 0
        (Mode.RMSNORM, half + 1, "heavy tail", True),
    ]
    vectors = []
    for mode, length, kind, second_pass in specs:
        if not 1 <= length <= longest:
            continue
        made = special[kind](length) if kind in special else codes_of(rng, kind, length)
        vector = Vector(mode, np.asarray(made, dtype=np.int64), tag=f"{kind}, {length}")
        vectors.append(vector)
        if second_pass and mode == Mode.STATS:
            vectors.append(Vector(Mode.SOFTMAX, vector.codes, tag=vector.tag))
        elif second_pass:
            vectors.append(norm_pass(rng, vector.codes, tag=vector.tag))
    vectors += length_class_vectors(rng, longest, {len(v.codes) for v in vectors})
    # every code once through each activation (in pieces of at most ``longest``)
    every = np.arange(-32768, 32768, dtype=np.int64)
    for mode in ACTIVATIONS:
        for start in range(0, every.size, longest):
            piece = every[start : start + longest]
            vectors.append(Vector(mode, piece, tag=f"every code from {piece[0]}"))
    return vectors


def length_classes(longest: int) -> list[int]:
    """The vector lengths the spec's boundaries single out, up to ``longest``: 1, 2 and
    every power of two with its two neighbours."""
    powers = [1 << k for k in range(1, 17)]
    found = {1, 2} | {n + d for n in powers for d in (-1, 0, 1)}
    return sorted(n for n in found if n <= longest)


def length_class_vectors(rng: np.random.Generator, longest: int, present: set[int]) -> list[Vector]:
    """A vector of each length class the other vectors miss, the modes in turn, and a
    one-element vector in every mode (SOFTMAX and NORM after their first pass)."""
    modes = [Mode.STATS, Mode.SUM, Mode.MAX, Mode.LAYERNORM, Mode.RMSNORM, *ACTIVATIONS]
    vectors = []
    missing = [n for n in length_classes(longest) if n not in present]
    for mode, length in zip(itertools.cycle(modes), missing):
        made = (
            activation_codes(rng, length)
            if mode in ACTIVATIONS
            else codes_of(rng, "uniform int16", length)
        )
        vectors.append(Vector(mode, made, tag=f"length class {length}"))
    for mode in modes:
        vectors.append(Vector(mode, codes_of(rng, "gauss s=3", 1), tag="length 1"))
        if mode == Mode.STATS:
            vectors.append(Vector(Mode.SOFTMAX, vectors[-1].codes, tag="length 1"))
        elif mode == Mode.LAYERNORM:
            vectors.append(norm_pass(rng, vectors[-1].codes, tag="length 1"))
    return vectors


def long_coverage(vectors: list[Vector], longest: int) -> Coverage:
    """Bins: every length class (:func:`length_classes`) in some mode, and every mode at
    length 1 and at ``longest``; each once, sampled from the vectors that went through."""
    classes = length_classes(longest)
    bins = dict.fromkeys((f"length {n}" for n in classes), 1)
    for mode in Mode:
        bins |= {f"{mode.name} length 1": 1, f"{mode.name} length {longest}": 1}
    coverage = Coverage("aau.long", bins)
    for vector in vectors:
        length = len(vector.codes)
        if length in classes:
            coverage.sample(f"length {length}")
        if length in (1, longest) and isinstance(vector.mode, Mode):
            coverage.sample(f"{vector.mode.name} length {length}")
    return coverage


@cocotb.test(timeout_time=900, timeout_unit="sec")
async def long_vectors_bit_exact(dut):
    """Vectors of up to ``max_length`` elements, back to back, against the golden model."""
    params = params_from_env(AAUParams)
    tb = TB(dut, params)
    rng = np.random.default_rng(tb.rng.randrange(1 << 32))
    await tb.start()
    vectors = long_vectors(rng, params.max_length)
    expected_results, expected_elements = expected_outputs(vectors, params)
    total = sum(len(v.codes) for v in vectors)
    started, cpu_started = time.perf_counter(), time.process_time()
    traffic = await tb.run(vectors, limit_cycles=2 * total + 10_000)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    errors = compare(vectors, traffic, expected_results, expected_elements)
    assert not errors, f"{len(errors)} mismatch(es):\n" + "\n".join(errors[:20])
    # sampled from vectors that went through bit-exact: each bin is a checked case
    coverage = long_coverage(vectors, params.max_length)
    coverage.write()
    report(dut, coverage.summary())
    coverage.check()
    lengths = sorted({len(v.codes) for v in vectors}, reverse=True)
    report(
        dut,
        f"{len(vectors)} long vectors bit-exact, lengths {lengths}; {total} elements in "
        f"{traffic.cycles} cycles, {wall:.1f} s wall, {cpu:.1f} s CPU = "
        f"{traffic.cycles / wall:.0f} clock edges/s, {traffic.cycles / cpu:.0f} per CPU-second",
    )


@cocotb.test(timeout_time=300, timeout_unit="sec")
async def throughput(dut):
    """Back to back without stalls: 1 element per cycle plus a fixed overhead."""
    params = params_from_env(AAUParams)
    tb = TB(dut, params)
    rng = np.random.default_rng(tb.rng.randrange(1 << 32))
    await tb.start()
    long = min(params.max_length, MAX_TEST_LENGTH)
    lengths = [long, long, min(long, 1000), min(long, 100)]
    stats = [Vector(Mode.STATS, clip16(rng.normal(0, 768, n)), tag="stats") for n in lengths]
    softmax = Vector(Mode.SOFTMAX, stats[-1].codes, tag="softmax")
    sums = Vector(Mode.SUM, clip16(rng.normal(0, 768, long)), tag="sum")
    vectors = [*stats, softmax, softmax, sums]
    traffic = await tb.run(vectors, limit_cycles=10 * sum(len(v.codes) for v in vectors))
    errors = compare(vectors, traffic, *expected_outputs(vectors, params))
    assert not errors, "\n".join(errors)

    # The STATS vectors (each at least as long as the post pass) stream without a gap.
    stats_elements = sum(lengths)
    firsts, lasts = [], []
    position = 0
    for n in lengths:
        firsts.append(traffic.inputs[position])
        lasts.append(traffic.inputs[position + n - 1])
        position += n
    assert traffic.inputs[:stats_elements] == list(
        range(traffic.inputs[0], traffic.inputs[0] + stats_elements)
    ), "the input stalled during back-to-back STATS vectors"
    result_cycles = [cycle for cycle, _ in traffic.results]
    for n, first, last, done in zip(lengths, firsts, lasts, result_cycles, strict=False):
        # result.valid rises RESULT_LATENCY cycles after the last element's input edge and
        # is taken at the next edge: first element to result = N + RESULT_LATENCY cycles.
        assert done - last == RESULT_LATENCY + 1, (n, done - last)
        assert done - first == n + RESULT_LATENCY, (n, done - first)
    per_element = [
        (done - first) / n for n, first, done in zip(lengths, firsts, result_cycles, strict=False)
    ]

    # SOFTMAX: the second pass over the same vector streams one element per cycle.
    soft_in = traffic.inputs[
        stats_elements + len(softmax.codes) : stats_elements + 2 * len(softmax.codes)
    ]
    soft_out = traffic.element_cycles[len(softmax.codes) :]
    assert soft_in == list(range(soft_in[0], soft_in[0] + len(soft_in)))
    assert [o - i for o, i in zip(soft_out, soft_in, strict=True)] == [OUTPUT_LATENCY + 1] * len(
        soft_in
    )
    sum_last = traffic.inputs[-1]
    assert result_cycles[-1] - sum_last == REDUCTION_LATENCY + 1

    # Short vectors back to back: limited by the post pass.
    short = [Vector(Mode.STATS, clip16(rng.normal(0, 768, 8)), tag="short") for _ in range(20)]
    traffic_short = await tb.run(short, limit_cycles=10_000)
    errors = compare(short, traffic_short, *expected_outputs(short, params))
    assert not errors, "\n".join(errors)
    result_cycles = [cycle for cycle, _ in traffic_short.results]
    spacing = {b - a for a, b in itertools.pairwise(result_cycles)}

    report(
        dut,
        "STATS back to back: cycles/element "
        + ", ".join(f"N={n}: {x:.4f}" for n, x in zip(lengths, per_element, strict=True))
        + f" (= 1 + {RESULT_LATENCY}/N: pipeline 6 + copy 1 + divider 32 + combine 1); "
        f"SOFTMAX 1 element/cycle, latency {OUTPUT_LATENCY}; SUM/MAX latency "
        f"{REDUCTION_LATENCY}; 8-element STATS vectors: one result every {sorted(spacing)} cycles",
    )

    # The other modes, back to back from an idle unit: each activation one element per
    # cycle; a NORM (first pass, result, second pass) 2 N cycles plus a fixed overhead.
    overheads = {}
    for n in (long, min(long, 300)):
        codes = clip16(rng.normal(0, 768, n))
        for mode in (*ACTIVATIONS, Mode.LAYERNORM, Mode.RMSNORM):
            if mode in ACTIVATIONS:
                vectors = [Vector(mode, codes, tag=mode.name)]
            else:
                vectors = [Vector(mode, codes, tag=mode.name), norm_pass(rng, codes)]
            traffic = await tb.run(vectors, limit_cycles=10 * n + 10_000)
            errors = compare(vectors, traffic, *expected_outputs(vectors, params))
            assert not errors, "\n".join(errors)
            outputs = traffic.element_cycles
            assert outputs == list(range(outputs[0], outputs[0] + n)), mode
            if mode in ACTIVATIONS:
                assert traffic.inputs == list(range(traffic.inputs[0], traffic.inputs[0] + n))
                assert outputs[0] - traffic.inputs[0] == OUTPUT_LATENCY + 1
            else:
                (result,) = [cycle for cycle, _ in traffic.results]
                assert result - traffic.inputs[n - 1] == norm_result_latency(params) + 1
            overheads.setdefault(mode.name, set()).add(
                outputs[-1] + 1 - traffic.inputs[0] - (n if mode in ACTIVATIONS else 2 * n)
            )
    # the overhead is a fixed latency, the same for both lengths
    assert all(len(values) == 1 for values in overheads.values()), overheads
    report(
        dut,
        "first element in to last output, back to back from idle: "
        + ", ".join(
            f"{name} {'N' if name in ('RELU', 'SILU', 'GELU') else '2 N'} + {values.pop()}"
            for name, values in overheads.items()
        )
        + f" cycles; NORM result latency {norm_result_latency(params)}",
    )
