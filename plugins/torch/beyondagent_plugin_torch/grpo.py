"""GRPO's math as small pure torch functions: advantages, log-probs, KL penalties, loss aggregation, policy loss.

This mirrors `verl.trainer.ppo.core_algos` (verl 0.9.1) function by function, with the same names for the
KL types and loss aggregation modes, and is tested against it: `tests/test_grpo_parity.py` runs verl in its
own venv on random inputs and compares to 1e-6; `tests/test_grpo.py` checks hand-computed values.

| here                                     | verl 0.9.1                                              |
|------------------------------------------|---------------------------------------------------------|
| `group_advantages`, `token_advantages`   | `core_algos.compute_grpo_outcome_advantage`             |
| `log_probs_from_logits`                  | `verl.utils.torch_functional.logprobs_from_logits`      |
| `entropy_from_logits`                    | `verl.utils.torch_functional.entropy_from_logits`       |
| `kl_penalty`                             | `core_algos.kl_penalty`                                 |
| `aggregate`                              | `core_algos.agg_loss`                                   |
| `policy_loss`                            | `core_algos.compute_policy_loss_vanilla` ("vanilla")    |
| `gspo_policy_loss`                       | `core_algos.compute_policy_loss_gspo` ("gspo")          |
| `overlong_penalty`                       | the `dapo` reward manager's overlong buffer             |
| `truncated_is_weights`                   | `rollout_corr_helper.compute_rollout_correction_weights`|
|                                          | (rollout_is "token", a float rollout_is_threshold: TIS) |

Shapes: B sequences, T response tokens, V vocabulary. Masks are 0/1 (bool, int or float) of shape [B, T].
One deliberate difference: where verl divides by a count of zero (a batch with no response tokens) and gets
NaN, `aggregate` returns 0, so an empty micro-batch cannot poison the weights.

Only torch and the standard library are imported, so the parity script can load this file by path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence

import torch

__all__ = [
    "KL_PENALTIES",
    "KL_TYPES",
    "LOSS_AGGREGATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "PolicyLoss",
    "aggregate",
    "entropy_from_logits",
    "group_advantages",
    "gspo_policy_loss",
    "kl_penalty",
    "log_probs_from_logits",
    "loss_normalizer",
    "overlong_penalty",
    "policy_loss",
    "token_advantages",
    "truncated_is_weights",
]

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------- advantages


@torch.no_grad()
def group_advantages(
    scores: Tensor, group_ids: Sequence[Hashable], *, norm_by_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """One advantage per rollout: its score relative to the other rollouts of the same task.

    A_i = (r_i - mean_g) / (std_g + eps), where g is the group of rollout i and std is the unbiased
    (n - 1) standard deviation; with `norm_by_std=False` (Dr. GRPO) A_i = r_i - mean_g. A group of
    size 1 has no baseline: verl uses mean 0 and std 1 there, so its advantage is its raw score
    (divided by 1 + eps). A group whose scores are all equal gets advantage 0.
    """
    if scores.dim() != 1 or scores.shape[0] != len(group_ids):
        raise ValueError(f"scores must be 1-D with one entry per group id; got shape {tuple(scores.shape)} "
                         f"and {len(group_ids)} group ids")
    if not scores.is_floating_point():
        scores = scores.to(torch.get_default_dtype())
    positions: dict[Hashable, int] = {}
    index = torch.tensor([positions.setdefault(g, len(positions)) for g in group_ids], device=scores.device)
    zeros = scores.new_zeros(len(positions))
    counts = zeros.index_add(0, index, torch.ones_like(scores))
    mean = zeros.index_add(0, index, scores) / counts
    squared_deviations = zeros.index_add(0, index, (scores - mean[index]).square())
    std = (squared_deviations / (counts - 1).clamp(min=1)).sqrt()
    alone = counts == 1
    mean = torch.where(alone, 0.0, mean)
    std = torch.where(alone, 1.0, std)
    advantages = scores - mean[index]
    if norm_by_std:
        advantages = advantages / (std[index] + eps)
    return advantages


def token_advantages(advantages: Tensor, response_mask: Tensor) -> Tensor:
    """Broadcast each sequence's advantage over its response tokens: A[b, t] = A[b] * mask[b, t]."""
    return advantages.unsqueeze(-1) * response_mask


# ------------------------------------------------------------------------------- log-probs and entropy


def _row_for_math(row_logits: Tensor, temperature: float) -> Tensor:
    """One sequence's logits [T, V], upcast from 16-bit floats (logsumexp is inaccurate there) and / temperature."""
    if row_logits.dtype in (torch.float16, torch.bfloat16):
        row_logits = row_logits.float()
    return row_logits if temperature == 1.0 else row_logits / temperature


def _check_temperature(temperature: float) -> None:
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")


def log_probs_from_logits(logits: Tensor, labels: Tensor, temperature: float = 1.0) -> Tensor:
    """Log-probability of each label token: log p(y_t) = z_t[y_t] / tau - logsumexp(z_t / tau).

    `logits` [B, T, V], `labels` [B, T] -> [B, T]. Works one sequence at a time, so its temporaries are the
    size of one sequence's [T, V] logits, never a full [B, T, V] log-softmax (under autograd, a scaled or upcast
    row is kept for the backward pass). 16-bit logits are upcast row by row and give float32 log-probs.
    """
    _check_temperature(temperature)
    rows = []
    for row_logits, row_labels in zip(logits, labels):
        row = _row_for_math(row_logits, temperature)
        label_logits = row.gather(-1, row_labels.unsqueeze(-1)).squeeze(-1)
        rows.append(label_logits - torch.logsumexp(row, dim=-1))
    return torch.stack(rows)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Entropy of each token's distribution: H = logsumexp(z) - sum_v softmax(z)_v * z_v, with z = logits / tau.

    `logits` [B, T, V] -> [B, T], one sequence at a time like `log_probs_from_logits`.
    """
    _check_temperature(temperature)
    rows = []
    for row_logits in logits:
        row = _row_for_math(row_logits, temperature)
        rows.append(torch.logsumexp(row, dim=-1) - (torch.softmax(row, dim=-1) * row).sum(dim=-1))
    return torch.stack(rows)


# ------------------------------------------------------------------------------------------ KL penalties
# Per-token estimators of KL(policy || reference) from sampled tokens (http://joschu.net/blog/kl-approx.html).


def kl_k1(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k1, named "kl": log p - log p_ref. Unbiased, high variance, can be negative."""
    return log_prob - ref_log_prob


def kl_abs(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """Named "abs": |log p - log p_ref|."""
    return (log_prob - ref_log_prob).abs()


def kl_mse(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k2, named "mse": 0.5 * (log p - log p_ref)^2."""
    return 0.5 * (log_prob - ref_log_prob).square()


def kl_low_var(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k3, named "low_var_kl": exp(d) - d - 1 with d = clamp(log p_ref - log p, -20, 20), then clamped to [-10, 10].

    Non-negative and low-variance; the clamps are verl's, for numerical stability (the gradient is zero
    where the estimate exceeds 10).
    """
    log_ratio = (ref_log_prob - log_prob).clamp(min=-20.0, max=20.0)
    return (log_ratio.exp() - log_ratio - 1).clamp(min=-10.0, max=10.0)


KL_PENALTIES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "low_var_kl": kl_low_var,
    "kl": kl_k1,
    "mse": kl_mse,
    "abs": kl_abs,
}
KL_TYPES: tuple[str, ...] = tuple(KL_PENALTIES)


def kl_penalty(log_prob: Tensor, ref_log_prob: Tensor, kind: str) -> Tensor:
    """Per-token KL estimate [B, T] of the kind named as in verl's `kl_penalty` (one of `KL_TYPES`)."""
    if kind not in KL_PENALTIES:
        raise ValueError(f"unknown KL penalty type {kind!r}: use one of {', '.join(KL_TYPES)}")
    return KL_PENALTIES[kind](log_prob, ref_log_prob)


# ----------------------------------------------------------------------------------------- aggregation
# `normalizer` makes gradient accumulation exact: when a mini-batch is split into micro-batches, pass the
# mini-batch's count (valid tokens for token-mean, sequences for the seq-mean modes) to every micro-batch and
# the micro-batch losses sum to the mini-batch loss. verl does the same through `agg_loss(batch_num_tokens=,
# global_batch_size=)`. Without it the count is the batch's own.


def _masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """sum(values * mask); values outside the mask (even NaN) do not count."""
    masked = torch.where(mask.bool(), values * mask, 0.0)
    return masked.sum() if dim is None else masked.sum(dim=dim)


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """sum(values * mask) / (sum(mask) + 1e-8), as verl's `masked_mean` (used for metrics)."""
    return _masked_sum(values, mask) / (mask.sum() + 1e-8)


def _count(own_count: Tensor, normalizer: float | None) -> Tensor | float:
    """The divisor: the caller's mini-batch count, else this batch's own (at least 1, so empty batches give 0)."""
    if normalizer is None:
        return own_count.clamp(min=1)
    if not normalizer > 0:
        raise ValueError(f"normalizer must be a positive count, got {normalizer!r}")
    return normalizer


def token_mean(values: Tensor, mask: Tensor, normalizer: float | None = None) -> Tensor:
    """Mode "token-mean": sum_{b,t} v[b,t] m[b,t] / N, N = number of valid tokens (or `normalizer`)."""
    return _masked_sum(values, mask) / _count(mask.sum(), normalizer)


def _sequences(has_tokens: Tensor, sequence_share: Tensor | None) -> Tensor:
    """How many sequences the rows with tokens are: one each, or each its `sequence_share` of one."""
    return has_tokens.sum() if sequence_share is None else (has_tokens * sequence_share.to(has_tokens.dtype)).sum()


def seq_mean_token_sum(values: Tensor, mask: Tensor, normalizer: float | None = None,
                       sequence_share: Tensor | None = None) -> Tensor:
    """Mode "seq-mean-token-sum": sum_b (sum_t v[b,t] m[b,t]) / S, S = sequences with tokens (or `normalizer`).

    With `sequence_share` (a row's share of its sequence: 1 / the rows one episode became) S counts
    episodes, so an episode split into rows weighs as much as one that was not."""
    has_tokens = (mask.sum(dim=-1) > 0).to(values.dtype)
    return _masked_sum(_masked_sum(values, mask, dim=-1), has_tokens) / _count(_sequences(has_tokens, sequence_share),
                                                                               normalizer)


def seq_mean_token_mean(values: Tensor, mask: Tensor, normalizer: float | None = None,
                        sequence_share: Tensor | None = None, sequence_tokens: Tensor | None = None) -> Tensor:
    """Mode "seq-mean-token-mean": sum_b (sum_t v[b,t] m[b,t] / (n_b + 1e-8)) / S, n_b = valid tokens of sequence b.

    With `sequence_tokens` (per row: the valid tokens of the episode it belongs to, over all its rows)
    n_b is the episode's count, so a split episode's rows together make one episode's token mean."""
    tokens = mask.sum(dim=-1).to(values.dtype)
    has_tokens = (tokens > 0).to(values.dtype)
    divisor = tokens if sequence_tokens is None else sequence_tokens.to(values.dtype)
    per_sequence = _masked_sum(values, mask, dim=-1) / (divisor + 1e-8)
    return _masked_sum(per_sequence, has_tokens) / _count(_sequences(has_tokens, sequence_share), normalizer)


def seq_mean_token_sum_norm(
    values: Tensor, mask: Tensor, normalizer: float | None = None, loss_scale_factor: float | None = None,
    sequence_share: Tensor | None = None,
) -> Tensor:
    """Mode "seq-mean-token-sum-norm" (Dr. GRPO): seq-mean-token-sum / L, L = `loss_scale_factor` or padded T.

    With micro-batches padded to different lengths, pass a constant `loss_scale_factor` (e.g. the maximum
    response length) so every micro-batch divides by the same L.
    """
    horizon = mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
    return seq_mean_token_sum(values, mask, normalizer, sequence_share) / horizon


LOSS_AGGREGATORS: dict[str, Callable[..., Tensor]] = {
    "token-mean": token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}
LOSS_AGG_MODES: tuple[str, ...] = tuple(LOSS_AGGREGATORS)


def _check_agg_mode(mode: str) -> None:
    if mode not in LOSS_AGGREGATORS:
        raise ValueError(f"unknown loss aggregation mode {mode!r}: use one of {', '.join(LOSS_AGG_MODES)}")


def loss_normalizer(mask: Tensor, mode: str, sequence_share: Tensor | None = None) -> float:
    """The `normalizer` for micro-batches of the mini-batch whose mask is `mask`: its valid tokens for token-mean,
    its sequences with at least one valid token for the seq-mean modes (what `aggregate` would count itself;
    with `sequence_share`, each row counts as its share of an episode).

    verl's trainer passes the mini-batch size (`ppo_mini_batch_size * n`) as its sequence count, which also
    counts sequences without response tokens; the two agree whenever every sequence has one.
    """
    _check_agg_mode(mode)
    if mode == "token-mean":
        count = mask.sum()
    else:
        count = _sequences((mask.sum(dim=-1) > 0).to(torch.float32), sequence_share)
    return max(float(count), 1.0)


def aggregate(
    values: Tensor,
    mask: Tensor,
    mode: str,
    *,
    normalizer: float | None = None,
    loss_scale_factor: float | None = None,
    sequence_share: Tensor | None = None,
    sequence_tokens: Tensor | None = None,
) -> Tensor:
    """Reduce per-token values [B, T] to a scalar the way verl's `agg_loss` does (mode one of `LOSS_AGG_MODES`).

    `normalizer`: the mini-batch's count when this is one micro-batch of it (see above). `loss_scale_factor`:
    the constant L of "seq-mean-token-sum-norm" (ignored by the other modes, as in verl).

    Rows that are parts of one episode (a gateway episode split into several samples) count as one
    sequence in the seq-mean modes: `sequence_share` [B] is each row's share of its episode (1 / its
    rows) and `sequence_tokens` [B] its episode's valid tokens over all its rows. "token-mean" needs
    neither: each sampled token is in exactly one row, so an episode weighs its tokens however it split.
    Without them (None) every row is a sequence, as in verl.
    """
    _check_agg_mode(mode)
    if mode == "token-mean":
        return token_mean(values, mask, normalizer)
    if mode == "seq-mean-token-sum":
        return seq_mean_token_sum(values, mask, normalizer, sequence_share)
    if mode == "seq-mean-token-mean":
        return seq_mean_token_mean(values, mask, normalizer, sequence_share, sequence_tokens)
    return seq_mean_token_sum_norm(values, mask, normalizer, loss_scale_factor, sequence_share)


# ----------------------------------------------------------------------------------------- policy loss


@dataclasses.dataclass(frozen=True)
class PolicyLoss:
    """The PPO-clip loss and its metrics (verl's names in brackets); the metrics are detached token means."""

    loss: Tensor  # scalar to backpropagate [actor/pg_loss]
    clip_fraction: Tensor  # share of tokens where the clipped ratio set the loss [actor/pg_clipfrac]
    dual_clip_fraction: Tensor  # share of tokens with A < 0 capped by the dual clip [actor/pg_clipfrac_lower]
    approx_kl: Tensor  # mean of log p_old - log p, KL(old || new) estimate [actor/ppo_kl]


def policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | Tensor | None = None,
    clip_ratio_c: float | Tensor = 3.0,
    loss_agg_mode: str = "token-mean",
    normalizer: float | None = None,
    loss_scale_factor: float | None = None,
    sequence_share: Tensor | None = None,
    sequence_tokens: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> PolicyLoss:
    """PPO's clipped surrogate with dual clip, per token, then aggregated (verl's "vanilla" policy loss).

    r = exp(clamp(log p - log p_old, -20, 20)), eps_low / eps_high default to `clip_ratio`;
    L = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)); where A < 0, L = min(L, -A c) with c = `clip_ratio_c`
    (dual-clip PPO, https://arxiv.org/abs/1912.09729: a negative advantage cannot push by more than c).
    `clip_ratio_high` and `clip_ratio_c` may be tensors broadcasting over [B, T] (per-row clips).
    `is_weights` [B, T] (detached, e.g. `truncated_is_weights`) multiply each token's loss, as verl's
    `rollout_is_weights` do.
    """
    if not bool(torch.all(torch.as_tensor(clip_ratio_c, dtype=torch.float64) > 1.0)):
        raise ValueError(f"clip_ratio_c (the dual-clip bound) must be greater than 1.0, got {clip_ratio_c}")
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high

    log_ratio = (log_prob - old_log_prob).clamp(min=-20.0, max=20.0)
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    if isinstance(high, Tensor):
        bounded = torch.minimum(torch.clamp(ratio, min=1 - low), 1 + high.to(ratio.dtype))
    else:
        bounded = ratio.clamp(1 - low, 1 + high)
    clipped = -advantages * bounded
    clipped_loss = torch.maximum(unclipped, clipped)
    dual_bound = -advantages * clip_ratio_c
    negative = advantages < 0
    per_token = torch.where(negative, torch.minimum(clipped_loss, dual_bound), clipped_loss)
    if is_weights is not None:
        per_token = per_token * is_weights

    with torch.no_grad():
        clip_fraction = _masked_mean((clipped > unclipped).to(per_token.dtype), response_mask)
        dual_clip_fraction = _masked_mean(((clipped_loss > dual_bound) & negative).to(per_token.dtype), response_mask)
        approx_kl = _masked_mean(-log_ratio, response_mask)
    loss = aggregate(per_token, response_mask, loss_agg_mode, normalizer=normalizer,
                     loss_scale_factor=loss_scale_factor, sequence_share=sequence_share,
                     sequence_tokens=sequence_tokens)
    return PolicyLoss(loss=loss, clip_fraction=clip_fraction, dual_clip_fraction=dual_clip_fraction,
                      approx_kl=approx_kl)


def gspo_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | Tensor | None = None,
    loss_agg_mode: str = "token-mean",
    normalizer: float | None = None,
    loss_scale_factor: float | None = None,
    sequence_share: Tensor | None = None,
    sequence_tokens: Tensor | None = None,
    is_weights: Tensor | None = None,
) -> PolicyLoss:
    """GSPO (https://arxiv.org/abs/2507.18071): PPO's clip on one importance ratio per sequence (verl's "gspo").

    s_b = exp(mean_t (log p - log p_old)) over row b's masked tokens (the geometric mean of its token ratios);
    token t carries s_b's value with the gradient of its own log p: log s_bt = sg[log s_b] + log p - sg[log p],
    clamped to <= 10 as verl does. L = max(-A s_bt, -A clip(s_bt, 1 - eps_low, 1 + eps_high)), aggregated like
    `policy_loss`; no dual clip (verl's GSPO has none; `dual_clip_fraction` is 0). Each row is a sequence: a
    gateway episode split into several samples has one ratio per sample (the aggregation still weighs the
    episode once through `sequence_share` / `sequence_tokens`). `is_weights`: as in `policy_loss`.
    """
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    log_ratio = log_prob - old_log_prob
    lengths = response_mask.sum(dim=-1).clamp(min=1)
    sequence_log_ratio = _masked_sum(log_ratio, response_mask, dim=-1) / lengths
    token_log_ratio = (log_prob - log_prob.detach() + sequence_log_ratio.detach().unsqueeze(-1)).clamp(max=10.0)
    ratio = token_log_ratio.exp()
    unclipped = -advantages * ratio
    if isinstance(high, Tensor):
        bounded = torch.minimum(torch.clamp(ratio, min=1 - low), 1 + high.to(ratio.dtype))
    else:
        bounded = ratio.clamp(1 - low, 1 + high)
    clipped = -advantages * bounded
    per_token = torch.maximum(unclipped, clipped)
    if is_weights is not None:
        per_token = per_token * is_weights

    with torch.no_grad():
        clip_fraction = _masked_mean((clipped > unclipped).to(per_token.dtype), response_mask)
        approx_kl = _masked_mean(-log_ratio, response_mask)
    loss = aggregate(per_token, response_mask, loss_agg_mode, normalizer=normalizer,
                     loss_scale_factor=loss_scale_factor, sequence_share=sequence_share,
                     sequence_tokens=sequence_tokens)
    return PolicyLoss(loss=loss, clip_fraction=clip_fraction, dual_clip_fraction=torch.zeros_like(clip_fraction),
                      approx_kl=approx_kl)


# `algorithm.policy_loss` -> the loss function (verl's `actor.policy_loss.loss_mode` of the same name).
# `policy_loss` takes `clip_ratio_c` (its dual clip); `gspo_policy_loss` has none.
POLICY_LOSSES: dict[str, Callable[..., PolicyLoss]] = {"vanilla": policy_loss, "gspo": gspo_policy_loss}


# ---------------------------------------------------------------------- off-policy correction (async rollout)


@torch.no_grad()
def truncated_is_weights(old_log_prob: Tensor, rollout_log_prob: Tensor, response_mask: Tensor, cap: float) -> Tensor:
    """Truncated importance sampling (TIS) weights of the tokens an older policy sampled, [B, T], detached.

    w = min(exp(clamp(log p_old - log p_rollout, -20, 20)), cap) on masked tokens, 0 elsewhere: `log p_old`
    is the policy the update starts from, `log p_rollout` the sampling log-prob the rollout recorded (a
    policy version or more behind with asynchronous rollout). verl's `compute_rollout_correction_weights`
    with rollout_is "token" and a float `rollout_is_threshold` (its safety bound is the same 20).
    """
    if not cap > 0:
        raise ValueError(f"the TIS cap must be positive, got {cap!r}")
    log_ratio = (old_log_prob - rollout_log_prob).clamp(min=-20.0, max=20.0)
    return (log_ratio.exp() * response_mask).clamp(max=cap)


# ------------------------------------------------------------------------------------------- reward shaping


def overlong_penalty(length: float, *, max_len: int, buffer_len: int, penalty_factor: float) -> float:
    """DAPO's soft overlong punishment (https://arxiv.org/abs/2503.14476), as verl's `dapo` reward manager adds it.

    With expected = max_len - buffer_len, a response of `length` tokens gets
    min(0, -(length - expected) / buffer_len * penalty_factor): 0 up to `expected`, falling linearly to
    -penalty_factor at `max_len` (and below it past `max_len`, as in verl).
    """
    if not 0 < buffer_len < max_len:
        raise ValueError(f"overlong shaping needs 0 < buffer_len < max_len, got buffer_len={buffer_len}, "
                         f"max_len={max_len}")
    expected = max_len - buffer_len
    return min(-(length - expected) / buffer_len * penalty_factor, 0.0) + 0.0  # + 0.0: no -0.0
