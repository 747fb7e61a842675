"""Run GEMMs through SCALE-Sim; executed by the SCALE-Sim venv's Python (``make validate``
makes it: ``scalesim==3.0.0`` needs ``numpy<2``), not by the project's.

Reads one JSON object on stdin::

    {"array": [rows, cols], "dataflow": "ws", "bandwidth": words_per_cycle,
     "sram_kb": [ifmap, filter, ofmap], "gemms": [[name, M, N, K], ...]}

(``M`` rows of the input, ``K`` the reduction, ``N`` the outputs; one word = one byte, INT8)
and prints one JSON object: the versions and, per GEMM, SCALE-Sim's total cycles (with the
initial prefetch), compute cycles, stall cycles and its average DRAM bandwidths (words per
cycle). The bandwidth is SCALE-Sim's ``InterfaceBandwidth = USER`` setting: in scalesim 3.0.0
the ifmap and filter DRAM bandwidths are the layout section's ``IfmapSRAMBankBandwidth`` and
``FilterSRAMBankBandwidth`` (``single_layer_sim.run``), the ``Bandwidth`` field only the
ofmap's, so all three are set to the same value. The layout file is required even without
custom layouts; it is written with every factor 1.

``"patched": true`` replaces one method of scalesim 3.0.0 before the run:
``read_buffer.service_reads`` (the branch without custom layouts) adds a prefetch stall to
the request's offset twice (``offset += potential_stall_cycles`` and again under ``if
potential_stall_cycles > 0``), and subtracts it when it is negative. On a bandwidth-bound
GEMV that doubles the time the stated bytes per cycle give (docs/validation.md, the
known-answer cases). The replacement adds a positive stall once.
"""

import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

CONFIG = """[general]
run_name = validate

[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
IfmapSramSzkB = {ifmap_kb}
FilterSramSzkB = {filter_kb}
OfmapSramSzkB = {ofmap_kb}
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Bandwidth = {bw}
Dataflow = {df}
ReadRequestBuffer = 32
WriteRequestBuffer = 32

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = {bw}
IfmapSRAMBankNum = 1
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = {bw}
FilterSRAMBankNum = 1
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40

[run_presets]
InterfaceBandwidth = USER
UseRamulatorTrace = False
"""


def _service_reads_fixed(self, incoming_requests_arr_np, incoming_cycles_arr):
    """scalesim 3.0.0's ``read_buffer.service_reads`` without custom layouts and without a
    Ramulator trace, with each prefetch stall counted once."""
    import numpy as np

    dram_stall_cycles = 0
    if not self.active_buf_full_flag:
        dram_stall_cycles = self.prefetch_active_buffer(start_cycle=incoming_cycles_arr[0][0])
    del dram_stall_cycles  # only the Ramulator-trace path uses it
    out = []
    offset = self.hit_latency
    for i in range(incoming_requests_arr_np.shape[0]):
        cycle = incoming_cycles_arr[i]
        for addr in incoming_requests_arr_np[i]:
            if addr == -1:
                continue
            while not self.active_buffer_hit(addr):
                self.new_prefetch()
                stall = self.last_prefetch_cycle - (cycle + offset)
                if stall > 0:
                    offset += stall
        out.append(cycle + offset)
    return np.asarray(out).reshape((len(out), 1))


def main() -> None:
    import contextlib
    import io

    from scalesim.scale_sim import scalesim

    job = json.load(sys.stdin)
    if job.get("patched"):
        from scalesim.memory import read_buffer

        read_buffer.read_buffer.service_reads = _service_reads_fixed
    rows, cols = job["array"]
    ifmap_kb, filter_kb, ofmap_kb = job["sram_kb"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = folder / "validate.cfg"
        config.write_text(
            CONFIG.format(
                rows=rows,
                cols=cols,
                ifmap_kb=ifmap_kb,
                filter_kb=filter_kb,
                ofmap_kb=ofmap_kb,
                bw=job["bandwidth"],
                df=job["dataflow"],
            )
        )
        topology = folder / "gemms.csv"
        layout = folder / "layout.csv"
        lines = ["Layer, M, N, K,"]
        layout_lines = ["Layer," + ",".join(["f"] * 19) + ","]
        for name, m, n, k in job["gemms"]:
            lines.append(f"{name}, {m}, {n}, {k},")
            layout_lines.append(f"{name}," + ",".join(["1"] * 19) + ",")
        topology.write_text("\n".join(lines) + "\n")
        layout.write_text("\n".join(layout_lines) + "\n")
        sim = scalesim(
            save_disk_space=True,
            verbose=False,
            config=str(config),
            topology=str(topology),
            layout=str(layout),
            input_type_gemm=True,
        )
        with contextlib.redirect_stdout(io.StringIO()):
            sim.run_scale(top_path=str(folder / "out"))
        results = []
        for (name, m, n, k), layer in zip(
            job["gemms"], sim.runner.single_layer_sim_object_list, strict=True
        ):
            total, compute, stall, util = layer.get_compute_report_items()[:4]
            bw = layer.get_bandwidth_report_items()
            results.append(
                {
                    "name": name,
                    "M": m,
                    "N": n,
                    "K": k,
                    "total_cycles": float(total),
                    "compute_cycles": float(compute),
                    "stall_cycles": float(stall),
                    "utilisation_pct": float(util),
                    "ifmap_dram_bw": float(bw[3]),
                    "filter_dram_bw": float(bw[4]),
                    "ofmap_dram_bw": float(bw[5]),
                }
            )
    json.dump(
        {"scalesim": version("scalesim"), "numpy": version("numpy"), "results": results}, sys.stdout
    )


if __name__ == "__main__":
    main()
