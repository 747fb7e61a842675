"""Planted bugs in the real RTL: a block's class rebuilt from its module's source with one
change, so that a test can show a check fails on exactly that bug.

:data:`CATALOGUE` keeps every bug planted by hand, each with the documented invariant it
breaks (:data:`INVARIANTS`, the "Invariants" paragraphs of docs/spec.md and the rules of
docs/spec-decisions.md) and the checks that must catch it. A check is a test that
parametrises over :func:`cases` with its own name and expects a failure on every bug it
receives: a bug the check no longer catches fails that test, and so fails ``make test`` (or,
for a check marked ``long``, its sample and ``make long``). ``tests/test_planted.py`` holds
the catalogue whole: every invariant has a bug, every bug names a check, every check
exists.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType


def planted(component: type, old: str, new: str) -> type:
    """``component`` rebuilt from its module's source with the one occurrence of ``old``
    replaced by ``new``."""
    return _executed(sys.modules[component.__module__], old, new)[component.__name__]


def planted_within(block: type, module_name: str, old: str, new: str) -> type:
    """``block`` rebuilt so that the module ``module_name`` (of ``ahasd.hw``) it reaches
    through its imports carries the bug (``old`` replaced by ``new``, once).

    Every module of ``ahasd.hw`` on the way from the block's module to ``module_name`` is
    executed afresh with the names it imported from a rebuilt module bound to the rebuilt
    objects (its classes and functions; enums included, so a wrapper must take the block's
    own), the other modules are shared; so ``ControllerTop`` gets the planted
    ``RegisterFile``, ``AAU`` the planted ``Exp2Unit`` through its ``FrontEnd``.
    """
    namespace = _rebuilt(sys.modules[block.__module__], module_name, old, new, {})
    assert namespace is not None, f"{block.__name__} does not reach {module_name}"
    return namespace[block.__name__]


def _executed(module, old: str | None = None, new: str = "") -> dict:
    """The namespace of ``module``'s source executed afresh, with ``old`` (once) replaced."""
    source = inspect.getsource(module)
    if old is not None:
        assert source.count(old) == 1, f"the planted bug's target must occur once: {old}"
        source = source.replace(old, new)
    namespace = {"__name__": f"{module.__name__}_planted"}
    exec(compile(source, module.__file__, "exec"), namespace)
    return namespace


def _rebuilt(module, target: str, old: str, new: str, done: dict) -> dict | None:
    """``module``'s namespace rebuilt with the bug in ``target``, or None when ``module``
    does not reach ``target`` (each module rebuilt once: ``done``)."""
    if module.__name__ not in done:
        if module.__name__ == target:
            done[module.__name__] = _executed(module, old, new)
        else:
            rebound = {}
            for name, value in vars(module).items():
                origin = getattr(value, "__module__", None)
                if not isinstance(value, type | FunctionType) or origin == module.__name__:
                    continue
                if origin in sys.modules and origin.startswith("ahasd.hw."):
                    rebuilt = _rebuilt(sys.modules[origin], target, old, new, done)
                    if rebuilt is not None:
                        rebound[name] = rebuilt[value.__name__]
            namespace = None
            if rebound:
                # in place: the rebuilt functions look their globals up in this dict
                namespace = _executed(module)
                namespace.update(rebound)
            done[module.__name__] = namespace
    return done[module.__name__]


#: The documented invariants a planted bug may break, by block (docs/spec.md section 2).
INVARIANTS = {
    "edc": {
        "llr": "LLR equals the number of in-flight indices and never exceeds its maximum",
        "counter": "a PHT counter moves by at most one per event and never wraps",
        "trained": "only the entry that predicted a batch is trained for it, and only once",
        "bucket": "the entropy bucket is the spec's formula (k*L*Hmax <= 8*S)",
    },
    "queues": {
        "no_drop": "nothing is dropped: a full queue back-pressures its writer",
        "no_duplicate": "nothing is duplicated: a squashed or read entry is never read again",
        "no_stale": "no entry of an older epoch is ever delivered after a squash",
        "level": "the reader sees its fill level: the entries written, as its synchroniser "
        "shows them, less those read",
        "reset": "a writer's reset of any length empties its queue, and no entry accepted "
        "after it is lost",
    },
    "tvc": {
        "bound": "an answer n is at most min(P, N_max)",
        "no_room": "n = 0 whenever C_left <= 0",
        "completes": "every LEARN and ASK completes exactly once",
    },
    "gtsu": {
        "one_role": "no rank is ever enabled for both roles at once",
        "gated_off": "no rank is enabled while it is being gated",
        "overlap": "a rank in both masks is never enabled",
    },
    # docs/aau.md sections 11 and 15 (spec 2.4 makes aau.md the unit's definition)
    "aau": {
        "exact": "every result field and output element is the arithmetic of docs/aau.md, "
        "bit for bit (max and argmax: max_i X_i and the lowest index holding it)",
        "one_per_vector": "a reduction vector gives one result, an element vector one output "
        "per element, in input order",
        "no_loss": "nothing is dropped: backpressure only delays, every output is held until taken",
    },
    # docs/integration.md "The bus: AXI4-Lite" and "The interrupt", docs/registers.md
    "top": {
        "read": "a read returns the addressed register's value, as of the cycle it is taken "
        "(docs/registers.md)",
        "strobe": "a write changes only the bytes of the addressed register its WSTRB enables",
        "refused": "SLVERR for an address no register covers and for a write to a read-only "
        "register",
        "irq": "irq is high while an IRQ_STATUS cause and its IRQ_ENABLE bit are both 1",
        "sticky": "a cause is set at the edge after its condition rises and cleared only by "
        "writing 1 to it; one that rises in the cycle of the clearing write stays set",
        "wide": "a 64-bit register is written whole by the write of its high word, with the "
        "low bytes written since the last one",
    },
}


#: The checks a planted bug may name: the test that runs it (parametrised over
#: :func:`cases` of this name) and what the check is.
CHECKS = {
    "edc.state_proof": (
        "tests/edc/test_formal.py::test_state_proof_fails_on_planted_bugs",
        "formal: the state proof (k-induction)",
    ),
    "edc.bucket_check": (
        "tests/edc/test_formal.py::test_bucket_check_fails_on_planted_bugs",
        "formal: the bucket check",
    ),
    "queues.pointer_proof": (
        "tests/queues/test_formal.py::test_pointer_proof_fails_on_planted_bugs",
        "formal: the pointer proof of the three queues (k-induction, free clocks)",
    ),
    "queues.epoch_proof": (
        "tests/queues/test_formal.py::test_epoch_checks_fail_on_planted_bugs",
        "formal: the epoch proof (k-induction, free clocks)",
    ),
    "queues.epoch_data": (
        "tests/queues/test_formal.py::test_epoch_checks_fail_on_planted_bugs",
        "formal: the epochs' bounded data check",
    ),
    "queues.cocotb": (
        "tests/queues/test_cocotb.py::test_queues_testbench_fails_on_planted_bugs",
        "cocotb: the random tier (epoch bumps in bursts)",
    ),
    "tvc.answer_proof": (
        "tests/tvc/test_formal.py::test_answer_proof_fails_on_planted_bugs",
        "formal: the answer proof (k-induction)",
    ),
    "tvc.safety_proof": (
        "tests/tvc/test_formal.py::test_safety_proof_fails_on_planted_bugs",
        "formal: the answer bound and no lost command (k-induction)",
    ),
    "gtsu.safety_proof": (
        "tests/gtsu/test_formal.py::test_safety_proof_fails_on_planted_bugs",
        "formal: the safety proof (k-induction)",
    ),
    "aau.reduction_proof": (
        "tests/aau/test_formal.py::test_reduction_proof_fails_on_planted_bugs",
        "formal: the MAX results of the first vector (BMC, every input and length)",
    ),
    "aau.cocotb": (
        "tests/aau/test_cocotb.py::test_aau_testbench_fails_on_planted_bugs",
        "cocotb: the random vectors against the golden model (the campaign's 150)",
    ),
    "top.register_walk": (
        "tests/top/test_cocotb.py::test_register_walk_fails_on_planted_bugs",
        "cocotb: the register walk through the AXI port",
    ),
    "top.integration": (
        "tests/top/test_cocotb.py::test_integration_fails_on_planted_bugs",
        "cocotb: the integration test against the golden controller",
    ),
    "top.clear_cycle": (
        "tests/top/test_amaranth.py::test_clear_check_fails_on_planted_bugs",
        "Amaranth: a cause rising before, in and after the cycle of its clearing write (the "
        "register file alone)",
    ),
    "top.read_mux_proof": (
        "tests/top/test_formal.py::test_read_mux_proof_fails_on_planted_bugs",
        "formal: the read-mux proof (k-induction, every register's value free)",
    ),
}


@dataclass(frozen=True)
class PlantedBug:
    """One hand-planted bug: ``old`` replaced by ``new`` in the module of ``component``.

    ``invariant`` is a key of :data:`INVARIANTS` for ``block``; ``caught_by`` names the
    checks (see :func:`cases`) that must fail on it.
    """

    block: str
    component: str
    old: str
    new: str
    invariant: str
    caught_by: tuple[str, ...]

    @property
    def tag(self) -> str:
        """A short name of the change, for build folders."""
        return f"planted-{zlib.crc32((self.old + self.new).encode()):08x}"

    def build(self, component: type) -> type:
        """``component`` with this bug planted: a class of the module that defines the class
        named :attr:`component` (the block itself, or a wrapper around it there), or a block
        that reaches that module through its imports (:func:`planted_within`: the top and
        its register file, the AAU and its sub-components)."""
        (home,) = [
            name
            for name, module in sys.modules.items()
            if name.startswith("ahasd.hw.")
            and getattr(getattr(module, self.component, None), "__module__", None) == name
        ]
        if home == component.__module__:
            return planted(component, self.old, self.new)
        return planted_within(component, home, self.old, self.new)


CATALOGUE = {
    # --- EDC (hw/edc.py) -------------------------------------------------------------------
    "edc.trains_current_index": PlantedBug(
        "edc",
        "EDC",
        "trained_index = self.inflight[0]",
        "trained_index = index_next",
        "trained",
        ("edc.state_proof",),
    ),
    "edc.training_waits_for_o": PlantedBug(
        # a VERIFY executed while two decisions wait on o trains no entry (mutant #3's bug,
        # for every entry): invisible while o is drained, since the buffer never fills then
        "edc",
        "EDC",
        "with m.If(verify_ok & write_select[entry_index]):",
        "with m.If(verify_ok & decisions.w_rdy & write_select[entry_index]):",
        "trained",
        ("edc.state_proof",),
    ),
    "edc.decision_dropped": PlantedBug(
        # a DRAFT executes without room on o: its decision is lost and LLR runs ahead of the
        # in-flight queue
        "edc",
        "EDC",
        "fire = s1_valid & (~emits | decisions.w_rdy)",
        "fire = s1_valid",
        "llr",
        ("edc.state_proof",),
    ),
    "edc.counter_wraps": PlantedBug(
        "edc",
        "EDC",
        "Mux(trained == counter_max, trained, trained + 1)",
        "trained + 1",
        "counter",
        ("edc.state_proof",),
    ),
    "edc.llr_past_max": PlantedBug(
        # the refusal rule lets a DRAFT in with LLR at its maximum
        "edc",
        "EDC",
        "~(head_is_draft & (llr_next == llr_max))",
        "~(head_is_draft & (llr_next == llr_max + 1))",
        "llr",
        ("edc.state_proof",),
    ),
    "edc.bucket_ge": PlantedBug(
        # 8*S - 1 >= k*L*Hmax is 8*S > k*L*Hmax: every threshold moved one step up
        "edc",
        "EDC",
        "scaled_sum = entropy_sum << EDCParams.BUCKET_BITS",
        "scaled_sum = (entropy_sum << EDCParams.BUCKET_BITS) - 1",
        "bucket",
        ("edc.bucket_check",),
    ),
    # --- queues (hw/queues.py) --------------------------------------------------------------
    "queues.no_backpressure": PlantedBug(
        # the writer is never back-pressured: an entry offered to a full queue is taken and
        # lost (the FIFO refuses it)
        "queues",
        "AsyncQueues",
        "self.w.ready.eq(fifo.w_rdy)",
        "self.w.ready.eq(1)",
        "no_drop",
        ("queues.pointer_proof",),
    ),
    "queues.squash_keeps_head": PlantedBug(
        # a stale head is reported squashed but not popped (read again later)
        "queues",
        "AsyncQueues",
        "fifo.r_en.eq(stale | self.r.ready)",
        "fifo.r_en.eq(self.r.ready)",
        "no_duplicate",
        ("queues.pointer_proof",),
    ),
    "queues.reader_sees_writer_level": PlantedBug(
        # the read side's level port shows the write side's level (another clock's register)
        "queues",
        "AsyncQueues",
        "self.r_level.eq(fifo.r_level)",
        "self.r_level.eq(fifo.w_level)",
        "level",
        ("queues.pointer_proof",),
    ),
    "queues.epoch_bit0": PlantedBug(
        # the stale test on bit 0 of the epoch only: an entry two epochs old passes as current
        "queues",
        "DraftQueue",
        "(head.epoch != self.r_epoch)",
        "(head.epoch[0] != self.r_epoch[0])",
        "no_stale",
        ("queues.epoch_proof", "queues.epoch_data", "queues.cocotb"),
    ),
    "queues.writes_during_reset_handshake": PlantedBug(
        # w_rdy without the handshake's hold: an entry taken while the request still holds
        # the writer's side in reset is dropped
        "queues",
        "HandshakeAsyncFIFO",
        "self.w_rdy.eq(~w_full & ~writer_held)",
        "self.w_rdy.eq(~w_full)",
        "reset",
        ("queues.cocotb",),
    ),
    "queues.reader_reset_by_writer_reset_only": PlantedBug(
        # Amaranth's AsyncFIFO's own reset path: the reader's side released two reader edges
        # after a short writer reset, before the writer's zeroed pointer has crossed
        "queues",
        "HandshakeAsyncFIFO",
        "writer_reset | reset_request, r_rst, o_domain=r_domain",
        "writer_reset, r_rst, o_domain=r_domain",
        "reset",
        ("queues.cocotb",),
    ),
    # --- TVC (hw/tvc.py) --------------------------------------------------------------------
    "tvc.answers_at_zero_c_left": PlantedBug(
        # C_left <= 0 made < 0: with PVCT all zero, n = min(P, N_max) instead of 0 (it escaped
        # every tier once)
        "tvc",
        "TVC",
        "no_room = held.c_left[-1] | ~held.c_left.any()",
        "no_room = held.c_left[-1]",
        "no_room",
        ("tvc.answer_proof",),
    ),
    "tvc.answer_above_limit": PlantedBug(
        # the output's clamp min(quotient, min(P, N_max)) made min(quotient, min(P, N_max) + 1)
        "tvc",
        "TVC",
        "Mux(held.answer_n < held.limit, held.answer_n, held.limit)",
        "Mux(held.answer_n < held.limit + 1, held.answer_n, held.limit + 1)",
        "bound",
        ("tvc.answer_proof", "tvc.safety_proof"),
    ),
    "tvc.answer_dropped": PlantedBug(
        # the answer withdrawn after one cycle whether or not the reader took it
        "tvc",
        "TVC",
        'with m.If(states["answering"] & self.ans.ready):',
        'with m.If(states["answering"]):',
        "completes",
        ("tvc.safety_proof",),
    ),
    # --- GTSU (hw/gtsu.py) ------------------------------------------------------------------
    "gtsu.draft_enabled_while_gating": PlantedBug(
        "gtsu",
        "GTSU",
        "self.dlm_enable.eq(Mux(drafting & ~gating, rank_set, 0))",
        "self.dlm_enable.eq(Mux(drafting, rank_set, 0))",
        "gated_off",
        ("gtsu.safety_proof",),
    ),
    "gtsu.both_roles": PlantedBug(
        # the DLM enables follow any task, so a pre-verification enables its ranks for both
        "gtsu",
        "GTSU",
        "self.dlm_enable.eq(Mux(drafting & ~gating, rank_set, 0))",
        "self.dlm_enable.eq(Mux((drafting | preverifying) & ~gating, rank_set, 0))",
        "one_role",
        ("gtsu.safety_proof",),
    ),
    "gtsu.overlap_enabled": PlantedBug(
        # the pre-verification's ranks are the whole TLM mask, overlap included
        "gtsu",
        "GTSU",
        "self.tlm_mask & ~self.dlm_mask,",
        "self.tlm_mask,",
        "overlap",
        ("gtsu.safety_proof",),
    ),
    # --- AAU (hw/aau.py and its sub-components) ---------------------------------------------
    "aau.ties_go_to_the_last": PlantedBug(
        # the max's compare made non-strict: of equal maxima the highest index wins
        "aau",
        "AAU",
        '(tag.x > acc["max"])',
        '(tag.x >= acc["max"])',
        "exact",
        ("aau.reduction_proof",),
    ),
    "aau.argmax_of_the_element_before": PlantedBug(
        "aau",
        "AAU",
        'acc["argmax"].eq(index_now)',
        'acc["argmax"].eq(acc["index"])',
        "exact",
        ("aau.reduction_proof",),
    ),
    "aau.top1_half_rounding": PlantedBug(
        # top1's rounding constant one bit short: round_shift(M_max * recip, 24) adds 2**22
        "aau",
        "PostPass",
        "half = widen(m, Const(1 << (TOP1_SHIFT - 1), TOP1_SHIFT), len(top1_sum) - 1)",
        "half = widen(m, Const(1 << (TOP1_SHIFT - 2), TOP1_SHIFT), len(top1_sum) - 1)",
        "exact",
        ("aau.cocotb",),
    ),
    "aau.exp_interpolation_halved": PlantedBug(
        # the exp unit's interpolation fraction sliced one bit high (r >> 1): every M low
        "aau",
        "Exp2Unit",
        'rest2 = register(f1[:r_bits], "rest2")',
        'rest2 = register(f1[1:r_bits], "rest2")',
        "exact",
        ("aau.cocotb",),
    ),
    "aau.result_per_element": PlantedBug(
        # every reduction element finishes a vector, not only the last
        "aau",
        "AAU",
        "with m.If(accumulate & lane.tag.last):",
        "with m.If(accumulate):",
        "one_per_vector",
        ("aau.reduction_proof", "aau.cocotb"),
    ),
    "aau.output_overwritten": PlantedBug(
        # the pipeline advances while o holds an element not taken: the element is lost
        "aau",
        "AAU",
        "en.eq(~(back_end.blocked | accumulators_busy | softmax_waits | norm_waits))",
        "en.eq(~(accumulators_busy | softmax_waits | norm_waits))",
        "no_loss",
        ("aau.cocotb",),
    ),
    "aau.result_withdrawn": PlantedBug(
        # the result offered for one cycle whether or not the reader took it
        "aau",
        "PostPass",
        "with m.Elif(in_phase[PostPhase.OFFER]), m.If(self.result.ready):",
        "with m.Elif(in_phase[PostPhase.OFFER]):",
        "no_loss",
        ("aau.reduction_proof", "aau.cocotb"),
    ),
    "aau.vector_start_while_stalled": PlantedBug(
        # the input register's vector flags move on a stalled element: a held last element
        # starts a new vector (the formal wrapper's first vector never stalls)
        "aau",
        "FrontEnd",
        "with m.If(advance & self.i.valid):",
        "with m.If(self.i.valid):",
        "one_per_vector",
        ("aau.cocotb",),
    ),
    # --- controller top (hw/top.py, its register file and AXI4-Lite port) ------------------
    "top.read_address_shifted": PlantedBug(
        # the read address's byte offset one bit short: a read of word w returns word 2w
        "top",
        "AXI4LiteSubordinate",
        "ar_word.eq(axi.araddr[self.byte_bits :])",
        "ar_word.eq(axi.araddr[self.byte_bits - 1 :])",
        "read",
        ("top.register_walk", "top.integration"),
    ),
    "top.write_data_unmasked": PlantedBug(
        # the new bytes not masked by WSTRB: a write sets the 1 bits of bytes it does not
        # enable
        "top",
        "RegisterFile",
        "parts.append((old & ~mask) | (access.wdata & mask))",
        "parts.append((old & ~mask) | access.wdata)",
        "strobe",
        ("top.register_walk", "top.integration"),
    ),
    "top.read_only_write_accepted": PlantedBug(
        # a write to a read-only register answered OKAY
        "top",
        "RegisterFile",
        "access.error.eq(~Cat(*hits).any() | (access.write & Cat(*refused).any())),",
        "access.error.eq(~Cat(*hits).any()),",
        "refused",
        ("top.register_walk", "top.integration"),
    ),
    "top.irq_status_or_enable": PlantedBug(
        # a cause or its enable raises irq
        "top",
        "RegisterFile",
        "& self._storage[(IRQ_ENABLE, self.regmap.irq_enable(f.name).name)].any()",
        "| self._storage[(IRQ_ENABLE, self.regmap.irq_enable(f.name).name)].any()",
        "irq",
        ("top.register_walk", "top.integration"),
    ),
    "top.clear_loses_a_rising_cause": PlantedBug(
        # the clearing write forgets a rise in its own cycle (the walk and, on most seeds, the
        # integration test never line the two up)
        "top",
        "RegisterFile",
        "m.d.sync += status.eq((status & ~written[bits]) | rises)",
        "m.d.sync += status.eq(status & ~written[bits])",
        "sticky",
        ("top.clear_cycle",),
    ),
    "top.write_buffer_kept": PlantedBug(
        # the write buffer's strobes never emptied: a later high-word write brings back low
        # bytes written before the previous one
        "top",
        "RegisterFile",
        "m.d.sync += strobes.eq(0)",
        "m.d.sync += strobes.eq(strobes)",
        "wide",
        ("top.register_walk", "top.integration"),
    ),
    "top.switch_count_bit30_in_every_read": PlantedBug(
        # mutant #9 of the first top campaign: bit 30 of the GTSU switch counter ORed into
        # every read, which no simulation shows (it needs 2**30 switches)
        "top",
        "RegisterFile",
        "value & select.replicate(DATA_BITS)",
        'value & (select.replicate(DATA_BITS) | ((reg.name == "GTSU_SWITCHES") << 30))',
        "read",
        ("top.read_mux_proof",),
    ),
}


DOC = Path(__file__).resolve().parents[2] / "docs" / "verification.md"
BEGIN = "<!-- generated by tests/harness/planted.py: begin -->"
END = "<!-- generated by tests/harness/planted.py: end -->"


def table() -> str:
    """The catalogue as the markdown table of docs/verification.md: each bug, the invariant
    it breaks and the checks that catch it (one source of truth: a test compares them)."""
    lines = [
        "| bug | block | the change | invariant broken | caught by |",
        "|---|---|---|---|---|",
    ]
    for name, bug in CATALOGUE.items():
        change = f"`{bug.old}` → `{bug.new}`".replace("|", "\\|")
        checks = "; ".join(CHECKS[check][1] for check in bug.caught_by)
        invariant = INVARIANTS[bug.block][bug.invariant]
        lines.append(f"| `{name}` | {bug.block} | {change} | {invariant} | {checks} |")
    return "\n".join(lines)


def page_table() -> str:
    """The table between the markers of docs/verification.md."""
    text = DOC.read_text()
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip("\n")


def cases(check: str) -> list:
    """The catalogue's bugs that ``check`` must catch, as ``pytest.param``s with the bug's
    name as id (the argument of the parametrised test is the :class:`PlantedBug`)."""
    import pytest

    return [pytest.param(bug, id=name) for name, bug in CATALOGUE.items() if check in bug.caught_by]


def main() -> None:
    """Print the table, or with ``--write`` replace it in docs/verification.md."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--write", action="store_true")
    if parser.parse_args().write:
        text = DOC.read_text()
        head, tail = text[: text.index(BEGIN) + len(BEGIN)], text[text.index(END) :]
        DOC.write_text(f"{head}\n{table()}\n{tail}")
    else:
        print(table())


if __name__ == "__main__":
    main()
