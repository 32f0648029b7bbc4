"""Settings and task ids of the `textarena` env that the other tests leave open (the eighth mutation audit):
the env's `difficulty` reaches a task that names none (and only a task of the env's own game), the LLM
opponent's reply is cut to `max_action_chars` as the policy's is, and a split task id with a six-digit
index plays its split's seed. Real TextArena games (textarena 0.7.4, offline); the LLM opponent is the
loopback stand-in for a hosted LLM."""

from __future__ import annotations

from typing import Any

import pytest
from beyondagent_plugin_textarena.config import TextArenaConfig, TextArenaTasksConfig
from beyondagent_plugin_textarena.env import TextArenaEnv
from beyondagent_plugin_textarena.seeds import parse_task_id, seed_of
from beyondagent_plugin_textarena.tasks import TextArenaTasks

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.llm_config import LLMConfig

pytestmark = pytest.mark.beyondagent_plugins("textarena")


def say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_the_envs_difficulty_reaches_a_task_of_its_game_that_names_none() -> None:
    medium = TextArenaEnv(TextArenaConfig(game="tower_of_hanoi", difficulty="medium"))
    reset = medium.reset(Task(task_id="textarena-tower_of_hanoi-train-0"))
    assert "Tower of Hanoi with 4 disks" in reset.messages[0]["content"]  # TowerOfHanoi-v0-medium: 4 disks
    assert reset.info == {"metadata": {"game": "tower_of_hanoi", "difficulty": "medium", "seed": 0}, "max_steps": 30}
    default = TextArenaEnv().reset(Task(task_id="textarena-tower_of_hanoi-train-0"))
    assert "Tower of Hanoi with 3 disks" in default.messages[0]["content"] and default.info["max_steps"] == 14
    # a task's own difficulty wins; a task of another game plays that game's default, not the env's medium
    hard = medium.reset(Task(task_id="h", metadata={"game": "tower_of_hanoi", "difficulty": "hard", "seed": 0}))
    assert "Tower of Hanoi with 5 disks" in hard.messages[0]["content"] and hard.info["max_steps"] == 62
    other = medium.reset(Task(task_id="textarena-guess_the_number-train-0"))
    assert other.info["metadata"]["difficulty"] == "" and other.info["max_steps"] == 10
    medium.close()


def llm_opponent_env(openai_server: Any, max_action_chars: int) -> TextArenaEnv:
    return TextArenaEnv(TextArenaConfig(
        game="tictactoe", seat=0, opponent="llm", max_action_chars=max_action_chars,
        opponent_llm=LLMConfig(model="stand-in", base_url=openai_server.base_url, max_llm_retries=0)))


def test_the_llm_opponents_reply_is_cut_to_max_action_chars(openai_server: Any) -> None:
    # the opponent names its move after 60 characters of talk: past a cut at 50, within one at 100
    openai_server.responder = lambda body: "x" * 60 + " [0]"
    within = llm_opponent_env(openai_server, 100)
    within.reset(Task(task_id="textarena-tictactoe-train-0"))
    step = within.step(say("[4]"))
    assert "Player 1 placed their symbol (X) in cell 0." in step.observation[0]["content"]
    assert not step.terminated and step.reward == 0.0
    within.close()

    cut = llm_opponent_env(openai_server, 50)
    cut.reset(Task(task_id="textarena-tictactoe-train-0"))
    step = cut.step(say("[4]"))
    # the game saw no move from the opponent: twice (TextArena's allowance is one error), so it lost
    assert "cell 0" not in step.observation[0]["content"]
    assert step.terminated and step.reward == 1.0
    reward = cut.evaluate()
    assert (reward.success, reward.details["outcome"]) == (True, "win")


@pytest.mark.parametrize(("task_id", "seed"), [("textarena-sudoku-train-99999", 99_999),
                                               ("textarena-sudoku-val-123456", 1_123_456),
                                               ("textarena-sudoku-test-999999", 2_999_999)])
def test_a_split_task_id_plays_its_splits_seed_up_to_the_last_index(task_id: str, seed: int) -> None:
    assert parse_task_id(task_id) == ("sudoku", seed) and seed_of(task_id) == seed


def test_an_index_past_the_split_is_no_split_id_and_the_source_agrees_with_the_env() -> None:
    assert parse_task_id("textarena-sudoku-train-1000000") is None
    assert seed_of("textarena-sudoku-train-1000000") >= 3_000_000  # hashed, above every split's range
    (task,) = TextArenaTasks(TextArenaTasksConfig(game="guess_the_number", split="val", start=123_456,
                                                  count=1)).load(BadRecords())
    assert task.task_id == "textarena-guess_the_number-val-123456" and task.metadata["seed"] == 1_123_456
    bare = TextArenaEnv().reset(Task(task_id=task.task_id))  # a bare id, as an env-service client sends
    assert bare.info["metadata"] == {"game": "guess_the_number", "difficulty": "", "seed": 1_123_456}
