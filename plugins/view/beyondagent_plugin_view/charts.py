"""Small SVG line charts of a run's metrics, drawn on the server (no plotting library, no script).

Every point is a circle whose `<title>` names the step and value, so hovering reads the number.
Long runs are thinned to at most `MAX_POINTS` circles (the line keeps every point).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH, HEIGHT, PAD_X, PAD_Y = 360, 150, 44, 18
MAX_POINTS = 200


def _fmt(value: float) -> str:
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.4g}"


def line_chart(name: str, steps: Sequence[int], values: Sequence[float]) -> str:
    """One metric as an SVG chart (an empty string when there is nothing to draw)."""
    if not steps:
        return ""
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 0.5, high + 0.5
    first, last = min(steps), max(steps)
    span = max(last - first, 1)

    def x(step: int) -> float:
        return PAD_X + (step - first) / span * (WIDTH - PAD_X - 8)

    def y(value: float) -> float:
        return HEIGHT - PAD_Y - (value - low) / (high - low) * (HEIGHT - 2 * PAD_Y)

    points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, values, strict=True))
    every = max(1, len(steps) // MAX_POINTS)
    dots = "".join(
        f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="2.2" fill="#0b57d0"><title>step {s}: {_fmt(v)}</title></circle>'
        for s, v in list(zip(steps, values, strict=True))[::every])
    axis = (f'<text x="2" y="{PAD_Y}" font-size="10">{_fmt(high)}</text>'
            f'<text x="2" y="{HEIGHT - PAD_Y}" font-size="10">{_fmt(low)}</text>'
            f'<text x="{PAD_X}" y="{HEIGHT - 3}" font-size="10">step {first}</text>'
            f'<text x="{WIDTH - 8}" y="{HEIGHT - 3}" font-size="10" text-anchor="end">{last}</text>'
            f'<line x1="{PAD_X}" y1="{HEIGHT - PAD_Y}" x2="{WIDTH - 8}" y2="{HEIGHT - PAD_Y}" stroke="#ccc"/>')
    return (f'<div class="chart" data-metric="{html.escape(name)}"><h4>{html.escape(name)}</h4>'
            f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(name)}">{axis}'
            f'<polyline fill="none" stroke="#0b57d0" stroke-width="1.4" points="{points}"/>{dots}</svg></div>')
