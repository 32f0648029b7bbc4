"""The SFT warm-up's end of a trained turn (audit 7): the template's end-of-turn token when the model stops on it.

`end_of_turn_id(template, stop_ids, eos)` is the token a sampled turn ends with: the first token of the
template's turn suffix (`<|im_end|>`, id 2 for tiny's and the real model's template) when it is one of the
stop tokens, else the tokenizer's eos. Both models' eos is that same id 2, so the cases here give another eos
(id 0, `<|endoftext|>`) to tell the two apart.

And `sft_update`'s loss metrics: `sft/loss_first_epoch` is the first pass's mean NLL, `sft/loss` the last's.
With one optimizer step per epoch (the whole data in one batch), the first pass's mean NLL is the starting
model's and the second pass's the model's after one step: both recomputed here with `mean_nll`.
"""

from __future__ import annotations

import copy

import pytest
import torch
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.sft import SftExample, conversation_sequence, end_of_turn_id, mean_nll, sft_update

from beyondagent_core.runtime.tokens import ChatTemplate


def test_the_end_of_turn_token_wins_over_eos_when_it_stops_a_turn(tokenizer) -> None:
    template = ChatTemplate(tokenizer)
    im_end, endoftext = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert template.turn_suffix_ids[0] == im_end == 2 and endoftext == 0
    assert end_of_turn_id(template, [endoftext, im_end], endoftext) == 2
    assert end_of_turn_id(template, [im_end], None) == 2
    # not a stop token: the turn ends on eos (or on nothing)
    assert end_of_turn_id(template, [endoftext], endoftext) == 0
    assert end_of_turn_id(template, [], None) is None


def test_the_first_and_last_epochs_loss_are_those_epochs_mean_nll() -> None:
    model, tokenizer = load_policy("tiny")
    template = ChatTemplate(tokenizer)
    examples = [SftExample(conversation_sequence([{"role": "user", "content": f"Which way? ({i})"},
                                                  {"role": "assistant", "content": word}], template, 2, where="x"), "x")
                for i, word in enumerate(["left", "up", "down"])]
    cpu, pad = torch.device("cpu"), tokenizer.pad_token_id

    def warmed(epochs: int) -> tuple[dict[str, float], float]:
        policy = copy.deepcopy(model)
        metrics = sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.5), examples, epochs=epochs,
                             batch_size=3, micro_batch_size=3, grad_clip=1e9, pad_token_id=pad, device=cpu,
                             generator=torch.Generator().manual_seed(0))
        return metrics, mean_nll(policy, examples, pad_token_id=pad, device=cpu)

    start = mean_nll(model, examples, pad_token_id=pad, device=cpu)
    one, after_one_step = warmed(1)
    assert one["sft/loss_first_epoch"] == pytest.approx(start, rel=1e-5)
    assert one["sft/loss"] == pytest.approx(start, rel=1e-5)
    two, _ = warmed(2)
    assert after_one_step < start
    assert two["sft/loss_first_epoch"] == pytest.approx(start, rel=1e-5)
    assert two["sft/loss"] == pytest.approx(after_one_step, rel=1e-5)
    assert (two["sft/steps"], two["sft/epochs"]) == (2.0, 2.0)


def test_each_epoch_visits_the_examples_in_the_generators_shuffled_order() -> None:
    """One example a step: the model sees them in the order of `randperm` drawn from the step generator,
    a new permutation each epoch (examples of different lengths tell which one a forward pass got)."""
    model, tokenizer = load_policy("tiny")
    template = ChatTemplate(tokenizer)
    answers = ["left", "left up", "left up down", "left up down right", "up up up up up", "down " * 7]
    examples = [SftExample(conversation_sequence([{"role": "user", "content": "Which way?"},
                                                  {"role": "assistant", "content": answer.strip()}],
                                                 template, 2, where="x"), "x") for answer in answers]
    lengths = [len(example.sequence.input_ids) for example in examples]
    assert len(set(lengths)) == len(examples)
    seen: list[int] = []
    policy = copy.deepcopy(model)
    policy.register_forward_pre_hook(lambda module, args, kwargs: seen.append(int(kwargs["attention_mask"].sum())),
                                     with_kwargs=True)
    sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.0), examples, epochs=2, batch_size=1,
               micro_batch_size=1, grad_clip=1.0, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"),
               generator=torch.Generator().manual_seed(0))
    draws = torch.Generator().manual_seed(0)
    orders = [torch.randperm(len(examples), generator=draws).tolist() for _ in range(2)]
    assert orders[0] != list(range(len(examples))) and orders[0] != orders[1]
    assert seen == [lengths[index] for order in orders for index in order]
