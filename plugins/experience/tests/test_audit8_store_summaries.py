"""The `trajectory` summarizer's count per task (`max_per_task`), from the eighth audit.

Each task's group gives at most `max_per_task` worked examples: its distinct successful
episodes, shortest first (a repeat of the same actions, a failure and an episode with no action
give none). Real store, real sqlite file; no LLM.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.types import Reward, Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("experience")


def episode(task: str, actions: list[str], success: bool = True) -> Trajectory:
    turns = [Turn("user", f"start of {task}")]
    for action in actions:
        turns += [Turn("assistant", action, token_ids=[1]), Turn("user", "ok")]
    return Trajectory(task=Task(task_id=task, query=f"reach the goal of {task}"), turns=turns,
                      reward=Reward(score=float(success), success=success))


GROUP = [episode("a", ["down", "down", "right", "right"]), episode("a", ["down", "right"]),
         episode("a", ["right", "down", "right"]), episode("a", ["down", "right"]),  # a repeat
         episode("a", ["up"], success=False), episode("a", ["right", "right", "down", "down", "down"]),
         episode("b", ["left", "down"]), episode("b", ["down", "left", "down"])]


def examples(tmp_path: Path, max_per_task: int) -> list:
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory", max_per_task=max_per_task),
                                  path=tmp_path / f"x{max_per_task}.sqlite", run_name="r")
    made = asyncio.run(store.summarize(GROUP, step=3))
    store.close()
    return made


def actions_in(text: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Action ")]


@pytest.mark.parametrize(("max_per_task", "lengths_a", "lengths_b"),
                         [(1, [2], [2]), (2, [2, 3], [2, 3]), (3, [2, 3, 4], [2, 3]), (5, [2, 3, 4, 5], [2, 3])])
def test_at_most_max_per_task_examples_per_task_shortest_first(tmp_path: Path, max_per_task: int,
                                                               lengths_a: list[int], lengths_b: list[int]) -> None:
    made = examples(tmp_path, max_per_task)
    assert all(e.kind == "example" and e.step == 3 for e in made)
    assert [len(actions_in(e.text)) for e in made if e.task_id == "a"] == lengths_a
    assert [len(actions_in(e.text)) for e in made if e.task_id == "b"] == lengths_b


def test_the_two_examples_kept_are_the_shortest_distinct_successes(tmp_path: Path) -> None:
    made = [e for e in examples(tmp_path, 2) if e.task_id == "a"]
    assert [actions_in(e.text) for e in made] == [["down", "right"], ["right", "down", "right"]]
    assert [[t["content"] for t in e.metadata["turns"]] for e in made] == [["down", "right"],
                                                                         ["right", "down", "right"]]
