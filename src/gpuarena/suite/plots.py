"""Suite plots as standalone SVG: one horizontal bar per row for a time ratio against the
baseline, on a log scale around 1 (the baseline's speed), right of it faster, left slower.
Drawn here, with no plotting library and nothing loaded from elsewhere (as harness/profile/roofline.py),
so the web page inlines them and `gpuarena suite compare --plots` writes them."""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuarena.suite.score import Comparison

WIDTH = 640
LABEL_W, VALUE_W, ROW_H, TOP, BOTTOM = 230, 70, 18, 26, 22
FASTER, SLOWER = "#15803d", "#b91c1c"


def ratio_bars(rows: list[tuple[str, float]], title: str) -> str:
    """rows: (label, baseline time / this time). The scale spans the rows' ratios and at least
    0.5x-2x, in whole powers of two."""
    ratios = [r for _, r in rows if r > 0 and math.isfinite(r)]
    low = min([0.5, *ratios])
    high = max([2.0, *ratios])
    lo, hi = math.floor(math.log2(low)), math.ceil(math.log2(high))
    plot_x0, plot_x1 = LABEL_W, WIDTH - VALUE_W
    height = TOP + ROW_H * max(1, len(rows)) + BOTTOM

    def x(ratio: float) -> float:
        return plot_x0 + (math.log2(ratio) - lo) / (hi - lo) * (plot_x1 - plot_x0)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="4" y="14" font-weight="bold">{escape(title)}</text>',
    ]
    for k in range(lo, hi + 1):
        at = x(2.0**k)
        out.append(
            f'<line x1="{at:.1f}" y1="{TOP - 4}" x2="{at:.1f}" y2="{height - BOTTOM}" '
            f'stroke="{"#666" if k == 0 else "#e5e5e5"}"/>'
        )
        label = f"{2.0**k:g}x"
        out.append(f'<text x="{at:.1f}" y="{height - BOTTOM + 14}" text-anchor="middle">{label}</text>')
    for i, (label, ratio) in enumerate(rows):
        y = TOP + i * ROW_H
        shown = label if len(label) <= 36 else label[:35] + "…"
        out.append(
            f'<text x="{LABEL_W - 6}" y="{y + 12}" text-anchor="end"><title>{escape(label)}</title>'
            f"{escape(shown)}</text>"
        )
        if not (ratio > 0 and math.isfinite(ratio)):
            continue
        start, end = sorted((x(1.0), x(ratio)))
        colour = FASTER if ratio >= 1 else SLOWER
        out.append(
            f'<rect x="{start:.1f}" y="{y + 3}" width="{max(end - start, 1):.1f}" height="{ROW_H - 6}" '
            f'fill="{colour}"><title>{escape(label)}: {ratio:.3f}x the baseline</title></rect>'
        )
        out.append(f'<text x="{plot_x1 + 6}" y="{y + 12}">{ratio:.3g}x</text>')
    out.append("</svg>")
    return "\n".join(out)


SLOWEST = 15
"""The slowest problems relative to the baseline that a comparison's third plot shows."""


def comparison_plots(scored: Comparison) -> dict[str, str]:
    """A comparison's plots by name: the score by level, by model (where its problems name
    models) and the SLOWEST problems slowest relative to the baseline."""
    plots = {"by-level": ratio_bars([(f"level {k}", v) for k, v in scored.by_level.items()], "score by level")}
    if scored.by_model:
        plots["by-model"] = ratio_bars(list(scored.by_model.items()), "score by model")
    plots["slowest"] = ratio_bars(
        [(r.problem, r.ratio) for r in scored.ratios[:SLOWEST]],
        f"the {min(SLOWEST, len(scored.ratios))} problems slowest relative to the baseline",
    )
    return plots
