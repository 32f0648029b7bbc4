"""Our policy loss in verl: PPO's clipped objective, with its own clip on experience-guided samples.

A guided episode trained without its lessons (`experience.training: strip`, or `hybrid` and it
succeeded) is off-policy: its tokens were sampled by the policy that saw the lessons. The trainer
(`sync_trainer.py`) gives such a sample its sampling log-probs as the old policy's and marks it in
the transfer-queue field `beyondagent_off_policy`; this loss clips its ratio above at
1 + `experience.off_clip_high` and dual-clips it at `experience.dual_clip` (the torch backend's
rule). Every other sample gets verl's vanilla PPO loss: the same formula and metrics, with
verl's clip_ratio_low/high/c (tested equal to `compute_policy_loss_vanilla`).

verl's policy-loss functions see padded tensors only, not a sample's other fields, so the flags
reach this one in two steps, each through a public verl hook: `OffPolicyLoss` is the actor
workers' loss function (the trainer sets it with the workers' `set_loss_fn`); it holds the
micro-batch's flags while verl's own `ppo_loss` runs (entropy bonus, KL loss, aggregation and
metrics unchanged), which calls the policy loss registered below under `loss_mode`
`beyondagent_off_policy` (the mapping sets it).
"""

from __future__ import annotations

from typing import Any

import torch
import verl.utils.torch_functional as verl_F
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss
from verl.workers.utils.losses import ppo_loss

from beyondagent_plugin_verl.mapping import OFF_POLICY_LOSS

OFF_POLICY_FIELD = "beyondagent_off_policy"  # per sample: 1 where trained off-policy (the trainer writes it)

# the micro-batch `OffPolicyLoss` is computing the loss of (verl calls the policy loss inside ppo_loss)
_current: dict[str, Any] = {}


class OffPolicyLoss:
    """The actor workers' loss function: verl's `ppo_loss`, told which rows are off-policy."""

    def __init__(self, config: Any, *, off_clip_high: float, dual_clip: float):
        self.config = config  # verl's ActorConfig (the worker's own loss function holds the same)
        self.off_clip_high, self.dual_clip = float(off_clip_high), float(dual_clip)

    def __call__(self, model_output: Any, data: Any, dp_group: Any = None) -> Any:
        rows = data[OFF_POLICY_FIELD] if OFF_POLICY_FIELD in data.keys() else None
        _current.update(rows=rows, off_clip_high=self.off_clip_high, dual_clip=self.dual_clip)
        try:
            return ppo_loss(self.config, model_output, data, dp_group)
        finally:
            _current.clear()


@register_policy_loss(OFF_POLICY_LOSS)
def off_policy_clipped_loss(old_log_prob: torch.Tensor, log_prob: torch.Tensor, advantages: torch.Tensor,
                            response_mask: torch.Tensor, loss_agg_mode: str = "token-mean", config: Any = None,
                            rollout_is_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's vanilla PPO loss with per-row clip bounds: off-policy rows get their own upper and dual clip."""
    clip = config.clip_ratio
    low = config.clip_ratio_low if config.clip_ratio_low is not None else clip
    high = config.clip_ratio_high if config.clip_ratio_high is not None else clip
    dual = config.get("clip_ratio_c", 3.0)
    rows = torch.zeros(log_prob.shape[0], 1, dtype=torch.bool, device=log_prob.device)
    if _current.get("rows") is not None:
        rows = _current["rows"].to(device=log_prob.device).reshape(-1, 1).bool()
    high = torch.where(rows, _current.get("off_clip_high", high), high).to(log_prob.dtype)
    dual = torch.where(rows, _current.get("dual_clip", dual), dual).to(log_prob.dtype)

    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.minimum(torch.clamp(ratio, min=1 - low), 1 + high)
    upper = torch.maximum(unclipped, clipped)
    dual_bound = -advantages * dual
    losses = torch.where(advantages < 0, torch.minimum(dual_bound, upper), upper)
    if rollout_is_weights is not None:
        losses = losses * rollout_is_weights
    loss = agg_loss(loss_mat=losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **config.global_batch_info)
    off_tokens = (rows.expand_as(response_mask) & response_mask.bool()).float()
    metrics = {
        "actor/pg_clipfrac": verl_F.masked_mean(torch.gt(clipped, unclipped).float(), response_mask).detach().item(),
        "actor/ppo_kl": verl_F.masked_mean(-log_ratio, response_mask).detach().item(),
        "actor/pg_clipfrac_lower": verl_F.masked_mean(torch.gt(upper, dual_bound) * (advantages < 0).float(),
                                                      response_mask).detach().item(),
        "actor/off_policy_token_fraction": verl_F.masked_mean(off_tokens, response_mask).detach().item(),
    }
    return loss, metrics
