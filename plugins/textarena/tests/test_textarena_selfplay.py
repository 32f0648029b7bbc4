"""Self-play in TextArena's two-player games (`opponent: self`): the env plays no seat, its episode has
two (`beyondagent_core.runtime.seats`); the contract suite on each game; Nim played by both seats from
the messages each is shown (the seat that keeps the nim-sum 0 wins, and the two rewards say so); a task
that names its own opponent (a random one, to validate against) wins over the env's; settings that
cannot mean anything are refused. Real TextArena games (textarena 0.7.4, offline)."""

from __future__ import annotations

import asyncio
from functools import reduce
from typing import Any

import pytest
from beyondagent_plugin_textarena.config import TWO_PLAYER, TextArenaConfig, TextArenaTasksConfig
from beyondagent_plugin_textarena.env import TextArenaEnv
from beyondagent_plugin_textarena.tasks import TextArenaTasks
from test_textarena_two_player import piles_of

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.testing.contracts import EnvContract
from beyondagent_core.types import Reward, Turn

pytestmark = pytest.mark.beyondagent_plugins("textarena")


class TestSelfPlay(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "textarena", "opponent": "self", "max_steps": 12}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=f"{game}-{seed}", env="textarena", metadata={"game": game, "seed": seed})
                for game in sorted(TWO_PLAYER) for seed in (4, 5)]


class NimPlayer:
    """Plays Nim from the messages it is shown: the nim-sum-0 move when there is one (`perfect`), else
    one stone from the first pile (stands in for a model: the seats' chats)."""

    def __init__(self, perfect: bool):
        self.perfect = perfect

    async def chat(self, messages: list[dict[str, str]], **sampling: Any) -> Turn:
        piles = piles_of("\n".join(m["content"] for m in messages if m["role"] == "user"))
        total = reduce(lambda a, b: a ^ b, piles, 0)
        move = next(((i, size - (size ^ total)) for i, size in enumerate(piles)
                     if self.perfect and total and size ^ total < size), None)
        pile, take = move or next((i, 1) for i, size in enumerate(piles) if size)
        return Turn(role="assistant", content=f"[{pile} {take}]", token_ids=[1], logprobs=[0.0])


@pytest.mark.parametrize("perfect_seat", [0, 1])
def test_both_seats_play_from_their_own_views_and_the_rewards_say_who_won(perfect_seat: int) -> None:
    players = {seat: NimPlayer(perfect=seat == perfect_seat) for seat in (0, 1)}
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=30)), lambda: TextArenaEnv(
        TextArenaConfig(game="nim", opponent="self")))
    # a seed whose opening piles have a non-zero nim-sum: the player who moves first wins with perfect play
    task = next(Task(task_id=f"nim-{seed}", metadata={"game": "nim", "seed": seed}) for seed in range(100)
                if opening_nim_sum(seed))
    trajectories = asyncio.run(runner.run_seats(task, lambda seat, seats=None: players[seat]))
    assert [t.seat for t in trajectories] == [0, 1] and all(t.error is None for t in trajectories)
    if perfect_seat == 0:  # the opener plays perfectly: it wins whatever the other does
        assert [t.reward.details["outcome"] for t in trajectories] == ["win", "loss"]
        assert [t.reward.score for t in trajectories] == [1.0, 0.0]
    assert trajectories[0].reward.details["outcome"] != trajectories[1].reward.details["outcome"]
    for seat, trajectory in enumerate(trajectories):
        assert trajectory.reward.details["seat"] == seat and trajectory.reward.details["opponent"] == "self"
        assert f"Player {seat}" in trajectory.turns[0].content  # each seat is told which player it is
        assert trajectory.metrics["turns"] >= 1 and trajectory.terminated


def opening_nim_sum(seed: int) -> int:
    env = TextArenaEnv(TextArenaConfig(game="nim", opponent="self"))
    try:
        return reduce(lambda a, b: a ^ b, piles_of(env.reset(Task("n", metadata={"game": "nim", "seed": seed}))
                                                   .messages[0]["content"]), 0)
    finally:
        env.close()


def test_the_next_seat_sees_the_others_move_and_the_seats_alternate() -> None:
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", opponent="self"))
    reset = env.reset(Task("t", metadata={"game": "tictactoe", "seed": 2}))
    assert reset.info["seats"] == 2 and reset.info["seat"] == 0 and "Player 0" in reset.messages[0]["content"]
    step = env.step({"role": "assistant", "content": "[4]"})
    assert step.info["seat"] == 1 and not step.terminated
    assert "Player 1" in step.observation[0]["content"]  # seat 1's first view: the rules, then seat 0's move
    assert "placed their symbol (O) in cell 4" in step.observation[0]["content"]
    assert env.step({"role": "assistant", "content": "[0]"}).info["seat"] == 0
    rewards = [Reward.from_dict(r) for r in env.seat_rewards()]
    assert [r.reason for r in rewards] == ["the game has not ended"] * 2 and env.evaluate().score == 0.0
    env.close()


def test_a_task_that_names_its_opponent_plays_it() -> None:
    source = TextArenaTasks(TextArenaTasksConfig(game="tictactoe", split="val", count=2, opponent="random"))
    task = next(iter(source.load(BadRecords("fail"))))
    assert task.metadata["opponent"] == "random"
    env = TextArenaEnv(TextArenaConfig(game="tictactoe", opponent="self"))
    reset = env.reset(task)
    assert "seats" not in reset.info and reset.info["metadata"]["opponent"] == "random"
    env.close()


def test_settings_that_mean_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match="in self-play the policy plays every seat"):
        TextArenaConfig(game="tictactoe", opponent="self", seat=0)
    with pytest.raises(ValueError, match="one-player game"):
        TextArenaTasksConfig(game="sokoban", opponent="random")
    with pytest.raises(ValueError, match="random opponent cannot play it"):
        TextArenaTasksConfig(game="simplenegotiation", opponent="random")
    env = TextArenaEnv(TextArenaConfig(game="tictactoe"))
    with pytest.raises(ValueError, match="opponent llm needs the env's opponent_llm"):
        env.reset(Task("t", metadata={"game": "tictactoe", "opponent": "llm"}))
    with pytest.raises(ValueError, match="unknown opponent 'nobody'"):
        env.reset(Task("t", metadata={"game": "tictactoe", "opponent": "nobody"}))
