"""A `reach` goal on the cell the episode starts on is refused at reset, in every game with cells.

Arriving where an episode began is never reported as achieved (`goals_reached` skips the start: standing
still there achieves nothing), so such a task could never be won: every episode of it scored as a
failure, silently. Found by the eighth mutation audit; real gymnasium games.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi

from beyondagent_core import Task

MAP_3X3 = ["SFF", "FHF", "FFG"]


def reach(row: int, col: int) -> dict:
    return {"kind": "reach", "row": row, "col": col}


def test_frozenlake_refuses_the_start_and_takes_its_neighbour() -> None:
    env = FrozenLake(FrozenLakeConfig())
    with pytest.raises(ValueError, match=r"task 'start'.*the cell the episode starts on"):
        env.reset(Task(task_id="start", metadata={"seed": 5, "map": MAP_3X3, "goal": reach(0, 0)}))
    env.reset(Task(task_id="next", metadata={"seed": 5, "map": MAP_3X3, "goal": reach(0, 1)}))
    assert env.step({"role": "assistant", "content": "right"}).reward == 1.0


def test_cliffwalking_refuses_its_start_cell() -> None:
    env = CliffWalking(CliffWalkingConfig())
    with pytest.raises(ValueError, match="the cell the episode starts on"):
        env.reset(Task(task_id="start", metadata={"seed": 0, "goal": reach(3, 0)}))
    env.reset(Task(task_id="above", metadata={"seed": 0, "goal": reach(2, 0)}))


def test_taxi_refuses_the_cell_its_seed_starts_on_and_no_other() -> None:
    env = Taxi(TaxiConfig())
    env.reset(Task(task_id="plain", metadata={"seed": 3}))
    row, col = env.cell(env._episode.start_state)
    with pytest.raises(ValueError, match="the cell the episode starts on"):
        env.reset(Task(task_id="start", metadata={"seed": 3, "goal": reach(row, col)}))
    env.reset(Task(task_id="other", metadata={"seed": 3, "goal": reach((row + 1) % 5, col)}))
