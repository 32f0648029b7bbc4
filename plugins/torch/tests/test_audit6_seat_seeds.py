"""Seat 0 of a multi-seat episode samples with the seed a one-seat episode of the same index gets
(rollout.py's `seat_llm`: `episode_seed(run seed, "train", step, index)`), and the other seats with seeds
of their own: with the real tiny model and the
same opening prompt, the two-seat game's seat 0 first move is token for token the one-seat episode's
move, while seat 1, shown the same prompt, samples differently. Two tiny envs in the test stand for a
game: one says nothing of seats, the other has two and opens with seat 0."""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.rollout import episode_seed, rollout

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Reward, Task

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")

PROMPT = [{"role": "user", "content": "Say a word."}]


class OneSeat:
    def reset(self, task: Task) -> EnvReset:
        return EnvReset(messages=list(PROMPT))

    def step(self, action: dict) -> EnvStep:
        return EnvStep(observation=[], reward=0.0, terminated=True)

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def close(self) -> None:
        pass


class TwoSeats(OneSeat):
    """Each seat is shown the same prompt; seat 0 moves, then seat 1, then it ends."""

    def reset(self, task: Task) -> EnvReset:
        self.moves = 0
        return EnvReset(messages=list(PROMPT), info={"seats": 2, "seat": 0})

    def step(self, action: dict) -> EnvStep:
        self.moves += 1
        return EnvStep(observation=list(PROMPT), reward=0.0, terminated=self.moves == 2, info={"seat": 1})

    def seat_rewards(self) -> list[dict]:
        return [Reward(score=0.0).to_dict(), Reward(score=0.0).to_dict()]


def first_moves(env_class, model, tokenizer) -> list[list[int]]:
    scheduler = ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=1)), lambda: env_class())
    episodes = asyncio.run(rollout([(0, Task("say-0"))], runner=runner, scheduler=scheduler,
                                   template=ChatTemplate(tokenizer), sampling=Sampling(1.0, 1.0, 8),
                                   max_episode_tokens=512, max_concurrency=1, seed=(11, "train", 1)))
    moves = []
    for episode in episodes:
        ids, mask = episode.sequence.input_ids, episode.sequence.loss_mask
        moves.append([token for token, trained in zip(ids, mask) if trained])
    return moves


def test_seat_zero_samples_as_a_one_seat_episode_and_seat_one_apart() -> None:
    model, tokenizer = load_policy("tiny")
    (alone,) = first_moves(OneSeat, model, tokenizer)
    # a one-seat episode samples with the generator seeded from (run seed, "train", step, its index): the
    # same move as the scheduler asked directly with that generator (what another backend's check assumes)
    scheduler = ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)

    async def direct():
        with scheduler.episode():
            return await scheduler.generate((0, 0), ChatTemplate(tokenizer).prompt_ids(PROMPT), Sampling(1.0, 1.0, 8),
                                            8, torch.Generator().manual_seed(episode_seed(11, "train", 1, 0)))

    tokens, _ = asyncio.run(direct())
    assert alone == list(tokens)
    zero, one = first_moves(TwoSeats, model, tokenizer)
    assert alone and zero == alone
    assert one and one != zero
