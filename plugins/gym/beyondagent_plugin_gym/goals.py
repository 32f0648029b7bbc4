"""Goals: what an episode achieved, and goal-conditioned tasks that ask for one of them.

A goal is a small JSON object the env can check, e.g. `{"kind": "reach", "row": 2, "col": 3}`
(FrozenLake, CliffWalking, Taxi), `{"kind": "pickup"}` or `{"kind": "dropoff", "stop": "Y"}`
(Taxi). While an episode runs, every env records the goals its transitions achieve; the
optional env method `describe_achieved()` lists them, each with a natural-language query, and
the `hindsight` summarizer turns them into synthetic tasks. A task whose `metadata["goal"]`
is set replays its seed task's start, but is judged on that goal instead of the game's own
objective (see `TextGymEnv`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Goal = dict[str, Any]


def goal_key(goal: Goal) -> str:
    """A canonical text form of `goal`, equal for equal goals whatever the key order."""
    return json.dumps(goal, sort_keys=True, separators=(",", ":"))


def reach(row: int, col: int) -> Goal:
    return {"kind": "reach", "row": row, "col": col}


def check_goal_shape(task_id: str, goal: Any, kinds: Iterable[str]) -> Goal:
    """`goal` as a dict whose `kind` is one of `kinds`; ValueError naming the task otherwise."""
    kinds = tuple(kinds)
    if not isinstance(goal, dict) or goal.get("kind") not in kinds:
        raise ValueError(f"task {task_id!r}: metadata.goal must be an object whose kind is one of "
                         f"{', '.join(kinds)}, got {_short(goal)}")
    return goal


def check_cell(task_id: str, goal: Goal, n_rows: int, n_cols: int) -> tuple[int, int]:
    """The (row, col) of a `reach` goal, checked against the grid's size."""
    row, col = goal.get("row"), goal.get("col")
    if set(goal) != {"kind", "row", "col"} or not (_index(row, n_rows) and _index(col, n_cols)):
        raise ValueError(f"task {task_id!r}: metadata.goal of kind reach must be "
                         f'{{"kind": "reach", "row": 0-{n_rows - 1}, "col": 0-{n_cols - 1}}}, got {_short(goal)}')
    return row, col


def bad_goal(task_id: str, goal: Goal, why: str) -> ValueError:
    return ValueError(f"task {task_id!r}: metadata.goal {_short(goal)} {why}")


def _index(value: Any, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=repr) if isinstance(value, (dict, list)) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
