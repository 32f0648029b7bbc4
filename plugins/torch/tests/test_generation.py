"""The ChatScheduler with real models: batching must not change what is generated.

Prompts of different lengths are left-padded into one batch; a row's tokens and log-probs
must be those it gets alone, and the log-probs must be what a plain forward pass computes.
The tiny model runs every test; the real one (tiny_and_real.py: its pad token is its eos, its
template adds a default system prompt, 49,152 tokens) the ones its differences can break.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling, nucleus, sample_next
from beyondagent_plugin_torch.trainer import stop_token_ids
from tiny_and_real import both_models

from beyondagent_core.runtime.tokens import ChatTemplate


def stop_ids(policy) -> list[int]:
    """Where the trainer's scheduler ends a turn: eos and the template's end-of-turn token."""
    model, tokenizer = policy
    return stop_token_ids(model, tokenizer, ChatTemplate(tokenizer))


def scheduler_for(policy) -> ChatScheduler:
    model, tokenizer = policy
    return ChatScheduler(model, eos_token_ids=stop_ids(policy), pad_token_id=tokenizer.pad_token_id)


# Rendered by the chat template; the real model answers the last in a few tokens (greedy: "No.").
PROMPTS = [[{"role": "user", "content": "Which way?"}],
           [{"role": "system", "content": "You are in a grid of frozen tiles and holes."},
            {"role": "user", "content": "You are at row 0, column 0. Which action do you take?"}],
           [{"role": "user", "content": "12 + 7 ="}],
           [{"role": "user", "content": "Reply with one word: yes or no. Is ice cold?"}]]


def prompt_ids(tokenizer, prompts=PROMPTS) -> list[list[int]]:
    template = ChatTemplate(tokenizer)
    return [template.prompt_ids(messages) for messages in prompts]


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


# The real model greedy: test_a_row_ending_on_eos_that_is_also_pad_leaves_the_batch.
@pytest.mark.parametrize(("policy", "temperature"), [("tiny", 0.0), ("tiny", 1.0), ("smollm2", 1.0)],
                         indirect=["policy"])
def test_a_batch_generates_what_each_prompt_generates_alone(policy, temperature) -> None:
    _, tokenizer = policy
    prompts = prompt_ids(tokenizer)
    sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=6)
    seeds = [11, 22, 33, 44]
    batched_scheduler, alone_scheduler = scheduler_for(policy), scheduler_for(policy)
    batched = generate_all(batched_scheduler, prompts, sampling, seeds, together=True)
    alone = generate_all(alone_scheduler, prompts, sampling, seeds, together=False)
    assert batched_scheduler.stats.batches == 1 and alone_scheduler.stats.batches == len(prompts)
    for (ids_b, lp_b), (ids_a, lp_a) in zip(batched, alone):
        assert ids_b == ids_a
        assert lp_b == pytest.approx(lp_a, abs=1e-4)


@both_models
def test_logprobs_are_those_of_a_forward_pass(policy) -> None:
    model, tokenizer = policy
    prompt = prompt_ids(tokenizer)[1]
    [(ids, logprobs)] = generate_all(scheduler_for(policy), [prompt], Sampling(0.7, 1.0, 6), [5], together=True)
    full = torch.tensor([prompt + ids])
    with torch.no_grad():
        logits = model(input_ids=full).logits[0, len(prompt) - 1:-1].float() / 0.7
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)
    assert logprobs == pytest.approx(expected.tolist(), abs=1e-4)


@both_models
def test_generation_stops_at_eos_or_the_token_limit(policy) -> None:
    model, tokenizer = policy
    results = generate_all(scheduler_for(policy), prompt_ids(tokenizer), Sampling(1.0, 1.0, 7), [1, 2, 3, 4],
                           together=True)
    for ids, logprobs in results:
        assert len(ids) == len(logprobs) <= 7
        assert not set(stop_ids(policy)) & set(ids[:-1])
        assert len(ids) == 7 or ids[-1] in stop_ids(policy)


@pytest.mark.parametrize("policy", ["smollm2"], indirect=True)
def test_a_row_ending_on_eos_that_is_also_pad_leaves_the_batch(policy) -> None:
    """The real model's pad token is its eos: the row that answers in a few tokens ends on it,
    before its limit, and the rows still generating (left-padded with that same id) go on as
    they would alone."""
    _, tokenizer = policy
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    sampling = Sampling(temperature=0.0, top_p=1.0, max_tokens=8)
    prompts = prompt_ids(tokenizer, [PROMPTS[3], PROMPTS[1]])
    assert len(prompts[0]) != len(prompts[1])  # one of them is padded
    together = generate_all(scheduler_for(policy), prompts, sampling, [0, 0], together=True)
    alone = generate_all(scheduler_for(policy), prompts, sampling, [0, 0], together=False)
    for (ids_t, lp_t), (ids_a, lp_a) in zip(together, alone, strict=True):
        assert ids_t == ids_a and lp_t == pytest.approx(lp_a, abs=1e-4)
    (short, _), (long, _) = together
    assert short[-1] == tokenizer.eos_token_id and len(short) < 8
    assert tokenizer.decode(short, skip_special_tokens=True).strip(" .").lower() in ("yes", "no")
    assert len(long) == 8 and tokenizer.eos_token_id not in long


def test_concurrent_episodes_share_generation_passes(policy) -> None:
    _, tokenizer = policy
    scheduler = scheduler_for(policy)
    prompt = prompt_ids(tokenizer)[0]

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


def test_sampling_draws_from_the_distribution_and_its_nucleus() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    rows = 20000
    logits = probs.log().expand(rows, 4)
    uniforms = torch.rand(rows, 4, generator=torch.Generator().manual_seed(0))
    chosen, logprobs = sample_next(logits, torch.ones(rows), torch.ones(rows), uniforms)
    frequencies = torch.bincount(chosen, minlength=4).float() / rows
    assert frequencies.tolist() == pytest.approx(probs.tolist(), abs=0.01)
    assert logprobs.tolist() == pytest.approx(probs.log()[chosen].tolist())
    chosen, _ = sample_next(logits, torch.ones(rows), torch.full((rows,), 0.7), uniforms)
    frequencies = torch.bincount(chosen, minlength=4).float() / rows
    assert frequencies.tolist() == pytest.approx([0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0], abs=0.01)
    greedy, _ = sample_next(logits[:3], torch.zeros(3), torch.ones(3), uniforms[:3])
    assert greedy.tolist() == [0, 0, 0]


def test_float_noise_in_the_logits_does_not_change_what_is_sampled() -> None:
    """A real vocabulary's long tail: 49,152 tokens, most of the mass on a few, the rest spread
    thin. Logits 4e-5 apart (what a cached prefill and a fresh one of the real model differ by)
    must sample the same tokens from the same noise; inverting the CDF with one uniform moved
    tail draws, whose tokens are ~1e-7 of probability wide."""
    generator = torch.Generator().manual_seed(0)
    rows, vocab = 400, 49152
    logits = torch.randn(rows, vocab, generator=generator) * 2
    logits[:, :5] += 12  # a few likely tokens, about 15% of the mass in the tail
    noisy = logits + (torch.rand(rows, vocab, generator=generator) - 0.5) * 8e-5
    uniforms = torch.rand(rows, vocab, generator=generator)
    ones = torch.ones(rows)
    chosen, _ = sample_next(logits, ones, ones, uniforms)
    assert (chosen >= 5).sum() > rows / 10  # tail tokens were drawn
    assert torch.equal(sample_next(noisy, ones, ones, uniforms)[0], chosen)


def test_noise_drawn_ahead_in_chunks_samples_what_per_token_noise_samples(policy, monkeypatch) -> None:
    """tiny's 2,048-token vocabulary gets its noise 16 tokens at a time; on CPU a [k, vocab] draw is
    the stream of k [vocab] draws, so the tokens are those of one draw per token (the real model's
    vocabulary gets one per token either way)."""
    import beyondagent_plugin_torch.generation as generation

    _, tokenizer = policy
    prompts = prompt_ids(tokenizer)
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=12)
    chunked = generate_all(scheduler_for(policy), prompts, sampling, [3, 4, 5, 6], together=True)
    monkeypatch.setattr(generation, "_NOISE_CHUNK_ELEMENTS", 1)
    per_token = generate_all(scheduler_for(policy), prompts, sampling, [3, 4, 5, 6], together=True)
    assert chunked == per_token
    monkeypatch.setattr(generation, "_NOISE_CHUNK_ELEMENTS", 5 * 2048)  # chunks of 5: 12 = 5 + 5 + 2
    assert generate_all(scheduler_for(policy), prompts, sampling, [3, 4, 5, 6], together=True) == per_token


def test_greedy_and_sampled_rows_share_a_batch() -> None:
    """A greedy row (temperature 0) takes its argmax beside rows sampled at other temperatures; each
    row's log-prob is its token's under its own temperature (greedy: temperature 1), top-p per row."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=generator) * 3
    uniforms = torch.rand(4, 50, generator=generator)
    temperature, top_p = torch.tensor([0.0, 0.5, 2.0, 1.0]), torch.tensor([1.0, 1.0, 1.0, 0.3])
    chosen, logprobs = sample_next(logits, temperature, top_p, uniforms)
    assert int(chosen[0]) == int(logits[0].argmax())
    scales = torch.tensor([1.0, 0.5, 2.0, 1.0])[:, None]
    expected = torch.log_softmax(logits / scales, -1).gather(-1, chosen[:, None]).squeeze(-1)
    assert logprobs.tolist() == pytest.approx(expected.tolist(), abs=1e-5)
    # Rows 1 and 2 win the exponential race p_i / E_i of their own temperature.
    for row in (1, 2):
        race = torch.log_softmax(logits[row] / scales[row], -1) - torch.log(-torch.log(uniforms[row]))
        assert int(chosen[row]) == int(race.argmax())
    # Row 3 stays inside its 0.3 nucleus whatever the noise.
    nucleus_tokens = set(nucleus(torch.softmax(logits[3:], -1), top_p[3:])[0].nonzero().flatten().tolist())
    for seed in range(20):
        noise = torch.rand(4, 50, generator=torch.Generator().manual_seed(seed))
        assert int(sample_next(logits, temperature, top_p, noise)[0][3]) in nucleus_tokens


def test_temperature_zero_takes_each_steps_argmax_and_top_p_keeps_to_its_nucleus(policy) -> None:
    """In one batch: the greedy row's every token is the argmax of a plain forward pass over what came before;
    the row at top-p 0.5 draws every token from that step's nucleus (the smallest set of tokens with half the
    probability)."""
    model, tokenizer = policy
    prompts = prompt_ids(tokenizer)[:2]
    greedy, nucleus_row = Sampling(0.0, 1.0, 12), Sampling(1.0, 0.5, 12)
    scheduler = scheduler_for(policy)

    async def run():
        async def one(i, sampling):
            with scheduler.episode():
                return await scheduler.generate((i, 0), prompts[i], sampling, 12, torch.Generator().manual_seed(i))
        return await asyncio.gather(one(0, greedy), one(1, nucleus_row))

    (greedy_ids, _), (nucleus_ids, _) = asyncio.run(run())
    for prompt, ids, check in ((prompts[0], greedy_ids, "argmax"), (prompts[1], nucleus_ids, "nucleus")):
        sequence = list(prompt)
        with torch.no_grad():
            for token in ids:
                logits = model(input_ids=torch.tensor([sequence])).logits[0, -1].float()
                if check == "argmax":
                    assert token == int(logits.argmax())
                else:
                    kept = nucleus(torch.softmax(logits, -1)[None], torch.tensor([0.5]))[0]
                    assert kept[token] > 0, f"token {token} is outside the 0.5 nucleus"
                sequence.append(token)


@pytest.mark.parametrize(("policy", "expected"), [("tiny", ["<|im_end|>"]), ("smollm2", ["<|im_end|>"]),
                                                  ("tiny_eos", ["<|endoftext|>", "<|im_end|>"])],
                         indirect=["policy"])
def test_a_turn_stops_at_eos_and_at_the_templates_end_of_turn_token(policy, expected) -> None:
    """tiny_eos's eos is `<|endoftext|>` and its `<|im_end|>` an added special token that no named special
    token is (a base checkpoint's setup): the end of turn must still stop a turn, or it would run on to
    its token limit after every reply."""
    _, tokenizer = policy
    assert stop_ids(policy) == tokenizer.convert_tokens_to_ids(expected)
