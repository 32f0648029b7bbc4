"""The KL term splits over micro-batches like the policy loss: with a reference that differs from the
policy, an update in micro-batches of 5 rows moves the weights as one of 12 rows does (the KL's
aggregate divides by the mini-batch's count, not by each micro-batch's own)."""

from __future__ import annotations

import copy

import pytest
import torch
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.update import make_batch
from test_update import episodes_for, updated_weights

from beyondagent_core.spec import AlgorithmSection


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_micro_batches_accumulate_the_kl_term_to_the_full_batch_gradient(mode: str) -> None:
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 12)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    reference = copy.deepcopy(model).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a reference a few updates behind the policy: the KL and its gradient are not 0
        for parameter in reference.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    algorithm = AlgorithmSection(loss_agg_mode=mode, kl_coef=0.5, kl_type="low_var_kl")
    whole = updated_weights(model, batch, algorithm=algorithm, config=TorchConfig(micro_batch_size=12), ref=reference)
    split = updated_weights(model, batch, algorithm=algorithm, config=TorchConfig(micro_batch_size=5), ref=reference)
    moved = sum(float((whole[name] - p.detach()).abs().sum()) for name, p in model.named_parameters())
    assert moved > 0
    for name in whole:
        assert torch.allclose(whole[name], split[name], atol=1e-6), name
