"""Figures of phone runs: temperatures, GPU clock, token rate and package power over time.

The same rules as every figure of :mod:`ahasd.sim.report`: each phone mode in its colour
from the phone mode table, units on every axis, legend and caption below the panels.
"""

from __future__ import annotations

from pathlib import Path

from ahasd.output import write_file
from ahasd.sim.phone.run import PhoneResult
from ahasd.sim.phone.settings import find_phone_mode
from ahasd.sim.report import finish_figure, png_bytes, pyplot

__all__ = ["phone_caption", "phone_figure", "plot_phone"]

_RATE_WINDOW = 10  # governor periods in the moving means of rate and power


def phone_caption(results: list[PhoneResult]) -> str:
    """Platform, pair, policy, task, simulated time, seed, trace and tokens per mode."""
    if not results:
        return "No runs."
    s = results[-1].summary  # the last mode drafts, so it names the policy
    generated = ", ".join(
        f"{r.summary['mode']} {r.summary['tokens']:,} tokens in {r.summary['requests']} requests"
        for r in results
    )
    return (
        f"{s['platform']}, pair {s['pair']}, policy {s['policy']}, task {s['task']}, "
        f"{s['duration_s']:g} s simulated per mode, seed {s['seed']}, trace {s['trace']} "
        f"(one per request). Generated: {generated}. System model, not measurements."
    )


def phone_figure(results: list[PhoneResult], *, title: str = "Sustained generation"):
    """Skin/die temperature, GPU clock, token rate and package power over time, one line per
    run (modes overlaid); returns the ``Figure``."""
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(9, 11.5), sharex=True)
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
        axes[2].plot(rate_t, _moving_mean(rates, _RATE_WINDOW), color=colour)
        axes[3].plot(rate_t, _moving_mean(power, _RATE_WINDOW), color=colour)
    if results:
        s = results[0].summary
        axes[0].axhline(s["skin_limit_c"], color="k", ls="--", lw=0.8, label="skin limit")
        arbiter = s["arbiter_c"]
        axes[0].axhline(
            arbiter, color="grey", ls=":", lw=0.8, label=f"arbiter shortens drafts ({arbiter:g} C)"
        )
    axes[0].plot([], [], color="0.3", label="skin (solid)")
    axes[0].plot([], [], color="0.3", ls=":", lw=0.8, label="die (dotted)")
    axes[0].set_title("Skin and die temperature (lower is better)")
    axes[0].set_ylabel("temperature (C)")
    axes[1].set_title("GPU clock set by the thermal governor")
    axes[1].set_ylabel("GPU clock (MHz)")
    axes[2].set_title("Token rate, 10 s moving mean (higher is better)")
    axes[2].set_ylabel("rate (tokens/s)")
    axes[3].set_title("Package power, 10 s moving mean (lower is better)")
    axes[3].set_ylabel("power (W)")
    axes[3].set_xlabel("simulated time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    finish_figure(
        fig,
        title=title,
        handles=handles,
        labels=labels,
        caption=phone_caption(results),
        columns=2,
    )
    return fig


def plot_phone(results: list[PhoneResult], path: Path, *, title: str = "") -> None:
    """Write :func:`phone_figure` as a PNG to ``path`` (:func:`ahasd.output.write_file`)."""
    figure = phone_figure(results, title=title or "Sustained generation")
    write_file(path, png_bytes(figure))


def _moving_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out
