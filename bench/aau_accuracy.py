"""AAU accuracy: the bit-accurate golden model against float64, over many vectors.

Measures the error of the fixed-point entropy (nats), top-1 probability and SOFTMAX
outputs of ``ahasd.golden.aau`` against ``reference_stats``/``reference_softmax`` run on
the *same* Q8.8-quantised logits (so only the unit's arithmetic is measured, not the
input quantisation), over eight distributions and lengths 1 to 65,536. Also sweeps the
exp and log2 table sizes. Prints the tables, writes them into ``docs/aau.md`` between
the ``aau-accuracy`` / ``aau-tables`` markers and plots ``docs/img/aau-error.png``.

The other modes the same way (``docs/aau.md`` sections 9, 10), on the same codes for the
unit and for float64 (inputs, ``gamma``, ``beta`` and ``eps = norm_eps / 2**32`` alike):
LAYERNORM/RMSNORM + NORM over six input distributions (OPT-like activations with outlier
channels, LLaMA-like, a mean far above the spread, heavy tails, the whole Q8.8 range, a
nearly constant vector) and lengths 1 to 65,536, the error of each vector relative to the
reference's range (at least 1; the reference saturated to the Q8.8 range as the unit's
output is); SILU and GELU over every one of the 65,536 codes and over pre-activation FFN
values (mostly in [-8, 8], 1% outliers). Also sweeps the gate table size. Written between
the ``aau-modes-accuracy`` / ``aau-gate-tables`` markers.

Usage::

    .venv/bin/python bench/aau_accuracy.py            # full run (2,800 vectors, about 20 s)
    .venv/bin/python bench/aau_accuracy.py --per-distribution 20 --no-write

Honours ``AHASD_SEED`` (default seed 2024) and prints the seed it uses.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ahasd.golden.aau import aau_softmax, aau_stats
from ahasd.golden.aau_modes import aau_gelu, aau_norm, aau_silu
from ahasd.golden.aau_reference import (
    reference_gelu,
    reference_layernorm,
    reference_rmsnorm,
    reference_silu,
    reference_softmax,
    reference_stats,
)
from ahasd.params import AAUParams

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "aau.md"
PLOT = ROOT / "docs" / "img" / "aau-error.png"
MAX_LENGTH = 65536
ENTROPY_TARGET = 0.02
PROB_TARGET = 2.0**-10
MODE_TARGET = 2.0**-8  # NORM relative to the reference's range, SILU/GELU absolute


def _gauss(sigma: float):
    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.normal(0.0, sigma, size)

    return draw


def _near_one_hot(rng: np.random.Generator, size: int) -> np.ndarray:
    logits = rng.normal(0.0, 1.0, size)
    logits[rng.integers(size)] += rng.uniform(8.0, 30.0)
    return logits


def _uniform(rng: np.random.Generator, size: int) -> np.ndarray:
    return rng.uniform(-10.0, 10.0, size)


def _lm_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """Heavy-tailed, LM-like: Zipf-law probabilities (exponent 0.8..1.5) with Student-t
    (3 degrees of freedom) noise, shuffled, shifted to a random offset."""
    exponent = rng.uniform(0.8, 1.5)
    logits = -exponent * np.log(np.arange(1, size + 1)) + 0.5 * rng.standard_t(3, size)
    rng.shuffle(logits)
    return logits + rng.uniform(-20.0, 20.0)


def _full_range(rng: np.random.Generator, size: int) -> np.ndarray:
    """The whole Q8.8 range: uniform over [-128, 128) (extreme values, wide spread)."""
    return rng.uniform(-128.0, 127.99, size)


def _truncation_worst(rng: np.random.Generator, size: int) -> np.ndarray:
    """Adversarial for the accumulators: the max near the top of the range and every
    other element 10 to 14 nats below it, where each term loses most bits to the shifts
    and ``E[x]`` is large (errors of Z are amplified by ``|E[x]|``)."""
    top = rng.uniform(100.0, 127.9)
    logits = top - rng.uniform(10.0, 14.0) - 0.05 * rng.random(size)
    logits[rng.integers(size)] = top
    return logits


DISTRIBUTIONS = {
    "gauss s=1": _gauss(1.0),
    "gauss s=3": _gauss(3.0),
    "gauss s=6": _gauss(6.0),
    "near one-hot": _near_one_hot,
    "uniform +-10": _uniform,
    "LM-like (Zipf+t)": _lm_like,
    "full range": _full_range,
    "tail 10-14 nats below": _truncation_worst,
}


def to_codes(values: np.ndarray) -> np.ndarray:
    """Quantise logits to INT16 Q8.8 codes (round to nearest, saturate)."""
    return np.clip(np.round(values * 256.0), -32768, 32767).astype(np.int64)


def draw_lengths(rng: np.random.Generator, count: int) -> list[int]:
    """Log-uniform lengths in [1, 65536], always including 1 and 65536."""
    lengths = np.round(2.0 ** rng.uniform(0.0, 16.0, count)).astype(int).tolist()
    lengths[0], lengths[-1] = 1, MAX_LENGTH
    return lengths


@dataclass
class VectorError:
    distribution: str
    length: int
    entropy: float  # |H_golden - H_ref| in nats
    top1: float  # |top1_golden - top1_ref|
    softmax: float  # max_i |p_golden - p_ref|


def measure(codes: np.ndarray, params: AAUParams, distribution: str = "") -> VectorError:
    """Errors of one vector (golden model against float64 on the same codes)."""
    stats = aau_stats(codes, params)
    ref = reference_stats(codes / 256.0)
    probs = aau_softmax(codes, params, stats=stats) / 65536.0
    return VectorError(
        distribution,
        codes.size,
        abs(stats.entropy / 4096.0 - ref.entropy),
        abs(stats.top1 / 65536.0 - ref.top1),
        float(np.max(np.abs(probs - reference_softmax(codes / 256.0)))),
    )


def sample(rng: np.random.Generator, per_distribution: int) -> list[tuple[str, np.ndarray]]:
    vectors = []
    for name, draw in DISTRIBUTIONS.items():
        for length in draw_lengths(rng, per_distribution):
            vectors.append((name, to_codes(draw(rng, length))))
    return vectors


def accuracy_table(errors: list[VectorError]) -> str:
    header = (
        "| distribution | vectors | lengths | entropy max | entropy mean | top-1 max "
        "| top-1 mean | softmax max | softmax mean |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    groups = [*DISTRIBUTIONS, "all"]
    for name in groups:
        chosen = [e for e in errors if name in ("all", e.distribution)]
        lengths = [e.length for e in chosen]
        cells = [name if name != "all" else "**all**", str(len(chosen))]
        cells.append(f"{min(lengths)}..{max(lengths)}")
        for field in ("entropy", "top1", "softmax"):
            values = np.array([getattr(e, field) for e in chosen])
            cells += [f"{values.max():.2e}", f"{values.mean():.2e}"]
        rows.append("| " + " | ".join(cells) + " |")
    return header + "\n".join(rows) + "\n"


def table_sweep(rng: np.random.Generator, count: int) -> str:
    """Max errors for several exp/log2 table sizes (the other table at its default)."""
    vectors = sample(rng, count)
    default = AAUParams()
    settings = [("exp", bits) for bits in (1, 2, 3, 4, 5, 6, 8)]
    settings += [("log2", bits) for bits in (1, 2, 3, 4, 6, 8)]
    lines = [
        "| table | address bits | entries (+1 end point) | entropy max (nats) | top-1 max "
        "| softmax max |",
        "|---|---|---|---|---|---|",
    ]
    for table, bits in settings:
        if table == "exp":
            params = AAUParams(exp_table_bits=bits, ln_table_bits=default.ln_table_bits)
        else:
            params = AAUParams(exp_table_bits=default.exp_table_bits, ln_table_bits=bits)
        errs = [measure(codes, params) for _, codes in vectors]
        mark = " (default)" if bits == 6 else ""
        lines.append(
            f"| {table}{mark} | {bits} | {1 << bits} | {max(e.entropy for e in errs):.2e} "
            f"| {max(e.top1 for e in errs):.2e} | {max(e.softmax for e in errs):.2e} |"
        )
    return (
        f"Sample: {len(vectors)} vectors ({count} per distribution), max error over all.\n\n"
        + "\n".join(lines)
        + "\n"
    )


# ---- NORM, SILU, GELU -------------------------------------------------------------------


def _opt_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """LayerNorm inputs of OPT-scale models: the residual stream, about N(0, 1) with a few
    outlier channels of magnitude 20 to 80 (Dettmers et al., LLM.int8())."""
    values = rng.normal(0.0, 1.0, size)
    channels = rng.integers(size, size=max(1, size // 1024))
    values[channels] = rng.choice([-1.0, 1.0], channels.size) * rng.uniform(20, 80, channels.size)
    return values


def _llama_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """RMSNorm inputs of LLaMA-scale models: narrower, N(0, 0.3), with a few outliers up to
    about 30."""
    values = rng.normal(0.0, 0.3, size)
    channels = rng.integers(size, size=max(1, size // 2048))
    values[channels] = rng.choice([-1.0, 1.0], channels.size) * rng.uniform(5, 30, channels.size)
    return values


def _offset(rng: np.random.Generator, size: int) -> np.ndarray:
    """A mean far above the spread: N(20, 0.05) (the variance is a tiny difference)."""
    return rng.normal(rng.uniform(-40, 40), 0.05, size)


def _heavy(rng: np.random.Generator, size: int) -> np.ndarray:
    return 2.0 * rng.standard_t(3, size)


def _near_constant(rng: np.random.Generator, size: int) -> np.ndarray:
    """Equal elements but one, one code apart: eps dominates the variance."""
    values = np.full(size, rng.uniform(-10, 10))
    values[rng.integers(size)] += 1 / 256
    return values


NORM_DISTRIBUTIONS = {
    "OPT-like (N(0,1), outliers 20-80)": _opt_like,
    "LLaMA-like (N(0,0.3), outliers)": _llama_like,
    "mean far above spread": _offset,
    "heavy tail (2 t3)": _heavy,
    "full range": _full_range,
    "near constant": _near_constant,
}


def norm_error(
    codes: np.ndarray, rng: np.random.Generator, params: AAUParams, *, rms: bool
) -> tuple[float, float]:
    """(max error / max(1, range of the reference), max absolute error) of one NORM vector:
    gamma ~ N(1, 0.3), beta ~ N(0, 0.1) for LayerNorm; gamma ~ N(0.5, 0.2), beta = 0 for
    RMSNorm (LLaMA's norm has no bias)."""
    if rms:
        gamma, beta = to_codes(rng.normal(0.5, 0.2, codes.size)), np.zeros(codes.size, np.int64)
    else:
        gamma, beta = (
            to_codes(rng.normal(1.0, 0.3, codes.size)),
            to_codes(rng.normal(0.0, 0.1, codes.size)),
        )
    y = aau_norm(codes, gamma, beta, params, rms=rms) / 256.0
    reference = reference_rmsnorm if rms else reference_layernorm
    eps = params.norm_eps / 2.0**32
    ref = reference(codes / 256.0, gamma / 256.0, beta / 256.0, eps)
    error = float(np.max(np.abs(y - np.clip(ref, -128.0, 32767 / 256))))
    return error / max(1.0, float(ref.max() - ref.min())), error


def norm_table(rng: np.random.Generator, per_distribution: int, params: AAUParams) -> str:
    lines = [
        "| norm | distribution | vectors | lengths | max error / range | mean error / range "
        "| max abs error |",
        "|---|---|---|---|---|---|---|",
    ]
    worst = []
    for rms in (False, True):
        for name, draw in NORM_DISTRIBUTIONS.items():
            errors = [
                norm_error(to_codes(draw(rng, length)), rng, params, rms=rms)
                for length in draw_lengths(rng, per_distribution)
            ]
            relative = np.array([e[0] for e in errors])
            absolute = max(e[1] for e in errors)
            worst.append(relative.max())
            lines.append(
                f"| {'RMSNorm' if rms else 'LayerNorm'} | {name} | {len(errors)} | "
                f"1..{MAX_LENGTH} | {relative.max():.2e} | {relative.mean():.2e} | "
                f"{absolute:.2e} |"
            )
    lines.append(
        f"| **all** | | {len(worst) * per_distribution} | 1..{MAX_LENGTH} | "
        f"**{max(worst):.2e}** | | |"
    )
    return "\n".join(lines) + "\n", max(worst)


ACTIVATIONS = {"SILU": (aau_silu, reference_silu), "GELU": (aau_gelu, reference_gelu)}
ALL_CODES = np.arange(-32768, 32768, dtype=np.int64)


def activation_table(rng: np.random.Generator, count: int, params: AAUParams) -> str:
    """Every code, and pre-activation FFN values (N(0, 2.5): mostly in [-8, 8], 1% outliers
    uniform over the range) over lengths 1 to 65,536."""
    lines = [
        "| mode | inputs | elements | max abs error | mean abs error | max / 2**-8 |",
        "|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for name, (unit, reference) in ACTIVATIONS.items():
        error = np.abs(unit(ALL_CODES, params) / 256.0 - reference(ALL_CODES / 256.0))
        worst = max(worst, float(error.max()))
        lines.append(
            f"| {name} | every code | {ALL_CODES.size} | {error.max():.2e} | "
            f"{error.mean():.2e} | {error.max() / MODE_TARGET:.2f} |"
        )
        maxima, total, elements = [], 0.0, 0
        for length in draw_lengths(rng, count):
            values = rng.normal(0.0, 2.5, length)
            outliers = rng.random(length) < 0.01
            values[outliers] = rng.uniform(-128, 128, int(outliers.sum()))
            codes = to_codes(values)
            vector_error = np.abs(unit(codes, params) / 256.0 - reference(codes / 256.0))
            maxima.append(float(vector_error.max()))
            total += float(vector_error.sum())
            elements += length
        worst = max(worst, max(maxima))
        lines.append(
            f"| {name} | FFN pre-activations, {count} vectors of 1..{MAX_LENGTH} | {elements} | "
            f"{max(maxima):.2e} | {total / elements:.2e} | {max(maxima) / MODE_TARGET:.2f} |"
        )
    return "\n".join(lines) + "\n", worst


def gate_table_sweep() -> str:
    """Max error over every code for several gate table sizes."""
    lines = [
        "| gate address bits | entries (+1 end point) | SILU max error | GELU max error |",
        "|---|---|---|---|",
    ]
    default = AAUParams().gate_table_bits
    for bits in (3, 4, 5, 6, 7, 8, 10):
        params = AAUParams(gate_table_bits=bits)
        cells = []
        for unit, reference in ACTIVATIONS.values():
            error = np.abs(unit(ALL_CODES, params) / 256.0 - reference(ALL_CODES / 256.0))
            cells.append(f"{error.max():.2e} ({error.max() / MODE_TARGET:.2f} x 2**-8)")
        mark = " (default)" if bits == default else ""
        lines.append(f"| {bits}{mark} | {1 << bits} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def plot(errors: list[VectorError], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), sharex=True)
    panels = [
        ("entropy", "entropy error |H - H_ref| (nats)", ENTROPY_TARGET, 2.0**-13),
        ("top1", "top-1 probability error", PROB_TARGET, 2.0**-17),
        ("softmax", "softmax max |p_i - p_ref,i|", PROB_TARGET, 2.0**-17),
    ]
    markers = "osD^v<>xP"
    for axis, (field, title, target, rounding) in zip(axes, panels, strict=True):
        for marker, name in zip(markers, DISTRIBUTIONS, strict=False):
            chosen = [e for e in errors if e.distribution == name]
            values = np.array([max(getattr(e, field), 1e-9) for e in chosen])
            lengths = np.array([e.length for e in chosen])
            axis.scatter(lengths, values, s=10, marker=marker, alpha=0.6, label=name)
        axis.axhline(target, color="red", linestyle="--", label="target")
        axis.axhline(rounding, color="grey", linestyle=":", label="half output LSB")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_ylim(5e-10, 0.1)
        axis.set_xlabel("vector length (elements)")
        axis.set_title(title)
        axis.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("absolute error (exact zero drawn at 1e-9)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle("AAU golden model vs float64 (default tables: exp 64+1, log2 64+1)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_section(text: str, marker: str, path: Path) -> None:
    """Replace the text between ``<!-- BEGIN marker -->`` and ``<!-- END marker -->``."""
    doc = path.read_text()
    pattern = re.compile(rf"(<!-- BEGIN {marker} -->\n).*?(<!-- END {marker} -->)", flags=re.DOTALL)
    if not pattern.search(doc):
        raise SystemExit(f"{path}: markers for {marker!r} not found")
    path.write_text(pattern.sub(lambda m: m.group(1) + text + m.group(2), doc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-distribution", type=int, default=150, metavar="N")
    parser.add_argument("--sweep-per-distribution", type=int, default=30, metavar="N")
    parser.add_argument("--norm-per-distribution", type=int, default=100, metavar="N")
    parser.add_argument("--activation-vectors", type=int, default=200, metavar="N")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/")
    args = parser.parse_args(argv)
    seed = int(os.environ.get("AHASD_SEED", "2024"))
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    params = AAUParams()

    start = time.perf_counter()
    errors = [measure(codes, params, name) for name, codes in sample(rng, args.per_distribution)]
    elapsed = time.perf_counter() - start
    table = accuracy_table(errors)
    summary = (
        f"{len(errors)} vectors, seed {seed}, default parameters; absolute errors against "
        f"float64 on the same Q8.8 codes (entropy in nats). Targets: entropy "
        f"{ENTROPY_TARGET} nats, probabilities 2**-10 = {PROB_TARGET:.2e}.\n\n"
    )
    print(summary + table)
    print(f"({elapsed:.1f} s for the accuracy sample)")

    sweep = table_sweep(rng, args.sweep_per_distribution)
    print(sweep)

    start = time.perf_counter()
    norms, worst_norm = norm_table(rng, args.norm_per_distribution, params)
    activations, worst_activation = activation_table(rng, args.activation_vectors, params)
    elapsed = time.perf_counter() - start
    modes = (
        f"Seed {seed}, default parameters (`gate_table_bits` "
        f"{params.gate_table_bits}, `norm_eps` {params.norm_eps} = "
        f"{params.norm_eps / 2**32:.3g}); errors against float64 on the same codes. Target: "
        f"2**-8 = {MODE_TARGET:.2e}, relative to the reference's range (at least 1) for NORM, "
        f"absolute for SILU and GELU. NORM: gamma ~ N(1, 0.3), beta ~ N(0, 0.1) for "
        f"LayerNorm; gamma ~ N(0.5, 0.2), beta = 0 for RMSNorm.\n\n"
    )
    print(modes + norms + "\n" + activations)
    print(f"({elapsed:.1f} s for the NORM and activation samples)")
    gates = gate_table_sweep()
    print(gates)

    worst_h = max(e.entropy for e in errors)
    worst_p = max(max(e.top1, e.softmax) for e in errors)
    ok = worst_h <= ENTROPY_TARGET and worst_p <= PROB_TARGET
    ok = ok and worst_norm <= MODE_TARGET and worst_activation <= MODE_TARGET
    print("targets met" if ok else "TARGETS MISSED")
    if not args.no_write:
        write_section(summary + table, "aau-accuracy", DOC)
        write_section(sweep, "aau-tables", DOC)
        write_section(modes + norms + "\n" + activations, "aau-modes-accuracy", DOC)
        write_section(gates, "aau-gate-tables", DOC)
        plot(errors, PLOT)
        print(f"wrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
