"""The critic's update and value model (critic.py), piece by piece (issue 37's fifth mutation audit):
the value loss is the mean over mini-batches, each normalized over its whole mini-batch however it
splits into micro-batches; backend.grad_clip and weight_decay reach the critic's optimizer (rebuilt
for the model a checkpoint loads); a non-finite gradient skips the step; mini-batches are drawn
from the step's generator; a value sits on the column of the token it precedes; no dropout while
training; the value head is drawn from the run's seed."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.critic import Critic, load_value_model
from beyondagent_plugin_torch.update import TrainBatch, make_batch

from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.spec import AlgorithmSection, CriticSection

CPU = torch.device("cpu")


def value_model(seed: int = 0, path: str = "tiny") -> torch.nn.Module:
    return load_value_model(path, device=CPU, dtype=torch.float32, compute_dtype=None, attention="sdpa", seed=seed,
                            where="critic.path")


def episode(ids: list[int], prompt: int) -> SimpleNamespace:
    mask = [0] * prompt + [1] * (len(ids) - prompt)
    sample = TokenSequence(template=None, input_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids))
    return SimpleNamespace(samples=[sample])


def fixed_batch(critic: Critic, lengths: tuple[int, ...] = (12, 12, 12, 12)) -> TrainBatch:
    """Rows of random tokens, 4 of prompt each, returns 1, -1, 0.5, 0; valued by `critic`."""
    generator = torch.Generator().manual_seed(0)
    episodes = [episode(torch.randint(3, 200, (n,), generator=generator).tolist(), 4) for n in lengths]
    targets = [torch.full((n,), target) for n, target in zip(lengths, (1.0, -1.0, 0.5, 0.0))]
    batch = make_batch(episodes, [0.0] * len(lengths), pad_token_id=0, device=CPU, returns=targets)
    batch.values = critic.values(batch, chunk=3)
    return batch


def update(critic: Critic, batch: TrainBatch, seed: int = 0, **config) -> dict[str, float]:
    return critic.update(batch, algorithm=AlgorithmSection(), config=TorchConfig(**config),
                         generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("mini", "micro"), [(None, 4), (2, 1), (2, 2), (None, 1)])
def test_the_value_loss_is_the_batchs_half_squared_error_however_it_splits(mini: int | None, micro: int) -> None:
    critic = Critic(value_model(), CriticSection(lr=1e-9), weight_decay=0.0)  # the weights barely move
    batch = fixed_batch(critic)
    # every row has 8 model tokens: the mean over mini-batches of their token means is the batch's
    expected = 0.5 * float(((batch.values - batch.returns) ** 2 * batch.loss_mask).sum() / batch.loss_mask.sum())
    got = update(critic, batch, mini_batch_size=mini, micro_batch_size=micro)["critic/vf_loss"]
    assert got == pytest.approx(expected, rel=1e-4)


def test_each_update_starts_from_cleared_gradients_and_clips_them() -> None:
    critic = Critic(value_model(), CriticSection(lr=1e-9), weight_decay=0.0)
    batch = fixed_batch(critic)
    first = update(critic, batch, grad_clip=1e9)["critic/grad_norm"]
    second = update(critic, batch, grad_clip=1e9)["critic/grad_norm"]
    assert second == pytest.approx(first, rel=1e-3)  # not first + second: the last step's gradients are gone
    # backend.grad_clip: the gradients the optimizer stepped with are clipped to it; the metric is before clipping
    norm = update(critic, batch, grad_clip=1e-3)["critic/grad_norm"]
    grads = [p.grad.norm() for p in critic.model.parameters() if p.grad is not None]
    kept = torch.linalg.vector_norm(torch.stack(grads))
    assert float(kept) == pytest.approx(1e-3, rel=1e-3) and norm > 0.01


def test_a_non_finite_gradient_skips_the_critics_step() -> None:
    critic = Critic(value_model(), CriticSection(lr=1e-3), weight_decay=0.1)
    batch = fixed_batch(critic)
    batch.returns[1, 6] = math.nan  # one model token's return
    before = {name: p.detach().clone() for name, p in critic.model.named_parameters()}
    metrics = update(critic, batch)
    assert math.isnan(metrics["critic/grad_norm"])
    assert all(torch.equal(before[name], p) for name, p in critic.model.named_parameters())


def test_mini_batches_are_drawn_from_the_steps_generator() -> None:
    model = value_model()
    section = CriticSection(lr=1e-3)
    batch = fixed_batch(Critic(model, section, weight_decay=0.0))
    weights = []
    for seed in (0, 0, 1):
        critic = Critic(copy.deepcopy(model), section, weight_decay=0.0)
        update(critic, batch, seed=seed, mini_batch_size=2, micro_batch_size=2)
        weights.append(critic.model.score.weight.detach().clone())
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_weight_decay_reaches_the_optimizer_and_a_loaded_critic_gets_one_of_its_own(tmp_path: Path) -> None:
    critic = Critic(value_model(), CriticSection(lr=2e-4), weight_decay=0.25)
    assert [(g["lr"], g["weight_decay"]) for g in critic.optimizer.param_groups] == [(2e-4, 0.25)]
    critic.save(tmp_path)
    critic.load(tmp_path, model_from=lambda directory: value_model(path=str(directory)))
    stepped = {id(p) for group in critic.optimizer.param_groups for p in group["params"]}
    assert stepped == {id(p) for p in critic.model.parameters()}  # the loaded model's, not the one before
    assert critic.optimizer.param_groups[0]["weight_decay"] == 0.25


def test_a_value_sits_on_the_column_of_the_token_after_its_state() -> None:
    critic = Critic(value_model(), CriticSection(), weight_decay=0.0)
    batch = fixed_batch(critic, lengths=(7, 12, 9))
    for row in range(3):
        n = int(batch.attention_mask[row].sum())
        with torch.no_grad():  # the row alone: position t's output values the state before token t+1
            own = critic.model(input_ids=batch.input_ids[row:row + 1, :n], use_cache=False).logits[0, :-1, 0]
        torch.testing.assert_close(batch.values[row, : n - 1], own, rtol=1e-4, atol=1e-5)


def test_the_value_model_trains_without_dropout_and_its_head_comes_from_the_seed() -> None:
    model = value_model(seed=3).train()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    assert torch.equal(model(input_ids=ids).logits, model(input_ids=ids).logits)  # train mode, no dropout
    again, other = value_model(seed=3), value_model(seed=4)
    assert torch.equal(model.score.weight, again.score.weight)
    assert not torch.equal(model.score.weight, other.score.weight)
    torch.testing.assert_close(model.model.embed_tokens.weight, other.model.embed_tokens.weight)  # the policy's body
