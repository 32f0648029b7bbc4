"""Taxi as text, on real gymnasium: starts from seeds, scripted deliveries, penalties."""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.config import TaxiConfig
from beyondagent_plugin_gym.taxi import Taxi
from gym_helpers import TAXI_STOPS, play, taxi_drive, text
from gymnasium.envs.toy_text import TaxiEnv

from beyondagent_core import Task

DECODER = TaxiEnv()  # gymnasium's own state encoding, to check ours against


def taxi(**config) -> Taxi:
    return Taxi(TaxiConfig(**config))


def delivery(state: int) -> list[str]:
    """Drive to the passenger, pick up, drive to the destination, drop off."""
    row, col, passenger, destination = DECODER.decode(state)
    return [*taxi_drive((row, col), TAXI_STOPS[passenger]), "pickup",
            *taxi_drive(TAXI_STOPS[passenger], TAXI_STOPS[destination]), "dropoff"]


def test_reset_shows_the_rules_the_map_and_where_everyone_is() -> None:
    state = DECODER.encode(2, 3, 2, 1)  # taxi at (2, 3), passenger at Y, destination G
    reset = taxi().reset(Task(task_id="t", metadata={"seed": 0, "state": state}))
    system, user = (message["content"] for message in reset.messages)
    for part in ("5x5 map", "'|' a wall", "Valid actions: south, north, east, west, pickup, dropoff", "+20"):
        assert part in system
    assert user == (
        "Pick up the passenger and drop them off at the destination.\n"
        "|R: | : :G|\n| : | : : |\n| : : :T: |\n| | : | : |\n|Y| : |B: |\n"
        "Taxi at row 2, column 3. Passenger waiting at Y (row 4, column 0). Destination: G (row 0, column 4)."
    )
    assert reset.info["metadata"] == {"seed": 0, "state": state}


def test_the_seed_fixes_the_start_and_seeds_vary_it() -> None:
    env = taxi()
    starts = [env.reset(Task(task_id=f"t{seed}", metadata={"seed": seed})).info["metadata"]["state"]
              for seed in range(20)]
    assert len(set(starts)) > 10
    for seed, state in enumerate(starts):
        assert DECODER.decode(state)[2] != DECODER.decode(state)[3]  # passenger not already at the destination
        assert taxi().reset(Task(task_id="x", metadata={"seed": seed})).info["metadata"]["state"] == state


def test_a_recorded_state_wins_over_the_seed() -> None:
    env = taxi()
    drawn = env.reset(Task(task_id="t", metadata={"seed": 7})).info["metadata"]["state"]
    recorded = DECODER.encode(0, 0, 3, 2)
    assert recorded != drawn
    reset = env.reset(Task(task_id="t", metadata={"seed": 7, "state": recorded}))
    assert reset.info["metadata"] == {"seed": 7, "state": recorded}
    assert "Taxi at row 0, column 0. Passenger waiting at B" in reset.messages[1]["content"]
    play(env, delivery(recorded))
    assert env.evaluate().success


@pytest.mark.parametrize("metadata", [{"state": 500}, {"state": -1}, {"state": "42"}, {"seed": 1.5}])
def test_bad_metadata_is_a_value_error(metadata) -> None:
    with pytest.raises(ValueError, match=r"task 'bad': metadata\.(state|seed) must be an integer"):
        taxi().reset(Task(task_id="bad", metadata=metadata))


def test_a_scripted_delivery_succeeds() -> None:
    for seed in range(6):
        env = taxi()
        state = env.reset(Task(task_id=f"taxi-test-{seed}")).info["metadata"]["state"]
        actions = delivery(state)
        steps = play(env, actions, template="I will {}.")
        assert len(steps) == len(actions)
        assert steps[-1].terminated and steps[-1].reward == 20.0
        assert all(step.reward == -1.0 and not step.terminated for step in steps[:-1])
        assert "carrying the passenger" in text(steps[actions.index("pickup")])
        assert text(steps[-1]).endswith(f"You delivered the passenger to {'RGYB'[DECODER.decode(state)[3]]}!")
        reward = env.evaluate()
        assert reward.success and reward.score == 20.0 - (len(actions) - 1)
        assert reward.reason == f"delivered the passenger in {len(actions)} steps"


def test_illegal_pickup_and_dropoff_cost_ten_and_say_why() -> None:
    env = taxi()
    env.reset(Task(task_id="t", metadata={"state": DECODER.encode(2, 2, 0, 1)}))
    pickup, dropoff = play(env, ["pickup", "dropoff"])
    assert pickup.reward == -10.0 and text(pickup).endswith("There is no passenger here to pick up (-10).")
    assert dropoff.reward == -10.0 and text(dropoff).endswith("You cannot drop off here (-10).")
    assert env.evaluate().score == -20.0


def test_dropping_the_passenger_at_another_stop_leaves_them_there() -> None:
    env = taxi()
    env.reset(Task(task_id="t", metadata={"state": DECODER.encode(0, 0, 4, 1)}))  # carrying, at R, bound for G
    [step] = play(env, ["dropoff"])
    assert (step.reward, step.terminated) == (-1.0, False)
    assert "Passenger waiting at R (row 0, column 0)" in text(step)
    assert text(step).endswith("You dropped the passenger at R, which is not the destination.")


def test_walls_stop_the_taxi() -> None:
    env = taxi()
    env.reset(Task(task_id="t", metadata={"state": DECODER.encode(0, 1, 0, 1)}))
    [step] = play(env, ["east"])  # a wall between columns 1 and 2 on row 0
    assert "Taxi at row 0, column 1." in text(step) and step.reward == -1.0


def test_max_steps_ends_an_undelivered_episode() -> None:
    env = taxi(max_steps=2)
    env.reset(Task(task_id="t", metadata={"state": DECODER.encode(2, 2, 0, 1)}))
    steps = play(env, ["north", "north"])
    assert steps[-1].terminated
    reward = env.evaluate()
    assert (reward.success, reward.score) == (False, -2.0)
    assert reward.reason == "did not deliver the passenger within max_steps=2"
