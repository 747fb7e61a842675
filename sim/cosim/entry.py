"""The cocotb module ``ahasd cosim`` runs: the system model with the RTL top as controller.

The job comes in the environment (``AHASD_COSIM_JOB``, JSON, written by
:func:`ahasd.sim.cosim.job.run_cosim`): the run settings, the top's parameters, whether to
feed the RTL's latencies back into the model, and where to write the result. The model runs
in a greenlet of the simulator's thread; every controller call switches to a coroutine that
runs it on the RTL (:class:`ahasd.sim.cosim.rtl.InlineRTLController`). The result file
holds the model's summary, the decision log, the co-simulation's statistics and the
wall time.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import cocotb

from ahasd.hw.tb.pins import write_immediately
from ahasd.params import TopParams
from ahasd.sim.cosim.job import JOB_ENV, TOP
from ahasd.sim.cosim.model import model_inputs, run_model, settings_from_dict
from ahasd.sim.cosim.rtl import InlineRTLController, RTLController


@cocotb.test(timeout_time=10, timeout_unit="sec")
async def cosim(dut):
    job = json.loads(os.environ[JOB_ENV])
    settings = settings_from_dict(job["settings"])
    params = TopParams.from_dict(job["top_params"])
    _prepared, _hardware, presets = model_inputs(settings)
    verilog = Path(job["verilog"]) if "verilog" in job else Path.cwd().parent / f"{TOP}.v"
    write_immediately()  # every call drives after the falling edge of pim_clk
    rtl = RTLController(
        dut,
        params,
        presets,
        verilog,
        feedback=bool(job.get("feedback")),
        irq=bool(job.get("irq")),
    )
    await rtl.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    controller = InlineRTLController(rtl)
    summary, log = await controller.run(lambda: run_model(settings, controller))
    wall = time.perf_counter() - started
    stats = rtl.statistics()
    stats["wall_s"] = wall
    stats["cpu_s"] = time.process_time() - cpu_started  # the model and the RTL
    stats["controller_cycles_per_s"] = stats["controller_cycles"] / wall if wall else 0.0
    stats["simulated_cycles_per_s"] = stats["simulated_cycles"] / wall if wall else 0.0
    stats["feedback"] = bool(job.get("feedback"))
    stats["irq"] = bool(job.get("irq"))
    Path(job["result"]).write_text(json.dumps({"summary": summary, "log": log, "cosim": stats}))
    dut._log.info(f"AHASD: cosim {json.dumps(stats)}")
