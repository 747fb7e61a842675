"""The suite's split into what every run checks and the long checks it samples.

Items marked ``long`` (a formal check or an exhaustive run that takes minutes on a slow
machine) all run by default. With ``AHASD_LONG_SAMPLE=N`` (``make test`` sets it) only N of
the collected long items run, chosen by a seed (``AHASD_LONG_SEED``, or a fresh one); the
others are skipped with a reason naming the seed, so ``-ra`` lists them and any run's
sample can be replayed. ``make long`` runs every long item.

The seed is drawn once, in the process pytest starts, and handed to pytest-xdist's workers
through the environment before they start, so every worker skips the same items (xdist
requires every worker to collect the same tests).
"""

from __future__ import annotations

import os
import random

import pytest

SAMPLE = "AHASD_LONG_SAMPLE"
SEED = "AHASD_LONG_SEED"


def _sample_size() -> int | None:
    text = os.environ.get(SAMPLE, "").strip()
    if not text:
        return None
    try:
        size = int(text)
    except ValueError:
        raise pytest.UsageError(f"{SAMPLE} must be a whole number, not {text!r}") from None
    if size < 0:
        raise pytest.UsageError(f"{SAMPLE} must be 0 or more, not {size}")
    return size


def pytest_configure(config: pytest.Config) -> None:
    if _sample_size() is not None and SEED not in os.environ:
        os.environ[SEED] = str(random.SystemRandom().randrange(1 << 31))


def pytest_report_header(config: pytest.Config) -> str | None:
    size = _sample_size()
    if size is None:
        return None
    seed = os.environ[SEED]
    return (
        f"long checks: a sample of {size} runs (seed {seed}; this sample again: "
        f"{SAMPLE}={size} {SEED}={seed}; all of them: make long)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    size = _sample_size()
    if size is None:
        return
    seed = int(os.environ[SEED])
    long_items = sorted(
        (item for item in items if item.get_closest_marker("long")), key=lambda item: item.nodeid
    )
    chosen = set(random.Random(seed).sample(range(len(long_items)), min(size, len(long_items))))
    reason = (
        f"long check outside this run's sample ({SAMPLE}={size} {SEED}={seed}; make long runs "
        "every long check)"
    )
    for index, item in enumerate(long_items):
        if index not in chosen:
            item.add_marker(pytest.mark.skip(reason=reason))
