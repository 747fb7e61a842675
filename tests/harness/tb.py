"""Testbench-side helpers for cocotb modules (imported inside the simulator process).

The drivers, the clocking discipline and payload packing live in the testbench library
(:mod:`ahasd.hw.tb`, shared with ``ahasd cosim``) and are re-exported here under the names
the testbenches import. What stays here is the pytest side's protocol: the parameters and
the seed it passes in the environment, and the ``AHASD:`` lines it echoes.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from ahasd.hw.tb.clocking import drive_slot, reset, sample_slot
from ahasd.hw.tb.streams import StreamSink, StreamSource, pack, unpack

__all__ = [
    "PREFIX",
    "StreamSink",
    "StreamSource",
    "drive_slot",
    "pack",
    "params_from_env",
    "report",
    "reset",
    "rng_from_env",
    "sample_slot",
    "unpack",
]

PREFIX = "AHASD:"


def params_from_env(cls: type) -> Any:
    """The parameter dataclass the pytest side passed in ``AHASD_TB_PARAMS``."""
    return cls(**json.loads(os.environ.get("AHASD_TB_PARAMS", "{}")))


def rng_from_env(salt: str = "") -> random.Random:
    """A ``random.Random`` seeded from the run's seed (and ``salt``, for independent streams).

    The pytest side passes the seed as ``AHASD_TB_SEED`` (derived from ``AHASD_SEED`` when set).
    """
    seed = int(os.environ.get("AHASD_TB_SEED", "0"))
    return random.Random(f"{seed}:{salt}")


def report(dut: Any, message: str) -> None:
    """Log a measurement; the pytest side echoes these lines."""
    dut._log.info(f"{PREFIX} {message}")
