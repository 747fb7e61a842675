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
