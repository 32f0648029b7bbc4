"""The `textarena` env and `textarena_tasks` source: the core's contract suites on every served game,
games played to their end (a solved Tower of Hanoi, Guess the Number by bisection, Mastermind's partial
credit, a game cut at `max_steps`), replies no game expects, and the games that are refused with the reason.
Real TextArena games throughout (textarena 0.7.4, offline)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from beyondagent_plugin_textarena.config import GAMES, TWO_PLAYER, TextArenaConfig, TextArenaTasksConfig
from beyondagent_plugin_textarena.env import TextArenaEnv
from beyondagent_plugin_textarena.tasks import TextArenaTasks

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.testing.contracts import EnvContract, TaskSourceContract

pytestmark = pytest.mark.beyondagent_plugins("textarena")


def say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


# Every served game and difficulty but Sokoban's `medium`, whose room generator takes ~20 s a game.
# (The two-player games have their own file: test_textarena_two_player.py.)
SERVED = [(game, difficulty) for game, (_, difficulties) in GAMES.items() for difficulty in difficulties
          if (game, difficulty) != ("sokoban", "medium") and game not in TWO_PLAYER]


class TestTextArenaGames(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "textarena", "max_steps": 3}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=f"{game}-{difficulty or 'default'}", env="textarena",
                     metadata={"game": game, "difficulty": difficulty, "seed": 7}) for game, difficulty in SERVED]


class TestTextArenaTasks(TaskSourceContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "textarena_tasks", "game": "mastermind", "difficulty": "hard", "split": "val", "count": 5}


def test_a_solved_tower_of_hanoi_scores_one_at_the_last_move_only() -> None:
    env = TextArenaEnv()
    reset = env.reset(Task(task_id="textarena-tower_of_hanoi-train-0"))
    assert "Tower of Hanoi with 3 disks" in reset.messages[0]["content"]
    assert reset.info == {"metadata": {"game": "tower_of_hanoi", "difficulty": "", "seed": 0}, "max_steps": 14}
    moves = ["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"]
    steps = [env.step(say(f"I move {move}.")) for move in moves]
    assert [step.reward for step in steps] == [0.0] * 6 + [1.0]
    assert [step.terminated for step in steps] == [False] * 6 + [True]
    assert "You moved disk 1 from A to C." in steps[0].observation[0]["content"]
    assert "[A C]" not in steps[0].observation[0]["content"]  # the move is the assistant's message, not echoed
    assert "solved the Tower of Hanoi" in steps[-1].observation[0]["content"]
    reward = env.evaluate()
    assert (reward.score, reward.success) == (1.0, True) and "solved" in reward.reason
    after = env.step(say("[A B]"))
    assert after.terminated and after.reward == 0.0 and after.observation[0]["content"] == "The game is over."


def test_guess_the_number_by_bisection_wins_and_the_task_id_alone_replays_the_game() -> None:
    def play(env: TextArenaEnv, task: Task) -> tuple[int, Any]:
        env.reset(task)
        low, high = 1, 20
        for turns in range(1, 11):
            guess = (low + high) // 2
            step = env.step(say(f"My guess: [{guess}]"))
            if step.terminated:
                return turns, env.evaluate()
            hint = step.observation[0]["content"].lower()
            low, high = (guess + 1, high) if "higher" in hint else (low, guess - 1)
        raise AssertionError("bisection takes at most 5 guesses of 1..20")

    env = TextArenaEnv()
    bare = Task(task_id="textarena-guess_the_number-val-3")
    turns, reward = play(env, bare)
    assert reward.success and reward.score == 1.0 and turns <= 5
    # the source's task of that id is the same game (the same number: the same guesses)
    (listed,) = TextArenaTasks(TextArenaTasksConfig(game="guess_the_number", split="val", start=3, count=1)).load(
        BadRecords())
    assert listed.task_id == bare.task_id and listed.metadata["seed"] == 1_000_003
    assert play(TextArenaEnv(), listed) == (turns, reward)


def test_mastermind_gives_partial_credit_and_max_steps_cuts_a_game_short() -> None:
    env = TextArenaEnv(TextArenaConfig(game="mastermind", max_steps=2))
    env.reset(Task(task_id="m", metadata={"seed": 11}))
    first, second = env.step(say("[1 2 3 4]")), env.step(say("[5 6 1 2]"))
    assert not first.terminated and second.terminated and second.info["truncated"]
    reward = env.evaluate()
    assert 0.0 <= reward.score < 1.0 and not reward.success and second.reward == reward.score
    assert reward.details == {"game": "mastermind", "difficulty": "", "seed": 11}


@pytest.mark.parametrize("content", [None, 42, "", "\x00" * 10, "[" * 5000, "]" * 5000 + "[A C]",
                                     "🙂" * 3000, "[A C]" * 2000, "[" + "A " * 20000 + "C]"])
def test_replies_no_game_expects_are_moves_the_game_answers(content: Any) -> None:
    env = TextArenaEnv(TextArenaConfig(max_action_chars=2000))
    env.reset(Task(task_id="textarena-tower_of_hanoi-test-1"))
    step = env.step({"role": "assistant", "content": content})
    assert isinstance(step.observation[0]["content"], str) and step.observation[0]["content"]
    assert isinstance(step.reward, float) and 0.0 <= step.reward <= 1.0


def test_a_reply_is_cut_to_max_action_chars_before_the_game_reads_it() -> None:
    env = TextArenaEnv(TextArenaConfig(max_action_chars=50))
    env.reset(Task(task_id="textarena-tower_of_hanoi-train-0"))
    late = env.step(say("x" * 60 + " [A C]"))  # the move is past the cut: the game sees no move
    assert "invalid move" in late.observation[0]["content"].lower()
    env.reset(Task(task_id="textarena-tower_of_hanoi-train-0"))
    early = env.step(say("[A C] " + "x" * 60))
    assert "You moved disk 1 from A to C." in early.observation[0]["content"]


@pytest.mark.parametrize(("game", "why"), [("wordle", "nltk's `words` corpus, a download"),
                                           ("chess", "Python 3.12 or newer"),
                                           ("go_fish", "unknown game 'go_fish'; the games served are sokoban")])
def test_a_game_that_is_not_served_is_refused_with_the_reason(game: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        TextArenaConfig(game=game)
    with pytest.raises(ValueError, match=re.escape(why)):
        TextArenaTasksConfig(game=game)
    with pytest.raises(ValueError, match=re.escape(why)):
        TextArenaEnv().reset(Task(task_id="t", metadata={"game": game}))


def test_an_unknown_difficulty_names_the_games_difficulties() -> None:
    with pytest.raises(ValueError, match="'sokoban' has the difficulties '', 'medium'"):
        TextArenaTasksConfig(game="sokoban", difficulty="hard")


def test_task_ids_of_a_split_are_the_sources_tasks() -> None:
    env = TextArenaEnv(TextArenaConfig(game="sudoku", tasks_per_split=4))
    source = TextArenaTasks(TextArenaTasksConfig(game="sudoku", split="test", count=4)).load(BadRecords())
    assert env.task_ids("test") == [task.task_id for task in source] == [f"textarena-sudoku-test-{i}" for i in range(4)]
    with pytest.raises(ValueError, match="split must be one of train, val, test"):
        env.task_ids("dev")


def test_games_first_made_in_several_threads_at_once_leave_stdout_alone() -> None:
    # the first import of textarena swaps sys.stdout to catch what it prints; envs reset in threads, and
    # two first imports at once once left the process's stdout (logs, progress, eval tables) in a buffer
    import subprocess
    import sys

    child = ("import sys, threading\n"
             "from beyondagent_plugin_textarena import games\n"
             "threads = [threading.Thread(target=games.textarena) for _ in range(6)]\n"
             "[t.start() for t in threads]; [t.join() for t in threads]\n"
             "print('stdout is the terminal' if sys.stdout is sys.__stdout__ else 'stdout lost')\n")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "stdout is the terminal", done.stdout + done.stderr
