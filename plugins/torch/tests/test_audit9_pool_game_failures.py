"""A pool game that fails before the policy's seat moved still comes back as one failed episode
(ninth mutation audit; rollout.py keeps "a failure stays counted").

In a game against an opponent-pool snapshot the rollout keeps only the policy's seats. When the game
crashes after the snapshot's seat moved but before the policy's seat was asked, the only error record
is the snapshot's seat: the rollout must still hand back one failed Episode (so the step's
`max_failed_fraction` and `episode_errors.jsonl` count it), marked with the opponent it met and the
snapshot's step, not drop the game silently. A game that finishes keeps the policy's seat only.
Real tiny model, a two-seat env in the test that opens with seat 1.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.opponent_pool import Opponent, PoolEntry
from beyondagent_plugin_torch.rollout import rollout

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Reward, Task

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")

PROMPT = [{"role": "user", "content": "Your move."}]


class SeatOneOpens:
    """Two seats, seat 1 moves first, then seat 0; `crash` makes the first move's step raise."""

    def __init__(self, crash: bool):
        self.crash = crash
        self.moves = 0

    def reset(self, task: Task) -> EnvReset:
        return EnvReset(messages=list(PROMPT), info={"seats": 2, "seat": 1})

    def step(self, action: dict) -> EnvStep:
        if self.crash:
            raise RuntimeError("the game server went away")
        self.moves += 1
        return EnvStep(observation=list(PROMPT), reward=0.0, terminated=self.moves == 2, info={"seat": 0})

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def seat_rewards(self) -> list[dict]:
        return [Reward(score=1.0).to_dict(), Reward(score=0.0).to_dict()]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny")


def play(tiny, *, crash: bool):
    model, tokenizer = tiny

    def scheduler() -> ChatScheduler:
        return ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)

    entry = PoolEntry(step=7, model=model, scheduler=scheduler(), rating=1000.0)
    opponent = Opponent(entry, 0)  # game 0: the policy plays seat 0, the snapshot seat 1 (which opens)
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=1)), lambda: SeatOneOpens(crash))
    episodes = asyncio.run(rollout([(0, Task("game-0"))], runner=runner, scheduler=scheduler(),
                                   template=ChatTemplate(tokenizer), sampling=Sampling(1.0, 1.0, 4),
                                   max_episode_tokens=256, max_concurrency=1, seed=(5, "train", 1),
                                   opponents=[opponent]))
    return episodes, opponent


def test_a_pool_game_that_crashed_before_the_policys_seat_moved_is_one_failed_episode(tiny) -> None:
    episodes, opponent = play(tiny, crash=True)
    assert len(episodes) == 1  # counted, not dropped with the snapshot's seats
    (failed,) = episodes
    assert failed.trajectory.error is not None and "the game server went away" in failed.trajectory.error
    assert not failed.trainable
    assert failed.opponent is opponent and failed.pool_score is None
    assert failed.trajectory.metrics["opponent_step"] == 7


def test_a_finished_pool_game_keeps_the_policys_seat_only_with_its_score(tiny) -> None:
    episodes, opponent = play(tiny, crash=False)
    assert [episode.seat for episode in episodes] == [0]
    (mine,) = episodes
    assert mine.trajectory.error is None and mine.opponent is opponent
    assert mine.pool_score == 1.0  # seat 0's reward 1.0 beat the snapshot's 0.0
