"""Successful FrozenLake episodes played in the real env, for the experience tests: `solved(task_id)`."""

from __future__ import annotations

from collections import deque
from typing import Any

from beyondagent_core.types import Reward, Task, Trajectory, Turn


def frozenlake(task_id: str, metadata: dict[str, Any] | None = None) -> Any:
    from beyondagent_plugin_gym.config import FrozenLakeConfig
    from beyondagent_plugin_gym.frozenlake import FrozenLake

    env = FrozenLake(FrozenLakeConfig())
    reset = env.reset(Task(task_id=task_id, env="frozenlake", metadata=metadata or {"size": 2}))
    return env, reset


def solved(task_id: str, *, detour: bool = False) -> Trajectory:
    """A successful episode of a FrozenLake task, played in the env: the shortest path (BFS over the
    env's own moves), optionally after a detour into the wall (a longer success)."""
    env, reset = frozenlake(task_id)
    task = Task(task_id=task_id, env="frozenlake", metadata=reset.info["metadata"])
    rows = reset.info["metadata"]["map"]
    start = next((r, c) for r, row in enumerate(rows) for c, cell in enumerate(row) if cell == "S")
    moves = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
    paths, seen = deque([(start, [])]), {start}
    while paths:
        (r, c), path = paths.popleft()
        if rows[r][c] == "G":
            break
        for move, (dr, dc) in moves.items():
            nxt = (r + dr, c + dc)
            if 0 <= nxt[0] < len(rows) and 0 <= nxt[1] < len(rows[0]) and rows[nxt[0]][nxt[1]] != "H" \
                    and nxt not in seen:
                seen.add(nxt)
                paths.append((nxt, [*path, move]))
    actions = (["up"] if detour else []) + path
    env, reset = frozenlake(task_id, task.metadata)
    turns = [Turn(m["role"], m["content"]) for m in reset.messages]
    for action in actions:
        turns.append(Turn("assistant", f"Action: {action}", token_ids=[1]))
        step = env.step({"role": "assistant", "content": f"Action: {action}"})
        turns += [Turn(m["role"], m["content"]) for m in step.observation]
    assert step.terminated and step.reward == 1.0, f"{task_id}: {actions} did not reach G"
    return Trajectory(task=task, turns=turns, reward=Reward(score=1.0, success=True))
