"""Mixed precision beyond the policy's first `compute_in` (eighth mutation audit).

`compute_in` wraps the model's plain forward: calling it again with another dtype replaces the
dtype (it never nests the earlier autocast wrapper inside the new one, which would keep computing in
the old dtype), and `plain_forward` stays the class's own forward. PPO's value model loaded with
float32 weights and a bf16 compute dtype computes in bf16 (its weights stay float32), and without a
compute dtype computes in float32.
"""

from __future__ import annotations

import torch
from beyondagent_plugin_torch.critic import load_value_model
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.precision import compute_in

CPU = torch.device("cpu")
IDS = torch.tensor([[5, 17, 42, 7, 99]])


def test_a_second_compute_in_switches_the_dtype_instead_of_nesting_the_first() -> None:
    model, _ = load_policy("tiny", dtype=torch.float32, compute_dtype=torch.bfloat16)
    with torch.no_grad():
        assert model(input_ids=IDS).logits.dtype == torch.bfloat16
        compute_in(model, torch.float16)
        assert model.autocast_dtype == torch.float16
        assert model.plain_forward is type(model).forward
        assert model(input_ids=IDS).logits.dtype == torch.float16
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_critic_computes_in_the_compute_dtype_over_float32_weights() -> None:
    mixed = load_value_model("tiny", device=CPU, dtype=torch.float32, compute_dtype=torch.bfloat16,
                             attention="sdpa", seed=0, where="critic.path")
    plain = load_value_model("tiny", device=CPU, dtype=torch.float32, compute_dtype=None,
                             attention="sdpa", seed=0, where="critic.path")
    with torch.no_grad():
        assert mixed(input_ids=IDS).logits.dtype == torch.bfloat16
        assert plain(input_ids=IDS).logits.dtype == torch.float32
    assert {p.dtype for p in mixed.parameters()} == {torch.float32}
    assert getattr(mixed, "autocast_dtype", None) == torch.bfloat16
    assert getattr(plain, "autocast_dtype", None) is None
