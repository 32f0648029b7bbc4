"""Seats in real TextArena games (textarena 0.7.4, offline), the parts the other tests leave open: against
the env's own random opponent with the policy in seat 1, `seat_rewards()` is the policy's one reward
(seat 1's, the same as `evaluate()`), not seat 0's; in self-play Kuhn Poker, whose first move is seat 1's,
`reset()` names seat 1 to move and shows seat 1's view; a self-play task's metadata says its opponent."""

from __future__ import annotations

import pytest
from beyondagent_plugin_textarena.config import TextArenaConfig
from beyondagent_plugin_textarena.env import TextArenaEnv

from beyondagent_core import Task
from beyondagent_core.types import Reward

pytestmark = pytest.mark.beyondagent_plugins("textarena")


def test_against_the_envs_opponent_seat_rewards_is_the_policys_seat() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tictactoe"))
    outcomes = set()
    for seed in (3, 7):  # odd seeds: the policy plays seat 1 (seat 1 wins seed 3's game, loses seed 7's)
        reset = env.reset(Task(f"tictactoe-{seed}", metadata={"game": "tictactoe", "seed": seed}))
        assert reset.info["metadata"]["seat"] == 1
        for cell in range(9):  # the first free cell each turn
            if env.step({"role": "assistant", "content": f"[{cell}]"}).terminated:
                break
        rewards = env.seat_rewards()
        assert rewards == [env.evaluate().to_dict()]
        outcomes.add(Reward.from_dict(rewards[0]).details["outcome"])
    assert outcomes == {"win", "loss"}  # seat 0's outcome was the other one each time


def test_self_play_reset_names_the_seat_that_moves_first() -> None:
    env = TextArenaEnv(TextArenaConfig(game="kuhnpoker", opponent="self"))
    reset = env.reset(Task("kuhnpoker-1", metadata={"game": "kuhnpoker", "seed": 1}))
    assert reset.info["seats"] == 2 and reset.info["seat"] == 1  # Kuhn Poker: player 1 acts first
    assert reset.messages[0]["content"].startswith("You are Player 1")
    assert reset.info["metadata"]["opponent"] == "self"
    tictactoe = TextArenaEnv(TextArenaConfig(game="tictactoe", opponent="self"))
    opened = tictactoe.reset(Task("tictactoe-1", metadata={"game": "tictactoe", "seed": 1}))
    assert opened.info["seat"] == 0 and opened.info["metadata"]["opponent"] == "self"
