"""The `appworld` judge: AppWorld's own `evaluate_task`, asked of the live env.

It is the env's `evaluate()` (passed checks / all checks, or 1/0, with the failed checks in the
reward's details), so it needs the env still open: the episode runner calls `score_in_env`
before closing it. Synthetic tasks (a new query on a seed task's world) have no ground truth;
judge them with `llm_judge` (`synthetic_reward` in the spec).
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import AsyncEnv
from beyondagent_core.types import Reward, Task, Trajectory


class AppWorldJudge:
    def __init__(self, config: Any = None):
        pass

    async def score_in_env(self, task: Task, trajectory: Trajectory, env: AsyncEnv) -> Reward:
        return await env.evaluate()

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        if trajectory.reward is None:
            raise RuntimeError("the `appworld` judge scores inside the episode (the env is already closed)")
        return trajectory.reward
