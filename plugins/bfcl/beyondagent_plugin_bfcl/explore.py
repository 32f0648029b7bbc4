"""Exploring BFCL's backends without an LLM, and the verifiable tasks it leaves behind.

`read_actions(instances, shown)` offers calls valid now, as `<tool_call>` text the env reads:
every shown function without required parameters (`ls`, `pwd`, `get_watchlist`...), and for the
file system, moving into each folder of the current one, back up, reading each file there, and
making a new folder or file (names that do not exist yet). The `random` explorer in
`random_actions` mode draws from them; an LLM explorer calls any function the prompt shows.

`achieved_goals(executed, bfcl_id)` turns what an episode did into tasks: for every call that
changed a backend's state (BFCL's own state comparison: public attributes, `!=`), the calls
up to it that ran (not the failed or refused ones) become a one-turn task, `metadata["goal"] = {"kind": "calls", "calls": [...],
"query": ...}`, on the seed entry's initial state. The env grades such a task with BFCL's
`multi_turn_checker`, those calls as the ground truth: the same state and the same results,
so the synthetic task is verified the way BFCL verifies its own.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from beyondagent_plugin_bfcl.calls import hermes_text

MAX_GOAL_CALLS = 12


def public_state(instances: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A copy of what BFCL's state checker compares: each instance's attributes not starting with `_`."""
    return {name: copy.deepcopy({key: value for key, value in vars(instance).items() if not key.startswith("_")})
            for name, instance in instances.items()}


def read_actions(instances: dict[str, Any], shown: set[str]) -> list[str]:
    """Calls worth trying now (see the module docstring), each as one `<tool_call>` message."""
    import inspect

    calls: list[tuple[str, dict[str, Any]]] = []
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if name.startswith("_") or name not in shown:
                continue
            required = [p for p in inspect.signature(method).parameters.values()
                        if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
            if not required:
                calls.append((name, {}))
    file_system = instances.get("GorillaFileSystem")
    if file_system is not None:
        calls += _file_system_actions(file_system, shown)
    return [hermes_text([call]) for call in calls]


def _file_system_actions(file_system: Any, shown: set[str]) -> list[tuple[str, dict[str, Any]]]:
    here = getattr(file_system, "_current_dir", None)
    contents = getattr(here, "contents", {}) or {}
    folders = [name for name, item in contents.items() if hasattr(item, "contents")]
    files = [name for name, item in contents.items() if not hasattr(item, "contents")]
    calls: list[tuple[str, dict[str, Any]]] = []
    if "cd" in shown:
        calls += [("cd", {"folder": name}) for name in folders]
        if getattr(here, "parent", None) is not None:
            calls.append(("cd", {"folder": ".."}))
    if "cat" in shown:
        calls += [("cat", {"file_name": name}) for name in files]
    if "mkdir" in shown:
        calls.append(("mkdir", {"dir_name": _fresh("new_folder", contents)}))
    if "touch" in shown:
        calls.append(("touch", {"file_name": _fresh("notes", contents, ".txt")}))
    if "echo" in shown and files:
        calls.append(("echo", {"content": "checked", "file_name": files[0]}))
    return calls


def _fresh(stem: str, contents: dict[str, Any], suffix: str = "") -> str:
    number = 1
    while f"{stem}_{number}{suffix}" in contents:
        number += 1
    return f"{stem}_{number}{suffix}"


def describe(call: str) -> str:
    """A call's text in words: `mkdir(dir_name='x')` -> `mkdir with dir_name='x'`."""
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return call
    if not isinstance(node, ast.Call):
        return call
    name = ast.unparse(node.func)
    args = ", ".join(f"{keyword.arg}={ast.unparse(keyword.value)}" for keyword in node.keywords)
    return f"{name} with {args}" if args else f"{name} (no arguments)"


def achieved_goals(executed: list[dict[str, Any]], bfcl_id: str) -> list[dict[str, Any]]:
    """`[{"query", "goal"}]`: one per state-changing call, the calls up to it that ran (at most 12).

    A call that failed or was refused (a function no backend has, one over a cap: recorded as
    `not_run_<name>()`) changed nothing and is left out: the env refuses a goal naming a function
    its backends do not have, and a task must not ask for one."""
    goals = []
    for index, record in enumerate(executed):
        calls = [item["call"] for item in executed[: index + 1] if item.get("ok")]
        if not record.get("changed") or len(calls) > MAX_GOAL_CALLS:
            continue
        query = ("Using the functions you have, do the following, in this order: "
                 + "; ".join(describe(call) for call in calls) + ".")
        goals.append({"query": query, "goal": {"kind": "calls", "calls": calls, "query": query, "seed": bfcl_id}})
    return goals


def check_goal(goal: Any) -> dict[str, Any]:
    """A task's `metadata["goal"]`, checked: `{"kind": "calls", "calls": [call text, ...]}`."""
    if (not isinstance(goal, dict) or goal.get("kind") != "calls" or not isinstance(goal.get("calls"), list)
            or not goal["calls"] or not all(isinstance(call, str) for call in goal["calls"])):
        raise ValueError(f"a BFCL goal is {{'kind': 'calls', 'calls': ['f(a=1)', ...]}}, got {goal!r:.120}")
    for call in goal["calls"]:
        try:
            node = ast.parse(call, mode="eval").body
        except SyntaxError:
            raise ValueError(f"a BFCL goal's call is not a call: {call!r:.80}") from None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args or any(
                not _literal(keyword.value) for keyword in node.keywords):
            raise ValueError(f"a BFCL goal's call must be name(arg=literal, ...): {call!r:.80}")
    return goal


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return False
    return True
