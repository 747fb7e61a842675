"""``make validate``: the cost model's NPU figures against SCALE-Sim, the PIM's from Table 2's
DRAM timing; writes ``docs/validation.md`` (generated: do not edit by hand).

NPU: SCALE-Sim (``scalesim==3.0.0`` in its own venv, ``build/scalesim-venv``, run through
``scalesim_runner.py``) runs the GEMMs of one verification pass of the target model per
operator at K+1 in :data:`TOKENS`, on one core of each NPU of :data:`NPUS`. First the
known-answer cases (a compute-bound GEMM, a bandwidth-bound GEMV, a GEMV streamed through a
buffer smaller than its weights); then per operator SCALE-Sim's array cycles and DRAM cycles
beside ``sim/cost.py``'s roofline at the same peak and bandwidth (efficiency 1), and the
efficiency factors they imply.

PIM: :mod:`ahasd.sim.pim_schedule` schedules every GEMV of the draft models on one rank.

Usage: ``.venv/bin/python bench/validate/validate.py [--scalesim PYTHON] [--doc PATH]
[--json PATH] [--skip-npu]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ahasd.sim import pim_schedule as ps
from ahasd.sim.cost import operators
from ahasd.sim.library.loading import load_library

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("scalesim_runner.py")
TOKENS = (1, 5, 9, 17, 33, 65)  # K + 1: the last committed token and K drafts
CONTEXT = 512  # cached tokens of the verification pass
TARGET = "opt-6.7b"  # the target whose pass is traced (the small pair's)
SLICE_K, SLICE_N = 512, 256  # the slice of a weight matrix one SCALE-Sim run traces
PIM_RANKS = 8  # the DLM ranks of lpddr5-pim (draft_ranks)
DRAFTS = ("opt-1.3b", "llama2-7b", "palm-like-8b")


@dataclass(frozen=True)
class Npu:
    """An NPU as SCALE-Sim sees it: ``cores`` equal weight-stationary arrays, each with its
    share of the memory bandwidth (``bytes_per_cycle``) at ``clock_hz``."""

    device: str
    cores: int
    rows: int
    cols: int
    bytes_per_cycle: float  # per core, as stated
    word_bytes: int
    clock_hz: float
    sram_kb: tuple[int, int, int]  # per core: ifmap, filter, ofmap
    why: str
    refresh: tuple[int, int, int, str]  # tRP, tRFC, tREFI (cycles) of its memory, source

    @property
    def words_per_cycle(self) -> int:
        """SCALE-Sim's bandwidth is an integer number of words per cycle."""
        return round(self.bytes_per_cycle / self.word_bytes)

    @property
    def peak_macs(self) -> float:
        return self.cores * self.rows * self.cols * self.clock_hz

    @property
    def bandwidth(self) -> float:
        """The bandwidth SCALE-Sim runs at (B/s, all cores)."""
        return self.cores * self.words_per_cycle * self.word_bytes * self.clock_hz


NPUS = (
    Npu(
        "npu-mobile",
        cores=4,
        rows=64,
        cols=64,
        bytes_per_cycle=51.2 / 4,
        word_bytes=1,
        clock_hz=1e9,
        sram_kb=(512, 1024, 512),
        why=(
            "Table 2: matrix unit 16 TOPS INT8 at 1 GHz on 2 compute chips, 8 MB scratchpad, "
            "51.2 GB/s. Under the project's 1 MAC = 1 op, 16 TOPS is 16,384 MACs per cycle: "
            "2 chips x 2 cores x a 64x64 weight-stationary array (the artifact's 4-core "
            "layout at a quarter of the array size), each core with a quarter of the "
            "bandwidth (12.8 B/cycle; SCALE-Sim takes whole words: 13) and of the scratchpad "
            "(2 MB)"
        ),
        refresh=(32, 560, 6240, "Table 2's LPDDR5 timing"),
    ),
    Npu(
        "npu-hbm2-artifact",
        cores=4,
        rows=128,
        cols=128,
        bytes_per_cycle=640.0 / 4,
        word_bytes=2,
        clock_hz=1e9,
        sram_kb=(512, 1024, 512),
        why=(
            "the authors' ONNXim configuration: 4 cores x 128x128 weight-stationary at "
            "1 GHz, FP16 (2-byte words), 640 GB/s of HBM2 (160 B, 80 words per core-cycle)"
        ),
        refresh=(14, 350, 3900, "the artifact's HBM2 timing (PIMSimulator's HBM2 file, 1 ns)"),
    ),
)


def scalesim(python: Path, npu: Npu, gemms, *, patched=False, sram_kb=None) -> dict:
    """Run ``gemms`` (``[name, M, N, K]``) on one core of ``npu`` through SCALE-Sim."""
    job = {
        "array": [npu.rows, npu.cols],
        "dataflow": "ws",
        "bandwidth": npu.words_per_cycle,
        "sram_kb": list(sram_kb or npu.sram_kb),
        "gemms": gemms,
        "patched": patched,
    }
    done = subprocess.run(
        [str(python), str(RUNNER)], input=json.dumps(job), capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"SCALE-Sim failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def pass_gemms(model, m: int, context: int):
    """The GEMMs of one layer of an ``m``-token pass: ``{operator: [(M, K, N, count)]}``,
    ``count`` instances of an ``M x K`` by ``K x N`` product (K the reduction)."""
    h, q, kv, f, d = model.hidden, model.q_dim, model.kv_dim, model.ffn, model.head_dim
    keys = context + m
    return {
        "qkv_projection": [(m, h, q + 2 * kv, 1)],
        "attention_scores": [(m, d, keys, model.heads)],
        "attention_values": [(m, keys, d, model.heads)],
        "output_projection": [(m, q, h, 1)],
        "ffn": [(m, h, f, model.ffn_matrices - 1), (m, f, h, 1)],
    }


def core_slice(npu: Npu, m: int, k: int, n: int, count: int, *, sk=SLICE_K, sn=SLICE_N):
    """What one core traces for ``count`` ``M x K x N`` products and how much it stands for.

    A weight matrix (``count == 1`` or a few) is split over the cores by its ``N`` columns;
    attention heads are dealt to the cores whole. The traced slice is at most ``sk x sn``;
    ``scale`` = the core's weights over the slice's."""
    return _core_share(npu, m, k, n, count, sk, sn)[:2]


def core_words(npu: Npu, m: int, k: int, n: int, count: int) -> float:
    """Words one core reads or writes for its share with every operand moved once: its
    weights, its inputs (``M x K`` per product) and its outputs (``M x N`` columns)."""
    return _core_share(npu, m, k, n, count, SLICE_K, SLICE_N)[2]


def _core_share(npu, m, k, n, count, sk, sn):
    if count >= npu.cores:  # heads: each core takes count / cores of them
        per_core_weights = k * n * count / npu.cores
        n_core = n
    else:
        n_core = math.ceil(n / npu.cores)
        per_core_weights = k * n_core * count
    products = per_core_weights / (k * n_core)
    ks, ns = min(k, sk), min(n_core, sn)
    words = per_core_weights + products * (m * k + m * n_core)
    return (m, ks, ns), per_core_weights / (ks * ns), words


def model_seconds(npu: Npu, model, m: int, context: int) -> dict[str, float]:
    """``sim/cost.py``'s time per operator and layer at SCALE-Sim's peak and bandwidth,
    efficiency 1: ``max(MACs / peak, bytes / bandwidth)``."""
    precise = dataclasses.replace(model, weight_bytes=npu.word_bytes, kv_bytes=npu.word_bytes)
    matrix, _, _ = operators(precise, m, context)
    return {
        name: max(macs / npu.peak_macs, nbytes / npu.bandwidth)
        for name, _, macs, nbytes in matrix
        if name != "lm_head"
    }


def known_answers(python: Path, npu: Npu) -> list[dict]:
    """Cases whose cycles are known by hand, on one core."""
    r, c, bw = npu.rows, npu.cols, npu.words_per_cycle
    big_m = 2048
    gemv_k, gemv_n = 512, 512
    out = []
    run = scalesim(python, npu, [["compute", big_m, c, r], ["gemv", 1, gemv_n, gemv_k]])
    comp, gemv = run["results"]
    # Compute-bound: one fold, the full array busy for M cycles once filled.
    out.append(
        {
            "case": f"compute-bound GEMM {big_m}x{r}x{c} (one fold)",
            "expected": f"{big_m} busy cycles + fill/drain (2R + C = {2 * r + c}): "
            f"utilisation {big_m / (big_m + 2 * r + c):.1%}",
            "measured": f"{comp['compute_cycles']:.0f} cycles, utilisation "
            f"{comp['utilisation_pct']:.1f} %, stalls {comp['stall_cycles']:.0f}",
            "ok": abs(comp["compute_cycles"] - (big_m + 2 * r + c)) <= 4,
        }
    )
    words = gemv_k * gemv_n + gemv_k + gemv_n
    dram = gemv["total_cycles"] - gemv["compute_cycles"]
    out.append(
        {
            "case": f"bandwidth-bound GEMV 1x{gemv_k}x{gemv_n}, operands fit the buffers",
            "expected": f"DRAM {words} words / {bw} per cycle = {words / bw:.0f} cycles",
            "measured": f"{dram:.0f} DRAM cycles (total {gemv['total_cycles']:.0f} - "
            f"array {gemv['compute_cycles']:.0f})",
            "ok": abs(dram - words / bw) / (words / bw) < 0.02,
        }
    )
    # Streamed through a filter buffer of a quarter of the weights (active half: an eighth).
    small = (64, max(16, gemv_k * gemv_n * npu.word_bytes // 4096), 64)
    for patched in (False, True):
        run = scalesim(python, npu, [["stream", 1, gemv_n, gemv_k]], patched=patched, sram_kb=small)
        res = run["results"][0]
        label = "with the stall counted once (patched)" if patched else "as released"
        out.append(
            {
                "case": f"GEMV 1x{gemv_k}x{gemv_n} streamed through a {small[1]} kB filter "
                f"buffer, {label}",
                "expected": f"about {gemv_k * gemv_n / bw:.0f} cycles (weights / bandwidth)",
                "measured": f"{res['compute_cycles']:.0f} cycles incl. "
                f"{res['stall_cycles']:.0f} stall cycles "
                f"({res['compute_cycles'] / (gemv_k * gemv_n / bw):.2f}x)",
                "ok": None,
            }
        )
    return out


def npu_rows(python: Path, npu: Npu, model) -> dict:
    """SCALE-Sim beside the cost model, per operator and K+1; the scaling check."""
    wanted: dict[tuple, None] = {}
    plan = {}
    for m in TOKENS:
        for op, gemms in pass_gemms(model, m, CONTEXT).items():
            for gm, k, n, count in gemms:
                shape, scale = core_slice(npu, gm, k, n, count)
                wanted[shape] = None
                words = core_words(npu, gm, k, n, count)
                plan.setdefault((m, op), []).append((shape, scale, words))
    # Scaling: the QKV projection at K+1 = 17 traced in three slice sizes.
    qkv = pass_gemms(model, 17, CONTEXT)["qkv_projection"][0]
    scaling = [
        core_slice(npu, *qkv, sk=sk, sn=sn) for sk, sn in ((512, 256), (1024, 256), (512, 512))
    ]
    for shape, _ in scaling:
        wanted[shape] = None
    shapes = list(wanted)
    run = scalesim(python, npu, [[f"g{i}", m, n, k] for i, (m, k, n) in enumerate(shapes)])
    got = dict(zip(shapes, run["results"], strict=True))
    rows = []
    for m in TOKENS:
        model_s = model_seconds(npu, model, m, CONTEXT)
        for op in pass_gemms(model, m, CONTEXT):
            array = dram = both = once = both_once = 0.0
            for shape, scale, words in plan[(m, op)]:
                res = got[shape]
                a = res["compute_cycles"] * scale
                d = (res["total_cycles"] - res["compute_cycles"]) * scale
                # The core's share with every operand read from DRAM once (weights, inputs,
                # outputs), at the bandwidth the known-answer GEMV confirms.
                o = words / npu.words_per_cycle
                array, dram, both = array + a, dram + d, both + max(a, d)
                once, both_once = once + o, both_once + max(a, o)
            rows.append(
                {
                    "tokens": m,
                    "operator": op,
                    "array_cycles": array,
                    "dram_cycles": dram,
                    "dram_once_cycles": once,
                    "scalesim_s": both / npu.clock_hz,
                    "scalesim_once_s": both_once / npu.clock_hz,
                    "scalesim_serial_s": (array + dram) / npu.clock_hz,
                    "model_s": model_s[op],
                }
            )
    scale_rows = []
    for (shape, _), (sk, sn) in zip(scaling, ((512, 256), (1024, 256), (512, 512)), strict=True):
        res = got[shape]
        weights = shape[1] * shape[2]
        scale_rows.append(
            {
                "slice": f"{sk}x{sn}" if shape[1:] == (sk, sn) else f"{shape[1]}x{shape[2]}",
                "array_per_weight": res["compute_cycles"] / weights,
                "dram_per_weight": (res["total_cycles"] - res["compute_cycles"]) / weights,
            }
        )
    return {"rows": rows, "scaling": scale_rows, "versions": (run["scalesim"], run["numpy"])}


def crossing(npu: Npu, rows) -> float:
    """K+1 at which the weight operators' array cycles reach their DRAM cycles (activations
    read once): both grow linearly with K+1 (one array cycle per token and fold; one input
    and one output word per token and column), so two straight lines through the first and
    the last K+1 traced meet there."""
    weight_ops = ("qkv_projection", "output_projection", "ffn")

    def totals(m):
        chosen = [r for r in rows if r["tokens"] == m and r["operator"] in weight_ops]
        return (
            sum(r["array_cycles"] for r in chosen),
            sum(r["dram_once_cycles"] for r in chosen),
        )

    m0, m1 = TOKENS[0], TOKENS[-1]
    (a0, d0), (a1, d1) = totals(m0), totals(m1)
    slope = ((a1 - a0) - (d1 - d0)) / (m1 - m0)
    return m0 + (d0 - a0) / slope


def etas(rows, key="scalesim_s") -> dict:
    """Per K+1, the model's pass time (efficiency 1) over SCALE-Sim's (``key``): the memory
    efficiency that makes the roofline match (every pass here is on the memory side of its
    ridge)."""
    out = {}
    for m in TOKENS:
        model = sum(r["model_s"] for r in rows if r["tokens"] == m)
        sim = sum(r[key] for r in rows if r["tokens"] == m)
        out[m] = model / sim
    return out


def eta_lines(npu: Npu, result) -> list[str]:
    """How the device file's efficiency factors follow from the runs."""
    trp, trfc, trefi, source = npu.refresh
    array_side = statistics.mean(result["eta_once"].values())
    dram_side = 1 - (trp + trfc) / trefi
    return [
        f"Efficiency factors of `{npu.device}` (its TOML names this run): `eta_memory` = "
        f"{array_side:.3f} (the model over SCALE-Sim, operands read once, mean over K+1: "
        "what the array and dataflow leave of the stream; SCALE-Sim's DRAM is ideal) x "
        f"{dram_side:.3f} (the memory's availability under all-bank refresh, 1 - (tRP + "
        f"tRFC) / tREFI = 1 - ({trp} + {trfc}) / {trefi}, {source}) = "
        f"**{array_side * dram_side:.3f}**. `eta_compute` is not set from these runs: no pass "
        "up to K+1 = 65 is on the compute side of the model's roofline, SCALE-Sim's array "
        "cycles grow with the weights (a fold's fill), which the model carries in "
        "`eta_memory`, and `eta_compute` also scales the vector unit, which SCALE-Sim does "
        "not model; it keeps the authors' 0.75.",
    ]


def pim_section(library) -> tuple[list[str], dict]:
    """The PIM's MAC rate and internal bandwidth from the command schedule."""
    t, org = ps.TABLE2_TIMING, ps.PimOrganisation()
    lines = []
    per_model = {}
    table = [
        "| draft | GEMV | per layer | rows x cols on one rank | order | cycles | MAC/cycle/rank |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in DRAFTS:
        model = library.model(name)
        macs = cycles = 0
        for op, count, rows, cols in ps.model_gemvs(model, PIM_RANKS):
            s = ps.gemv_schedule(rows, cols)
            macs += count * s.macs()
            cycles += count * s.cycles
            table.append(
                f"| {name} | {op} | {count} | {rows} x {cols} | {s.order} | {s.cycles:,} | "
                f"{s.macs() / s.cycles:.1f} |"
            )
        per_model[name] = macs / cycles
    peak = org.units * org.macs_per_access / t.tCCD_S  # MAC per cycle per rank
    tccd_l = org.units * org.macs_per_access / t.tCCD_L
    sustained = statistics.mean(per_model.values())
    hz = t.clock_hz
    lines += [
        "Organisation (stated assumptions, sources in `sim/pim_schedule.py`): a rank is one "
        f"LPDDR5 die of {org.banks} banks in {org.bank_groups} bank groups; one PIM unit per "
        f"{org.banks_per_unit} banks (Samsung HBM-PIM, Lee et al. ISCA 2021; the LPDDR5-PIM of "
        f"Kim et al., Hot Chips 2022, keeps it): {org.units} units per rank; a column access "
        f"is {org.access_bytes} B (x16 at burst 16, the 256 bits of HBM-PIM's 16-lane SIMD), "
        f"{org.macs_per_access} INT8 MACs; DRAM rows of {org.row_bytes} B; the units run in "
        "lock step (all-bank mode); an input buffer of "
        f"{org.input_buffer_bytes} B per unit (as SK hynix AiM's global buffer); 4-byte "
        "results read out unit by unit.",
        "",
        f"Clock: Table 2's timing is in cycles. Read at {hz / 1e9:.1f} GHz (0.625 ns, "
        "LPDDR5-6400's WCK/2) it gives tREFI 3.9 us (LPDDR5's refresh interval), tRCD = "
        "tRP = 20 ns, tRAS 40 ns, tRRD 5 ns, tFAW 40 ns, tRFC 350 ns, the values of an LPDDR5 "
        "datasheet; at the 800 MHz PIM clock tRCD would be 40 ns and tRAS 80 ns. A unit's "
        "16-lane SIMD at 800 MHz takes 32 INT8 weights per 2 of its cycles = per 4 cycles of "
        "1.6 GHz = one column access per tCCD_S: the two clocks agree.",
        "",
        "Steps:",
        "",
        f"1. Peak of one unit: {org.macs_per_access} MAC per column access, one access per "
        f"tCCD_S = {t.tCCD_S} cycles (its two banks alternate bank groups): "
        f"{org.macs_per_access / t.tCCD_S:.0f} MAC/cycle = "
        f"{org.macs_per_access / t.tCCD_S * hz / 1e9:.1f} GMAC/s, and as many bytes per second "
        "of internal bandwidth (INT8: one weight byte per MAC).",
        f"2. Peak of one rank: {org.units} units: {peak:.0f} MAC/cycle = "
        f"**{peak * hz / 1e9:.1f} GMAC/s** and {peak * hz / 1e9:.1f} GB/s.",
        f"3. Reading one row's {org.row_bytes // org.access_bytes} columns from one bank is "
        f"same-bank-group: tCCD_L = {t.tCCD_L}: {tccd_l:.1f} MAC/cycle per rank while the "
        "other bank of each unit activates its next row (8 ACTs per rank: tRRD and tFAW give "
        f"the last at {3 * t.tRRD + t.tFAW + 3 * t.tRRD} cycles, + tRCD {t.tRCD}, hidden in the "
        f"{org.row_bytes // org.access_bytes * t.tCCD_L} cycles of the row). Reading both "
        "banks in turn (tCCD_S) forces both to change rows together: 16 ACTs under tFAW "
        "(~216 cycles) + tRP + tRCD exposed per 128 accesses.",
        f"4. Refresh: all banks every tREFI = {t.tREFI}: tRP + tRFC = {t.tRP + t.tRFC} cycles "
        f"and the re-activation lost: at least {(t.tRP + t.tRFC) / t.tREFI:.1%}.",
        "5. Input vector writes (tCCD_L apart, then tWR) per 2 KB chunk, result read-out.",
        "6. The schedule (both read orders, the faster kept) of every GEMV of each draft's "
        f"decode step, each matrix's rows split over the {PIM_RANKS} DLM ranks:",
        "",
        *table,
        "",
        "| draft | sustained MAC/cycle per rank | GMAC/s per rank | per unit | of the peak |",
        "|---|---|---|---|---|",
    ]
    for name, rate in per_model.items():
        lines.append(
            f"| {name} | {rate:.2f} | {rate * hz / 1e9:.1f} | {rate / org.units * hz / 1e9:.2f} "
            f"| {rate / peak:.1%} |"
        )
    eta = sustained / peak
    lines += [
        "",
        f"Sustained (mean of the three drafts): {sustained:.2f} MAC/cycle per rank = "
        f"{sustained * hz / 1e9:.1f} GMAC/s per rank, {sustained * hz / org.units / 1e9:.2f} "
        f"per unit, {eta:.1%} of the peak; the internal bandwidth the units consume is the "
        "same figure in GB/s.",
        "",
        "**Which reading of Table 2.** The peak of one rank, "
        f'{peak * hz / 1e9:.1f} GMAC/s, is Table 2\'s "102.4 GOPS" exactly: the figure is per '
        "rank, i.e. per Table-2 PIM unit (16 units, 16 ranks), at 1 MAC = 1 op. Read for the "
        f"whole memory it would leave each rank {102.4 / 16:.1f} GMAC/s, a sixteenth of what "
        "its banks deliver. (At 800 MHz and 2 ops per MAC the peak is again 102.4 GOPS per "
        'rank: either way not the whole memory\'s.) The "256 GB/s" is not reproduced by '
        f"either reading: the units of a rank consume {peak * hz / 1e9:.1f} GB/s at their peak "
        f"(all {org.banks} banks at tCCD_S would give "
        f"{org.banks * org.access_bytes / t.tCCD_S * hz / 1e9:.1f} GB/s); the model takes the "
        "derived figure.",
        "",
        f"Default platform (`table2`, `lpddr5-pim`): 16 x {peak * hz / 1e9:.1f}e9 MAC/s and "
        f"16 x {peak * hz / 1e9:.1f}e9 B/s internal, `eta_compute` = `eta_memory` = "
        f"{eta:.3f} (sustained over peak). The whole-memory reading stays the platform "
        "`table2-whole-memory`; Table 2 per unit with its 256 GB/s stays `table2-per-unit`.",
    ]
    return lines, {"per_model": per_model, "peak": peak, "sustained": sustained, "eta": eta}


def write_doc(path: Path, npu_results: dict, known: dict, pim_lines: list[str], versions):
    today = datetime.date.today().isoformat()
    lines = [
        "# Validation of the cost model (generated by `make validate`; do not edit)",
        "",
        f"Generated {today} by `bench/validate/validate.py` with Python "
        f"{platform.python_version()}"
        + (
            f", scalesim {versions[0]}, numpy {versions[1]} (its own venv)."
            if versions
            else "; the NPU part was skipped (no SCALE-Sim venv)."
        ),
        "",
        "## 1. The NPU against SCALE-Sim",
        "",
        f"One verification pass of {TARGET} (per layer; context {CONTEXT}) at K+1 in "
        f"{', '.join(map(str, TOKENS))}, per operator, on one core of each NPU (the others do "
        "the same share in parallel). SCALE-Sim runs a weight-stationary array with the "
        "slice's operands prefetched into its buffers: its array cycles (`Total Cycles`, no "
        "stall) and its DRAM cycles (the prefetch, `Total Cycles (incl. prefetch)` minus "
        "them) at the stated bytes per cycle. The SCALE-Sim time is the double-buffered one, "
        "max(array, DRAM) per GEMM (the next slice's prefetch under this slice's compute); "
        "the serial sum is in `build/validate/results.json`. A matrix larger than "
        f"{SLICE_K}x{SLICE_N} is traced as one slice and scaled by its weights (the scaling "
        "table shows the cycles per weight do not move). The model is `sim/cost.py`'s "
        "roofline at SCALE-Sim's peak and bandwidth, efficiency 1.",
        "",
        "Two things the known-answer cases show about scalesim 3.0.0. Streaming a GEMV "
        "through a filter buffer smaller than its weights costs 4 to 11 times weights over "
        "bandwidth; counting each prefetch stall once (the released read buffer adds it "
        "twice, `scalesim_runner.py` says where) barely changes that, because the read "
        "buffer fetches again when the fold order leaves its window. So every traced slice "
        "sits in the buffers. And as traced, its DRAM cycles count the small operands (the "
        "inputs or the partial outputs) once per fold of the array: at K+1 = 65 on the 64x64 "
        "core twice the weights' cycles. With 2 MB of scratchpad per core they stay on chip, "
        "so the `once` columns move every operand once (weights, inputs, outputs, at the "
        "bandwidth the known-answer GEMV confirms) beside SCALE-Sim's array cycles, and the "
        "efficiency factors are taken from them.",
        "",
    ]
    for device, result in npu_results.items():
        npu = next(n for n in NPUS if n.device == device)
        lines += [
            f"### {device}",
            "",
            f"Array: {npu.why}.",
            "",
            "Known-answer cases (one core):",
            "",
            "| case | expected | SCALE-Sim | agrees |",
            "|---|---|---|---|",
        ]
        for k in known[device]:
            ok = "n/a" if k["ok"] is None else ("yes" if k["ok"] else "**no**")
            lines.append(f"| {k['case']} | {k['expected']} | {k['measured']} | {ok} |")
        lines += [
            "",
            "Scaling (QKV projection, K+1 = 17, one core):",
            "",
            "| traced slice | array cycles per weight | DRAM cycles per weight |",
            "|---|---|---|",
        ]
        for s in result["scaling"]:
            lines.append(
                f"| {s['slice']} | {s['array_per_weight']:.5f} | {s['dram_per_weight']:.5f} |"
            )
        lines += [
            "",
            "Per operator and layer (us: microseconds of the whole NPU; `once`: "
            "the activations read from DRAM once):",
            "",
            "| K+1 | operator | array cycles | DRAM cycles | DRAM cycles, once "
            "| SCALE-Sim us | SCALE-Sim us, once | model us | model / SCALE-Sim "
            "| model / SCALE-Sim, once |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in result["rows"]:
            lines.append(
                f"| {r['tokens']} | {r['operator']} | {r['array_cycles']:,.0f} | "
                f"{r['dram_cycles']:,.0f} | {r['dram_once_cycles']:,.0f} | "
                f"{r['scalesim_s'] * 1e6:.2f} | {r['scalesim_once_s'] * 1e6:.2f} | "
                f"{r['model_s'] * 1e6:.2f} | {r['model_s'] / r['scalesim_s']:.3f} | "
                f"{r['model_s'] / r['scalesim_once_s']:.3f} |"
            )
        e, e1 = result["eta"], result["eta_once"]
        lines += [
            "",
            "Whole pass (per layer), model over SCALE-Sim as traced: "
            + ", ".join(f"K+1 = {m}: {v:.3f}" for m, v in e.items())
            + f"; mean {statistics.mean(e.values()):.3f}. With the activations read once: "
            + ", ".join(f"{m}: {v:.3f}" for m, v in e1.items())
            + f"; mean **{statistics.mean(e1.values()):.3f}**.",
            "",
            (
                f"Weight-stream bound up to K+1 = **{result['crossing']:.0f}** (SCALE-Sim: the "
                "weight operators' array cycles reach their DRAM cycles there"
                if result["crossing"] >= 1
                else "**Never weight-stream bound**: the weight operators' array cycles exceed "
                "their DRAM cycles already at K+1 = 1 (a fold's weights enter the array one row "
                "per cycle and drain before the next: about 2R + C cycles per R x C weights, "
                f"{npu.rows * npu.cols / (2 * npu.rows + npu.cols):.1f} weights per cycle "
                f"against {npu.words_per_cycle} per cycle from DRAM"
            )
            + f"; the roofline's ridge is at K+1 = "
            f"{npu.peak_macs / npu.bandwidth * npu.word_bytes:.0f}).",
            "",
            *eta_lines(npu, result),
            "",
        ]
    lines += ["## 2. The PIM from Table 2's DRAM timing", "", *pim_lines, ""]
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalesim", type=Path, default=ROOT / "build/scalesim-venv/bin/python")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs/validation.md")
    parser.add_argument("--json", type=Path, default=ROOT / "build/validate/results.json")
    parser.add_argument("--skip-npu", action="store_true")
    args = parser.parse_args(argv)
    library = load_library()
    npu_results, known, versions = {}, {}, None
    if not args.skip_npu:
        if not args.scalesim.exists():
            print(
                f"error: no SCALE-Sim Python at {args.scalesim} (make validate makes it)",
                file=sys.stderr,
            )
            return 2
        model = library.model(TARGET)
        for npu in NPUS:
            print(f"{npu.device}: known answers ...", file=sys.stderr)
            known[npu.device] = known_answers(args.scalesim, npu)
            print(f"{npu.device}: the pass ...", file=sys.stderr)
            result = npu_rows(args.scalesim, npu, model)
            versions = result.pop("versions")
            result["eta"] = etas(result["rows"])
            result["eta_once"] = etas(result["rows"], "scalesim_once_s")
            result["crossing"] = crossing(npu, result["rows"])
            npu_results[npu.device] = result
    pim_lines, pim = pim_section(library)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"npu": npu_results, "known": known, "pim": pim}, indent=1, default=str)
    )
    write_doc(args.doc, npu_results, known, pim_lines, versions)
    print(f"wrote {args.doc} and {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
