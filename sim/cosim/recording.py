"""Recording the decision sequence of a run, and finding where two recordings differ.

:class:`RecordingController` wraps any controller and records one ``[cycle, event, inputs,
answer]`` per call, so that a golden run and a co-simulation can be compared call by call
(:func:`first_divergence`).
"""

from __future__ import annotations

__all__ = ["RecordingController", "first_divergence"]


class RecordingController:
    """A controller that forwards every call to ``inner`` and records it.

    Attributes
    ----------
    log : list of ``[cycle, event, inputs, answer]``; ``cycle`` is the last PIM cycle the
        engine passed (the TVC calls carry it; the other calls happen "now").
    """

    def __init__(self, inner) -> None:
        self.inner = inner
        self.log: list[list] = []
        self.cycle = 0

    def _record(self, event: str, inputs: list, answer):
        self.log.append([self.cycle, event, inputs, answer])
        return answer

    def edc_full(self) -> bool:
        return self._record("edc_full", [], bool(self.inner.edc_full()))

    def edc_draft(self, entropy_sum: int, length: int) -> bool | None:
        answer = self.inner.edc_draft(entropy_sum, length)
        return self._record(
            "edc_draft", [entropy_sum, length], None if answer is None else bool(answer)
        )

    def edc_verify(self, full: bool, entropy_sum: int, accepted: int) -> None:
        self.inner.edc_verify(full, entropy_sum, accepted)
        self._record("edc_verify", [bool(full), entropy_sum, accepted], None)

    def tvc_learn(self, table: str, cycles: int, length: int) -> None:
        self.inner.tvc_learn(table, cycles, length)
        self._record("tvc_learn", [table, cycles, length], None)

    def tvc_npu_start(self, l_kv: int, cycle: int) -> None:
        self.cycle = cycle
        self.inner.tvc_npu_start(l_kv, cycle)
        self._record("tvc_npu_start", [l_kv], None)

    def tvc_npu_done(self, cycle: int) -> None:
        self.cycle = cycle
        self.inner.tvc_npu_done(cycle)
        self._record("tvc_npu_done", [], None)

    def tvc_ask(self, available: int, cycle: int) -> int:
        self.cycle = cycle
        return self._record("tvc_ask", [available], int(self.inner.tvc_ask(available, cycle)))

    def gtsu_switch(self, task: str) -> int:
        return self._record("gtsu_switch", [task], int(self.inner.gtsu_switch(task)))

    def gtsu_next(self, preverify_pending: bool, draft_wanted: bool) -> str:
        answer = self.inner.gtsu_next(preverify_pending, draft_wanted)
        return self._record("gtsu_next", [bool(preverify_pending), bool(draft_wanted)], answer)

    def counters(self) -> dict:
        return self.inner.counters()


def first_divergence(golden: list, cosim: list) -> dict | None:
    """The first call at which two decision logs differ, or ``None`` when they are equal.

    Returns ``{"index", "cycle", "event", "golden", "cosim"}`` (``golden``/``cosim`` are the
    two ``[cycle, event, inputs, answer]`` entries; one is ``None`` if a log is shorter).
    """
    for index in range(max(len(golden), len(cosim))):
        a = list(golden[index]) if index < len(golden) else None
        b = list(cosim[index]) if index < len(cosim) else None
        if a != b:
            where = a or b
            return {
                "index": index,
                "cycle": where[0],
                "event": where[1],
                "golden": a,
                "cosim": b,
            }
    return None
