"""The GRPO policy update: episodes in, one or more optimizer steps out.

Reads top to bottom as in verl: pad the episodes into a batch, recompute the old log-probs
(unless there is a single optimizer step, where they equal the current ones) and the
reference's when KL is on, without gradients; then for each PPO epoch and each mini-batch
accumulate the loss over micro-batches and take one clipped optimizer step. The
math (clipped loss, KL, aggregation) lives in `grpo.py`; the advantages come from the run's
advantage estimator (`backend.advantage`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import torch

from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.rollout import Episode


@attrs.define
class TrainBatch:
    """Right-padded sequences; `loss_mask[:, t]` says whether token t+1 was model-generated, and
    `advantages[:, t]` is that token's advantage (from the run's advantage estimator).

    One row per training sample: an episode whose gateway calls split into several samples has
    several rows. `episode_tokens[b]` (its episode's trained tokens, over all its rows) and
    `episode_share[b]` (1 / its episode's rows) let the seq-mean loss modes weight an episode once
    however many rows it became (`grpo.aggregate`)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    advantages: torch.Tensor
    off_policy: torch.Tensor | None = None  # [B] bool: rows trained on other tokens than they were sampled with
    episode_tokens: torch.Tensor | None = None  # [B]
    episode_share: torch.Tensor | None = None  # [B]
    values: torch.Tensor | None = None  # [B, T]: the critic's, as the step saw them (critic.py)
    returns: torch.Tensor | None = None  # [B, T]: the critic's targets

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def rows(self, index: torch.Tensor) -> TrainBatch:
        """The rows in `index`, trimmed to their longest sequence."""
        width = int(self.attention_mask[index].sum(-1).max())
        return TrainBatch(self.input_ids[index, :width], self.attention_mask[index, :width],
                          self.loss_mask[index, : width - 1], self.rollout_logprobs[index, : width - 1],
                          self.advantages[index, : width - 1],
                          None if self.off_policy is None else self.off_policy[index],
                          None if self.episode_tokens is None else self.episode_tokens[index],
                          None if self.episode_share is None else self.episode_share[index],
                          None if self.values is None else self.values[index, : width - 1],
                          None if self.returns is None else self.returns[index, : width - 1])

    def placed(self, episodes: Sequence[Episode], per_episode: Sequence[Any]) -> torch.Tensor:
        """Per-token values of `episodes` (the ones this batch was made of, in order) in its columns,
        0 where no model token is: how advantages and returns reach the loss (`episode_columns`)."""
        width = int(self.input_ids.shape[1])
        return episode_columns(episodes, per_episode, width).to(self.loss_mask.device) * self.loss_mask

    def weighting(self) -> dict[str, torch.Tensor | None]:
        """The per-row episode weighting `grpo.aggregate` takes."""
        return {"sequence_tokens": self.episode_tokens, "sequence_share": self.episode_share}


def make_batch(episodes: Sequence[Episode], advantages: Sequence[Any], *, pad_token_id: int,
               device: torch.device, returns: Sequence[Any] | None = None) -> TrainBatch:
    """Pad `episodes`' samples, one row each; `advantages[i]` has one value per token of episode i's
    samples laid end to end (`joined_view`; a numpy array, a tensor or a list), or is a number for
    every model token of the episode. `returns` (the critic's targets), when given, likewise."""
    samples = [(index, sample) for index, episode in enumerate(episodes) for sample in samples_of(episode)]
    width = max(len(sample) for _, sample in samples)
    size = len(samples)
    input_ids = torch.full((size, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((size, width), dtype=torch.long)
    loss_mask = torch.zeros((size, width - 1), dtype=torch.float32)
    logprobs = torch.zeros((size, width - 1), dtype=torch.float32)
    for row, (_, sequence) in enumerate(samples):
        n = len(sequence)
        input_ids[row, :n] = torch.tensor(sequence.input_ids)
        attention[row, :n] = 1
        loss_mask[row, : n - 1] = torch.tensor(sequence.loss_mask[1:], dtype=torch.float32)
        logprobs[row, : n - 1] = torch.tensor(sequence.logprobs[1:], dtype=torch.float32)
    owner = torch.tensor([index for index, _ in samples])
    rows_of = torch.zeros(len(episodes)).index_add(0, owner, torch.ones(size))
    tokens_of = torch.zeros(len(episodes)).index_add(0, owner, loss_mask.sum(-1))
    off_policy = torch.tensor([bool(getattr(episodes[index], "off_policy", False)) for index, _ in samples])
    batch = TrainBatch(input_ids.to(device), attention.to(device), loss_mask.to(device), logprobs.to(device),
                       torch.zeros_like(loss_mask, device=device), off_policy.to(device),
                       tokens_of[owner].to(device), (1.0 / rows_of[owner]).to(device))
    batch.advantages = batch.placed(episodes, advantages)
    if returns is not None:
        batch.returns = batch.placed(episodes, returns)
    return batch


def episode_columns(episodes: Sequence[Episode], per_episode: Sequence[Any], width: int) -> torch.Tensor:
    """One value per token of each episode (its samples laid end to end; or a number for all of them)
    in `make_batch`'s columns, [rows, width - 1]: position t predicts token t+1, so token t+1's value
    sits at column t (like the loss mask). `episode_arrays` undoes it."""
    rows = []
    for episode, values in zip(episodes, per_episode, strict=True):
        values = torch.as_tensor(values, dtype=torch.float32)
        offset = 0
        for sample in samples_of(episode):
            n = len(sample)
            rows.append(values[offset + 1:offset + n] if values.dim() else values.expand(n - 1))
            offset += n
    out = torch.zeros((len(rows), width - 1), dtype=torch.float32)
    for row, values in enumerate(rows):
        out[row, : len(values)] = values
    return out


def samples_of(episode: Any) -> list[Any]:
    """An episode's token sequences: its samples (a gateway episode may have several), else its one sequence."""
    samples = getattr(episode, "samples", None)
    return [episode.sequence] if samples is None else samples


def episode_arrays(columns: torch.Tensor, episodes: Sequence[Episode]) -> list[Any]:
    """`episode_columns` undone: a [rows, W-1] tensor of per-column values (column t: token
    t+1 of its row) as one float32 numpy array per episode, its samples laid end to end, 0 on each
    sample's first token (no column holds it)."""
    import numpy as np

    columns = columns.detach().float().cpu().numpy()
    out, row = [], 0
    for episode in episodes:
        samples = samples_of(episode)
        values = np.zeros(sum(len(sample) for sample in samples), dtype=np.float32)
        offset = 0
        for sample in samples:
            values[offset + 1: offset + len(sample)] = columns[row, : len(sample) - 1]
            offset += len(sample)
            row += 1
        out.append(values)
    return out


def forward_logprobs(model: Any, batch: TrainBatch, temperature: float, *, with_entropy: bool = False,
                     entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of each next token (and the entropy of its distribution) under `model`, [rows, width - 1]:
    column j is position j's prediction of token j + 1; 0 where no row of the batch trains.

    Logits only at the positions some row trains on (column j of `loss_mask`): the LM head and the
    log-softmax skip the prompts and the env's observations. A game's seat sequence is mostly the board
    shown between short moves; at SmolLM2's 49k-word vocabulary its full [rows, width, vocab] float32
    logits (and the copies the backward pass keeps) were most of a micro-batch's memory.
    """
    width = batch.input_ids.shape[1]
    positions = batch.loss_mask.bool().any(0).nonzero().squeeze(-1)
    nothing = not len(positions)
    if nothing:  # nothing trains: one position keeps the pass (and its graph) cheap; its values are zeroed below
        positions = torch.tensor([width - 2], device=batch.input_ids.device)
    # No KV cache: nothing decodes after this pass (and gradient checkpointing refuses one).
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False,
                   logits_to_keep=positions).logits.float()
    labels = batch.input_ids[:, positions + 1]
    logprobs = spread(grpo.log_probs_from_logits(logits, labels, temperature=temperature), positions, width - 1)
    entropy = None
    if with_entropy:
        # Without an entropy bonus the entropy is only a metric: keep it out of the autograd graph.
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = spread(grpo.entropy_from_logits(logits, temperature=temperature), positions, width - 1)
    if nothing:
        logprobs, entropy = logprobs * 0, None if entropy is None else entropy * 0
    return logprobs, entropy


def spread(values: torch.Tensor, positions: torch.Tensor, columns: int) -> torch.Tensor:
    """[rows, len(positions)] values placed in `columns` columns at `positions`, zeros elsewhere."""
    out = values.new_zeros((values.shape[0], columns))
    return out.index_copy(1, positions, values)


@torch.no_grad()
def logprobs_in_chunks(model: Any, batch: TrainBatch, temperature: float, chunk: int,
                       rows: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probs of the batch's tokens under `model`, `chunk` rows a forward pass (only the `rows`
    marked true, when given; the others stay 0)."""
    out = torch.zeros_like(batch.loss_mask)
    for index in torch.arange(batch.size)[rows if rows is not None else slice(None)].split(chunk):
        if not len(index):  # no row marked (a step with nothing to learn): `split` still gives one empty chunk
            continue
        part = batch.rows(index)
        logprobs, _ = forward_logprobs(model, part, temperature)
        out[index, : logprobs.shape[1]] = logprobs
    return out


def grpo_update(model: Any, ref_model: Any | None, optimizer: torch.optim.Optimizer, batch: TrainBatch, *,
                algorithm: Any, config: Any, temperature: float, generator: torch.Generator,
                off_policy_clip: tuple[float, float] | None = None, tis_cap: float | None = None,
                device_turn: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
                before_weights_change: Callable[[], Any] | None = None, skip_flat: bool = True) -> dict[str, float]:
    """Update the policy on `batch`; returns the actor metrics of this step.

    Asynchronous rollout (`async_rollout.py`): `tis_cap` weighs each token's loss by its truncated
    importance weight (`grpo.truncated_is_weights`: the policy the update starts from over the
    sampling policy); every forward and backward runs inside `device_turn()`, and
    `before_weights_change()` is called before each optimizer step (it waits for the rollout that
    must still see the current weights).

    Off-policy rows (`batch.off_policy`: experience-guided episodes trained without the experience)
    take their sampling log-probs as the old policy's, and `off_policy_clip` = (upper clip, dual
    clip) instead of the algorithm's (GSPO has no dual clip: only the upper one applies).

    No work for nothing (`skip_flat`): a row whose advantages are all 0 adds nothing to the policy
    gradient (each token's loss is its advantage times a ratio), so it gets no forward or backward;
    the loss normalizer still counts it, so the gradient is the one the whole batch gives. With a KL
    or entropy term every row trains. A mini-batch with nothing to learn takes no optimizer step
    (metrics `actor/flat_samples_skipped`, `actor/update_skipped`)."""
    micro = config.micro_batch_size
    mini_size = config.mini_batch_size or batch.size
    # With one optimizer step per batch the policy is still the one that sampled: the old log-probs
    # are the current ones, detached (what verl's recomputation gives), so that forward is skipped.
    single_step = config.ppo_epochs == 1 and mini_size >= batch.size
    every_row_trains = (ref_model is not None and algorithm.kl_coef > 0) or bool(algorithm.entropy_coeff)
    learns = (batch.advantages.ne(0) & batch.loss_mask.bool()).any(dim=1).cpu()
    if every_row_trains or not skip_flat:
        learns = torch.ones_like(learns)
    with device_turn():
        old_logprobs = None if single_step else logprobs_in_chunks(model, batch, temperature, micro, rows=learns)
        ref_logprobs = logprobs_in_chunks(ref_model, batch, temperature, micro) if ref_model is not None else None
    params = [p for p in model.parameters() if p.requires_grad]
    shuffle = config.ppo_epochs > 1 or mini_size < batch.size
    # seq-mean-token-sum-norm divides by a length: the whole batch's, the same for every micro-batch.
    horizon = float(batch.loss_mask.shape[1])
    totals = _Totals()
    first_pass = torch.zeros_like(batch.loss_mask)  # the log-probs before any update, for the metric
    # `algorithm.policy_loss`: vanilla PPO clip (with its dual clip) or GSPO's sequence ratio; clip-higher's
    # bounds default to clip_ratio
    loss_fn = grpo.POLICY_LOSSES[algorithm.policy_loss]
    upper_clip = algorithm.clip_ratio if algorithm.clip_ratio_high is None else algorithm.clip_ratio_high
    base_clip: dict[str, Any] = {"clip_ratio": algorithm.clip_ratio, "clip_ratio_low": algorithm.clip_ratio_low,
                                 "clip_ratio_high": algorithm.clip_ratio_high}
    if algorithm.policy_loss == "vanilla":  # dual clip: vanilla only (verl's GSPO has none)
        base_clip["clip_ratio_c"] = algorithm.clip_ratio_c

    for _ in range(config.ppo_epochs):
        order = torch.randperm(batch.size, generator=generator) if shuffle else torch.arange(batch.size)
        for mini in order.split(mini_size):
            normalizer = grpo.loss_normalizer(batch.loss_mask[mini], algorithm.loss_agg_mode,
                                              sequence_share=None if batch.episode_share is None
                                              else batch.episode_share[mini])
            scale = {"normalizer": normalizer, "loss_scale_factor": horizon}
            optimizer.zero_grad(set_to_none=True)
            active = mini[learns[mini]]
            totals.flat_samples_skipped += len(mini) - len(active)
            if not len(active):  # nothing to learn here: no forward, no backward, no optimizer step
                totals.skipped_updates += 1
                continue
            for index in active.split(micro):
                with device_turn():
                    part = batch.rows(index)
                    width = part.loss_mask.shape[1]
                    logprobs, entropy = forward_logprobs(model, part, temperature, with_entropy=True,
                                                         entropy_grad=bool(algorithm.entropy_coeff))
                    old = logprobs.detach() if old_logprobs is None else old_logprobs[index, :width]
                    if old_logprobs is None:
                        first_pass[index, :width] = old
                    clip = dict(base_clip)
                    if off_policy_clip is not None and part.off_policy is not None and bool(part.off_policy.any()):
                        rows = part.off_policy[:, None]
                        old = torch.where(rows, part.rollout_logprobs, old)  # the behaviour policy saw the experience
                        high, dual = off_policy_clip
                        clip["clip_ratio_high"] = torch.where(rows, high, upper_clip)
                        if "clip_ratio_c" in clip:
                            clip["clip_ratio_c"] = torch.where(rows, dual, algorithm.clip_ratio_c)
                    scale.update(part.weighting())
                    is_weights = None
                    if tis_cap is not None:  # the lag behind the sampling policy (asynchronous rollout)
                        is_weights = grpo.truncated_is_weights(old, part.rollout_logprobs, part.loss_mask, tis_cap)
                        totals.add_is_weights(is_weights, old - part.rollout_logprobs, part.loss_mask, tis_cap)
                    policy = loss_fn(old, logprobs, part.advantages, part.loss_mask,
                                     loss_agg_mode=algorithm.loss_agg_mode, is_weights=is_weights, **clip, **scale)
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
            if before_weights_change is not None:
                before_weights_change()
            with device_turn():
                grad_norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                if torch.isfinite(grad_norm):
                    optimizer.step()
                else:
                    totals.skipped_steps += 1
            totals.grad_norms.append(float(grad_norm))
    # Rollout log-probs against the trainer's: a large gap means the token sequences are misaligned.
    totals.logprob_diff = mean_abs_gap(batch.rollout_logprobs, first_pass if old_logprobs is None else old_logprobs,
                                       batch.loss_mask * learns.to(batch.loss_mask.device)[:, None])
    totals.flat_samples_skipped //= config.ppo_epochs  # counted once per pass
    totals.update_skipped = totals.skipped_updates == config.ppo_epochs * math.ceil(batch.size / mini_size)
    return totals.metrics()


def mean_abs_gap(rollout: torch.Tensor, trainer: torch.Tensor, mask: torch.Tensor) -> float:
    gap = (rollout - trainer).abs()
    valid = mask.bool() & torch.isfinite(gap)
    return float(gap[valid].mean()) if valid.any() else float("nan")


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
    flat_samples_skipped: int = 0  # rows with advantage 0 everywhere: no forward, no backward
    skipped_updates: int = 0  # mini-batches with nothing to learn: no optimizer step
    update_skipped: bool = False  # the whole update
    grad_norms: list[float] = attrs.field(factory=list)
    is_tokens: float = 0.0  # tokens weighed by truncated importance weights (asynchronous rollout)
    is_weight_sum: float = 0.0
    is_above_cap: float = 0.0

    def add_is_weights(self, weights: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor, cap: float) -> None:
        valid = mask.bool()
        self.is_tokens += float(valid.sum())
        self.is_weight_sum += float(weights[valid].sum())
        self.is_above_cap += float((log_ratio[valid] > math.log(cap)).sum())

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
            "actor/grad_norm": sum(self.grad_norms) / max(len(self.grad_norms), 1),
            "actor/skipped_steps": float(self.skipped_steps),
            "actor/flat_samples_skipped": float(self.flat_samples_skipped),
            "actor/update_skipped": float(self.update_skipped),
        }
        if self.tokens:  # else no row was trained: no forward to measure
            metrics.update({"actor/clip_fraction": self.clip_fraction / tokens,
                            "actor/dual_clip_fraction": self.dual_clip_fraction / tokens,
                            "actor/entropy": self.entropy / tokens})
        if math.isfinite(self.logprob_diff):
            metrics["rollout/logprob_diff"] = self.logprob_diff
        if self.has_kl:
            metrics["actor/kl"] = self.kl / tokens
        if self.is_tokens:  # verl's rollout_corr/ names
            metrics["rollout_corr/rollout_is_mean"] = self.is_weight_sum / self.is_tokens
            metrics["rollout_corr/rollout_is_ratio_fraction_high"] = self.is_above_cap / self.is_tokens
        return metrics
