"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest
from harness.cli import run_cli


@pytest.fixture
def ahasd(capsys):
    """``ahasd(*argv) -> Outcome``: the CLI in-process (``harness.cli.run_cli``)."""
    return lambda *argv: run_cli(capsys, *argv)
