"""`JudgeSelector` picks each task's judge by its origin (`beyondagent_core.judging`), from the eighth audit.

A task without its own `judge` gets the spec's `synthetic_reward` when it is synthetic (falling
back to `reward` when that is unset) and `reward` when it is original; a task that names a judge
gets that one, built once. The judges here are small real ones that say which they are.
"""

from __future__ import annotations

import asyncio

from beyondagent_core.judging import JudgeSelector, as_selector
from beyondagent_core.types import Reward, Task, Trajectory


class Named:
    """A judge that scores every episode with its own fixed score, so a result says who judged."""

    def __init__(self, score: float):
        self.value = score

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        return Reward(score=self.value, success=self.value > 0.5)


ORIGINAL = Task(task_id="q1", query="What is 6 * 7?", ground_truth="42")
SYNTHETIC = Task(task_id="q1/syn-0", query="What is 6 * 8?", ground_truth="48", origin="synthetic",
                 seed_task_id="q1")


def scored_by(selector: JudgeSelector, task: Task) -> float:
    judge = selector.for_task(task)
    return asyncio.run(judge.score(task, Trajectory(task=task))).score


def test_synthetic_tasks_get_the_synthetic_reward_and_originals_the_reward() -> None:
    reward, synthetic = Named(0.25), Named(0.75)
    selector = JudgeSelector(default=reward, synthetic=synthetic)
    assert selector.for_task(SYNTHETIC) is synthetic
    assert selector.for_task(ORIGINAL) is reward
    assert scored_by(selector, SYNTHETIC) == 0.75 and scored_by(selector, ORIGINAL) == 0.25


def test_without_a_synthetic_reward_synthetic_tasks_fall_back_to_the_reward() -> None:
    reward = Named(0.25)
    selector = JudgeSelector(default=reward)
    assert selector.for_task(SYNTHETIC) is reward and selector.for_task(ORIGINAL) is reward


def test_a_task_naming_its_judge_gets_it_whatever_its_origin() -> None:
    built: list[str] = []

    def build(name: str) -> Named:
        built.append(name)
        return Named(0.9)

    reward, synthetic = Named(0.25), Named(0.75)
    selector = JudgeSelector(default=reward, synthetic=synthetic, build=build)
    own = Task(task_id="q2", query="What is 1 + 1?", judge="exact")
    own_synthetic = Task(task_id="q2/syn-0", query="What is 1 + 2?", judge="exact", origin="synthetic",
                         seed_task_id="q2")
    assert scored_by(selector, own) == 0.9 and scored_by(selector, own_synthetic) == 0.9
    assert built == ["exact"]  # built once, reused
    assert selector.for_task(SYNTHETIC) is synthetic


def test_one_judge_for_every_task() -> None:
    judge = Named(0.6)
    selector = as_selector(judge)
    assert selector.for_task(ORIGINAL) is judge and selector.for_task(SYNTHETIC) is judge
    assert as_selector(selector) is selector
