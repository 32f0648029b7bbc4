"""Hindsight reads only achievements after an action (plugins/synthesis/.../hindsight.py)."""

from __future__ import annotations

import asyncio

from beyondagent_plugin_synthesis.hindsight import HindsightSummarizer

from beyondagent_core.types import Task, Trajectory, Turn

SEED = Task(task_id="seed/1", env="frozenlake", query="Reach the goal.", metadata={"start": 0})


def test_an_achievement_at_step_0_is_malformed_and_does_not_hide_the_step_that_achieved_the_goal() -> None:
    goal = {"cell": 7}
    turns = [Turn(role="assistant", content=action) for action in ("right", "down", "left")]
    achieved = [{"step": 0, "goals": [{"query": "Reach cell 7.", "goal": goal}]},  # before any action: malformed
                {"step": 2, "goals": [{"query": "Reach cell 7.", "goal": goal}]}]
    summarizer = HindsightSummarizer()
    tasks = asyncio.run(summarizer.summarize(SEED, Trajectory(task=SEED, turns=turns, metrics={"achieved": achieved}),
                                             [], None))
    assert [(t.query, t.ground_truth, t.metadata["goal"]) for t in tasks] == [("Reach cell 7.", ["right", "down"], goal)]
    assert summarizer.stats["malformed"] == 1 and summarizer.stats["tasks"] == 1
