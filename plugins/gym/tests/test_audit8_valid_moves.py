"""`valid_actions()` on grids that are not square: rows and columns must not be swapped.

From the eighth audit (mutation testing): `moves_on_grid` turns a state into (row, col) by the
number of columns; dividing by the number of rows gives the same answer on square FrozenLake maps
and at CliffWalking's start, so the checks here stand on cells of a 4x12 and a 2x5 grid where the
two readings differ, with the expected moves worked out by hand.
"""

from __future__ import annotations

from beyondagent_plugin_gym.base import moves_on_grid
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from gym_helpers import play

from beyondagent_core import Task

GRID_ACTIONS = ("left", "down", "right", "up")


def test_cliffwalking_valid_actions_one_row_above_the_start() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t"))
    (step,) = play(env, ["up"])
    assert step.info["state"] == 24  # row 2, column 0 of the 4x12 grid
    assert env.valid_actions() == ["up", "right", "down"]  # not left: the west edge


def test_cliffwalking_valid_actions_in_the_top_right_corner() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t"))
    steps = play(env, ["up", "up", "up", *["right"] * 11])
    assert steps[-1].info["state"] == 11  # row 0, column 11
    assert env.valid_actions() == ["down", "left"]


def test_a_two_by_five_frozenlake_map_knows_its_right_edge() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(Task(task_id="t", metadata={"seed": 1, "map": ["SFFFF", "FFFFG"]}))
    assert env.valid_actions() == ["down", "right"]
    steps = play(env, ["right"] * 4)
    assert steps[-1].info["state"] == 4  # row 0, column 4: the last column
    assert env.valid_actions() == ["left", "down"]


def test_moves_on_grid_reads_states_row_major_by_columns() -> None:
    # 3 rows x 7 columns: state 6 is row 0, column 6; state 14 is row 2, column 0.
    assert moves_on_grid(6, 3, 7, GRID_ACTIONS) == [0, 1]  # left, down
    assert moves_on_grid(14, 3, 7, GRID_ACTIONS) == [2, 3]  # right, up
    assert moves_on_grid(10, 3, 7, GRID_ACTIONS) == [0, 1, 2, 3]  # row 1, column 3: every way
