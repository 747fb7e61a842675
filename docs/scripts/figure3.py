"""The paper's Figure 3 experiment on the system model: operator-level synchronous NPU + PIM.

SpecPIM's mapping on the paper's mobile NPU + LPDDR5-PIM (``specpim-npu`` on platform
``table2``), a LLaMA2-1.3B-like draft with LLaMA2-7B (pair ``llama2-1.3b-7b``). The split is
balanced offline for a planned draft length (4, ``--specpim-planned-draft``); the draft
length then varies over AdaEDL's range (1 to 8 tokens) and beyond. For each length the
table gives a round's latency (draft steps, then the verification) and the PIM's and the
NPU's busy share of it; the paper states that the PIM's share swings from 12.3 % to 84.2 %.
An AdaEDL run on the pair's synthetic trace gives the shares it actually sees.

Run: ``.venv/bin/python docs/scripts/figure3.py [--out PNG]`` (a few seconds).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ahasd.sim.library.loading import load_library
from ahasd.sim.modes import build_hardware, prepare_run, simulate
from ahasd.sim.modes.oplevel import round_shares
from ahasd.sim.report import pyplot
from ahasd.sim.settings import RunSettings

PAIR, PLATFORM, PLANNED = "llama2-1.3b-7b", "table2", 4
LENGTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/figure3.png"))
    args = parser.parse_args()
    settings = RunSettings(
        mode="specpim-npu",
        pair=PAIR,
        policy="adaedl",
        platform=PLATFORM,
        specpim_planned_draft=PLANNED,
        tokens=1024,
    )
    hardware = build_hardware(prepare_run(settings, load_library()))
    context = settings.prompt_tokens
    rows = [(k, *round_shares(hardware, k, context)) for k in LENGTHS]
    print(f"{PAIR} on {PLATFORM}, split balanced for K = {PLANNED}")
    print("K   round ms  PIM share  NPU share")
    for k, seconds, pim, npu in rows:
        print(f"{k:<3d} {seconds * 1e3:8.1f}  {pim:8.1%}  {npu:8.1%}")
    summary = simulate(settings).summary
    busy = summary["busy_s"]
    print(
        f"AdaEDL run ({summary['tokens']} tokens): PIM busy {busy['pim'] / summary['seconds']:.1%}"
        f", NPU busy {busy['npu'] / summary['seconds']:.1%} of {summary['seconds']:.1f} s; "
        f"{summary['drafted'] / max(1, summary['verify_passes']):.2f} drafts per round"
    )
    fig, ax = pyplot().subplots(figsize=(6.4, 3.6))
    ks = [r[0] for r in rows]
    ax.plot(ks, [100 * r[2] for r in rows], "o-", label="PIM busy share")
    ax.plot(ks, [100 * r[3] for r in rows], "s-", label="NPU busy share")
    ax.axhspan(12.3, 84.2, color="0.9", label="paper: PIM share 12.3-84.2 %")
    ax.axvline(PLANNED, color="0.5", linestyle=":", label=f"split balanced for K = {PLANNED}")
    ax.set_xlabel("draft length K (tokens per round)")
    ax.set_ylabel("share of round latency (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"Operator-level sync NPU + PIM ({PAIR}, {PLATFORM})")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
