"""Two steps, or two runs, compared on the tasks both recorded: `/compare?a=RUN:STEP&b=RUN:STEP&split=val`.

Each side is one step of one run (`0:20`); its episodes are grouped by task (mean reward, success
rate, episodes), the tasks both sides have are lined up with the change in mean reward, largest
change first. Without `a` / `b` the first and the last step of run 0 that recorded the split are
compared. Validation picks the same tasks at every evaluation (`logging.episodes`), so two
evaluations of one run line up task for task.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import attrs

from beyondagent_plugin_view.pages import esc, page


@attrs.frozen
class Side:
    run: int
    step: int

    @property
    def label(self) -> str:
        return f"{self.run}:{self.step}"


def parse_side(text: str, what: str) -> Side:
    run, _, step = text.partition(":")
    try:
        return Side(int(run), int(step))
    except ValueError:
        raise ValueError(f"?{what}= must be RUN:STEP (e.g. 0:20, run 0 at step 20), got {text!r}") from None


def default_sides(index: Any, split: str) -> tuple[Side, Side] | None:
    steps = [row[0] for row in index.query("SELECT DISTINCT step FROM episodes WHERE split = ? AND step IS NOT NULL "
                                           "ORDER BY step", (split,))]
    return (Side(0, steps[0]), Side(0, steps[-1])) if len(steps) > 1 else None


def per_task(index: Any, step: int, split: str) -> dict[str, dict[str, float]]:
    """task id -> {"n", "reward", "success", "first"} of one step's recorded episodes."""
    rows = index.query("SELECT task_id, count(*), avg(score), avg(success), min(id) FROM episodes "
                       "WHERE step = ? AND split = ? AND bad IS NULL AND task_id IS NOT NULL GROUP BY task_id",
                       (step, split))
    return {task: {"n": n, "reward": reward or 0.0, "success": success or 0.0, "first": first}
            for task, n, reward, success, first in rows}


def compare(runs: Sequence[Any], a: Side, b: Side, split: str) -> dict[str, Any]:
    """The comparison as data (the JSON endpoint returns it as it is)."""
    for side in (a, b):
        if not 0 <= side.run < len(runs):
            raise LookupError(f"there is no run {side.run}; runs are 0 to {len(runs) - 1}")
    left, right = per_task(runs[a.run].index, a.step, split), per_task(runs[b.run].index, b.step, split)
    common = sorted(set(left) & set(right))
    rows = []
    for task in common:
        delta = (right[task]["reward"] or 0.0) - (left[task]["reward"] or 0.0)
        rows.append({"task_id": task, "a": left[task], "b": right[task], "delta_reward": delta,
                     "delta_success": right[task]["success"] - left[task]["success"]})
    rows.sort(key=lambda row: (-abs(row["delta_reward"]), row["task_id"]))

    def mean(key: str, side: str) -> float | None:
        return statistics.fmean(row[side][key] for row in rows) if rows else None

    return {
        "a": a.label, "b": b.label, "split": split, "tasks_a": len(left), "tasks_b": len(right),
        "common": len(common), "only_a": len(set(left) - set(right)), "only_b": len(set(right) - set(left)),
        "reward_a": mean("reward", "a"), "reward_b": mean("reward", "b"),
        "success_a": mean("success", "a"), "success_b": mean("success", "b"),
        "better": sum(1 for row in rows if row["delta_reward"] > 1e-9),
        "worse": sum(1 for row in rows if row["delta_reward"] < -1e-9),
        "tasks": rows,
    }


def compare_page(runs: Sequence[Any], result: dict[str, Any] | None, params: Mapping[str, str]) -> str:
    splits = ("val", "train")
    params = {**params, **({"a": result["a"], "b": result["b"]} if result and not params.get("a") else {})}
    form = ('<form class="filters" method="get" action="/compare">'
            f'<label>A (run:step)<input class="num" name="a" value="{esc(params.get("a", ""))}"></label>'
            f'<label>B (run:step)<input class="num" name="b" value="{esc(params.get("b", ""))}"></label>'
            '<label>split<select name="split">' + "".join(
                f'<option{" selected" if params.get("split", "val") == s else ""}>{s}</option>' for s in splits)
            + '</select></label><button type="submit">Compare</button></form>')
    parts = ["<h2>Compare two steps or two runs on the same tasks</h2>", form]
    if result is None:
        parts.append('<p class="notice">Pick two sides as RUN:STEP (run 0 is the first RUN_DIR): this run has fewer '
                     "than two steps that recorded this split.</p>")
        return page("compare", "".join(parts), run=runs[0] if len(runs) == 1 else None, here="compare", runs=runs)
    names = {side: _side_name(runs, result[side]) for side in ("a", "b")}
    parts.append(
        f'<p id="compare-summary">A = {esc(names["a"])}, B = {esc(names["b"])}, split {esc(result["split"])}: '
        f'{result["common"]} tasks in common ({result["only_a"]} only in A, {result["only_b"]} only in B). '
        + (f'Mean reward {result["reward_a"]:.3f} → {result["reward_b"]:.3f}, success '
           f'{result["success_a"]:.0%} → {result["success_b"]:.0%}; {result["better"]} tasks better, '
           f'{result["worse"]} worse.' if result["common"] else "") + "</p>")
    if not result["common"]:
        parts.append('<p class="notice">No task was recorded on both sides. Validation keeps the same tasks at every '
                     "evaluation; training steps share tasks once an epoch comes round again.</p>")
    head = ("<tr><th>task</th><th class=num>A episodes</th><th class=num>A reward</th><th class=num>A success</th>"
            "<th class=num>B episodes</th><th class=num>B reward</th><th class=num>B success</th>"
            "<th class=num>Δ reward</th></tr>")
    body = "".join(_row(runs, result, row) for row in result["tasks"])
    parts.append(f'<table class="list" id="compare">{head}{body}</table>')
    return page("compare", "".join(parts), run=runs[0] if len(runs) == 1 else None, here="compare", runs=runs)


def _side_name(runs: Sequence[Any], label: str) -> str:
    run, step = label.split(":")
    return f"{runs[int(run)].name} step {step}"


def _row(runs: Sequence[Any], result: dict[str, Any], row: dict[str, Any]) -> str:
    cells = []
    for side in ("a", "b"):
        run, step = result[side].split(":")
        link = f'{runs[int(run)].base}/?{urlencode({"task": row["task_id"], "step_min": step, "step_max": step})}'
        data = row[side]
        cells.append(f'<td class="num"><a href="{esc(link)}">{data["n"]}</a></td>'
                     f'<td class="num">{data["reward"]:.3f}</td><td class="num">{data["success"]:.0%}</td>')
    delta = row["delta_reward"]
    colour = "ok" if delta > 1e-9 else ("fail" if delta < -1e-9 else "muted")
    return (f'<tr><td>{esc(row["task_id"])}</td>{"".join(cells)}'
            f'<td class="num"><span class="{colour}">{delta:+.3f}</span></td></tr>')
