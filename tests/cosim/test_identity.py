"""Co-simulation identity: the RTL controller in the loop decides as the golden controller.

For 2 modes x 2 policies on 256-token synthetic traces, ``ahasd.sim.cosim.run_cosim`` runs the
system model with every EDC/TVC/GTSU decision taken by the Verilog of the controller top
(cocotb + Verilator); the golden run is ``ahasd.sim.modes.simulate`` with its default
golden controller. The decision sequences (every controller call with its inputs and answer)
and the whole summary must be equal; on a mismatch the first divergence is printed.

The policies are the two that exercise the TVC and the GTSU most (``adaedl`` and
``banditspec`` ask the TVC and switch the ranks; ``svip`` never asks). Run time: one
Verilator build of the top (shared with tests/top under build/cocotb/verilator; ~2.5 min
cold), then 3-6 s per run, ~40 s for the folder.

``ahasd`` runs on a configuration whose TVC values fit the top's widths and on which
pre-verifications are ordered and find rejections, so the early rollbacks reach the EDC
(spec 2.1): on the paper's pairs and platform a target token on the PIM costs more than a
verification on the NPU, TVC never orders one, and the 32-bit tables would saturate (the
model refuses them, docs/system-model.md "TVC widths"). The configuration: Table 2's PIM
figures read per unit (tests/sim/specs) with the device file's fixed split of 8 target
ranks (with the target on just the ranks its footprint needs, the default, a target token
on the PIM costs more than the NPU's pass), SmolLM-135M drafting for OPT-1.3B at an i.i.d.
acceptance of 0.7, a draft queue of 16 tokens. On it both policies order pre-verifications
that find rejections (adaedl 32 passes, 14 useful; banditspec 14, 11); the NPU's cost from
``make validate`` leaves too little headroom for banditspec's batches with a smaller target
or a lower acceptance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahasd.params import GTSUParams
from ahasd.sim.cosim import (
    first_divergence,
    model_top_params,
    run_cosim,
    run_model,
    settings_to_dict,
)
from ahasd.sim.settings import RunSettings

ROOT = Path(__file__).resolve().parents[2]
# The cocotb harness builds the same top (same Verilog text) here for tests/top: share it.
BUILD = ROOT / "build" / "cocotb" / "verilator"
TOKENS = 256
# Where pre-verification happens and fits 32-bit TVC tables (module docstring).
PREVERIFYING = {
    "pim": "lpddr5-pim-x16",
    "spec_dirs": (str(ROOT / "tests" / "sim" / "specs"),),
    "draft_model": "smollm-135m",
    "target_model": "opt-1.3b",
    "trace": "iid:0.7",
    "draft_queue_tokens": 16,
    "rank_split": "fixed",
}


def _cosim(settings: RunSettings, *, feedback: bool = False, irq: bool = False) -> dict:
    name = f"test-{settings.mode}-{settings.policy}-{settings.tokens}"
    name += ("-fb" if feedback else "") + ("-irq" if irq else "")
    run = run_cosim(
        {"settings": settings_to_dict(settings), "feedback": feedback, "irq": irq},
        model_top_params(settings),
        run_name=name,
        build_root=BUILD,
    )
    return json.loads(run.result_file.read_text())


@pytest.mark.cocotb
@pytest.mark.parametrize("mode", ["pim-async-aau-edc", "ahasd"])
@pytest.mark.parametrize("policy", ["adaedl", "banditspec"])
def test_cosim_identical_to_golden(mode, policy):
    scenario = PREVERIFYING if mode == "ahasd" else {}
    settings = RunSettings(
        mode=mode, pair="opt-1.3b-6.7b", policy=policy, tokens=TOKENS, **scenario
    )
    golden, golden_log = run_model(settings)
    result = _cosim(settings)
    stats = result["cosim"]
    print(f"AHASD: {mode} {policy}: {json.dumps(stats)}")
    divergence = first_divergence(golden_log, result["log"])
    assert divergence is None, (
        f"first divergence at call {divergence['index']}, cycle {divergence['cycle']}, "
        f"event {divergence['event']}: golden {divergence['golden']}, cosim {divergence['cosim']}"
    )
    different = {k: (golden[k], result["summary"].get(k)) for k in golden}
    different = {k: v for k, v in different.items() if v[0] != v[1]}
    assert not different, f"summaries differ (golden, cosim): {different}"
    assert result["summary"].keys() == golden.keys()
    assert len(golden_log) > 300  # the run did exercise the controller
    # The RTL answered every EDC decision after the top's documented 2 cycles (docs/top.md).
    assert set(stats["edc_decision_latency"]) == {"2"}
    if mode == "ahasd":
        assert stats["tvc_answer_latency"], "no ASK reached the RTL"
        # Pre-verifications found rejections: early rollbacks went through the RTL EDC.
        assert golden["preverify_useful"] > 0
        # Spec 2.5 / GTSUParams: a switch is t_off + t_on cycles.
        gtsu = GTSUParams()
        assert set(stats["gtsu_switch_cycles"]) == {str(gtsu.t_off + gtsu.t_on)}
        assert stats["warps"] > 0
    # NCR was counted or warped, never set back: the RTL kept the model's time exactly.
    assert stats["rewinds"] == 0


@pytest.mark.cocotb
def test_interrupt_driven_run_equals_the_polling_one():
    """``ahasd cosim --irq``: the CPU learns of each pending pre-verification order from
    the interrupt instead of polling PREVERIFY_QUEUE_LEVEL; decisions and summary are the
    same as polling's (and the golden run's). On the configuration where TVC orders
    pre-verifications (module docstring): on the paper's platform it orders none."""
    settings = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="adaedl", tokens=TOKENS, **PREVERIFYING
    )
    golden, golden_log = run_model(settings)
    polling = _cosim(settings)
    interrupts = _cosim(settings, irq=True)
    assert first_divergence(polling["log"], interrupts["log"]) is None
    assert first_divergence(golden_log, interrupts["log"]) is None
    assert interrupts["summary"] == polling["summary"] == golden
    # Each mode learned of every order its own way, and the interrupt had no other cause.
    # An order is posted on each switch of the ranks to PREVERIFY; back-to-back passes
    # share one switch, so there are at most as many orders as passes.
    orders = interrupts["cosim"]["orders_posted"]
    assert orders == polling["cosim"]["orders_posted"]
    assert 0 < orders <= golden["preverify_passes"]
    assert polling["cosim"]["polls"] >= orders
    assert polling["cosim"]["interrupts"] == 0
    assert interrupts["cosim"]["interrupts"] == orders
    assert interrupts["cosim"]["polls"] == 0
    assert interrupts["cosim"]["irq_other_causes"] == []


@pytest.mark.cocotb
def test_rtl_latency_feedback_changes_the_timing():
    """With the RTL's latencies fed back, PIM tasks start later than in the golden timing:
    the run still completes, and its simulated time is no longer the golden one."""
    settings = RunSettings(
        mode="ahasd", pair="opt-1.3b-6.7b", policy="adaedl", tokens=128, **PREVERIFYING
    )
    golden, _ = run_model(settings)
    result = _cosim(settings, feedback=True)
    assert result["cosim"]["feedback"]
    assert result["summary"]["tokens"] == golden["tokens"] == 128
    assert result["summary"]["seconds"] != golden["seconds"]


def test_first_divergence_names_the_first_differing_call():
    golden = [[0, "edc_full", [], False], [10, "tvc_ask", [3], 2], [12, "edc_verify", [], None]]
    same = [list(entry) for entry in golden]
    assert first_divergence(golden, same) is None
    other = [golden[0], [10, "tvc_ask", [3], 1], [13, "edc_verify", [], None]]
    found = first_divergence(golden, other)
    assert found == {
        "index": 1,
        "cycle": 10,
        "event": "tvc_ask",
        "golden": [10, "tvc_ask", [3], 2],
        "cosim": [10, "tvc_ask", [3], 1],
    }
    assert first_divergence(golden, golden[:2])["index"] == 2


def test_register_list_keeps_registers_and_skips_memories_and_temporaries():
    """The warp proof compares every plain register; the parser is checked on hand-written
    Verilog in Amaranth's style (escaped submodule names, escaped temporaries, memories)."""
    from ahasd.sim.cosim.rtl import module_registers

    verilog = "\n".join(
        [
            "module top(clk);",
            "  reg [7:0] count = 8'h00;",
            "  reg \\$12 ;",
            "endmodule",
            "module \\top.tvc (clk);",
            "  reg [31:0] ncr = 32'd0;",
            "  reg busy;",
            "  reg [39:0] storage [63:0];",
            "endmodule",
        ]
    )
    assert module_registers(verilog) == [("", "count"), ("tvc", "ncr"), ("tvc", "busy")]
