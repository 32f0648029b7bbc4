"""Running one episode: a fresh env, the workflow, the judge; failures become error records.

An episode that raises (a workflow bug, an env returning a non-string observation, a judge
crash) does not stop the step: it comes back as a `Trajectory` with reward 0 and `error` set,
and is logged with its traceback. Backends count these and train on the rest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import attrs
import structlog

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.protocols import ChatLLM, Env, Judge, Workflow
from beyondagent_core.types import Reward, Task, Trajectory

log = structlog.get_logger("beyondagent.episodes")


@attrs.define
class EpisodeRunner:
    """Runs episodes of `workflow` in envs from `make_env`; `judge` (if any) scores them.

    Without a judge the reward is the one the workflow set (the react workflow asks the
    env's `evaluate()`).
    """

    workflow: Workflow
    make_env: Callable[[], Env]
    judge: Judge | None = None

    async def run(self, task: Task, llm: ChatLLM) -> Trajectory:
        started = time.perf_counter()
        try:
            trajectory = await self._run(task, llm)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one broken episode must not stop the step
            error = f"{type(exc).__name__}: {exc}"
            log.warning("episode.failed", task=task.task_id, error=error, exc_info=True)
            trajectory = Trajectory(task=task, reward=Reward(0.0, reason=f"episode failed: {error}"), error=error)
        trajectory.metrics["seconds"] = round(time.perf_counter() - started, 4)
        return trajectory

    async def _run(self, task: Task, llm: ChatLLM) -> Trajectory:
        env = await asyncio.to_thread(self.make_env)
        async with LocalAsyncEnv(env) as async_env:
            trajectory = await self.workflow.run(task, async_env, llm)
        if not isinstance(trajectory, Trajectory):
            raise TypeError(f"{type(self.workflow).__name__}.run() returned {type(trajectory).__name__}, "
                            "not Trajectory")
        if self.judge is not None:
            trajectory.reward = await self.judge.score(task, trajectory)
        if not isinstance(trajectory.reward, Reward):
            raise TypeError("the episode has no Reward: the workflow set none and no `reward` judge is configured")
        return trajectory
