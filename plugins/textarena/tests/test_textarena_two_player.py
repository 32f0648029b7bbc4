"""TextArena's two-player games against the env's random opponent: the contract suite on each, the
seats (by seed, or fixed), Nim won every time by the player who reads the piles from the messages and
keeps their nim-sum 0 (so the opponent's moves reach the game and the messages), the zero-sum reward as
a score (win 1, draw 0.5, loss 0; a game cut by `max_steps` 0), and replies no game expects.
Real TextArena games (textarena 0.7.4, offline)."""

from __future__ import annotations

import re
from functools import reduce
from typing import Any

import pytest
from beyondagent_plugin_textarena.config import FREE_TEXT, TWO_PLAYER, TextArenaConfig
from beyondagent_plugin_textarena.env import TextArenaEnv

from beyondagent_core import Task
from beyondagent_core.llm_config import LLMConfig
from beyondagent_core.testing.contracts import EnvContract

pytestmark = pytest.mark.beyondagent_plugins("textarena")


def say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


MOVE_LISTS = sorted(TWO_PLAYER - FREE_TEXT)  # the games the random opponent plays


class TestTwoPlayerGames(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "textarena", "max_steps": 3}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=f"{game}-{seed}", env="textarena", metadata={"game": game, "seed": seed})
                for game in MOVE_LISTS for seed in (4, 5)]


class TestFreeTextGamesAgainstAnLLM(EnvContract):
    """The negotiation and the prisoner's dilemma against the loopback stand-in for a hosted LLM."""

    @pytest.fixture
    def implementation(self, openai_server: Any) -> dict[str, Any]:
        openai_server.responder = lambda body: "I propose we both do well. [Cooperate] [Deny]"
        return {"name": "textarena", "max_steps": 3, "opponent": "llm",
                "opponent_llm": {"model": "stand-in", "base_url": openai_server.base_url, "max_llm_retries": 0}}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=f"{game}-{seed}", env="textarena", metadata={"game": game, "seed": seed})
                for game in sorted(FREE_TEXT) for seed in (4, 5)]


def piles_of(text: str) -> list[int]:
    """The piles the last board in `text` shows."""
    board = text.rsplit("Current Pile:", 1)[-1]
    return [int(size) for size in re.findall(r"pile \d+: (\d+)", board)]


def nim_sum_move(piles: list[int]) -> str:
    """A move leaving a nim-sum of 0 (the player to move wins from any other position)."""
    total = reduce(lambda a, b: a ^ b, piles)
    for index, size in enumerate(piles):
        if size ^ total < size:
            return f"[{index} {size - (size ^ total)}]"
    index = next(i for i, size in enumerate(piles) if size)  # a lost position: take one and hope
    return f"[{index} 1]"


def test_the_player_who_reads_the_piles_wins_every_nim_game_it_can() -> None:
    env = TextArenaEnv(TextArenaConfig(game="nim", seat=0))
    won = 0
    for index in range(6):
        text = env.reset(Task(task_id=f"textarena-nim-train-{index}")).messages[0]["content"]
        assert reduce(lambda a, b: a ^ b, piles_of(text)) != 0  # the opener can win these
        for _ in range(40):
            step = env.step(say(f"My move: {nim_sum_move(piles_of(text))}"))
            text = step.observation[0]["content"]
            if step.terminated:
                break
            assert re.search(r"Player 1 removes \d+ from pile \d+", text)  # the opponent's move is shown
        reward = env.evaluate()
        assert (reward.score, reward.success, reward.details["outcome"]) == (1.0, True, "win"), reward
        assert step.reward == 1.0
        won += 1
    assert won == 6


def test_seats_follow_the_seed_unless_fixed_and_the_opponent_opens_for_seat_one() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tictactoe"))
    even = env.reset(Task(task_id="textarena-tictactoe-train-2"))
    assert even.info["metadata"]["seat"] == 0 and "Player 1 placed" not in even.messages[0]["content"]
    odd = env.reset(Task(task_id="textarena-tictactoe-train-3"))
    assert odd.info["metadata"] == {"game": "tictactoe", "difficulty": "", "seed": 3, "seat": 1, "opponent": "random"}
    assert "You are Player 1" in odd.messages[0]["content"]
    assert "Player 0 placed their symbol" in odd.messages[0]["content"]  # its first move, before the policy's
    fixed = TextArenaEnv(TextArenaConfig(game="tictactoe", seat=0)).reset(Task(task_id="textarena-tictactoe-train-3"))
    assert fixed.info["metadata"]["seat"] == 0
    # the same task replays the same opponent
    again = env.reset(Task(task_id="textarena-tictactoe-train-3"))
    assert again.messages == odd.messages


def play_out(env: TextArenaEnv, task: str, moves: list[str]) -> tuple[Any, Any]:
    env.reset(Task(task_id=task))
    for move in moves:
        step = env.step(say(move))
        if step.terminated:
            return step, env.evaluate()
    raise AssertionError(f"{task} did not end")


def test_the_zero_sum_reward_is_a_score_in_zero_one() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", seat=0))
    outcomes = {}
    for index in range(12):  # every cell in turn: the first free one is always a legal move
        cells = [f"[{cell}]" for cell in range(9)]
        step, reward = play_out(env, f"textarena-tictactoe-val-{index}", cells * 2)
        outcomes[reward.details["outcome"]] = reward.score
        assert step.reward == reward.score and reward.success == (reward.details["outcome"] == "win")
    assert outcomes.get("win") == 1.0 and outcomes.get("loss") == 0.0 and set(outcomes) <= {"win", "loss", "draw"}
    assert outcomes.get("draw", 0.5) == 0.5


@pytest.mark.parametrize("game", MOVE_LISTS)
def test_replies_no_game_expects_lose_the_game(game: str) -> None:
    env = TextArenaEnv(TextArenaConfig(game=game, seat=0))
    env.reset(Task(task_id=f"textarena-{game}-test-0"))
    for content in ("nonsense", None, "[" * 3000):
        step = env.step({"role": "assistant", "content": content})
        assert isinstance(step.observation[0]["content"], str) and step.observation[0]["content"]
        if step.terminated:
            break
    reward = env.evaluate()
    assert step.terminated and reward.details["outcome"] == "loss" and reward.score == 0.0


def test_a_game_cut_by_max_steps_is_unfinished_and_scores_nothing() -> None:
    env = TextArenaEnv(TextArenaConfig(game="connectfour", seat=0, max_steps=2))
    env.reset(Task(task_id="textarena-connectfour-train-0"))
    env.step(say("[col 3]"))
    last = env.step(say("[col 3]"))
    reward = env.evaluate()
    assert last.terminated and last.info["truncated"] and last.reward == 0.0
    assert reward.details["outcome"] == "unfinished" and reward.score == 0.0 and not reward.success


def llm_config(openai_server: Any) -> LLMConfig:
    return LLMConfig(model="stand-in", base_url=openai_server.base_url, max_llm_retries=0)


def test_an_llm_opponent_plays_from_the_game_as_its_seat_sees_it(openai_server: Any) -> None:
    """The opponent at an OpenAI-compatible endpoint (the loopback stand-in for a hosted LLM, which
    answers the first cell the board offers): one chat for the game, its replies the moves."""
    def first_free_cell(body: dict[str, Any]) -> str:
        offered = re.findall(r"'\[(\d)\]'", body["messages"][-1]["content"])
        return f"I take [{offered[0]}]."

    openai_server.responder = first_free_cell
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", seat=0, opponent="llm",
                                       opponent_llm=llm_config(openai_server)))
    env.reset(Task(task_id="textarena-tictactoe-train-0"))
    step = env.step(say("[4]"))
    assert "Player 1 placed their symbol (X) in cell 0." in step.observation[0]["content"]
    for cell in ("[8]", "[2]", "[6]"):  # 4, 8 with 0 taken; 2, 6 finish a diagonal... or the opponent blocks
        if step.terminated:
            break
        step = env.step(say(cell))
    chat = openai_server.requests[-1]["messages"]
    assert chat[0]["role"] == "user" and "You are Player 1" in chat[0]["content"]  # the opponent's own seat
    assert [m["role"] for m in chat] == ["user", "assistant"] * (len(chat) // 2) + ["user"] * (len(chat) % 2)
    assert all(request["messages"][-1]["role"] == "user" for request in openai_server.requests)


def test_a_free_text_game_against_an_llm_shows_each_side_the_others_words(openai_server: Any) -> None:
    openai_server.responder = lambda body: "Let us both cooperate, every round. [Cooperate]"
    env = TextArenaEnv(TextArenaConfig(game="iteratedprisonersdilemma", seat=0, opponent="llm",
                                       opponent_llm=llm_config(openai_server)))
    reset = env.reset(Task(task_id="textarena-iteratedprisonersdilemma-val-0"))
    assert "Prisoner's Dilemma" in reset.messages[0]["content"]
    step = env.step(say("Agreed: we cooperate. [Cooperate]"))
    assert "Player 1: Let us both cooperate" in step.observation[0]["content"]  # the opponent's words
    for _ in range(60):
        if step.terminated:
            break
        step = env.step(say("[Cooperate]"))
    reward = env.evaluate()
    assert step.terminated and reward.details["outcome"] == "draw" and reward.score == 0.5  # equal payoffs
    assert any("Agreed: we cooperate" in m["content"] for m in openai_server.requests[-1]["messages"])


def test_opponent_settings_that_cannot_play_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="free text .* the random opponent cannot play it; set the env's opponent: llm"):
        TextArenaConfig(game="simplenegotiation")
    with pytest.raises(ValueError, match="opponent llm needs opponent_llm"):
        TextArenaConfig(game="tictactoe", opponent="llm")
    with pytest.raises(ValueError, match="opponent_llm is set but the opponent is 'random'"):
        TextArenaConfig(game="tictactoe", opponent_llm=LLMConfig(model="m"))
    with pytest.raises(ValueError, match="free text"):  # a task naming such a game, with the random opponent
        TextArenaEnv().reset(Task(task_id="t", metadata={"game": "simplenegotiation"}))
