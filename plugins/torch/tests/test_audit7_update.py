"""Off-policy rows in the GRPO update (audit 7): only those rows take the recorded log-probs as the old policy.

A stripped experience-guided row was sampled with the experience, so its old log-probs are the rollout's
recorded ones; an ordinary row's old log-probs are the policy's own (one optimizer step: ratio 1). Here the
on-policy rows' recorded log-probs are the policy's and the off-policy rows' are -1.0 (far from it): only the
off-policy rows can clip, and they do; swapping which rows read the recorded log-probs would clip nothing.
"""

from __future__ import annotations

import copy

import attrs
import torch
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.update import forward_logprobs, grpo_update, make_batch
from test_update import episodes_for

from beyondagent_core.spec import AlgorithmSection


def test_only_off_policy_rows_take_the_recorded_log_probs_as_the_old_policy() -> None:
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 8)
    for episode in episodes[::2]:
        episode.off_policy = True
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    rows = batch.off_policy[:, None]
    with torch.no_grad():
        current, _ = forward_logprobs(model, batch, 1.0)
    # on-policy rows recorded what the policy gives (ratio 1 either way); off-policy rows recorded -1.0
    recorded = torch.where(rows, batch.rollout_logprobs, current) * batch.loss_mask
    assert bool((batch.rollout_logprobs[batch.off_policy] == -1.0 * batch.loss_mask[batch.off_policy]).all())

    def clip_fraction(batch) -> float:
        policy = copy.deepcopy(model)
        metrics = grpo_update(policy, None, torch.optim.SGD(policy.parameters(), lr=0.0), batch,
                              algorithm=AlgorithmSection(kl_coef=0.0), config=TorchConfig(micro_batch_size=8),
                              temperature=1.0, generator=torch.Generator().manual_seed(0), off_policy_clip=(0.2, 3.0))
        return metrics["actor/clip_fraction"]

    assert clip_fraction(attrs.evolve(batch, rollout_logprobs=recorded)) > 0
    # the same recorded log-probs, every row on-policy: nothing reads them, nothing clips
    on_policy = attrs.evolve(batch, rollout_logprobs=recorded, off_policy=torch.zeros_like(batch.off_policy))
    assert clip_fraction(on_policy) == 0
