"""An episode's KV cache kept between turns, shared group prefixes and continuous batching, with
the real tiny model.

Reuse must be exact: every turn's token ids equal those of a scheduler that prefills the whole
conversation again (greedy, and sampled with fixed seeds), log-probs equal within float noise,
including a turn whose prompt re-renders earlier text and a budget too small to keep everything.
Continuous batching (episodes join and leave the decode batch between steps) must generate what
lockstep batching generates, and an episode waiting on a slow env must not hold the others.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.kv_cache import SessionCache
from beyondagent_plugin_torch.models import load_policy


@pytest.fixture(scope="module")
def policy():
    return load_policy("tiny")


def scheduler_for(policy, **options) -> ChatScheduler:
    model, tokenizer = policy
    return ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id, **options)


FIRST = ["<|im_start|>user\nWhich way?<|im_end|>\n<|im_start|>assistant\n",
         "<|im_start|>system\nYou are in a grid of frozen tiles and holes.<|im_end|>\n<|im_start|>user\n"
         "You are at row 0, column 0. Which action do you take?<|im_end|>\n<|im_start|>assistant\n",
         "<|im_start|>user\n12 + 7 =<|im_end|>\n<|im_start|>assistant\n"]
OBSERVATION = "<|im_end|>\n<|im_start|>user\nYou moved. Now at row {turn}, column {episode}.<|im_end|>\n" \
              "<|im_start|>assistant\n"


def play(scheduler, tokenizer, prompts, sampling, *, turns=3, rerender_at=None):
    """Episodes of `turns` model turns, all in flight: each turn's prompt is the last one, the model's
    ids and an observation. With `rerender_at`, that turn's prompt rewrites an earlier token.
    Returns each episode's per-turn (ids, logprobs) and checks every session's cache is freed."""
    async def episode(index, prompt):
        ids, turns_out, session = list(prompt), [], object()
        generator = torch.Generator().manual_seed(100 + index)
        with scheduler.episode():
            for turn in range(turns):
                if turn == rerender_at:
                    ids[2] = tokenizer.encode("Hello", add_special_tokens=False)[0]
                new, logprobs = await scheduler.generate((index, turn), ids, sampling, sampling.max_tokens,
                                                         generator, session=session)
                turns_out.append((new, logprobs))
                await asyncio.sleep(0.001 * (index % 2))  # envs answer at different speeds
                ids += new + tokenizer.encode(OBSERVATION.format(turn=turn, episode=index), add_special_tokens=False)
        scheduler.end_session(session)
        return turns_out

    async def run():
        return await asyncio.gather(*(episode(i, p) for i, p in enumerate(prompts)))

    results = asyncio.run(run())
    assert scheduler.kv.tokens == 0 and len(scheduler.kv) == 0
    return results


def assert_same(reused, fresh) -> None:
    for episode_reused, episode_fresh in zip(reused, fresh, strict=True):
        for (ids_r, lp_r), (ids_f, lp_f) in zip(episode_reused, episode_fresh, strict=True):
            assert ids_r == ids_f
            assert lp_r == pytest.approx(lp_f, abs=1e-4)


@pytest.mark.parametrize("batching", ["lockstep", "continuous"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_reused_caches_generate_what_a_full_prefill_generates(policy, temperature, batching) -> None:
    _, tokenizer = policy
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in FIRST]
    sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=8)
    cached, uncached = scheduler_for(policy, batching=batching), scheduler_for(policy, kv_cache_tokens=0)
    assert_same(play(cached, tokenizer, prompts, sampling), play(uncached, tokenizer, prompts, sampling))
    assert uncached.kv.stats.reused_tokens == 0
    # Turns 2 and 3 of each episode fed only the model's last token and the observation.
    assert cached.kv.stats.reused_tokens > 0
    assert cached.kv.stats.prefill_tokens + cached.kv.stats.reused_tokens == uncached.kv.stats.prefill_tokens
    assert cached.kv.stats.prefill_tokens < uncached.kv.stats.prefill_tokens / 2
    assert cached.kv.stats.rerenders == 0 and cached.kv.stats.evictions == 0


def test_a_rerendered_prompt_uses_the_cache_up_to_where_it_diverges(policy) -> None:
    _, tokenizer = policy
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in FIRST]
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    cached, uncached = scheduler_for(policy), scheduler_for(policy, kv_cache_tokens=0)
    assert_same(play(cached, tokenizer, prompts, sampling, rerender_at=2),
                play(uncached, tokenizer, prompts, sampling, rerender_at=2))
    assert cached.kv.stats.rerenders == len(prompts)


@pytest.mark.parametrize("batching", ["lockstep", "continuous"])
def test_a_small_budget_evicts_and_stays_exact(policy, batching) -> None:
    _, tokenizer = policy
    prompts = [tokenizer.encode(p, add_special_tokens=False) for p in FIRST]
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    budget = max(len(p) for p in prompts) + 8  # about one episode's cache
    small = scheduler_for(policy, kv_cache_tokens=budget, batching=batching)
    uncached = scheduler_for(policy, kv_cache_tokens=0)
    assert_same(play(small, tokenizer, prompts, sampling), play(uncached, tokenizer, prompts, sampling))
    stats = small.kv.stats
    assert stats.evictions + stats.over_budget > 0
    assert stats.reused_tokens > 0  # what fitted was still used


def test_a_groups_identical_prompts_are_prefilled_once(policy) -> None:
    _, tokenizer = policy
    prompt = tokenizer.encode(FIRST[1], add_special_tokens=False)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=8)
    shared = scheduler_for(policy)
    group = play(shared, tokenizer, [prompt] * 4, sampling, turns=2)
    alone = []  # each rollout alone, with its seed and observations
    for index in range(4):
        scheduler = scheduler_for(policy, kv_cache_tokens=0)
        alone.append(play_one_seeded(scheduler, tokenizer, prompt, sampling, index))
    assert_same(group, alone)
    assert shared.kv.stats.shared_prefix_tokens == 3 * len(prompt)
    assert len({tuple(ids) for (ids, _), _ in group}) > 1  # different seeds, different rollouts


def play_one_seeded(scheduler, tokenizer, prompt, sampling, index):
    """Episode `index` of `play` alone (same seed and observations)."""
    async def run():
        ids, out, session = list(prompt), [], object()
        generator = torch.Generator().manual_seed(100 + index)
        with scheduler.episode():
            for turn in range(2):
                new, logprobs = await scheduler.generate((0, turn), ids, sampling, sampling.max_tokens, generator,
                                                         session=session)
                out.append((new, logprobs))
                ids += new + tokenizer.encode(OBSERVATION.format(turn=turn, episode=index), add_special_tokens=False)
        scheduler.end_session(session)
        return out

    return asyncio.run(run())


def test_the_store_evicts_least_recently_used_first() -> None:
    from beyondagent_plugin_torch.kv_cache import CachedPrefix

    def prefix(n):
        return CachedPrefix(list(range(n)), [torch.zeros(1, n, 2)], [torch.zeros(1, n, 2)])

    store = SessionCache(budget_tokens=10)
    store.put("a", prefix(4))
    store.put("b", prefix(4))
    assert store.take("a", list(range(6))) is not None  # taken out: "a" is stored again after its turn
    store.put("a", prefix(5))
    store.put("c", prefix(4))  # over budget: "b" (least recently used) goes
    assert store.take("b", list(range(6))) is None and store.stats.evictions == 1
    store.put("big", prefix(11))
    assert store.stats.over_budget == 1 and store.tokens == 9
    # A prompt equal to the cached ids still feeds its last token.
    cut = store.take("c", list(range(4)))
    assert cut is not None and len(cut) == 3 and cut.keys[0].shape[1] == 3 and store.stats.rerenders == 0


def test_continuous_batching_does_not_wait_for_a_slow_env(policy) -> None:
    """Three fast episodes and one whose env takes 1 s per step: with continuous batching the fast
    ones finish all their turns while the slow one waits; in lockstep each turn waits for it."""
    _, tokenizer = policy
    prompt = tokenizer.encode(FIRST[0], add_special_tokens=False)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=4)

    def run(batching):
        scheduler = scheduler_for(policy, batching=batching)
        finished = {}

        async def episode(index):
            ids, session = list(prompt), object()
            generator = torch.Generator().manual_seed(index)
            loop = asyncio.get_running_loop()
            started = loop.time()
            with scheduler.episode():
                for turn in range(3):
                    new, _ = await scheduler.generate((index, turn), ids, sampling, 4, generator, session=session)
                    await asyncio.sleep(1.0 if index == 0 else 0.0)  # episode 0's env is slow
                    ids += new + tokenizer.encode(OBSERVATION.format(turn=turn, episode=index),
                                                  add_special_tokens=False)
            scheduler.end_session(session)
            finished[index] = loop.time() - started

        async def all_episodes():
            await asyncio.gather(*(episode(i) for i in range(4)))

        asyncio.run(all_episodes())
        return finished, scheduler

    continuous, scheduler = run("continuous")
    assert max(continuous[i] for i in (1, 2, 3)) < 1.0 <= continuous[0]  # not held by episode 0's env
    assert scheduler.stats.prefills > 3  # episodes joined a running batch
    lockstep, _ = run("lockstep")
    assert min(lockstep[i] for i in (1, 2, 3)) >= 2.0  # each turn waited for episode 0
