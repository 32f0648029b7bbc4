"""`max_explore_step` is exactly how many steps an exploration that nothing ends takes.

On gymnasium's CliffWalking the goal is at least 13 moves away and the cliff sends the walker back
to the start without ending the episode, so a `random_actions` exploration of at most 12 steps
always runs out of steps: it takes exactly `max_explore_step` of them (1 included), records one
`achieved` entry per step and says `stopped: max_explore_step`. Real env, no LLM.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig
from test_random_explorer import actions_of, explore, random_actions

from beyondagent_core.types import Task

SEED = Task(task_id="cliffwalking-train-0", env="cliffwalking")


@pytest.mark.parametrize("limit", [1, 2, 12])
def test_an_exploration_nothing_ends_takes_exactly_max_explore_step_steps(limit: int) -> None:
    for seed in (0, 1):
        trajectory = explore(random_actions(max_explore_step=limit, seed=seed), seed=SEED,
                             env=CliffWalking(CliffWalkingConfig(max_steps=100)))
        assert (trajectory.metrics["steps"], trajectory.metrics["stopped"]) == (limit, "max_explore_step")
        assert len(actions_of(trajectory)) == limit and not trajectory.terminated
        assert [entry["step"] for entry in trajectory.metrics["achieved"]] == list(range(1, limit + 1))
