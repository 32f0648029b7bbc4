"""Which judge scores an episode, and the built-in `env` judge.

A task names its judge in `task.judge` (a registered reward, built with its default config,
or the spec's own `reward`/`synthetic_reward` block when the names match). A task without
one gets the spec's default for its origin: `synthetic_reward` for synthetic tasks (falling
back to `reward`), `reward` for originals. With no judge at all, the episode keeps the reward
its workflow set (the react workflow asks the env's `evaluate()`).

A judge that needs the live env (like `env`) defines `score_in_env(task, trajectory, env)`;
the episode runner calls it before the env is closed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from beyondagent_core.errors import PluginError
from beyondagent_core.protocols import AsyncEnv, Judge
from beyondagent_core.types import Reward, Task, Trajectory


class EnvJudge:
    """Reward `env`: the environment's own `evaluate()` at the end of the episode.

    For goal-conditioned synthetic tasks (hindsight) the env checks the task's goal, so these
    tasks are verifiable without an LLM.
    """

    name = "env"  # the reward name, for the message below

    def __init__(self, config: Any = None):
        pass

    async def score_in_env(self, task: Task, trajectory: Trajectory, env: AsyncEnv) -> Reward:
        return await env.evaluate()

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        if trajectory.reward is None:
            raise RuntimeError(f"the `{self.name}` judge scores inside the episode (the env is already closed)")
        return trajectory.reward


def check_judge(judge: Any, where: str) -> None:
    """A judge's shape, checked when it is built: `async def score(task, trajectory) -> Reward`."""
    for method in ("score", "score_in_env"):
        function = getattr(judge, method, None)
        if method == "score" and not callable(function):
            raise PluginError(f"{type(judge).__name__} has no score() method", where=where,
                              hint="a judge defines `async def score(self, task, trajectory) -> Reward`")
        if function is not None and not inspect.iscoroutinefunction(function):
            raise PluginError(f"{type(judge).__name__}.{method}() is not async", where=where,
                              hint=f"define it as `async def {method}(...)` returning a Reward")


def _reward_of(judge: Any, method: str, value: Any) -> Reward:
    if not isinstance(value, Reward):
        raise TypeError(f"judge {type(judge).__name__}.{method}() returned {type(value).__name__} "
                        f"{str(value)[:60]!r}, not Reward (return Reward(score=..., success=...))")
    return value


async def score_episode(judge: Judge | None, task: Task, trajectory: Trajectory, env: AsyncEnv | None) -> None:
    """Score `trajectory` with a judge that needs the live env; others wait for `score_after`."""
    if judge is not None and env is not None and hasattr(judge, "score_in_env") and not _agent_scored(trajectory):
        trajectory.reward = _reward_of(judge, "score_in_env", await judge.score_in_env(task, trajectory, env))
        trajectory.metrics["judged_in_env"] = True


async def score_after(judge: Judge | None, task: Task, trajectory: Trajectory) -> None:
    """Score `trajectory` once the env is closed (unless `score_episode` already did)."""
    if judge is not None and not trajectory.metrics.pop("judged_in_env", False) and not _agent_scored(trajectory):
        trajectory.reward = _reward_of(judge, "score", await judge.score(task, trajectory))


def _agent_scored(trajectory: Trajectory) -> bool:
    """The `agent` workflow's agent gave its own reward: a judge does not override it."""
    return trajectory.metrics.get("reward_source") == "agent"


@attrs.define
class JudgeSelector:
    """Picks each task's judge: its own `judge` name, else the spec default for its origin.

    `build(name)` makes a registered reward by name (used for names the spec does not
    configure); judges are built once and reused.
    """

    default: Judge | None = None
    synthetic: Judge | None = None
    build: Callable[[str], Judge] | None = None
    configured: dict[str, Judge] = attrs.field(factory=dict)

    def for_task(self, task: Task) -> Judge | None:
        if task.judge:
            if task.judge not in self.configured:
                if self.build is None:
                    raise LookupError(f"task {task.task_id!r} names judge {task.judge!r} but no registry is available")
                self.configured[task.judge] = self.build(task.judge)
            return self.configured[task.judge]
        if task.origin == "synthetic" and self.synthetic is not None:
            return self.synthetic
        return self.default


def as_selector(judge: Judge | JudgeSelector | None) -> JudgeSelector:
    """A `JudgeSelector` from one judge for every task (or None: the workflow's reward)."""
    return judge if isinstance(judge, JudgeSelector) else JudgeSelector(default=judge)
