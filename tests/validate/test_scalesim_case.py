"""One GEMM through SCALE-Sim and the cost model (``make validate`` runs them all).

Needs the SCALE-Sim venv that ``make validate`` creates (``build/scalesim-venv``: scalesim
3.0.0 with numpy < 2, about a minute to install): without it the test is skipped and says
so. The expected cycles are worked out here by hand from the weight-stationary dataflow and
the bandwidth, not read from SCALE-Sim.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ahasd.sim.library.loading import load_library

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "scalesim-venv" / "bin" / "python"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists(), reason="no SCALE-Sim venv (make validate creates build/scalesim-venv)"
)


def _validate():
    spec = importlib.util.spec_from_file_location(
        "ahasd_bench_validate", ROOT / "bench" / "validate" / "validate.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ahasd_bench_validate", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


def test_one_qkv_slice_on_the_table2_npu_core_matches_the_hand_figures():
    v = _validate()
    npu = next(n for n in v.NPUS if n.device == "npu-mobile")
    # One core of the 4 x 64x64 NPU: a 1 x 512 x 256 slice (K = 512, N = 256) of a GEMV.
    run = v.scalesim(PYTHON, npu, [["slice", 1, 256, 512]])
    res = run["results"][0]
    assert run["scalesim"] == "3.0.0"
    # Weight stationary: 512/64 x 256/64 = 32 folds; a fold loads 64 rows of weights, streams
    # the M = 1 input row through and drains: 2R + C - 2 + M = 128 + 64 - 2 + 1 = 191 cycles.
    assert res["compute_cycles"] == pytest.approx(32 * 191, rel=0.02)
    # DRAM: 512 x 256 weights + 512 inputs + 256 outputs at 13 words per cycle.
    dram = res["total_cycles"] - res["compute_cycles"]
    assert dram == pytest.approx((512 * 256 + 512 + 256) / 13, rel=0.02)
    # The cost model's roofline for the same GEMV at the same peak (4 x 64 x 64 MAC/cycle at
    # 1 GHz) and bandwidth (4 x 13 B/cycle), scaled to one core's share of the weights: the
    # weight stream, 512 x 256 / 13 cycles, 0.5 % under SCALE-Sim's double-buffered time.
    model = load_library().model("opt-6.7b")
    model_qkv = v.model_seconds(npu, model, 1, 0)["qkv_projection"]
    core_weights = 4096 * (3 * 4096) / 4
    model_slice_cycles = model_qkv * 1e9 * (512 * 256) / core_weights
    assert model_slice_cycles == pytest.approx(512 * 256 / 13, rel=1e-3)
    assert 0.97 < model_slice_cycles / max(res["compute_cycles"], dram) <= 1.0
