"""`kv_layout: slots`: one preallocated KV cache, a slot per episode, every forward over all slots.

What the slots layout samples must be what a scheduler that prefills every turn's whole prompt
samples (tokens equal, log-probs within float noise), greedy and with fixed seeds, in lockstep and
continuous batching, through a turn whose prompt re-renders earlier text, with fewer slots than
episodes (evictions), with eager attention (an additive mask) as well as sdpa, and with the decode
step compiled (torch.compile; CUDA graphs on a GPU, inductor's kernels on this CPU). Each later
turn prefills only what the slot does not hold: the reuse counters equal the sessions layout's.
Episodes are played by test_kv_cache.py's `play`. The real model's check runs on a GPU
(scripts/gpu/rollout.sh, benchmarks/gpu_rollout.py): on this CPU it costs half a minute.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_torch.generation import Sampling
from beyondagent_plugin_torch.slots import SlotCache, SlotScheduler, make_scheduler
from test_kv_cache import FIRST, assert_same, play, reusable_tokens, scheduler_for

from beyondagent_core.errors import SpecError


def slots_for(policy, **options) -> SlotScheduler:
    model, tokenizer = policy
    options.setdefault("capacity", 256)
    options.setdefault("max_batch_size", 4)
    return SlotScheduler(model, eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id, **options)


@pytest.mark.parametrize(("policy", "batching", "temperature", "turns"),
                         [("tiny", "lockstep", 0.0, 3), ("tiny", "continuous", 1.0, 3)],
                         indirect=["policy"])
def test_slots_generate_what_a_full_prefill_generates(policy, batching, temperature, turns) -> None:
    _, tokenizer = policy
    sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=6)
    slots, uncached = slots_for(policy, batching=batching), scheduler_for(policy, kv_cache_tokens=0)
    reused = play(slots, tokenizer, FIRST, sampling, turns=turns)
    assert_same(reused, play(uncached, tokenizer, FIRST, sampling, turns=turns))
    # every later turn fed only what its slot did not hold: the model's last token and the increment
    assert slots.kv.stats.reused_tokens == reusable_tokens(reused) > 0
    assert slots.kv.stats.prefill_tokens + slots.kv.stats.reused_tokens == uncached.kv.stats.prefill_tokens
    assert slots.kv.stats.rerenders == 0 and slots.kv.stats.evictions == 0
    assert slots.stats.generated_tokens == sum(len(ids) for episode in reused for ids, *_ in episode)


def test_a_rerendered_prompt_moves_the_slot_back_to_where_it_diverges(policy) -> None:
    _, tokenizer = policy
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    slots, uncached = slots_for(policy), scheduler_for(policy, kv_cache_tokens=0)
    reused = play(slots, tokenizer, FIRST, sampling, turns=3, rerender_at=2)
    assert_same(reused, play(uncached, tokenizer, FIRST, sampling, turns=3, rerender_at=2))
    assert slots.kv.stats.rerenders == len(FIRST)
    # turn 2 reused only the two tokens before the rewritten one
    assert slots.kv.stats.reused_tokens == reusable_tokens([episode[:2] for episode in reused]) + 2 * len(FIRST)


def test_more_episodes_than_slots_evict_idle_sessions_and_sample_the_same(policy) -> None:
    """Two slots, three episodes in flight: a turn of the third takes the slot of the least recently
    used idle episode, whose next turn prefills in full."""
    _, tokenizer = policy
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=5)
    slots, uncached = slots_for(policy, max_batch_size=2), scheduler_for(policy, kv_cache_tokens=0)
    reused = play(slots, tokenizer, FIRST, sampling, turns=3)
    assert_same(reused, play(uncached, tokenizer, FIRST, sampling, turns=3))
    assert slots.kv.stats.evictions > 0
    assert 0 < slots.kv.stats.reused_tokens < reusable_tokens(reused)
    assert slots.kv.stats.prefill_tokens + slots.kv.stats.reused_tokens == uncached.kv.stats.prefill_tokens


def test_eager_attention_takes_the_mask_as_additive_scores() -> None:
    from beyondagent_plugin_torch.models import load_policy

    eager = load_policy("tiny", dtype="float32", attention="eager")
    assert eager[0].config._attn_implementation == "eager"
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    slots = slots_for(eager)
    assert slots._additive_mask
    assert_same(play(slots, eager[1], FIRST, sampling, turns=2),
                play(scheduler_for(eager, kv_cache_tokens=0), eager[1], FIRST, sampling, turns=2))


def test_the_compiled_decode_step_samples_what_the_eager_one_samples(policy) -> None:
    """torch.compile of the decode step at fixed shapes: compiled once (the second rollout reuses it),
    the same tokens and log-probs as the eager path."""
    import torch._dynamo

    _, tokenizer = policy
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=6)
    compiled = slots_for(policy, compile_decode=True, capacity=128, max_batch_size=3)
    torch._dynamo.reset()
    first = play(compiled, tokenizer, FIRST, sampling, turns=2)
    counters = dict(torch._dynamo.utils.counters["stats"])
    second = play(compiled, tokenizer, FIRST, sampling, turns=2)
    assert dict(torch._dynamo.utils.counters["stats"]) == counters  # nothing compiled again
    eager = play(slots_for(policy, capacity=128, max_batch_size=3), tokenizer, FIRST, sampling, turns=2)
    assert_same(first, eager)
    assert_same(second, eager)


def test_a_prompt_longer_than_a_slot_fails_its_episode_only(policy) -> None:
    import asyncio

    import torch

    model, tokenizer = policy
    slots = slots_for(policy, capacity=16)
    sampling = Sampling(temperature=0.0, top_p=1.0, max_tokens=4)

    async def both():
        with slots.episode(), slots.episode():
            return await asyncio.gather(
                slots.generate((0, 0), [5] * 20, sampling, 4, torch.Generator().manual_seed(0)),
                slots.generate((1, 0), [5] * 8, sampling, 4, torch.Generator().manual_seed(1)),
                return_exceptions=True)

    too_long, fine = asyncio.run(both())
    assert isinstance(too_long, ValueError) and "do not fit a slot of 16 tokens" in str(too_long)
    assert len(fine[0]) == 4
    assert len(slots.kv) == 0  # a turn without a session frees its slot


def test_a_failed_pass_tells_its_episodes_and_frees_their_slots(policy) -> None:
    """A prompt id past the vocabulary fails the model's embedding in the prefill: every episode of
    that pass gets the error, and the slots they took serve the next turns."""
    import asyncio

    import torch

    model, tokenizer = policy
    slots = slots_for(policy, max_batch_size=2)
    sampling = Sampling(temperature=0.0, top_p=1.0, max_tokens=3)

    async def turn(ids, order):
        with slots.episode():
            return await slots.generate((order, 0), ids, sampling, 3, torch.Generator().manual_seed(order),
                                        session=("episode", order))

    async def failing_pass():
        return await asyncio.gather(turn([5, 6, 7], 0), turn([5, model.config.vocab_size + 10], 1),
                                    return_exceptions=True)

    results = asyncio.run(failing_pass())
    assert all(isinstance(result, IndexError) for result in results)
    assert not any(slot.busy for slot in slots.kv.slots) and len(slots.kv) == 0
    again, _ = asyncio.run(turn([5, 6, 7], 0))
    assert len(again) == 3


def test_the_cache_is_allocated_once_for_every_slot(policy) -> None:
    model, _ = policy
    slots = slots_for(policy, capacity=64, max_batch_size=3)
    cache = slots.cache()
    config = model.config
    assert isinstance(cache, SlotCache) and slots.cache() is cache
    assert len(cache.keys) == config.num_hidden_layers
    assert tuple(cache.keys[0].shape) == (3, config.num_key_value_heads, 65, config.hidden_size //
                                          config.num_attention_heads)  # 64 tokens and the scratch column


def test_a_sliding_window_model_is_refused_naming_the_key(policy) -> None:
    import copy

    model, tokenizer = policy
    windowed = copy.copy(model)
    windowed.config = copy.copy(model.config)
    windowed.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    with pytest.raises(SpecError, match="full attention only") as raised:
        make_scheduler(windowed, kv_layout="slots", compile_decode=False, max_episode_tokens=64, where="spec.yaml",
                       eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)
    assert raised.value.where == "spec.yaml, key backend.kv_layout"
