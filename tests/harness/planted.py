"""Planted bugs in the real RTL: a block's class rebuilt from its module's source with one
change, so that a test can show a check fails on exactly that bug."""

from __future__ import annotations

import inspect
import sys


def planted(component: type, old: str, new: str) -> type:
    """``component`` rebuilt from its module's source with the one occurrence of ``old``
    replaced by ``new``."""
    module = sys.modules[component.__module__]
    source = inspect.getsource(module)
    assert source.count(old) == 1, f"the planted bug's target must occur once: {old}"
    namespace = {"__name__": f"{module.__name__}_planted"}
    exec(compile(source.replace(old, new), module.__file__, "exec"), namespace)
    return namespace[component.__name__]


#: Bugs planted by hand that a tier must catch, by name: ``(old, new)`` source replacements
#: in the block's module (:func:`planted`). Each is run by the tests named beside it.
#: ``queues.epoch_bit0``: the draft queue's stale test on bit 0 of the epoch only, so an entry
#: two epochs old passes as current (tests/queues/test_formal.py's epoch proof and data
#: check, tests/queues/test_cocotb.py's random tier with bursts of bumps).
CATALOGUE = {
    "queues.epoch_bit0": ("(head.epoch != self.r_epoch)", "(head.epoch[0] != self.r_epoch[0])"),
}
