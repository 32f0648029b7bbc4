"""The `textarena` env and task source at their edges, module by module (after the eighth mutation audit):
each config key's limits exactly on them and one past, `max_steps` against the game's own limit (the
smaller one wins) and the step it truncates at, `max_action_chars` cutting a move one character short,
which seed a task plays for each form of its `metadata["seed"]` and of its id (split ids with the nearest
ids that are not), which game and difficulty a task's metadata picks, the random opponent's offered
actions, the LLM opponent's seed, and an unfinished game's release on close (a game that cannot close
included). Real TextArena games (textarena 0.7.4, offline); the LLM opponent is the loopback stand-in for a
hosted LLM."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from beyondagent_plugin_textarena.config import MAX_ACTION_CHARS, SPLIT_SIZE, TextArenaConfig, TextArenaTasksConfig
from beyondagent_plugin_textarena.env import TextArenaEnv
from beyondagent_plugin_textarena.games import make_game
from beyondagent_plugin_textarena.opponents import random_move
from beyondagent_plugin_textarena.seeds import parse_task_id, seed_of
from beyondagent_plugin_textarena.tasks import TextArenaTasks

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.llm_config import LLMConfig

pytestmark = pytest.mark.beyondagent_plugins("textarena")

HANOI = "textarena-tower_of_hanoi-train-0"  # 3 disks, the game's own limit 14 turns


def say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


# --- config limits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "key", "value", "accepted"), [
    (TextArenaConfig, "max_action_chars", 1, True), (TextArenaConfig, "max_action_chars", 0, False),
    (TextArenaConfig, "max_action_chars", MAX_ACTION_CHARS, True),
    (TextArenaConfig, "max_action_chars", MAX_ACTION_CHARS + 1, False),
    (TextArenaConfig, "max_steps", 1, True), (TextArenaConfig, "max_steps", 0, False),
    (TextArenaConfig, "max_steps", 10_000, True), (TextArenaConfig, "max_steps", 10_001, False),
    (TextArenaConfig, "tasks_per_split", SPLIT_SIZE, True), (TextArenaConfig, "tasks_per_split", SPLIT_SIZE + 1, False),
    (TextArenaConfig, "tasks_per_split", 0, False),
    (TextArenaTasksConfig, "count", 1, True), (TextArenaTasksConfig, "count", 0, False),
    (TextArenaTasksConfig, "start", 0, True), (TextArenaTasksConfig, "start", -1, False),
])
def test_config_keys_are_accepted_up_to_their_limits(cls: type, key: str, value: int, accepted: bool) -> None:
    if accepted:
        assert getattr(cls(**{key: value}), key) == value
    else:
        with pytest.raises(ValueError, match=key):
            cls(**{key: value})


@pytest.mark.parametrize(("seat", "accepted"), [(0, True), (1, True), (2, False), (-1, False)])
def test_a_two_player_games_seat_is_zero_or_one(seat: int, accepted: bool) -> None:
    if accepted:
        assert TextArenaConfig(game="tictactoe", seat=seat).seat == seat
    else:
        with pytest.raises(ValueError, match="seat"):
            TextArenaConfig(game="tictactoe", seat=seat)


def test_a_task_range_may_end_at_the_last_seed_of_its_split_and_not_past_it() -> None:
    last = TextArenaTasksConfig(start=SPLIT_SIZE - 2, count=2)
    assert [task.metadata["seed"] for task in TextArenaTasks(last).load(BadRecords())] == [SPLIT_SIZE - 2,
                                                                                           SPLIT_SIZE - 1]
    with pytest.raises(ValueError, match="start \\+ count must be at most 1,000,000 .* got 1,000,001"):
        TextArenaTasksConfig(start=SPLIT_SIZE - 2, count=3)
    with pytest.raises(ValueError, match="start must be <= 999,999"):
        TextArenaTasksConfig(start=SPLIT_SIZE, count=1)


def test_the_documented_defaults() -> None:
    config = TextArenaConfig()
    assert (config.game, config.difficulty, config.max_action_chars, config.max_steps, config.tasks_per_split,
            config.opponent, config.seat, config.opponent_llm) == ("tower_of_hanoi", "", 2000, None, 1000,
                                                                   "random", None, None)
    tasks = TextArenaTasksConfig()
    assert (tasks.game, tasks.split, tasks.count, tasks.start, tasks.opponent) == ("tower_of_hanoi", "train", 100,
                                                                                   0, None)
    assert len(TextArenaEnv().task_ids("val")) == 1000


# --- the env's limits -------------------------------------------------------------------------------


@pytest.mark.parametrize(("max_steps", "limit"), [(None, 14), (20, 14), (14, 14), (13, 13), (1, 1)])
def test_the_smaller_of_max_steps_and_the_games_own_limit_wins(max_steps: int | None, limit: int) -> None:
    assert TextArenaEnv(TextArenaConfig(max_steps=max_steps)).reset(Task(task_id=HANOI)).info["max_steps"] == limit


def test_max_steps_truncates_at_its_step_and_says_why() -> None:
    env = TextArenaEnv(TextArenaConfig(max_steps=2))
    env.reset(Task(task_id=HANOI))
    first, second = env.step(say("[A C]")), env.step(say("[A B]"))
    assert (first.terminated, first.info["truncated"], first.info["steps"]) == (False, False, 1)
    assert (second.terminated, second.info["truncated"], second.info["steps"]) == (True, True, 2)
    assert second.observation[0]["content"].endswith("Game over: no turns left (2)")
    reward = env.evaluate()
    assert (reward.score, reward.success, reward.reason) == (0.0, False, "no turns left (2)")


@pytest.mark.parametrize(("max_action_chars", "moved"), [(5, True), (4, False)])
def test_a_move_exactly_max_action_chars_long_is_read_whole(max_action_chars: int, moved: bool) -> None:
    env = TextArenaEnv(TextArenaConfig(max_action_chars=max_action_chars))
    env.reset(Task(task_id=HANOI))
    shown = env.step(say("[A C]")).observation[0]["content"]  # 5 characters; cut to 4: "[A C" is no move
    assert ("You moved disk 1 from A to C." in shown) == moved
    assert ("invalid move" in shown.lower()) != moved


def test_task_ids_count_tasks_per_split() -> None:
    assert TextArenaEnv(TextArenaConfig(game="nim", tasks_per_split=1)).task_ids("train") == ["textarena-nim-train-0"]


# --- which game and seed a task plays ---------------------------------------------------------------


@pytest.mark.parametrize(("seed", "played"), [
    (0, 0), (5, 5), (2**63 - 1, 2**63 - 1),  # a seed of 0 is a seed, not a missing one
    (True, 1_000_007), (-1, 1_000_007), (2**63, 1_000_007), ("5", 1_000_007), (5.0, 1_000_007),  # the id's seed
])
def test_a_tasks_own_seed_is_played_when_it_is_an_int_in_range(seed: Any, played: int) -> None:
    reset = TextArenaEnv().reset(Task(task_id="textarena-tower_of_hanoi-val-7", metadata={"seed": seed}))
    assert reset.info["metadata"]["seed"] == played


@pytest.mark.parametrize(("task_id", "parsed"), [
    ("textarena-sudoku-train-0", ("sudoku", 0)), ("textarena-sudoku-val-0", ("sudoku", 1_000_000)),
    ("textarena-tower_of_hanoi-test-0", ("tower_of_hanoi", 2_000_000)),
    ("textarena-sudoku-train-01", None), ("textarena-sudoku-dev-1", None), ("textarena-Sudoku-train-1", None),
    ("textarena-sudoku-train-1 ", None), ("my-textarena-sudoku-train-1", None), ("textarena-sudoku-train-", None),
    ("textarena-sudoku-train--1", None),
])
def test_split_task_ids_and_the_nearest_ids_that_are_not(task_id: str, parsed: tuple[str, int] | None) -> None:
    assert parse_task_id(task_id) == parsed
    if parsed is None:
        assert seed_of(task_id) >= 3 * SPLIT_SIZE and seed_of(task_id) == seed_of(task_id)  # hashed, stable
    else:
        assert seed_of(task_id) == parsed[1]


def test_any_other_id_plays_a_stable_seed_above_every_splits_range() -> None:
    # pinned: a changed hash would replay other games for every task with such an id (its first 6 bytes of
    # SHA-256, plus the three splits' 3,000,000 seeds)
    assert seed_of("custom-7") == 3 * SPLIT_SIZE + 146_815_273_958_590


def test_a_tasks_metadata_picks_its_game_and_difficulty_over_its_id_and_the_envs() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tower_of_hanoi", difficulty="medium"))
    named = env.reset(Task(task_id=HANOI, metadata={"game": "guess_the_number", "seed": 0}))
    assert named.info["metadata"] == {"game": "guess_the_number", "difficulty": "", "seed": 0}
    by_id = env.reset(Task(task_id="textarena-sudoku-train-3"))  # the id's game over the env's
    assert by_id.info["metadata"] == {"game": "sudoku", "difficulty": "", "seed": 3}
    default = env.reset(Task(task_id=HANOI, metadata={"difficulty": ""}))  # a task's own '' wins over medium
    assert default.info["metadata"]["difficulty"] == "" and "3 disks" in default.messages[0]["content"]
    other = env.reset(Task(task_id="custom-7"))  # no game anywhere but the env's: its difficulty too
    assert other.info["metadata"]["difficulty"] == "medium" and "4 disks" in other.messages[0]["content"]
    env.close()


def test_the_source_names_its_game_difficulty_and_split_seeds_and_an_opponent_only_when_set() -> None:
    tasks = list(TextArenaTasks(TextArenaTasksConfig(game="mastermind", difficulty="hard", split="test", start=5,
                                                     count=2)).load(BadRecords()))
    assert [task.task_id for task in tasks] == ["textarena-mastermind-test-5", "textarena-mastermind-test-6"]
    assert tasks[0].metadata == {"game": "mastermind", "difficulty": "hard", "seed": 2_000_005}
    assert tasks[0].env == "textarena"
    (selfplay,) = TextArenaTasks(TextArenaTasksConfig(game="nim", count=1, opponent="self")).load(BadRecords())
    assert selfplay.metadata == {"game": "nim", "difficulty": "", "seed": 0, "opponent": "self"}


# --- opponents ---------------------------------------------------------------------------------------


def test_the_random_opponent_picks_only_from_the_last_offered_actions() -> None:
    shown = ("Earlier your available actions were: '[fold]'. Round 2. Your available actions are: '[check]', "
             "'[bet]', '[" + "x" * 41 + "]'")
    rng, game = random.Random(0), make_game("kuhnpoker", "", 0)
    assert {random_move("kuhnpoker", game, shown, rng) for _ in range(60)} == {"[check]", "[bet]"}
    with pytest.raises(RuntimeError, match="the kuhnpoker game offered the opponent no action to choose from"):
        random_move("kuhnpoker", game, "Your available actions are: none", rng)


def test_the_llm_opponent_asks_with_the_tasks_seed(openai_server: Any) -> None:
    openai_server.responder = lambda body: "[0]"
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", seat=0, opponent="llm", opponent_llm=LLMConfig(
        model="stand-in", base_url=openai_server.base_url, max_llm_retries=0)))
    env.reset(Task(task_id="t", metadata={"game": "tictactoe", "seed": 41}))
    env.step(say("[4]"))
    assert [request["seed"] for request in openai_server.requests] == [41]
    env.close()


# --- closing -------------------------------------------------------------------------------------------


def counting_closes(env: TextArenaEnv, monkeypatch: pytest.MonkeyPatch, *, raises: bool = False) -> list[int]:
    game, closes = env._game, []
    original = game.close

    def close() -> Any:
        closes.append(1)
        if raises:
            raise RuntimeError("the game cannot close")
        return original()

    monkeypatch.setattr(game, "close", close)
    return closes


def test_an_unfinished_game_is_closed_on_close_and_on_the_next_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    env = TextArenaEnv()
    env.reset(Task(task_id=HANOI))
    closes = counting_closes(env, monkeypatch)
    env.reset(Task(task_id=HANOI))
    assert closes == [1]
    again = counting_closes(env, monkeypatch)
    env.close()
    assert again == [1]
    with pytest.raises(RuntimeError, match=re.escape("step() before reset()")):
        env.step(say("[A C]"))


def test_a_game_that_cannot_close_is_let_go_and_an_ended_one_is_not_closed_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = TextArenaEnv()
    env.reset(Task(task_id=HANOI))
    closes = counting_closes(env, monkeypatch, raises=True)
    env.close()  # nothing left to free: no error
    assert closes == [1]
    env.reset(Task(task_id=HANOI))
    ended = counting_closes(env, monkeypatch)
    for _ in range(2):  # two invalid moves: the game ends, and its close gave the result
        step = env.step(say("nonsense"))
    assert step.terminated and ended == [1]
    env.close()
    assert ended == [1]
