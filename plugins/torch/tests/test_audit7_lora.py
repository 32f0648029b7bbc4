"""LoRA adapters and gradient checkpointing (audit 7): the run's seed draws the adapters; non-reentrant checkpoints.

`with_adapters(..., seed=s)` draws the adapters' random initial weights from `s`: the same seed gives the same
adapters, another seed other ones, and the global generator is left as it was. `enable_gradient_checkpointing`
says it uses transformers' non-reentrant checkpointing: every checkpointed layer's function is
`checkpoint(..., use_reentrant=False)`.
"""

from __future__ import annotations

import copy

import torch
from beyondagent_plugin_torch.lora import with_adapters
from beyondagent_plugin_torch.models import enable_gradient_checkpointing, load_policy

from beyondagent_core.spec import LoraSection


def lora_a(model, seed: int) -> dict[str, torch.Tensor]:
    wrapped = with_adapters(copy.deepcopy(model), LoraSection(rank=4, alpha=8.0), seed=seed)
    return {name: p.detach().clone() for name, p in wrapped.named_parameters() if "lora_A" in name}


def test_the_runs_seed_draws_the_adapters_and_leaves_the_global_generator_alone() -> None:
    model, _ = load_policy("tiny", dtype="float32")
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first, again, other = lora_a(model, 1), lora_a(model, 1), lora_a(model, 2)
    assert torch.equal(torch.get_rng_state(), state)
    assert first and first.keys() == again.keys() == other.keys()
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert all(not torch.equal(first[name], other[name]) for name in first)


def test_gradient_checkpointing_is_the_non_reentrant_kind() -> None:
    model, _ = load_policy("tiny", dtype="float32")
    enable_gradient_checkpointing(model)
    layers = [module for module in model.modules() if getattr(module, "gradient_checkpointing", False)]
    assert layers
    for layer in layers:
        assert layer._gradient_checkpointing_func.keywords == {"use_reentrant": False}
