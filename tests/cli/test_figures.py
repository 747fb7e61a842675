"""The figures, read from their metadata: labels with units on every panel, legends clear of
every panel (so of all data), one colour per mode everywhere, the better direction stated,
a caption with tokens, seeds and traces clear of the rest."""

from __future__ import annotations

import re

import numpy as np
import pytest
from harness.seeds import choose_seed
from matplotlib.colors import to_hex

from ahasd.sim import report
from ahasd.sim.modes import MODE_TABLE, MODES, simulate
from ahasd.sim.phone import PHONE_MODES, PhoneSettings, find_phone_mode, simulate_phone
from ahasd.sim.phone.figures import phone_figure
from ahasd.sim.settings import RunSettings

PAIRS = ("opt-1.3b-6.7b", "llama2-7b-13b")


def _rows(seed: int) -> list[dict]:
    """Made-up sweep rows: every mode, two pairs, two policies, two seeds."""
    rng = np.random.default_rng(seed)
    rows = []
    for pair in PAIRS:
        for policy in ("svip", "adaedl"):
            for run_seed in (0, 1):
                for mode in MODES:
                    rows.append(
                        {
                            "mode": mode, "pair": pair, "policy": policy, "seed": run_seed,
                            "trace": f"synthetic:{pair}", "tokens": 256,
                            "tokens_per_s": float(rng.uniform(1, 40)),
                            "energy_per_token_mj": float(rng.uniform(50, 900)),
                            "acceptance_rate": 0.6, "drafted": 400,
                        }
                    )  # fmt: skip
    return rows


def _figures():
    seed = choose_seed(20261201)
    rows = _rows(seed)
    settings = RunSettings(mode="ahasd", pair="opt-1.3b-6.7b", policy="svip", tokens=48)
    run = simulate(settings)
    phones = [
        simulate_phone(PhoneSettings(platform="sd8gen3", mode=mode, duration_s=3.0, tokens=64))
        for mode in PHONE_MODES
    ]
    return {
        "ablation": report.ablation_figure(rows, MODES),
        "comparison": report.comparison_figure(rows, MODES),
        "run": report.run_figure(run.summary, run.metrics),
        "phone": phone_figure(phones, title="sd8gen3"),
    }


@pytest.fixture(scope="module")
def figures():
    made = _figures()
    for fig in made.values():
        fig.canvas.draw()
    yield made
    plt = report.pyplot()
    for fig in made.values():
        plt.close(fig)


NAMES = ("ablation", "comparison", "run", "phone")


def _numeric(labels) -> bool:
    texts = [t.get_text().replace("\u2212", "-") for t in labels if t.get_text()]
    return bool(texts) and all(re.fullmatch(r"-?[\d.,eE+]+", t) for t in texts)


@pytest.mark.parametrize("name", NAMES)
def test_every_panel_labels_its_axes_with_units(figures, name):
    fig = figures[name]
    for ax in fig.axes:
        for axis, label, shared_group in (
            (ax.xaxis, ax.get_xlabel(), ax.get_shared_x_axes()),
            (ax.yaxis, ax.get_ylabel(), ax.get_shared_y_axes()),
        ):
            if not label:
                # A shared axis is labelled once, on one of the panels sharing it.
                siblings = [a for a in fig.axes if a is not ax and shared_group.joined(ax, a)]
                owner = [a for a in siblings if (a.get_xlabel() if axis is ax.xaxis else "")]
                assert owner, f"{name}: a panel ({ax.get_title()!r}) has an unlabelled axis"
                continue
            if _numeric(axis.get_ticklabels()):
                assert re.search(r"\(.+\)", label), f"{name}: {label!r} has no unit"


@pytest.mark.parametrize("name", NAMES)
def test_legends_and_caption_sit_clear_of_every_panel(figures, name):
    fig = figures[name]
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    assert legends, f"{name}: no legend"
    captions = [t for t in fig.texts if "seed" in t.get_text()]
    assert len(captions) == 1, f"{name}: expected one caption"
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    boxes.append(captions[0].get_window_extent(renderer))
    for ax in fig.axes:
        panel = ax.get_tightbbox(renderer)  # the data area with its ticks and labels
        for box in boxes:
            assert not box.overlaps(panel), f"{name}: legend or caption over {ax.get_title()!r}"
    legend_box, caption_box = boxes[0], boxes[-1]
    assert not legend_box.overlaps(caption_box)
    figure_box = fig.bbox
    for box in boxes:
        assert figure_box.x0 <= box.x0
        assert box.x1 <= figure_box.x1 + 1
        assert figure_box.y0 <= box.y0
        assert box.y1 <= figure_box.y1


@pytest.mark.parametrize("name", NAMES)
def test_the_caption_names_tokens_seeds_and_traces(figures, name):
    text = next(t.get_text() for t in figures[name].texts if "seed" in t.get_text())
    assert "tokens" in text
    assert re.search(r"seeds? \d", text)
    assert "trace" in text


@pytest.mark.parametrize("name", ["ablation", "comparison"])
def test_each_mode_has_its_table_colour(figures, name):
    fig = figures[name]
    seen = 0
    for ax in fig.axes:
        for container in ax.containers:
            # A GPU-hosted mode's label says it is another power class.
            mode = container.get_label().removesuffix(" (laptop GPU: another power class)")
            for bar in container:
                assert to_hex(bar.get_facecolor()) == report.MODE_COLOURS[mode]
                seen += 1
    assert seen > 0


def test_gpu_hosted_modes_are_labelled_another_power_class(figures):
    labels = {c.get_label() for ax in figures["comparison"].axes for c in ax.containers}
    assert "gpu-only (laptop GPU: another power class)" in labels
    assert not any("another power class" in label for label in labels if "ahasd" in label)


def test_the_colour_map_follows_the_mode_table_and_is_one_to_one():
    assert list(report.MODE_COLOURS) == [mode.name for mode in MODE_TABLE]
    assert len(set(report.MODE_COLOURS.values())) == len(MODE_TABLE)


def test_the_run_figure_uses_its_mode_colour(figures):
    busy = figures["run"].axes[0].containers[0]
    assert {to_hex(bar.get_facecolor()) for bar in busy} == {report.MODE_COLOURS["ahasd"]}


def test_phone_lines_use_the_phone_mode_table_colours(figures):
    lines = figures["phone"].axes[2].get_lines()
    assert [to_hex(line.get_color()) for line in lines] == [
        to_hex(find_phone_mode(mode).colour) for mode in PHONE_MODES
    ]


@pytest.mark.parametrize(
    ("name", "panel", "better"),
    [
        ("ablation", 0, "higher is better"),
        ("ablation", 1, "lower is better"),
        ("comparison", 0, "higher is better"),
        ("comparison", 1, "higher is better"),
        ("phone", 2, "higher is better"),
        ("phone", 3, "lower is better"),
    ],
)
def test_the_better_direction_is_stated(figures, name, panel, better):
    assert better in figures[name].axes[panel].get_title()


def test_png_bytes_are_the_same_for_the_same_figure():
    rows = _rows(7)
    first = report.png_bytes(report.ablation_figure(rows, MODES))
    second = report.png_bytes(report.ablation_figure(rows, MODES))
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert first == second
