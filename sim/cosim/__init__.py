"""Co-simulation: the system model with the controller top's Verilog deciding for it.

``ahasd cosim`` runs the system model (:mod:`ahasd.sim.modes`) with every EDC, TVC and GTSU
decision taken by the generated Verilog of :class:`ahasd.hw.top.ControllerTop` under
cocotb, and can compare the run with one on the golden controller (``docs/cosim.md``).

:mod:`~ahasd.sim.cosim.recording`
    :class:`RecordingController` (records every controller call) and
    :func:`first_divergence` (the first call at which two records differ).
:mod:`~ahasd.sim.cosim.model`
    The run settings as JSON and back, the top's parameters matching the model's
    controller, and :func:`run_model` (a recorded run of the model on any controller).
:mod:`~ahasd.sim.cosim.rtl`
    :class:`~ahasd.sim.cosim.rtl.RTLController`: the controller protocol on the RTL top,
    built on the testbench library's drivers (:mod:`ahasd.hw.tb.top`), with the time warp.
    Runs inside the simulator process only (it imports cocotb).
:mod:`~ahasd.sim.cosim.job`
    :func:`run_cosim`: build the top (:mod:`ahasd.hw.tb.build`) and run one job in a
    simulator process.
:mod:`~ahasd.sim.cosim.entry`
    The cocotb module that process runs.
"""

from ahasd.sim.cosim.job import CosimRun, build_top, check_build_root, run_cosim
from ahasd.sim.cosim.model import (
    model_inputs,
    model_top_params,
    run_model,
    settings_from_dict,
    settings_to_dict,
)
from ahasd.sim.cosim.recording import RecordingController, first_divergence

__all__ = [
    "CosimRun",
    "RecordingController",
    "build_top",
    "check_build_root",
    "first_divergence",
    "model_inputs",
    "model_top_params",
    "run_cosim",
    "run_model",
    "settings_from_dict",
    "settings_to_dict",
]
