"""An episode's count in flight (generation.py's `Presence`) on two real ChatSchedulers over the tiny
model, as in a game against the opponent pool: the episode is counted by exactly one scheduler at a
time (the one it asked last), moving it takes it off the other, moving it where it is changes nothing,
and leaving the episode takes it off the scheduler that counts it, so a lockstep batch there may start."""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.models import load_policy

from beyondagent_core.runtime.tokens import ChatTemplate

pytestmark = pytest.mark.beyondagent_plugins("torch")


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny")


def scheduler(tiny) -> ChatScheduler:
    model, tokenizer = tiny
    return ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)


def test_an_episode_is_counted_where_it_asked_last(tiny) -> None:
    policy, frozen = scheduler(tiny), scheduler(tiny)

    async def moves() -> None:  # leaving a scheduler may start its batch: that needs the event loop
        with policy.episode() as presence:
            assert (policy._active, frozen._active) == (1, 0)
            presence.move_to(frozen)
            assert (policy._active, frozen._active) == (0, 1)
            presence.move_to(frozen)  # already there
            assert (policy._active, frozen._active) == (0, 1)
            presence.move_to(policy)
            assert (policy._active, frozen._active) == (1, 0)
            presence.move_to(frozen)
        assert (policy._active, frozen._active) == (0, 0)  # it left the one that counted it
        with policy.episode():
            pass
        assert policy._active == 0

    asyncio.run(moves())


def test_a_lockstep_batch_does_not_wait_for_an_episode_that_moved_away(tiny) -> None:
    """Two episodes on the policy's scheduler; one moves to the frozen one and asks there. The other's
    request on the policy's scheduler (lockstep: it waits for every episode counted there) must be
    answered: were the moved episode still counted by the policy's scheduler, neither would finish."""
    _, tokenizer = tiny
    policy, frozen = scheduler(tiny), scheduler(tiny)
    ids = ChatTemplate(tokenizer).prompt_ids([{"role": "user", "content": "Which way?"}])
    sampling = Sampling(1.0, 1.0, 3)

    async def one(index: int, moved: bool):
        with policy.episode() as presence:
            target = policy
            if moved:
                presence.move_to(frozen)
                target = frozen
            return await target.generate((index, 0), ids, sampling, 3, torch.Generator().manual_seed(index))

    async def both():
        # a hang guard only (the answer comes at once when the count is right), not a timing assertion
        return await asyncio.wait_for(asyncio.gather(one(0, False), one(1, True)), timeout=60)

    answers = asyncio.run(both())
    assert all(len(tokens) >= 1 for tokens, _ in answers)
    assert (policy._active, frozen._active) == (0, 0)
