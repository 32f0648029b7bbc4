"""Goal-conditioned tasks and achievements, on real gymnasium: what an invalid answer scores in a
goal task, and that returning to the start cell is never an achievement.

From the eighth audit (mutation testing): an invalid answer in a goal task must score 0 (goal
steps score 0 or 1), not the game's step cost of -1, while a plain task of the same game still
pays -1 and a configured `invalid_action_reward` wins in both; and a CliffWalking walk that
steps back onto S must not list S as a goal reached.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, TaxiConfig
from beyondagent_plugin_gym.taxi import Taxi
from gym_helpers import play
from gymnasium.envs.toy_text import TaxiEnv

from beyondagent_core import Task

ENCODER = TaxiEnv()
BESIDE_R = ENCODER.encode(1, 0, 0, 1)  # the taxi at (1, 0), the passenger waiting at R (0, 0), bound for G


def reach(row: int, col: int) -> dict:
    return {"kind": "reach", "row": row, "col": col}


def goals(env) -> list[dict]:
    return [entry["goal"] for entry in env.describe_achieved()]


# --- an invalid answer's reward -------------------------------------------------------------------


def test_an_invalid_answer_in_a_taxi_goal_task_scores_zero_and_the_goal_still_scores_one() -> None:
    env = Taxi(TaxiConfig())
    env.reset(Task(task_id="t", metadata={"state": BESIDE_R, "goal": {"kind": "pickup"}}))
    invalid, north, pickup = play(env, ["jump", "north", "pickup"])
    assert (invalid.reward, invalid.info["valid"]) == (0.0, False)
    assert (north.reward, north.terminated) == (0.0, False)
    assert (pickup.reward, pickup.terminated) == (1.0, True)
    reward = env.evaluate()
    assert (reward.success, reward.score) == (True, 1.0)  # 0 + 0 + 1: the invalid answer cost nothing
    assert reward.details["invalid_actions"] == 1


def test_the_same_invalid_answer_in_a_plain_taxi_task_costs_a_move() -> None:
    env = Taxi(TaxiConfig())
    env.reset(Task(task_id="t", metadata={"state": BESIDE_R}))
    (invalid,) = play(env, ["jump"])
    assert invalid.reward == -1.0  # Taxi's step cost: not acting never beats acting
    assert env.evaluate().score == -1.0


@pytest.mark.parametrize("goal", [None, reach(2, 0)], ids=["plain", "goal"])
def test_cliffwalking_invalid_answer_scores_its_step_cost_only_outside_goal_tasks(goal: dict | None) -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t", metadata={} if goal is None else {"goal": goal}))
    (invalid,) = play(env, ["I refuse to move."])
    assert invalid.reward == (-1.0 if goal is None else 0.0)


@pytest.mark.parametrize("goal", [None, {"kind": "pickup"}], ids=["plain", "goal"])
def test_a_configured_invalid_action_reward_wins_in_goal_and_plain_tasks(goal: dict | None) -> None:
    env = Taxi(TaxiConfig(invalid_action_reward=-0.25))
    metadata = {"state": BESIDE_R} | ({} if goal is None else {"goal": goal})
    env.reset(Task(task_id="t", metadata=metadata))
    (invalid,) = play(env, ["left or right"])
    assert invalid.reward == -0.25


# --- the start cell is never an achievement ---------------------------------------------------------


def test_cliffwalking_stepping_back_onto_the_start_achieves_nothing() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t"))
    play(env, ["up", "down"])  # (2, 0), then back onto S at (3, 0)
    assert goals(env) == [reach(2, 0)]
    play(env, ["up", "right"])  # (2, 0) again (already listed), then (2, 1)
    assert goals(env) == [reach(2, 0), reach(2, 1)]
    assert [entry["query"] for entry in env.describe_achieved()] == [
        "Reach row 2, column 0 without stepping into the cliff.",
        "Reach row 2, column 1 without stepping into the cliff.",
    ]
