"""Small SVG line charts of a run's metrics, drawn on the server (no plotting library, no script).

`chart()` computes the geometry; `templates/curves.html` draws it. Every point is a circle whose
`<title>` names the step and value, so hovering reads the number. Long runs are thinned: the line
to at most `MAX_CHART_POINTS` points, the circles to at most `MAX_DOTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beyondagent_plugin_view.bounds import MAX_CHART_POINTS

WIDTH, HEIGHT, PAD_X, PAD_Y = 360, 150, 44, 18
MAX_DOTS = 200


def _fmt(value: float) -> str:
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.4g}"


def _every(items: Sequence[Any], most: int) -> list[Any]:
    """At most about `most` of `items`, evenly spaced, the last one kept."""
    step = max(1, len(items) // most)
    thinned = list(items[::step])
    if thinned[-1] != items[-1]:
        thinned.append(items[-1])
    return thinned


def chart(name: str, steps: Sequence[int], values: Sequence[float]) -> dict[str, Any] | None:
    """One metric's chart geometry (None when there is nothing to draw). Values must be finite."""
    if not steps:
        return None
    low, high = min(values), max(values)
    if high == low:
        low, high = low - 0.5, high + 0.5
    first, last = min(steps), max(steps)
    span = max(last - first, 1)

    def x(step: int) -> float:
        return PAD_X + (step - first) / span * (WIDTH - PAD_X - 8)

    def y(value: float) -> float:
        return HEIGHT - PAD_Y - (value - low) / (high - low) * (HEIGHT - 2 * PAD_Y)

    pairs = list(zip(steps, values, strict=True))
    return {
        "name": name, "width": WIDTH, "height": HEIGHT, "pad_x": PAD_X, "pad_y": PAD_Y,
        "points": " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in _every(pairs, MAX_CHART_POINTS)),
        "dots": [{"x": f"{x(s):.1f}", "y": f"{y(v):.1f}", "title": f"step {s}: {_fmt(v)}"}
                 for s, v in _every(pairs, MAX_DOTS)],
        "high": _fmt(high), "low": _fmt(low), "first": first, "last": last,
    }
