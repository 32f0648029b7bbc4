"""`model.gradient_checkpointing` reaches PPO's critic as well as the policy (audit 7).

The trainer switches activation checkpointing on in every model it trains: with the `gae` estimator that is
the policy and the critic's value model, two models, each in checkpointing mode afterwards. A one-step PPO
run of the word game (test_ppo_critic.py's spec) with `enable_gradient_checkpointing` wrapped to note each
model it is called with.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from beyondagent_plugin_torch.models import enable_gradient_checkpointing
from test_ppo_critic import ppo_spec

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


def test_the_policy_and_the_critic_are_both_checkpointed(run_spec, test_envs, tmp_path: Path, monkeypatch) -> None:
    from beyondagent_plugin_torch import trainer

    switched_on = []

    def noting(model, **kwargs):
        enable_gradient_checkpointing(model, **kwargs)
        switched_on.append(model)

    monkeypatch.setattr(trainer, "enable_gradient_checkpointing", noting)
    spec = ppo_spec(tmp_path, total_steps=1, batch_size=2)
    spec["model"]["gradient_checkpointing"] = True
    run_spec(spec)
    assert len(switched_on) == 2 and switched_on[0] is not switched_on[1]
    name = "is_activation_checkpointing" if hasattr(type(switched_on[0]), "is_activation_checkpointing") \
        else "is_gradient_checkpointing"
    assert all(getattr(model, name) for model in switched_on)
    assert type(switched_on[1]).__name__.endswith("ForTokenClassification")  # the critic's value model
