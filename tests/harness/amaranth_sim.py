"""Amaranth-simulator tier: run async testbenches against a component.

Warnings are errors in this tier (pytest's ``filterwarnings = error``), so a deprecated
Amaranth idiom fails the test instead of scrolling past.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from amaranth.sim import Simulator

Testbench = Callable[..., Coroutine[Any, Any, None]]

BUILD = Path(__file__).resolve().parents[2] / "build" / "amaranth-sim"


def simulate(
    dut: Any,
    testbenches: Testbench | Iterable[Testbench],
    *,
    clocks: dict[str, float] | None = None,
    processes: Iterable[Testbench] = (),
    name: str = "sim",
    deadline: float | None = None,
) -> None:
    """Simulate ``dut`` with the given async testbenches until all of them return.

    Parameters
    ----------
    clocks : {domain: period in seconds}, default ``{"sync": 1e-8}``.
    processes : background coroutines (``add_process``) such as stall generators.
    name : waveform file name when ``WAVES=1`` (written to ``build/amaranth-sim/<name>.vcd``).
    deadline : simulated seconds within which every testbench must have returned; a watchdog
        fails the test if one has not (a hung handshake fails instead of hanging pytest).
        The run ends as soon as the testbenches return, whether or not a deadline is given.
    """
    sim = Simulator(dut)
    for domain, period in (clocks or {"sync": 1e-8}).items():
        sim.add_clock(period, domain=domain)
    if callable(testbenches):
        testbenches = [testbenches]
    for testbench in testbenches:
        sim.add_testbench(testbench)
    for process in processes:
        sim.add_process(process)
    if deadline is not None:
        # A background process: it does not keep the run alive once the testbenches return.
        async def watchdog(ctx):
            await ctx.delay(deadline)
            raise AssertionError(f"testbenches still running after {deadline} s simulated")

        sim.add_process(watchdog)
    if os.environ.get("WAVES") == "1":
        BUILD.mkdir(parents=True, exist_ok=True)
        with sim.write_vcd(str(BUILD / f"{name}.vcd")):
            sim.run()
    else:
        sim.run()
