"""Seeds for random tests: printed, and fixed by ``AHASD_SEED`` when set."""

from __future__ import annotations

import os
import random


def choose_seed(default: int | None = None) -> int:
    """The seed a random test uses: ``AHASD_SEED`` if set, else ``default``, else a fresh one.

    The value is printed so a failure can be replayed with ``AHASD_SEED=<seed> make test``
    (pytest shows captured output of failing tests).
    """
    if "AHASD_SEED" in os.environ:
        seed = int(os.environ["AHASD_SEED"])
    elif default is not None:
        seed = default
    else:
        seed = random.SystemRandom().randrange(1 << 31)
    print(f"seed: {seed} (replay with AHASD_SEED={seed})")
    return seed


def seed_offsets(count: int) -> list:
    """Parameters ``0 .. count - 1`` (ids ``seed0``, ``seed1``, ...) of a random test run on
    that many seeds, its seed plus the offset. Offsets above 0 are marked ``extra_seed``:
    ``make test`` runs the first seed only, ``make regress`` every offset of every seed."""
    import pytest

    return [
        pytest.param(offset, id=f"seed{offset}", marks=[pytest.mark.extra_seed] if offset else [])
        for offset in range(count)
    ]
