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


def planted(component: type, old: str, new: str) -> type:
    """``component`` rebuilt from its module's source with the one occurrence of ``old``
    replaced by ``new``."""
    module = sys.modules[component.__module__]
    source = inspect.getsource(module)
    assert source.count(old) == 1, f"the planted bug's target must occur once: {old}"
    namespace = {"__name__": f"{module.__name__}_planted"}
    exec(compile(source.replace(old, new), module.__file__, "exec"), namespace)
    return namespace[component.__name__]


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
    "top": {
        "read": "a read returns the addressed register's value, as of the cycle it is taken "
        "(docs/registers.md)",
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
        named :attr:`component` (the block itself, or a wrapper around it there)."""
        module = sys.modules[component.__module__]
        assert hasattr(module, self.component), (component, self.component)
        return planted(component, self.old, self.new)


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
        # the writer is never back-pressured: a full queue overwrites its oldest entry
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
    # --- controller top (hw/registers.py) ---------------------------------------------------
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
