"""A drawn two-player game scores 0.5 and is no success (the ninth mutation audit): success is a win,
a score of 1, never a score that merely reaches a draw's. A TicTacToe game played to a full board in
self-play (real TextArena, offline), both seats' rewards read."""

from __future__ import annotations

import pytest
from beyondagent_plugin_textarena.config import TextArenaConfig
from beyondagent_plugin_textarena.env import TextArenaEnv

from beyondagent_core import Task

pytestmark = pytest.mark.beyondagent_plugins("textarena")

# X (seat 0) and O alternate to a full board with no line: X X O / O O X / X O X (cells 0..8)
DRAWN = ["[0]", "[4]", "[8]", "[2]", "[6]", "[3]", "[5]", "[7]", "[1]"]


def test_a_drawn_game_scores_half_for_each_seat_and_neither_succeeds() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", opponent="self"))
    reset = env.reset(Task(task_id="draw", metadata={"seed": 0}))
    assert reset.info["seat"] == 0
    for move in DRAWN:
        step = env.step({"role": "assistant", "content": move})
    assert step.terminated and not step.info["truncated"]
    rewards = env.seat_rewards()
    assert [(r["details"]["outcome"], r["score"], r["success"]) for r in rewards] == [("draw", 0.5, False)] * 2
    reward = env.evaluate()
    assert reward.score == 0.5 and not reward.success
