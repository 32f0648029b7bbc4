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

from beyondagent_plugin_view.bounds import MAX_COMPARE_ROWS, check_int64
from beyondagent_plugin_view.pages import clip, number, render


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
        return Side(check_int64(int(run), f"?{what}= run"), check_int64(int(step), f"?{what}= step"))
    except ValueError as exc:
        detail = f" ({exc})" if "out of range" in str(exc) else ""
        raise ValueError(f"?{what}= must be RUN:STEP (e.g. 0:20, run 0 at step 20), "
                         f"got {text[:40]!r}{detail}") from None


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
    cut = len(rows) > MAX_COMPARE_ROWS

    def mean(key: str, side: str) -> float | None:
        return statistics.fmean(row[side][key] for row in rows) if rows else None

    return {
        "a": a.label, "b": b.label, "split": split, "tasks_a": len(left), "tasks_b": len(right),
        "common": len(common), "only_a": len(set(left) - set(right)), "only_b": len(set(right) - set(left)),
        "reward_a": mean("reward", "a"), "reward_b": mean("reward", "b"),
        "success_a": mean("success", "a"), "success_b": mean("success", "b"),
        "better": sum(1 for row in rows if row["delta_reward"] > 1e-9),
        "worse": sum(1 for row in rows if row["delta_reward"] < -1e-9),
        "tasks": rows[:MAX_COMPARE_ROWS], "cut": cut,
    }


def compare_page(runs: Sequence[Any], result: dict[str, Any] | None, params: Mapping[str, str]) -> str:
    form = {"a": params.get("a", ""), "b": params.get("b", ""), "split": params.get("split", "val")}
    if result is not None and not params.get("a"):
        form.update(a=result["a"], b=result["b"])
    context: dict[str, Any] = {"form": {key: clip(value, 100) for key, value in form.items()},
                               "splits": ("val", "train"), "result": result}
    if result is not None:
        context["names"] = {side: _side_name(runs, result[side]) for side in ("a", "b")}
        context["summary"] = {f"{key}_{side}": number(result[f"{key}_{side}"], spec)
                              for key, spec in (("reward", ".3f"), ("success", ".0%")) for side in "ab"}
        context["rows"] = [_row(runs, result, row) for row in result["tasks"]]
    return render("compare.html", title="compare", run=runs[0] if len(runs) == 1 else None, here="compare", runs=runs,
                  **context)


def _side_name(runs: Sequence[Any], label: str) -> str:
    run, step = label.split(":")
    return f"{runs[int(run)].name} step {step}"


def _row(runs: Sequence[Any], result: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    sides = []
    for side in ("a", "b"):
        run, step = result[side].split(":")
        where = urlencode({"task": row["task_id"], "step_min": step, "step_max": step})
        data = row[side]
        sides.append({"href": f"{runs[int(run)].base}/?{where}", "n": data["n"],
                      "reward": number(data["reward"], ".3f"), "success": number(data["success"], ".0%")})
    delta = row["delta_reward"]
    colour = "ok" if delta > 1e-9 else ("fail" if delta < -1e-9 else "muted")
    return {"task_id": clip(row["task_id"]), "sides": sides, "delta": number(delta, "+.3f"), "colour": colour}
