"""The ChatScheduler with the real tiny model: batching must not change what is generated.

Prompts of different lengths are left-padded into one batch; a row's tokens and log-probs
must be those it gets alone, and the log-probs must be what a plain forward pass computes.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling, nucleus
from beyondagent_plugin_torch.models import load_policy


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny")


def scheduler_for(policy) -> ChatScheduler:
    model, tokenizer = policy
    return ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)


PROMPTS = ["<|im_start|>user\nWhich way?<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>system\nYou are in a grid of frozen tiles and holes.<|im_end|>\n<|im_start|>user\n"
           "You are at row 0, column 0. Which action do you take?<|im_end|>\n<|im_start|>assistant\n",
           "<|im_start|>user\n12 + 7 =<|im_end|>\n<|im_start|>assistant\n"]


def generate_all(scheduler, prompts, sampling, seeds, *, together: bool):
    async def one(i, ids):
        with scheduler.episode():
            return await scheduler.generate((i, 0), ids, sampling, sampling.max_tokens,
                                            torch.Generator().manual_seed(seeds[i]))

    async def run():
        if together:
            return await asyncio.gather(*(one(i, ids) for i, ids in enumerate(prompts)))
        return [await one(i, ids) for i, ids in enumerate(prompts)]

    return asyncio.run(run())


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_batch_generates_what_each_prompt_generates_alone(policy, temperature) -> None:
    _, tokenizer = policy
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]
    sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=12)
    seeds = [11, 22, 33]
    batched_scheduler, alone_scheduler = scheduler_for(policy), scheduler_for(policy)
    batched = generate_all(batched_scheduler, prompts, sampling, seeds, together=True)
    alone = generate_all(alone_scheduler, prompts, sampling, seeds, together=False)
    assert batched_scheduler.stats.batches == 1 and alone_scheduler.stats.batches == 3
    for (ids_b, lp_b), (ids_a, lp_a) in zip(batched, alone):
        assert ids_b == ids_a
        assert lp_b == pytest.approx(lp_a, abs=1e-4)


def test_logprobs_are_those_of_a_forward_pass(policy) -> None:
    model, tokenizer = policy
    prompt = tokenizer.encode(PROMPTS[1], add_special_tokens=False)
    [(ids, logprobs)] = generate_all(scheduler_for(policy), [prompt], Sampling(0.7, 1.0, 10), [5], together=True)
    full = torch.tensor([prompt + ids])
    with torch.no_grad():
        logits = model(input_ids=full).logits[0, len(prompt) - 1:-1].float() / 0.7
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)
    assert logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_generation_stops_at_eos_or_the_token_limit(policy) -> None:
    model, tokenizer = policy
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]
    results = generate_all(scheduler_for(policy), prompts, Sampling(1.0, 1.0, 7), [1, 2, 3], together=True)
    for ids, logprobs in results:
        assert len(ids) == len(logprobs) <= 7
        assert tokenizer.eos_token_id not in ids[:-1]
        assert len(ids) == 7 or ids[-1] == tokenizer.eos_token_id


def test_concurrent_episodes_share_generation_passes(policy) -> None:
    _, tokenizer = policy
    scheduler = scheduler_for(policy)
    prompt = tokenizer.encode(PROMPTS[0], add_special_tokens=False)

    async def episode(i):
        with scheduler.episode():
            ids = list(prompt)
            for turn in range(3):
                new, _ = await scheduler.generate((i, turn), ids, Sampling(1.0, 1.0, 4), 4,
                                                  torch.Generator().manual_seed(i))
                await asyncio.sleep(0.001 * (i % 3))  # envs step at different speeds
                ids += new

    async def run():
        await asyncio.gather(*(episode(i) for i in range(16)))

    asyncio.run(run())
    assert scheduler.stats.requests == 48
    assert scheduler.stats.batches == 3  # lockstep: one pass per turn for all 16 episodes


def test_top_p_keeps_the_smallest_nucleus() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]])
    kept = nucleus(probs, torch.tensor([0.7, 1.0]))
    assert kept[0].tolist() == pytest.approx([0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0])
    assert kept[1].tolist() == pytest.approx([0.25] * 4)
    # A tiny top-p is greedy.
    assert nucleus(probs, torch.tensor([1e-9, 1e-9]))[0].tolist() == [1.0, 0.0, 0.0, 0.0]
