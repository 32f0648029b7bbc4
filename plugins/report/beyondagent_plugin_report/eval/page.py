"""`eval.html`: the eval's numbers as one static page (no scripts), beside `eval.json`."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

STYLE = """body{font-family:system-ui,sans-serif;margin:2rem;color:#222}table{border-collapse:collapse;margin:1rem 0}
td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}
.ci{color:#777;font-size:.85em}"""


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else html.escape(str(value))


def _headline(summary: dict[str, Any]) -> list[str]:
    names = [key for key in summary if ("@" in key or key.endswith("_rate") or key == "elo_vs_opponent")
             and not key.endswith("_ci95")]
    cells = []
    for name in names:
        low, high = summary.get(f"{name}_ci95", (None, None))
        interval = f' <span class="ci">[{low:.3f}, {high:.3f}]</span>' if low is not None else ""
        cells.append(f"<tr><td>{html.escape(name)}</td><td>{_number(summary[name])}{interval}</td></tr>")
    for key in ("tasks", "episodes", "errors", "mean_turns"):
        if key in summary:
            cells.append(f"<tr><td>{key}</td><td>{_number(summary[key])}</td></tr>")
    return cells


def write_page(result: dict[str, Any], path: Path) -> None:
    settings = result["settings"]
    parts = [f"<!doctype html><meta charset=utf-8><title>eval: {html.escape(result['model'])}</title>",
             f"<style>{STYLE}</style>", "<h1>Evaluation</h1>",
             f"<p>{html.escape(result['model'])}"
             + (f" against {html.escape(result['opponent'])} (the model's seats' numbers)"
                if result.get("opponent") else "")
             + f" on <code>tasks.{html.escape(settings['split'])}</code> of "
             f"<code>{html.escape(result['spec'])}</code>: k={settings['k']}, temperature {settings['temperature']}. "
             "Intervals are 95% bootstrap intervals over tasks.</p>",
             "<h2>Summary</h2><table><tr><th>metric</th><th>value</th></tr>", *_headline(result["summary"]), "</table>"]
    if len(result["by_origin"]) > 1:
        parts.append("<h2>By origin</h2>")
        for origin, summary in result["by_origin"].items():
            parts += [f"<h3>{html.escape(origin)}</h3><table><tr><th>metric</th><th>value</th></tr>",
                      *_headline(summary), "</table>"]
    for key, title in (("by_group", "By group"), ("by_seat", "By seat")):
        if result.get(key):
            parts.append(f"<h2>{title}</h2>")
            for part, summary in result[key].items():
                parts += [f"<h3>{html.escape(part)}</h3><table><tr><th>metric</th><th>value</th></tr>",
                          *_headline(summary), "</table>"]
    columns = ("task_id", "origin", "n", "successes", "mean_score", "best_score", "mean_turns", "errors")
    parts.append("<h2>Tasks</h2><table><tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>")
    for row in result["tasks"]:
        parts.append("<tr>" + "".join(f"<td>{_number(row[c])}</td>" for c in columns) + "</tr>")
    parts.append(f"</table><p>Episodes: <code>{html.escape(result['episodes'])}</code></p>")
    path.write_text("\n".join(parts), encoding="utf-8")
