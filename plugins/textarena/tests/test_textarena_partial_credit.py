"""Partial credit is scored but is not a win: Mastermind ended with pegs and no code (here a repeated
guess, an invalid move past the game's allowance) scores its partial credit, and only a score of 1
is a success."""

from __future__ import annotations

import pytest
from beyondagent_plugin_textarena.config import TextArenaConfig
from beyondagent_plugin_textarena.env import TextArenaEnv

from beyondagent_core import Task

pytestmark = pytest.mark.beyondagent_plugins("textarena")


def test_partial_credit_is_scored_but_is_no_success() -> None:
    env = TextArenaEnv(TextArenaConfig(game="mastermind"))
    env.reset(Task(task_id="m", metadata={"seed": 11}))
    for _ in range(3):
        step = env.step({"role": "assistant", "content": "[1 2 3 4]"})
    assert step.terminated and not step.info["truncated"]
    reward = env.evaluate()
    assert 0.0 < reward.score < 1.0 and step.reward == reward.score
    assert not reward.success
