"""Figures of phone runs: temperatures, GPU clock, token rate and package power over time."""

from __future__ import annotations

from pathlib import Path

from ahasd.sim.phone.run import PhoneResult
from ahasd.sim.phone.settings import find_phone_mode
from ahasd.sim.report import pyplot

__all__ = ["plot_phone"]


def plot_phone(results: list[PhoneResult], path: Path, *, title: str = "") -> None:
    """Skin/die temperature, GPU clock, token rate and package power over time, one line per
    run (modes overlaid)."""
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    for result in results:
        s = result.summary
        colour = find_phone_mode(s["mode"]).colour
        times = [x["time_s"] for x in result.samples]
        label = (
            f"{s['mode']} ({s['tokens_per_s']:.1f} tok/s, {s['energy_per_token_mj']:.0f} mJ/tok)"
        )
        axes[0].plot(times, [x["skin_c"] for x in result.samples], color=colour, label=label)
        axes[0].plot(times, [x["die_c"] for x in result.samples], color=colour, ls=":", lw=0.8)
        axes[1].step(
            times, [x["gpu_clock_hz"] / 1e6 for x in result.samples], where="post", color=colour
        )
        rate_t, rates, power = [], [], []
        for a, b in zip(result.samples, result.samples[1:], strict=False):
            dt = b["time_s"] - a["time_s"]
            if dt <= 0:
                continue
            rate_t.append(b["time_s"])
            rates.append((b["tokens"] - a["tokens"]) / dt)
            power.append((b["energy_j"] - a["energy_j"]) / dt)
        window = 10
        axes[2].plot(rate_t, _moving_mean(rates, window), color=colour)
        axes[3].plot(rate_t, _moving_mean(power, window), color=colour)
    if results:
        s = results[0].summary
        axes[0].axhline(s["skin_limit_c"], color="k", ls="--", lw=0.8, label="skin limit")
        arbiter = s["arbiter_c"]
        axes[0].axhline(arbiter, color="grey", ls=":", lw=0.8, label=f"arbiter ({arbiter:g} C)")
    axes[0].set_ylabel("skin (solid) / die (dotted), C")
    axes[0].legend(fontsize=7, loc="lower right")
    axes[1].set_ylabel("GPU clock, MHz")
    axes[2].set_ylabel("tokens/s (10 s mean)")
    axes[3].set_ylabel("package power, W (10 s mean)")
    axes[3].set_xlabel("simulated time, s")
    if title:
        fig.suptitle(title)
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _moving_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out
