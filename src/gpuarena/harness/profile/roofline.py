"""A roofline plot as a standalone SVG: each profiled kernel at (FLOPs per DRAM byte, FLOP/s)
under the device's roofs (measured copy bandwidth, FP32 and BF16 matrix rates from
harness/device/peaks.py). Drawn here, with no plotting library and nothing loaded from elsewhere, so
the CLI can write it beside the report and the web page can inline it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from gpuarena.contracts.profile_record import ProfileRecord

WIDTH, HEIGHT = 560, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 50
COLOURS = {"solution": "#c2410c", "reference": "#1d4ed8"}


@dataclass(frozen=True)
class Point:
    side: str
    """solution or reference."""
    label: str
    intensity: float
    """FLOPs per DRAM byte."""
    flops: float
    """FLOP/s."""


def _decades(low: float, high: float) -> tuple[int, int]:
    return math.floor(math.log10(low)), math.ceil(math.log10(high))


def svg(points: list[Point], bandwidth_bytes_s: float, roofs: dict[str, float], title: str = "") -> str:
    """The plot; `roofs` names compute ceilings in FLOP/s (e.g. {"FP32": 5.1e13})."""
    ceiling = max(roofs.values(), default=1e12)
    xs = [p.intensity for p in points] + [ceiling / bandwidth_bytes_s]
    ys = [p.flops for p in points] + [ceiling]
    x0, x1 = _decades(min(min(xs) / 4, 0.01), max(max(xs) * 4, 100))
    y0, y1 = _decades(min(min(ys) / 4, bandwidth_bytes_s * 10.0**x0), ceiling * 2)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + (math.log10(value) - x0) / (x1 - x0) * plot_w

    def y(value: float) -> float:
        return TOP + plot_h - (math.log10(value) - y0) / (y1 - y0) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="roofline{": " + escape(title) if title else ""}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for d in range(x0, x1 + 1):
        out.append(f'<line x1="{x(10.0**d):.1f}" y1="{TOP}" x2="{x(10.0**d):.1f}" y2="{TOP + plot_h}" stroke="#eee"/>')
        out.append(f'<text x="{x(10.0**d):.1f}" y="{TOP + plot_h + 14}" text-anchor="middle">1e{d}</text>')
    for d in range(y0, y1 + 1):
        out.append(
            f'<line x1="{LEFT}" y1="{y(10.0**d):.1f}" x2="{LEFT + plot_w}" y2="{y(10.0**d):.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{LEFT - 4}" y="{y(10.0**d) + 4:.1f}" text-anchor="end">1e{d}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{TOP + plot_h + 28}" text-anchor="middle">FLOPs per DRAM byte</text>')
    out.append(
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2})">FLOP/s</text>'
    )
    for name, roof in sorted(roofs.items(), key=lambda item: item[1]):
        knee = roof / bandwidth_bytes_s
        start = 10.0**x0
        out.append(
            f'<polyline fill="none" stroke="#444" points="{x(start):.1f},{y(max(bandwidth_bytes_s * start, 10.0**y0)):.1f} '
            f'{x(knee):.1f},{y(roof):.1f} {x(10.0**x1):.1f},{y(roof):.1f}"/>'
        )
        out.append(
            f'<text x="{x(10.0**x1) - 4:.1f}" y="{y(roof) - 4:.1f}" text-anchor="end">{escape(name)} '
            f"{roof / 1e12:.1f} TFLOP/s</text>"
        )
    out.append(f'<text x="{LEFT + 6}" y="{TOP + 14}">{bandwidth_bytes_s / 1e9:.0f} GB/s</text>')
    for p in points:
        colour = COLOURS.get(p.side, "#333")
        out.append(
            f'<circle cx="{x(p.intensity):.1f}" cy="{y(p.flops):.1f}" r="5" fill="{colour}" opacity="0.85">'
            f"<title>{escape(p.side)}: {escape(p.label)} ({p.intensity:.3g} FLOP/B, "
            f"{p.flops / 1e12:.3g} TFLOP/s)</title></circle>"
        )
    legend_y = HEIGHT - 6
    for i, (side, colour) in enumerate(COLOURS.items()):
        out.append(
            f'<circle cx="{LEFT + 10 + i * 110}" cy="{legend_y - 4}" r="5" fill="{colour}"/>'
            f'<text x="{LEFT + 20 + i * 110}" y="{legend_y}">{side}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def for_record(record: ProfileRecord) -> str:
    """The plot of a profile: both sides' kernels that have FLOPs and DRAM traffic, under the
    roofs of the device's measured peaks (the record's)."""
    points = [
        Point(side, k.name, k.arithmetic_intensity, k.achieved_flops)
        for side, profile in (("solution", record.solution_profile), ("reference", record.reference_profile))
        for k in profile.kernels
        if k.arithmetic_intensity and k.achieved_flops
    ]
    bandwidth = record.peaks.get("bandwidth_gbs", 1000.0) * 1e9
    roofs = {
        name: record.peaks[key] * 1e12
        for name, key in (("FP32", "tflops_fp32"), ("BF16 matrix", "tflops_bf16"))
        if record.peaks.get(key)
    }
    return svg(points, bandwidth, roofs, title=f"{record.problem} {record.workload}")
