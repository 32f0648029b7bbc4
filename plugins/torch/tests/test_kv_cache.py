"""An episode's KV cache kept between turns, shared group prefixes and continuous batching, with
real models: tiny, and for the exactness checks also the real model (tiny_and_real.py).

Reuse must be exact: every turn's token ids equal those of a scheduler that prefills the whole
conversation again (greedy, and sampled with fixed seeds), log-probs equal within float noise,
including a turn whose prompt re-renders earlier text and a budget too small to keep everything.
Prompts are built as the policy builds them (`TokenSequence`: the chat template's first prompt,
the real one's default system prompt included, then the template's increments), so each later
turn must prefill only the model's last token and the new messages.
Continuous batching (episodes join and leave the decode batch between steps) must generate what
lockstep batching generates, and an episode waiting on a slow env must not hold the others.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.kv_cache import SessionCache
from tiny_and_real import both_models

from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence


def scheduler_for(policy, **options) -> ChatScheduler:
    model, tokenizer = policy
    return ChatScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id, **options)


# The first messages of each episode (the first without a system message: the real template adds its own).
FIRST = [[{"role": "user", "content": "Which way?"}],
         [{"role": "system", "content": "You are in a grid of frozen tiles and holes."},
          {"role": "user", "content": "You are at row 0, column 0. Which action do you take?"}],
         [{"role": "user", "content": "12 + 7 ="}]]
OBSERVATION = "You moved. Now at row {turn}, column {episode}."


def play(scheduler, tokenizer, firsts, sampling, *, turns=3, rerender_at=None, start=0):
    """Episodes of `turns` model turns, all in flight, each prompt built by a `TokenSequence`: the
    last prompt, the model's ids, the template's increment for an observation. From turn
    `rerender_at` on, the prompt has an early token rewritten (a template that re-renders).
    Episode i has the seed and observations of index `start + i`. Returns each episode's per-turn
    (ids, logprobs, prompt length); checks every cache is freed."""
    template = ChatTemplate(tokenizer)
    rewritten = tokenizer.encode("Hello", add_special_tokens=False)[0]

    async def episode(index, first):
        messages, sequence, turns_out, session = list(first), TokenSequence(template), [], object()
        generator = torch.Generator().manual_seed(100 + index)
        with scheduler.episode():
            for turn in range(turns):
                ids = sequence.extend(messages)
                if rerender_at is not None and turn >= rerender_at:
                    assert ids[2] != rewritten
                    ids[2] = rewritten
                new, logprobs = await scheduler.generate((index, turn), ids, sampling, sampling.max_tokens,
                                                         generator, session=session)
                sequence.add_generation(new, logprobs)
                turns_out.append((new, logprobs, len(ids)))
                await asyncio.sleep(0.001 * (index % 2))  # envs answer at different speeds
                messages += [{"role": "assistant", "content": tokenizer.decode(new, skip_special_tokens=True)},
                             {"role": "user", "content": OBSERVATION.format(turn=turn, episode=index)}]
        scheduler.end_session(session)
        return turns_out

    async def run():
        return await asyncio.gather(*(episode(start + i, first) for i, first in enumerate(firsts)))

    results = asyncio.run(run())
    assert scheduler.kv.tokens == 0 and len(scheduler.kv) == 0
    return results


def reusable_tokens(results) -> int:
    """What a later turn need not prefill: all the last turn's prompt and its sampled ids but the
    last sampled one (never fed to the model)."""
    return sum(prompt + len(ids) - 1 for episode in results for ids, _, prompt in episode[:-1])


def assert_same(reused, fresh) -> None:
    for episode_reused, episode_fresh in zip(reused, fresh, strict=True):
        for (ids_r, lp_r, *_), (ids_f, lp_f, *_) in zip(episode_reused, episode_fresh, strict=True):
            assert ids_r == ids_f
            assert lp_r == pytest.approx(lp_f, abs=1e-4)


# The real model plays two turns, not three, in one batching mode: it costs ~50 times tiny's per
# token, and the cache's bookkeeping under both modes is tiny's to show.
@pytest.mark.parametrize(("policy", "batching", "temperature", "turns"),
                         [("tiny", "lockstep", 0.0, 3), ("tiny", "lockstep", 1.0, 3), ("tiny", "continuous", 0.0, 3),
                          ("tiny", "continuous", 1.0, 3), ("smollm2", "lockstep", 1.0, 2)],
                         indirect=["policy"])
def test_reused_caches_generate_what_a_full_prefill_generates(policy, temperature, batching, turns) -> None:
    _, tokenizer = policy
    sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=6)
    cached, uncached = scheduler_for(policy, batching=batching), scheduler_for(policy, kv_cache_tokens=0)
    reused = play(cached, tokenizer, FIRST, sampling, turns=turns)
    assert_same(reused, play(uncached, tokenizer, FIRST, sampling, turns=turns))
    assert uncached.kv.stats.reused_tokens == 0
    # Every later turn of each episode fed only the model's last token and the template's increment.
    assert cached.kv.stats.reused_tokens == reusable_tokens(reused) > 0
    assert cached.kv.stats.prefill_tokens + cached.kv.stats.reused_tokens == uncached.kv.stats.prefill_tokens
    assert cached.kv.stats.rerenders == 0 and cached.kv.stats.evictions == 0


@pytest.mark.parametrize(("policy", "turns"), [("tiny", 3), ("smollm2", 2)], indirect=["policy"])
def test_a_rerendered_prompt_uses_the_cache_up_to_where_it_diverges(policy, turns) -> None:
    _, tokenizer = policy
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    cached, uncached = scheduler_for(policy), scheduler_for(policy, kv_cache_tokens=0)
    last = turns - 1
    reused = play(cached, tokenizer, FIRST, sampling, turns=turns, rerender_at=last)
    assert_same(reused, play(uncached, tokenizer, FIRST, sampling, turns=turns, rerender_at=last))
    assert cached.kv.stats.rerenders == len(FIRST)
    # The turns before the last reused the whole cache, the last only the two tokens before the rewritten one.
    assert cached.kv.stats.reused_tokens == reusable_tokens([episode[:last] for episode in reused]) + 2 * len(FIRST)


@pytest.mark.parametrize("batching", ["lockstep", "continuous"])
def test_a_small_budget_evicts_and_stays_exact(policy, batching) -> None:
    _, tokenizer = policy
    template = ChatTemplate(tokenizer)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    budget = max(len(template.prompt_ids(first)) for first in FIRST) + 8  # about one episode's cache
    small = scheduler_for(policy, kv_cache_tokens=budget, batching=batching)
    uncached = scheduler_for(policy, kv_cache_tokens=0)
    assert_same(play(small, tokenizer, FIRST, sampling), play(uncached, tokenizer, FIRST, sampling))
    stats = small.kv.stats
    assert stats.evictions + stats.over_budget > 0
    assert stats.reused_tokens > 0  # what fitted was still used


def test_a_groups_identical_prompts_are_prefilled_once(policy) -> None:
    _, tokenizer = policy
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=8)
    shared = scheduler_for(policy)
    group = play(shared, tokenizer, [FIRST[1]] * 4, sampling, turns=2)
    # each rollout alone, with its seed and observations
    alone = [play(scheduler_for(policy, kv_cache_tokens=0), tokenizer, [FIRST[1]], sampling, turns=2, start=index)[0]
             for index in range(4)]
    assert_same(group, alone)
    assert shared.kv.stats.shared_prefix_tokens == 3 * len(ChatTemplate(tokenizer).prompt_ids(FIRST[1]))
    assert len({tuple(episode[0][0]) for episode in group}) > 1  # different seeds, different rollouts


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
    """Three fast episodes and one whose env step waits until the fast ones are done (or gives up
    after `patience` s): with continuous batching the fast ones finish all their turns while the
    slow one waits; in lockstep each turn waits for the slow env, so they cannot finish before it
    gives up. No wall-clock bound on the fast ones: the test holds on a loaded machine."""
    _, tokenizer = policy
    template = ChatTemplate(tokenizer)
    prompt = template.prompt_ids(FIRST[0])
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=4)

    def run(batching, patience):
        scheduler = scheduler_for(policy, batching=batching)
        slow_waits = []  # per slow env step: were the fast episodes all done when it stopped waiting

        async def episode(index, fast_done, fast_left):
            ids, session = list(prompt), object()
            generator = torch.Generator().manual_seed(index)
            with scheduler.episode():
                for turn in range(3):
                    new, _ = await scheduler.generate((index, turn), ids, sampling, 4, generator, session=session)
                    if index == 0:  # episode 0's env is slow
                        try:
                            await asyncio.wait_for(fast_done.wait(), timeout=patience)
                        except TimeoutError:
                            pass
                        slow_waits.append(fast_done.is_set())
                    observation = {"role": "user", "content": OBSERVATION.format(turn=turn, episode=index)}
                    ids += new + template.increment_ids(new, [observation])
            scheduler.end_session(session)
            if index != 0:
                fast_left.discard(index)
                if not fast_left:
                    fast_done.set()

        async def all_episodes():
            fast_done, fast_left = asyncio.Event(), {1, 2, 3}
            await asyncio.gather(*(episode(i, fast_done, fast_left) for i in range(4)))

        asyncio.run(all_episodes())
        return slow_waits, scheduler

    continuous, scheduler = run("continuous", patience=120.0)  # gives up only if the fast ones are held
    assert continuous[0] is True  # the fast episodes finished while the slow env's first step waited
    assert scheduler.stats.prefills > 3  # episodes joined a running batch
    lockstep, _ = run("lockstep", patience=0.5)
    assert lockstep[0] is False  # in lockstep the fast episodes' next turn waited for the slow env
