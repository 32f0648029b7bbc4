"""The skip-flat metrics of the GRPO update (plugins/torch/beyondagent_plugin_torch/update.py):
`actor/update_skipped` with a mini-batch larger than the batch, `actor/flat_samples_skipped` over PPO epochs,
and a step with nothing to learn under several optimizer steps (it crashed recomputing no row's old log-probs)."""

from __future__ import annotations

import torch
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.update import grpo_update, make_batch

from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.spec import AlgorithmSection
from beyondagent_core.types import Task, Trajectory


def episodes_for(tokenizer, count: int) -> list[Episode]:
    template = ChatTemplate(tokenizer)
    generator = torch.Generator().manual_seed(0)
    episodes = []
    for i in range(count):
        sequence = TokenSequence(template)
        sequence.extend([{"role": "user", "content": f"Which way? {i}"}])
        ids = torch.randint(3, len(tokenizer), (2 + i % 3,), generator=generator).tolist()
        sequence.add_generation(ids, [-1.0] * len(ids))
        episodes.append(Episode(group=i // 2, trajectory=Trajectory(task=Task(f"t{i}")), sequence=sequence))
    return episodes


def update(model, batch, config: TorchConfig) -> dict[str, float]:
    return grpo_update(model.train(), None, torch.optim.SGD(model.parameters(), lr=0.1), batch,
                       algorithm=AlgorithmSection(kl_coef=0.0, entropy_coeff=0.0), config=config, temperature=1.0,
                       generator=torch.Generator().manual_seed(0))


def test_a_flat_batch_smaller_than_its_mini_batch_size_skips_the_whole_update() -> None:
    model, tokenizer = load_policy("tiny")
    batch = make_batch(episodes_for(tokenizer, 6), torch.zeros(6), pad_token_id=tokenizer.pad_token_id,
                       device=torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    # 6 rows, mini-batches of 8: one mini-batch (ceil(6 / 8) = 1), with nothing to learn
    metrics = update(model, batch, TorchConfig(micro_batch_size=2, mini_batch_size=8))
    assert metrics["actor/update_skipped"] == 1.0 and metrics["actor/flat_samples_skipped"] == 6.0
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_flat_rows_are_counted_once_whatever_the_ppo_epochs() -> None:
    model, tokenizer = load_policy("tiny")
    advantages = torch.tensor([1.0, 0.0, -1.0, 0.5, 0.0, 2.0, 0.0, -0.5])  # rows 1, 4 and 6 flat
    batch = make_batch(episodes_for(tokenizer, 8), advantages, pad_token_id=tokenizer.pad_token_id,
                       device=torch.device("cpu"))
    metrics = update(model, batch, TorchConfig(micro_batch_size=4, mini_batch_size=4, ppo_epochs=3))
    assert metrics["actor/flat_samples_skipped"] == 3.0 and metrics["actor/update_skipped"] == 0.0



def test_a_step_with_nothing_to_learn_skips_every_mini_batch_over_ppo_epochs() -> None:
    """Several optimizer steps (ppo_epochs 2, mini-batches of 4 of 6 rows) recompute the old log-probs
    of the rows that learn; with none, that is no forward at all (it raised on an empty chunk)."""
    model, tokenizer = load_policy("tiny")
    batch = make_batch(episodes_for(tokenizer, 6), torch.zeros(6), pad_token_id=tokenizer.pad_token_id,
                       device=torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    metrics = update(model, batch, TorchConfig(micro_batch_size=2, mini_batch_size=4, ppo_epochs=2))
    assert metrics["actor/update_skipped"] == 1.0  # every mini-batch of both epochs: the whole update
    assert metrics["actor/flat_samples_skipped"] == 6.0
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
