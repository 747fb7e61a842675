"""Test harness shared by every block's tests (importable as ``harness`` from tests)."""
