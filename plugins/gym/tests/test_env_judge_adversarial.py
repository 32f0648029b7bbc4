"""The `env` judge against policies that would game it: whole episodes, the real runtime, real gymnasium.

Each row plays one episode of a game with the `react` workflow and scores it with the core's
`env` judge (the env's own `evaluate()`), every env at its default config. The replies come
from `ScriptedPolicy`, which stands in for a model (none runs here): what it writes is what an
adversarial or degenerate policy would. The property the rows pin: an episode that never acts
(garbage, every action at once, claims of success) never scores above one that plays, and
only the game decides success.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi
from gym_helpers import TAXI_STOPS, frozenlake_path, taxi_drive
from gymnasium.envs.toy_text import TaxiEnv

from beyondagent_core import Task, Trajectory, Turn
from beyondagent_core.judging import EnvJudge, JudgeSelector
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow

LAKE_MAP = ["SFF", "FHF", "FFG"]
LAKE_TASK = Task(task_id="frozenlake-train-0", env="frozenlake", metadata={"seed": 0, "map": LAKE_MAP})
LAKE_GOAL = Task(task_id="frozenlake-train-0/goal", env="frozenlake", judge="env", origin="synthetic",
                 seed_task_id="frozenlake-train-0",
                 metadata={"seed": 0, "map": LAKE_MAP, "goal": {"kind": "reach", "row": 0, "col": 2}})
CLIFF_TASK = Task(task_id="cliffwalking-train-0", env="cliffwalking", metadata={"seed": 0})
TAXI_STATE = TaxiEnv().encode(2, 3, 2, 1)  # taxi at (2, 3), passenger at Y, destination G
TAXI_TASK = Task(task_id="taxi-train-0", env="taxi", metadata={"seed": 0, "state": TAXI_STATE})

GAMES: dict[str, tuple[Callable[[], object], Task, int]] = {
    # game: (a fresh env at its default config, the task, the episode's turn budget = max_steps)
    "frozenlake": (lambda: FrozenLake(FrozenLakeConfig()), LAKE_TASK, FrozenLakeConfig().max_steps),
    "frozenlake goal": (lambda: FrozenLake(FrozenLakeConfig()), LAKE_GOAL, FrozenLakeConfig().max_steps),
    "cliffwalking": (lambda: CliffWalking(CliffWalkingConfig()), CLIFF_TASK, CliffWalkingConfig().max_steps),
    "taxi": (lambda: Taxi(TaxiConfig()), TAXI_TASK, TaxiConfig().max_steps),
}
SOLUTIONS = {
    "frozenlake": frozenlake_path(LAKE_MAP),
    "frozenlake goal": ["right", "right"],
    "cliffwalking": ["up"] + ["right"] * 11 + ["down"],
    "taxi": [*taxi_drive((2, 3), TAXI_STOPS[2]), "pickup", *taxi_drive(TAXI_STOPS[2], TAXI_STOPS[1]), "dropoff"],
}
WALL = {"frozenlake": "left", "frozenlake goal": "left", "cliffwalking": "left", "taxi": "east"}
"""A move into the edge or a wall from the start: a valid move that gets nowhere."""


class ScriptedPolicy:
    """Stands in for a model: answers each turn with `reply(turn)`."""

    def __init__(self, reply: Callable[[int], str]):
        self.reply, self.turn = reply, 0

    async def chat(self, messages, **sampling) -> Turn:
        text = self.reply(self.turn)
        self.turn += 1
        return Turn(role="assistant", content=text)


def play(game: str, reply: Callable[[int], str]) -> Trajectory:
    make_env, task, budget = GAMES[game]
    judge = EnvJudge()
    runner = EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=budget)), make_env=make_env,
                           judge=JudgeSelector(default=judge, configured={"env": judge}))
    trajectory = asyncio.run(runner.run(task, ScriptedPolicy(reply)))
    assert trajectory.error is None, trajectory.error
    return trajectory


def solve(game: str) -> Callable[[int], str]:
    return lambda turn: f"Action: {SOLUTIONS[game][turn]}"


POLICIES: dict[str, Callable[[str], Callable[[int], str]]] = {
    "garbage": lambda game: lambda turn: "xyz",
    "silence": lambda game: lambda turn: "",
    "every action at once": lambda game: lambda turn: "left down right up north south east west pickup dropoff",
    "claims success": lambda game: lambda turn: "I reached the goal! Reward: 1. Success: true.",
    "copies the env's success line": lambda game: lambda turn: "You reached the goal!\nYou delivered the passenger!",
    "restates its position": lambda game: lambda turn: "You are at row 1, column 1.",
    "refuses every move": lambda game: lambda turn: "Don't go left, don't go right, never up, avoid down.",
    "a huge number": lambda game: lambda turn: "9" * 5000,
    "bumps into the wall": lambda game: lambda turn: f"Action: {WALL[game]}",
}
NOT_ACTING = ("garbage", "silence", "every action at once", "claims success", "copies the env's success line",
              "restates its position", "refuses every move", "a huge number")


@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize("policy", NOT_ACTING)
def test_not_acting_never_scores_above_playing(game: str, policy: str) -> None:
    episode = play(game, POLICIES[policy](game))
    playing = play(game, POLICIES["bumps into the wall"](game))
    solved = play(game, solve(game))
    assert not episode.reward.success and solved.reward.success and not playing.reward.success
    assert episode.reward.details["invalid_actions"] == episode.metrics["turns"] == GAMES[game][2]
    assert episode.reward.score <= playing.reward.score < solved.reward.score, (
        f"{policy}: {episode.reward.score} vs a wall-bumping walk {playing.reward.score} "
        f"and a solution {solved.reward.score}")


@pytest.mark.parametrize(("game", "score"), [("frozenlake", 1.0), ("frozenlake goal", 1.0),
                                             ("cliffwalking", -13.0), ("taxi", 20.0 - 14)])
def test_the_solution_scores_what_the_game_says(game: str, score: float) -> None:
    # Taxi: -1 for each of the 14 actions before the delivery (13 drives, the pickup), +20 for the delivery.
    reward = play(game, solve(game)).reward
    assert (reward.success, reward.score, reward.details["outcome"]) == (True, score, "success")


@pytest.mark.parametrize(("game", "score"), [("frozenlake", 0.0), ("frozenlake goal", 0.0),
                                             ("cliffwalking", -30.0), ("taxi", -40.0)])
def test_an_invalid_answer_costs_what_a_move_costs_by_default(game: str, score: float) -> None:
    reward = play(game, POLICIES["garbage"](game)).reward
    assert (reward.score, reward.details["outcome"]) == (score, "out_of_steps")


def test_a_configured_penalty_still_wins() -> None:
    env = CliffWalking(CliffWalkingConfig(invalid_action_reward=-2.0, max_steps=3))
    env.reset(CLIFF_TASK)
    for _ in range(3):
        env.step({"role": "assistant", "content": "xyz"})
    assert env.evaluate().score == -6.0


def test_solving_after_noise_still_counts_only_the_game() -> None:
    def reply(turn: int) -> str:
        return "I reached the goal!" if turn % 2 == 0 else f"Action: {SOLUTIONS['frozenlake'][turn // 2]}"

    reward = play("frozenlake", reply).reward
    assert reward.success and reward.details["invalid_actions"] == 4
    assert reward.reason == "reached the goal in 8 steps; 4 invalid actions"


def test_falling_into_a_hole_ends_the_episode_whatever_the_model_says_next() -> None:
    replies = ["Action: right", "Action: down", "I am fine, Action: right", "Action: down"]
    trajectory = play("frozenlake", lambda turn: replies[turn])
    assert trajectory.metrics["turns"] == 2 and trajectory.terminated
    assert (trajectory.reward.success, trajectory.reward.score, trajectory.reward.details["outcome"]) == (
        False, 0.0, "failed")
