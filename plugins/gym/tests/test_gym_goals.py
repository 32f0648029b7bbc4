"""Exploration support of the gym envs, on real gymnasium: valid_actions, describe_achieved, goal tasks."""

from __future__ import annotations

import random

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi
from gym_helpers import TAXI_STOPS, play, taxi_drive, text
from gymnasium.envs.toy_text import TaxiEnv

from beyondagent_core import Task

MAP_3X3 = ["SFF", "FHF", "FFG"]
ENCODER = TaxiEnv()


def reach(row: int, col: int) -> dict:
    return {"kind": "reach", "row": row, "col": col}


def goals(env) -> list[dict]:
    return [entry["goal"] for entry in env.describe_achieved()]


def lake_task(goal: dict | None = None, **fields) -> Task:
    metadata = {"seed": 5, "map": MAP_3X3} | ({} if goal is None else {"goal": goal})
    return Task(task_id="t", metadata=metadata, **fields)


# --- valid_actions ------------------------------------------------------------------------------


def test_frozenlake_valid_actions_stay_on_the_map_and_end_with_the_episode() -> None:
    env = FrozenLake(FrozenLakeConfig())
    with pytest.raises(RuntimeError, match="before reset"):
        env.valid_actions()
    env.reset(lake_task())
    assert env.valid_actions() == ["down", "right"]
    play(env, ["right"])
    assert env.valid_actions() == ["left", "down", "right"]
    play(env, ["down"])  # into the hole at (1, 1)
    assert env.valid_actions() == []


def test_taxi_valid_actions_follow_gymnasiums_action_mask() -> None:
    env = Taxi(TaxiConfig())
    env.reset(Task(task_id="t", metadata={"state": ENCODER.encode(0, 0, 0, 1)}))  # at R with the passenger
    assert env.valid_actions() == ["south", "east", "pickup"]  # the edge north and west
    play(env, ["pickup"])
    assert env.valid_actions() == ["south", "east", "dropoff"]  # R is a stop: dropping off is allowed
    env.reset(Task(task_id="t", metadata={"state": ENCODER.encode(0, 1, 0, 1)}))
    assert env.valid_actions() == ["south", "west"]  # a wall east of (0, 1); no passenger here


def test_cliffwalking_valid_actions_include_the_cliff() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t"))
    assert env.valid_actions() == ["up", "right"]


# --- describe_achieved --------------------------------------------------------------------------


def test_frozenlake_describes_each_new_safe_cell_once() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(lake_task())
    assert env.describe_achieved() == []
    play(env, ["right", "left", "right", "right", "up"])  # back to the start, then on; "up" bumps the edge
    assert env.describe_achieved() == [
        {"query": "Reach row 0, column 1 of this map without falling into a hole.", "goal": reach(0, 1)},
        {"query": "Reach row 0, column 2 of this map without falling into a hole.", "goal": reach(0, 2)},
    ]
    play(env, ["left", "down"])  # the hole is not an achievement
    assert goals(env) == [reach(0, 1), reach(0, 2)]


def test_invalid_answers_achieve_nothing() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(lake_task())
    play(env, ["jump"])
    assert env.describe_achieved() == []


def test_taxi_describes_cells_pickup_and_dropoff() -> None:
    env = Taxi(TaxiConfig())
    env.reset(Task(task_id="t", metadata={"state": ENCODER.encode(1, 0, 0, 1)}))  # passenger at R, to G
    play(env, ["north", "pickup", "south", "south", "south", "south", "dropoff"])  # drop off at Y (4, 0)
    assert goals(env) == [reach(0, 0), {"kind": "pickup"}, reach(2, 0), reach(3, 0), reach(4, 0),
                          {"kind": "dropoff", "stop": "Y"}]
    queries = [entry["query"] for entry in env.describe_achieved()]
    assert queries[1] == "Drive to the passenger and pick them up."
    assert queries[-1] == "Pick up the passenger and drop them off at stop Y (row 4, column 0)."


def test_cliffwalking_stops_counting_after_a_fall() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t"))
    play(env, ["up", "right", "down"])  # (2, 0), (2, 1), then into the cliff at (3, 1)
    assert goals(env) == [reach(2, 0), reach(2, 1)]
    play(env, ["up", "up"])
    assert goals(env) == [reach(2, 0), reach(2, 1)]
    assert env.describe_achieved()[0]["query"] == "Reach row 2, column 0 without stepping into the cliff."


# --- goal-conditioned tasks -----------------------------------------------------------------------


def test_a_goal_task_states_the_goal_and_succeeds_when_it_is_reached() -> None:
    env = FrozenLake(FrozenLakeConfig())
    reset = env.reset(lake_task(reach(0, 2)))
    assert reset.messages[1]["content"].startswith("Reach row 0, column 2 of this map without falling into a hole.\nPFF")
    assert reset.info["metadata"] == {"seed": 5, "is_slippery": False, "size": 3, "map": MAP_3X3,
                                     "goal": reach(0, 2)}
    first, second = play(env, ["right", "right"])
    assert (first.reward, first.terminated) == (0.0, False)
    assert (second.reward, second.terminated) == (1.0, True)
    assert text(second).endswith("You achieved the goal: Reach row 0, column 2 of this map without falling "
                                 "into a hole.")
    reward = env.evaluate()
    assert (reward.success, reward.score, reward.reason) == (True, 1.0, "achieved the goal in 2 steps")
    assert reward.details["goal"] == reach(0, 2) and reward.details["outcome"] == "success"


def test_the_task_query_wins_over_the_goal_wording() -> None:
    reset = FrozenLake(FrozenLakeConfig()).reset(lake_task(reach(2, 0), query="Walk down two cells."))
    assert reset.messages[1]["content"].startswith("Walk down two cells.\nPFF")


def test_a_goal_task_fails_on_a_hole_and_on_the_games_own_goal() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(lake_task(reach(2, 0)))
    steps = play(env, ["right", "down"])
    assert steps[-1].terminated and steps[-1].reward == 0.0
    assert text(steps[-1]).endswith("The game is over without achieving the goal.")
    reward = env.evaluate()
    assert not reward.success and reward.score == 0.0
    assert reward.reason == "the game ended (fell into a hole at row 1, column 1) after 2 steps without achieving the goal"

    env.reset(lake_task(reach(2, 0)))
    play(env, ["right", "right", "down", "down"])  # G, not the goal cell
    assert env.evaluate().reason == "the game ended (reached the goal) after 4 steps without achieving the goal"


def test_a_goal_task_runs_out_of_steps() -> None:
    env = FrozenLake(FrozenLakeConfig(max_steps=3))
    env.reset(lake_task(reach(2, 0)))
    steps = play(env, ["right", "left", "right"])
    assert steps[-1].terminated
    reward = env.evaluate()
    assert not reward.success and reward.details["outcome"] == "out_of_steps"
    assert reward.reason == "did not achieve the goal within max_steps=3"


def test_an_ordinary_task_keeps_the_games_objective() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(lake_task())
    steps = play(env, ["right", "right"])
    assert steps[-1].reward == 0.0 and not steps[-1].terminated
    play(env, ["down", "down"])
    assert env.evaluate().reason == "reached the goal in 4 steps"


@pytest.mark.parametrize(("goal", "problem"), [
    (reach(1, 1), "is a hole on this map"),
    (reach(3, 0), "row\": 0-2"),
    ({"kind": "fly"}, "kind is one of reach"),
    ("reach 2 0", "kind is one of reach"),
    ({"kind": "reach", "row": 0, "col": 1, "extra": 1}, "must be"),
])
def test_a_bad_goal_is_a_value_error_naming_the_task(goal, problem) -> None:
    with pytest.raises(ValueError, match="task 't': metadata.goal") as error:
        FrozenLake(FrozenLakeConfig()).reset(lake_task(goal))
    assert problem in str(error.value)


def test_taxi_goal_tasks_pickup_and_dropoff() -> None:
    start = ENCODER.encode(2, 2, 0, 1)  # passenger at R, destination G
    to_r = taxi_drive((2, 2), TAXI_STOPS[0])
    env = Taxi(TaxiConfig())

    env.reset(Task(task_id="t", metadata={"state": start, "goal": {"kind": "pickup"}}))
    steps = play(env, [*to_r, "pickup", "south"])
    assert len(steps) == len(to_r) + 1 and steps[-1].terminated and env.evaluate().success

    env.reset(Task(task_id="t", metadata={"state": start, "goal": {"kind": "dropoff", "stop": "B"}}))
    plan = [*to_r, "pickup", *taxi_drive(TAXI_STOPS[0], TAXI_STOPS[3]), "dropoff"]
    steps = play(env, plan)
    assert steps[-1].terminated and steps[-1].reward == 1.0 and env.evaluate().success

    env.reset(Task(task_id="t", metadata={"state": start, "goal": {"kind": "dropoff", "stop": "B"}}))
    play(env, [*to_r, "pickup", *taxi_drive(TAXI_STOPS[0], TAXI_STOPS[1]), "dropoff"])  # delivered to G instead
    reward = env.evaluate()
    assert not reward.success and "delivered the passenger" in reward.reason

    with pytest.raises(ValueError, match="one of R, G, Y, B"):
        env.reset(Task(task_id="t", metadata={"state": start, "goal": {"kind": "dropoff", "stop": "X"}}))


def test_cliffwalking_goal_task_ends_at_the_cliff() -> None:
    env = CliffWalking(CliffWalkingConfig())
    env.reset(Task(task_id="t", metadata={"goal": reach(2, 3)}))
    steps = play(env, ["up", "right", "down", "up"])
    assert len(steps) == 3 and steps[-1].terminated
    assert text(steps[-1]).endswith("The goal can no longer be achieved (fell off the cliff); the episode is over.")
    assert env.evaluate().reason == "fell off the cliff after 3 steps; the goal was not achieved"
    with pytest.raises(ValueError, match="is a cliff cell"):
        env.reset(Task(task_id="t", metadata={"goal": reach(3, 4)}))


@pytest.mark.parametrize("make", [
    lambda: FrozenLake(FrozenLakeConfig(size=5, is_slippery=True)),
    lambda: Taxi(TaxiConfig(max_steps=60)),
    lambda: CliffWalking(CliffWalkingConfig(is_slippery=True)),
], ids=["frozenlake", "taxi", "cliffwalking"])
def test_every_achieved_goal_replays_to_success_from_the_same_start(make) -> None:
    """A random walk of valid actions; each goal it achieved, replayed as a goal task, succeeds."""
    rng = random.Random(7)
    env = make()
    for index in range(4):
        seed_task = Task(task_id=f"{env.name}-train-{index}")
        metadata = env.reset(seed_task).info["metadata"]
        actions, first_step = [], {}
        while env.valid_actions():
            actions.append(rng.choice(env.valid_actions()))
            play(env, actions[-1:])
            for entry in env.describe_achieved():
                first_step.setdefault(str(entry["goal"]), (entry["goal"], len(actions)))
        for goal, step in first_step.values():
            replay = make()
            replay.reset(Task(task_id="syn", seed_task_id=seed_task.task_id, metadata={**metadata, "goal": goal}))
            steps = play(replay, actions[:step])
            assert len(steps) == step and steps[-1].terminated, (goal, actions[:step])
            assert replay.evaluate().success
