"""The gym envs on the last allowed step, and what each way an episode ends reports (real gymnasium).

Written after the eighth audit, for the next audit's mutants in `base.py` around `max_steps` and the
goal outcome: the game won, or a goal task's goal achieved, on exactly the `max_steps`-th step is a
success, not "out of steps"; one step short is still in progress; an invalid answer on the last step
ends the episode out of steps (and a step after it is refused); a one-step episode says "1 step"; a
step after the end is refused naming the env; each goal-task step before the goal scores 0 and the goal
step 1, so the score is 1.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from gym_helpers import play, text
from test_gym_goals import MAP_3X3, lake_task, reach

WALK = ["right", "right", "down", "down"]  # S to G on MAP_3X3, around the hole


def test_the_game_won_on_exactly_the_last_allowed_step_is_a_success() -> None:
    env = FrozenLake(FrozenLakeConfig(max_steps=len(WALK)))
    env.reset(lake_task())
    steps = play(env, WALK)
    assert [s.terminated for s in steps] == [False, False, False, True]
    assert "Out of steps" not in text(steps[-1])
    reward = env.evaluate()
    assert (reward.success, reward.details["outcome"]) == (True, "success")
    assert reward.reason == "reached the goal in 4 steps"


def test_a_goal_achieved_on_exactly_the_last_allowed_step_is_a_success_scoring_one() -> None:
    env = FrozenLake(FrozenLakeConfig(max_steps=2))
    env.reset(lake_task(reach(0, 2)))
    first, last = play(env, ["right", "right"])
    assert (first.reward, last.reward, last.terminated) == (0.0, 1.0, True)
    assert "Out of steps" not in text(last) and "You achieved the goal" in text(last)
    reward = env.evaluate()
    assert (reward.success, reward.score, reward.details["outcome"]) == (True, 1.0, "success")


def test_one_step_short_of_the_limit_the_episode_is_in_progress_and_the_next_invalid_answer_ends_it() -> None:
    env = FrozenLake(FrozenLakeConfig(max_steps=2))
    env.reset(lake_task(reach(2, 0)))
    step = play(env, ["right"])[0]
    assert not step.terminated
    reward = env.evaluate()
    assert reward.details["outcome"] == "in_progress"
    assert reward.reason == "has not achieved the goal yet (1 step so far)"
    last = env.step({"role": "assistant", "content": "fly"})
    assert last.terminated and last.reward == 0.0
    assert text(last).endswith("Out of steps: the episode ends after 2 steps.")
    reward = env.evaluate()
    assert (reward.details["outcome"], reward.reason) == (
        "out_of_steps", "did not achieve the goal within max_steps=2; 1 invalid action")
    with pytest.raises(RuntimeError, match="after the episode ended"):  # out of steps is over too
        env.step({"role": "assistant", "content": "left"})


def test_a_one_step_game_says_one_step_and_a_step_after_the_end_is_refused() -> None:
    env = FrozenLake(FrozenLakeConfig())
    env.reset(lake_task(reach(0, 1)))
    assert play(env, ["right"])[0].terminated
    assert env.evaluate().reason == "achieved the goal in 1 step"
    with pytest.raises(RuntimeError, match="frozenlake: step.. after the episode ended; call reset.. first"):
        env.step({"role": "assistant", "content": "left"})
    assert MAP_3X3[0][1] == "F"
