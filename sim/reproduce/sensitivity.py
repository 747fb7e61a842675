"""Section 4 of ``ahasd reproduce``'s report: how much each rung's gain moves when one
uncertain number is set to either end of its documented range.

- :func:`sensitivity_table`: per rung, every varied number (spec-file numbers of medium or
  low confidence, and the platform options of
  :data:`~ahasd.sim.reproduce.study.SETTING_READINGS`) with the gain at each end, sorted by
  the larger change (``swing``);
- :func:`top_numbers_table`: the three numbers each rung moves most with, as markdown;
- :func:`sensitivity_reading`, :func:`not_varied`: the generated text;
- :func:`tornado_figure`: a tornado plot per rung.
"""

from __future__ import annotations

import math

from ahasd.sim import report
from ahasd.sim.report import gain_text, markdown_table
from ahasd.sim.reproduce.study import RUNGS, Study, evaluation_lookup, gain

__all__ = [
    "not_varied",
    "sensitivity_lookup",
    "sensitivity_reading",
    "sensitivity_table",
    "top_numbers_table",
    "tornado_figure",
]


def sensitivity_lookup(study: Study, path: str | None, end: str | None):
    """The row of a mode and a run with number ``path`` at its ``end`` (``low``, ``high``),
    else the evaluation's on the sensitivity platform (the number at its file value)."""
    platform = study.config.sensitivity_platform
    gpu = study.library.platform(platform).device("gpu")
    base = evaluation_lookup(study, platform, gpu)

    def lookup(mode: str, run: tuple) -> dict | None:
        return study.row(("sens", path, end, mode, *run)) or base(mode, run)

    return lookup


def sensitivity_table(study: Study, metric: str = "tokens_per_s") -> dict[str, list[dict]]:
    """Per rung: every varied number with the rung's gain at each end of its range, sorted
    by the larger change of the gain (``swing``, in log terms)."""
    runs = study.runs()
    base_lookup = sensitivity_lookup(study, None, None)
    out = {}
    for label, mode, base in RUNGS:
        reference = gain(base_lookup, mode, base, runs, metric)
        entries = []
        for number in study.numbers:
            if number.span is None:
                continue
            gains = {}
            for end, value in zip(("low", "high"), number.span, strict=True):
                lookup = (
                    base_lookup
                    if value == number.value
                    else sensitivity_lookup(study, number.path, end)
                )
                gains[end] = gain(lookup, mode, base, runs, metric)
            swing = max(abs(math.log(g / reference)) for g in gains.values())
            entries.append(
                {
                    "number": number.path,
                    "range": number.span,
                    "value": number.value,
                    "gain_low": gains["low"],
                    "gain_high": gains["high"],
                    "reference": reference,
                    "swing": swing,
                }
            )
        entries.sort(key=lambda e: -e["swing"])
        out[label] = entries
    return out


def top_numbers_table(table: dict[str, list[dict]], figure: str) -> str:
    """Markdown: per rung of ``table`` (:func:`sensitivity_table`), its reference value in
    the column ``figure`` and the three numbers it moves most with (each with its gain at
    the low and high end)."""
    return markdown_table(
        [
            {
                "rung": label,
                figure: entries[0]["reference"] if entries else math.nan,
                **{
                    f"#{n + 1}": (
                        f"{e['number']}: {gain_text(e['gain_low'])}..{gain_text(e['gain_high'])}"
                    )
                    for n, e in enumerate(entries[:3])
                },
            }
            for label, entries in table.items()
        ],
        ["rung", figure, "#1", "#2", "#3"],
    )


def _reading(value) -> str:
    """A number as ``:g``, a setting's reading as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return format(value, "g")


def sensitivity_reading(table: dict[str, list[dict]]) -> str:
    sentences = []
    for label, entries in table.items():
        if not entries:
            continue
        top = entries[:3]
        reference = top[0]["reference"]
        parts = [
            f"{e['number']} ({gain_text(e['gain_low'])} at {_reading(e['range'][0])}, "
            f"{gain_text(e['gain_high'])} at {_reading(e['range'][1])})"
            for e in top
        ]
        flat = sum(1 for e in entries if e["swing"] < math.log(1.01))
        sentences.append(
            f"- The gain of {label} ({gain_text(reference)} at the files' values) moves most with "
            f"{parts[0]}, then {', then '.join(parts[1:]) or 'nothing else'}; "
            f"{flat} of {len(entries)} numbers move it by less than 1%."
        )
    return "\n".join(sentences)


def not_varied(study: Study) -> str:
    """The uncertain numbers without a range (not varied), as a sentence."""
    missing = [n.path for n in study.numbers if n.span is None]
    if not missing:
        return "Every medium- or low-confidence number of the platform's devices has a range."
    return f"Not varied (medium or low confidence but no range in the file): {', '.join(missing)}."


def tornado_figure(table: dict[str, list[dict]], top: int = 8):
    """Per rung: the ``top`` numbers its speed gain is most sensitive to, a bar from the
    gain at one end of the number's range to the gain at the other."""
    plt = report.pyplot()
    labels = list(table)
    columns = 2
    rows = math.ceil(len(labels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(13, 2.9 * rows), squeeze=False)
    for ax, label in zip(axes.flat, labels, strict=False):
        entries = table[label][:top][::-1]
        reference = entries[0]["reference"] if entries else 1.0
        for y, e in enumerate(entries):
            low, high = e["gain_low"], e["gain_high"]
            ax.barh(y, low - reference, left=reference, color="C0", alpha=0.8)
            ax.barh(y, high - reference, left=reference, color="C3", alpha=0.8)
        ax.set_yticks(range(len(entries)), [e["number"] for e in entries], fontsize=7)
        ax.axvline(reference, color="k", lw=0.8)
        ax.set_title(f"{label} (x{reference:.3g})", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(labels) :]:
        ax.axis("off")
    fig.suptitle(
        f"Speed gain of each rung at the low (blue) and high (red) end of each range "
        f"(the {top} numbers it moves most with)"
    )
    fig.tight_layout()
    return fig
