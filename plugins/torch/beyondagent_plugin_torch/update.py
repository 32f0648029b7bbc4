"""The GRPO policy update: episodes in, one or more optimizer steps out.

Reads top to bottom as in verl: pad the episodes into a batch, recompute the old log-probs
(and the reference's when KL is on) without gradients, then for each PPO epoch and each
mini-batch accumulate the loss over micro-batches and take one clipped optimizer step. The
math (advantages, clipped loss, KL, aggregation) lives in `grpo.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.rollout import Episode


@attrs.define
class TrainBatch:
    """Right-padded sequences; `loss_mask[:, t]` says whether token t+1 was model-generated."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    advantages: torch.Tensor

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, index: torch.Tensor) -> TrainBatch:
        """The rows in `index`, trimmed to their longest sequence."""
        width = int(self.attention_mask[index].sum(-1).max())
        return TrainBatch(self.input_ids[index, :width], self.attention_mask[index, :width],
                          self.loss_mask[index, : width - 1], self.rollout_logprobs[index, : width - 1],
                          self.advantages[index])


def make_batch(episodes: Sequence[Episode], advantages: torch.Tensor, *, pad_token_id: int,
               device: torch.device) -> TrainBatch:
    width = max(len(episode.sequence) for episode in episodes)
    size = len(episodes)
    input_ids = torch.full((size, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((size, width), dtype=torch.long)
    loss_mask = torch.zeros((size, width - 1), dtype=torch.float32)
    logprobs = torch.zeros((size, width - 1), dtype=torch.float32)
    for row, episode in enumerate(episodes):
        sequence, n = episode.sequence, len(episode.sequence)
        input_ids[row, :n] = torch.tensor(sequence.input_ids)
        attention[row, :n] = 1
        loss_mask[row, : n - 1] = torch.tensor(sequence.loss_mask[1:], dtype=torch.float32)
        logprobs[row, : n - 1] = torch.tensor(sequence.logprobs[1:], dtype=torch.float32)
    return TrainBatch(input_ids.to(device), attention.to(device), loss_mask.to(device),
                      logprobs.to(device), advantages.to(device, torch.float32))


def forward_logprobs(model: Any, batch: TrainBatch, temperature: float, *, with_entropy: bool = False,
                     entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of each next token (and the entropy of its distribution) under `model`."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1, :].float()
    logprobs = grpo.log_probs_from_logits(logits, batch.input_ids[:, 1:], temperature=temperature)
    entropy = None
    if with_entropy:
        # Without an entropy bonus the entropy is only a metric: keep it out of the autograd graph.
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = grpo.entropy_from_logits(logits, temperature=temperature)
    return logprobs, entropy


@torch.no_grad()
def logprobs_in_chunks(model: Any, batch: TrainBatch, temperature: float, chunk: int) -> torch.Tensor:
    out = torch.zeros_like(batch.loss_mask)
    for index in torch.arange(batch.size).split(chunk):
        part = batch.rows(index)
        logprobs, _ = forward_logprobs(model, part, temperature)
        out[index, : logprobs.shape[1]] = logprobs
    return out


def grpo_update(model: Any, ref_model: Any | None, optimizer: torch.optim.Optimizer, batch: TrainBatch, *,
                algorithm: Any, config: Any, temperature: float, generator: torch.Generator) -> dict[str, float]:
    """Update the policy on `batch`; returns the actor metrics of this step."""
    micro = config.micro_batch_size
    old_logprobs = logprobs_in_chunks(model, batch, temperature, micro)
    ref_logprobs = logprobs_in_chunks(ref_model, batch, temperature, micro) if ref_model is not None else None
    token_advantages = grpo.token_advantages(batch.advantages, batch.loss_mask)
    params = [p for p in model.parameters() if p.requires_grad]
    mini_size = config.mini_batch_size or batch.size
    shuffle = config.ppo_epochs > 1 or mini_size < batch.size
    # seq-mean-token-sum-norm divides by a length: the whole batch's, the same for every micro-batch.
    horizon = float(batch.loss_mask.shape[1])
    totals = _Totals()
    mismatch = (batch.rollout_logprobs - old_logprobs).abs()
    finite = batch.loss_mask.bool() & torch.isfinite(mismatch)
    totals.logprob_diff = float(mismatch[finite].mean()) if finite.any() else float("nan")

    for _ in range(config.ppo_epochs):
        order = torch.randperm(batch.size, generator=generator) if shuffle else torch.arange(batch.size)
        for mini in order.split(mini_size):
            normalizer = grpo.loss_normalizer(batch.loss_mask[mini], algorithm.loss_agg_mode)
            scale = {"normalizer": normalizer, "loss_scale_factor": horizon}
            optimizer.zero_grad(set_to_none=True)
            for index in mini.split(micro):
                part = batch.rows(index)
                width = part.loss_mask.shape[1]
                logprobs, entropy = forward_logprobs(model, part, temperature, with_entropy=True,
                                                     entropy_grad=bool(algorithm.entropy_coeff))
                policy = grpo.policy_loss(
                    old_logprobs[index, :width], logprobs, token_advantages[index, :width], part.loss_mask,
                    clip_ratio=algorithm.clip_ratio, clip_ratio_c=algorithm.clip_ratio_c,
                    loss_agg_mode=algorithm.loss_agg_mode, **scale)
                loss = policy.loss
                kl = None
                if ref_logprobs is not None and algorithm.kl_coef > 0:
                    kl = grpo.kl_penalty(logprobs, ref_logprobs[index, :width], algorithm.kl_type)
                    loss = loss + algorithm.kl_coef * grpo.aggregate(kl, part.loss_mask, algorithm.loss_agg_mode,
                                                                     **scale)
                if algorithm.entropy_coeff:
                    loss = loss - algorithm.entropy_coeff * grpo.aggregate(
                        entropy, part.loss_mask, algorithm.loss_agg_mode, **scale)
                loss.backward()
                totals.add_micro(part.loss_mask, policy, entropy.detach(), None if kl is None else kl.detach())
            grad_norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            else:
                totals.skipped_steps += 1
            totals.grad_norms.append(float(grad_norm))
    return totals.metrics()


@attrs.define
class _Totals:
    """Token-weighted means of the per-micro-batch statistics."""

    tokens: float = 0.0
    pg_loss: float = 0.0
    clip_fraction: float = 0.0
    dual_clip_fraction: float = 0.0
    entropy: float = 0.0
    kl: float = 0.0
    has_kl: bool = False
    logprob_diff: float = 0.0
    skipped_steps: int = 0
    grad_norms: list[float] = attrs.field(factory=list)

    def add_micro(self, mask: torch.Tensor, policy: Any, entropy: torch.Tensor, kl: torch.Tensor | None) -> None:
        tokens = float(mask.sum())
        if tokens == 0:
            return
        self.tokens += tokens
        self.pg_loss += float(policy.loss.detach())
        self.clip_fraction += float(policy.clip_fraction) * tokens
        self.dual_clip_fraction += float(policy.dual_clip_fraction) * tokens
        self.entropy += float((entropy * mask).sum())
        if kl is not None:
            self.has_kl = True
            self.kl += float((kl * mask).sum())

    def metrics(self) -> dict[str, float]:
        tokens = max(self.tokens, 1.0)
        metrics = {
            "actor/pg_loss": self.pg_loss / max(len(self.grad_norms), 1),
            "actor/clip_fraction": self.clip_fraction / tokens,
            "actor/dual_clip_fraction": self.dual_clip_fraction / tokens,
            "actor/entropy": self.entropy / tokens,
            "actor/grad_norm": sum(self.grad_norms) / max(len(self.grad_norms), 1),
            "actor/skipped_steps": float(self.skipped_steps),
            "rollout/logprob_diff": self.logprob_diff,
        }
        if self.has_kl:
            metrics["actor/kl"] = self.kl / tokens
        return metrics
