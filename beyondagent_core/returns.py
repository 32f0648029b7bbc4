"""What workflows and explorers return, checked where the core receives it.

A workflow's `run` and an explorer's `explore` return a `Trajectory`. A wrong return — a dict,
turns that are message dicts instead of `Turn`s, an `achieved` entry counted from 0 — would
otherwise surface far from its cause (an AttributeError in the tokenizer, a summarizer quietly
counting "malformed" entries and making no tasks). These checks say which component returned
what, from which method, and the type that was expected.

An explorer's `metrics["achieved"]` (optional: what the `hindsight` summarizer reads) is a list of
`{"step": i, "goals": [{"query": str, "goal": <JSON>}, ...]}`, where `i` counts the actions
(assistant turns) taken so far, from 1: the entry recorded after the first action is step 1.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from beyondagent_core.types import Reward, Task, Trajectory, Turn


class ReturnError(TypeError):
    """A component returned something of the wrong type or shape; the message names the component."""


def class_name(obj: Any) -> str:
    """How a component is named when nothing better is known: its class."""
    return type(obj).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


async def awaited(value: Any, *, who: str, method: str) -> Any:
    """Await what an async method returned; a sync one's plain return is a `ReturnError` naming `who`."""
    if not inspect.isawaitable(value):
        raise ReturnError(f"{who}: {method}() returned {type(value).__name__} instead of a coroutine; "
                          f"define it as `async def {method}(...)`")
    return await value


def check_trajectory(value: Any, *, who: str, method: str) -> Trajectory:
    """`value` if it is a well-typed `Trajectory`, else a `ReturnError` naming `who` and `method`."""
    said = f"{who}: {method}() returned"
    if not isinstance(value, Trajectory):
        raise ReturnError(f"{said} {type(value).__name__} {_short(value)}; expected a Trajectory "
                          "(beyondagent_core.types.Trajectory)")
    if not isinstance(value.task, Task):
        raise ReturnError(f"{said} a Trajectory whose task is {type(value.task).__name__}; expected the Task it ran")
    if not isinstance(value.turns, list):
        raise ReturnError(f"{said} a Trajectory whose turns are a {type(value.turns).__name__}; "
                          "expected a list of Turn")
    for index, turn in enumerate(value.turns):
        if not isinstance(turn, Turn):
            raise ReturnError(f"{said} turns[{index}] = {_short(turn)} ({type(turn).__name__}); expected a Turn "
                              "(beyondagent_core.types.Turn(role=..., content=...))")
        if not isinstance(turn.role, str) or not isinstance(turn.content, str):
            raise ReturnError(f"{said} turns[{index}] with role {_short(turn.role)} and content of type "
                              f"{type(turn.content).__name__}; expected str for both")
    if value.reward is not None and not isinstance(value.reward, Reward):
        raise ReturnError(f"{said} a Trajectory whose reward is {type(value.reward).__name__}; "
                          "expected a Reward or None")
    if not isinstance(value.metrics, dict):
        raise ReturnError(f"{said} a Trajectory whose metrics are a {type(value.metrics).__name__}; expected a dict")
    return value


def check_exploration(value: Any, *, who: str) -> Trajectory:
    """An explorer's trajectory, checked: a `Trajectory` and, when present, a well-formed `achieved` list."""
    trajectory = check_trajectory(value, who=who, method="explore")
    achieved = trajectory.metrics.get("achieved")
    if achieved is None:
        return trajectory
    said = f"{who}: explore() returned metrics['achieved']"
    if not isinstance(achieved, list):
        raise ReturnError(f"{said} as a {type(achieved).__name__}; expected a list of "
                          "{'step': int, 'goals': [{'query': str, 'goal': ...}]}")
    actions = sum(1 for turn in trajectory.turns if turn.role == "assistant")
    for index, entry in enumerate(achieved):
        step = entry.get("step") if isinstance(entry, dict) else None
        goals = entry.get("goals") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(step, int) or isinstance(step, bool) \
                or not isinstance(goals, list):
            raise ReturnError(f"{said}[{index}] = {_short(entry)}; expected {{'step': int, 'goals': list}}")
        if not 1 <= step <= actions:
            raise ReturnError(f"{said}[{index}] with step {step}; steps count the actions taken from 1 (the entry "
                              f"after the first action is step 1) up to {actions}, the trajectory's assistant turns")
        for number, goal in enumerate(goals):
            _check_goal(goal, f"{said}[{index}]['goals'][{number}]")
    return trajectory


def _check_goal(goal: Any, said: str) -> None:
    query = goal.get("query") if isinstance(goal, dict) else None
    if not isinstance(query, str) or not query.strip() or goal.get("goal") is None:
        raise ReturnError(f"{said} = {_short(goal)}; expected {{'query': a non-empty str, 'goal': a JSON value}}")
    try:
        json.dumps(goal["goal"])
    except (TypeError, ValueError):
        raise ReturnError(f"{said}['goal'] = {_short(goal['goal'])} is not JSON (dicts, lists, strings, numbers)") \
            from None
