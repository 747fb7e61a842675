"""Does the EDC golden model learn? Plot its decisions on a synthetic, seeded event stream.

The stream: a draft model whose mean token entropy drifts slowly (an AR(1) process in nats,
so recent history predicts the next batch), batches of 3 to 6 tokens, and a target model
that accepts a whole batch with a probability that falls with the batch's mean entropy
(a logistic around 4.5 nats). PIM and NPU run asynchronously: the NPU verifies the oldest
outstanding batch with probability 0.4 per step; the PIM drafts otherwise, but waits for a
verification after EDC says "suppress" or when EDC is full. A rejection voids every later
outstanding batch (EDC rolls back, the driver forgets them).

The golden EDC (``ahasd.golden.edc``) is driven in both update modes from the same seed.
After a warm-up, the figure shows (a) the fraction of "continue" answers against the
average bucket of the four newest LEHT entries (the ``lo`` field of the PHT index), with
the measured full-acceptance rate of the same batches for reference, and (b) how often
the answer matched the batch's eventual outcome, over time, against always answering
"continue".

Run: ``.venv/bin/python docs/scripts/edc_learning.py [--seed N] [--steps N] [--out PNG]``
(a few seconds). Prints where the PNG went.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import matplotlib
import numpy as np

from ahasd.golden.edc import EDC
from ahasd.params import EDCParams, entropy_to_fixed

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "img" / "edc-learning.png"

# The synthetic workload, in nats.
ENTROPY_MEAN = 4.0  # long-run mean of the latent mean entropy
ENTROPY_SPREAD = 2.2  # its stationary standard deviation
ENTROPY_MEMORY = 0.97  # AR(1) coefficient per batch: histories predict the next batch
ACCEPT_MIDPOINT = 4.5  # mean entropy at which a batch is fully accepted half the time
ACCEPT_SLOPE = 0.6  # logistic width
VERIFY_PROBABILITY = 0.4  # per step, when something is outstanding


def run(update: str, steps: int, warmup: int, seed: int) -> dict:
    """Drive one EDC; return per-decision and per-verification records after warm-up."""
    rng = np.random.default_rng(seed)
    edc = EDC(EDCParams(update=update))
    half = edc.params.history_len // 2
    latent = ENTROPY_MEAN
    innovation = ENTROPY_SPREAD * np.sqrt(1 - ENTROPY_MEMORY**2)
    outstanding: collections.deque = collections.deque()
    waiting = False  # the PIM waits for a verification after a "suppress"
    decisions = []  # (step, lo bucket, continue) after warm-up
    verified = []  # (step, lo bucket, predicted continue, full) after warm-up
    for step in range(steps):
        verify_now = outstanding and (waiting or edc.full() or rng.random() < VERIFY_PROBABILITY)
        if verify_now:
            batch = outstanding.popleft()
            n_acc = batch["length"] if batch["full"] else int(rng.integers(0, batch["length"]))
            s_acc = sum(batch["codes"][:n_acc])
            edc.verify(batch["full"], s_acc, n_acc)
            if step >= warmup:
                verified.append((step, batch["lo"], batch["decision"], batch["full"]))
            if not batch["full"]:
                outstanding.clear()  # built on a rejected token: void
            waiting = False
            continue
        latent = ENTROPY_MEAN + ENTROPY_MEMORY * (latent - ENTROPY_MEAN)
        latent += innovation * rng.standard_normal()
        mean = float(np.clip(latent, 0.1, 9.9))
        length = int(rng.integers(3, 7))
        tokens = rng.gamma(4.0, mean / 4.0, size=length)  # per-token entropies, mean `mean`
        codes = [entropy_to_fixed(float(h)) for h in tokens]
        p_full = 1.0 / (1.0 + np.exp((float(np.mean(tokens)) - ACCEPT_MIDPOINT) / ACCEPT_SLOPE))
        decision = edc.draft(sum(codes), length)
        lo = sum(edc.leht[:half]) >> (half.bit_length() - 1)
        full = bool(rng.random() < p_full)
        outstanding.append(
            {"codes": codes, "length": length, "full": full, "lo": lo, "decision": decision}
        )
        waiting = not decision
        if step >= warmup:
            decisions.append((step, lo, decision))
    return {"decisions": np.array(decisions, dtype=float), "verified": np.array(verified)}


def per_bucket(values: np.ndarray, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``values`` per bucket 0..7 (NaN where a bucket is empty) and the counts."""
    means = np.full(8, np.nan)
    counts = np.zeros(8, dtype=int)
    for b in range(8):
        chosen = values[buckets == b]
        counts[b] = chosen.size
        if chosen.size:
            means[b] = chosen.mean()
    return means, counts


def rolling(values: np.ndarray, window: int) -> np.ndarray:
    kernel = np.ones(window) / window
    return np.convolve(values, kernel, mode="valid")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2026, help="stream seed (default 2026)")
    parser.add_argument("--steps", type=int, default=80_000, help="events per mode")
    parser.add_argument("--warmup", type=int, default=5_000, help="events not plotted in (a)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    args = parser.parse_args(argv)
    matplotlib.use("Agg")  # files only, no display; before pyplot is imported
    import matplotlib.pyplot as plt

    results = {mode: run(mode, args.steps, 0, args.seed) for mode in ("predicted", "current")}
    colours = {"predicted": "tab:blue", "current": "tab:orange"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4), constrained_layout=True)

    buckets = np.arange(8)
    for mode, result in results.items():
        d = result["decisions"]
        d = d[d[:, 0] >= args.warmup]
        cont, counts = per_bucket(d[:, 2], d[:, 1].astype(int))
        keep = counts >= 30  # hide buckets too sparse to estimate
        left.plot(buckets[keep], cont[keep], "o-", color=colours[mode], label=f'"{mode}" update')
        print(f"{mode:9s} continue fraction per lo bucket: {np.round(cont, 2).tolist()}")
    v = results["predicted"]["verified"]
    v = v[v[:, 0] >= args.warmup]
    accept, counts = per_bucket(v[:, 3].astype(float), v[:, 1].astype(int))
    keep = counts >= 30
    left.plot(buckets[keep], accept[keep], "k--", label="measured full-accept rate")
    print(f"full-accept rate per lo bucket:            {np.round(accept, 2).tolist()}")
    left.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    left.set_xlabel("lo = average bucket of the 4 newest LEHT entries (Hmax/8 = 1.25 nats)")
    left.set_ylabel('fraction of DRAFTs answered "continue"')
    left.set_title(f"(a) decisions after {args.warmup} warm-up events")
    left.set_ylim(-0.03, 1.03)
    left.set_xticks(buckets)
    left.legend(loc="lower left", fontsize=9)

    # (b) learning from reset: "continue" fraction over time for low- and high-entropy
    # histories, in log-spaced event bins.
    edges = np.unique(np.geomspace(20, args.steps, 28).astype(int))
    centres = np.sqrt(edges[:-1] * edges[1:])
    for mode, result in results.items():
        d = result["decisions"]
        for label, chosen, style in (
            ("lo >= 4", d[:, 1] >= 4, "-"),
            ("lo <= 1", d[:, 1] <= 1, "--"),
        ):
            which = np.digitize(d[chosen, 0], edges) - 1
            fraction = np.array(
                [d[chosen, 2][which == k].mean() if (which == k).sum() >= 5 else np.nan
                 for k in range(len(centres))]
            )  # fmt: skip
            right.plot(centres, fraction, style, color=colours[mode], label=f"{mode}, {label}")
    for mode, result in results.items():
        v = result["verified"]
        v = v[v[:, 0] >= args.warmup]
        hits = (v[:, 2] == v[:, 3]).mean()
        print(
            f"{mode:9s} answer = outcome after warm-up: {hits:.3f} "
            f"(always 'continue' on the same stream: {v[:, 3].mean():.3f})"
        )
    right.set_xscale("log")
    right.set_xlabel("event (log scale)")
    right.set_ylabel('fraction answered "continue"')
    right.set_title('(b) learning from reset (counters start weakly "continue")')
    right.set_ylim(-0.03, 1.03)
    right.legend(loc="lower left", fontsize=9)
    fig.suptitle(f"EDC golden model on a synthetic stream (seed {args.seed}, default EDCParams)")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
