"""PPO's critic on the torch backend: a value model, its optimizer, its update and its checkpoint.

A run whose advantage estimator uses values (`gae`, `AdvantageSpec.uses_values`) trains one, as
the spec's `critic:` section describes (its defaults when unset). The value model is the policy's
architecture with a scalar head on every position (transformers' `...ForTokenClassification` with
one label, as verl's critic): from `critic.path`, or by default from the policy's own starting
weights, the head new (drawn from the run's seed). Its value at position t is the value of the
state before token t+1, so `values[:, t]` lines up with the loss mask and the advantages of
`update.TrainBatch` (column t is token t+1).

A step, in verl's order: the critic values the batch's tokens (`values`), the estimator turns them
and the rewards into advantages and returns, the critic regresses on the returns (`update`:
verl's clipped value loss, 0.5 * max((V - R)^2, (clip(V, V_old +- cliprange) - R)^2), aggregated
like the policy loss, over the backend's PPO epochs, mini- and micro-batches), then the policy
updates, unless the step is within `critic.warmup_steps`. With `model.lora` the critic trains
adapters too (peft's TOKEN_CLS: the value head trains in full). A checkpoint keeps it in
`critic/` (the model, or its adapters and head, and `optimizer.pt`).

torch and transformers are imported inside the functions: the CLI imports this plugin at start-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beyondagent_core.errors import RunError, SpecError
from beyondagent_plugin_torch.lora import trainable_parameters
from beyondagent_plugin_torch.models import _load_error, locate_checkpoint
from beyondagent_plugin_torch.precision import compute_in
from beyondagent_plugin_torch.progress_bars import quiet_progress_bars

CRITIC_DIR = "critic"  # inside a checkpoint's step directory
HEAD_PREFIX = "score."  # transformers' token-classification head: new when starting from a causal LM
OPTIMIZER_FILE = "optimizer.pt"


def load_value_model(path: str, *, device: Any, dtype: Any, compute_dtype: Any, attention: str, seed: int,
                     where: str) -> Any:
    """The value model at `path` (a policy checkpoint: its body, a new head drawn from `seed`; or a
    critic checkpoint: both) on `device`, weights in `dtype`, forwards in `compute_dtype`, eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForTokenClassification
    from transformers.utils import logging as hf_logging

    checkpoint, local_only = locate_checkpoint(path, where=where)
    verbosity = hf_logging.get_verbosity()
    try:
        # transformers' load report would warn that the head is new: it is meant to be (checked below)
        hf_logging.set_verbosity_error()
        with quiet_progress_bars(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            config = AutoConfig.from_pretrained(checkpoint, local_files_only=local_only)
            # one label: the value; no dropout before the head, so a value does not change between the
            # pass that saw the rollout and the one that trains (a token classifier's default is 0.1)
            config.num_labels, config.classifier_dropout = 1, 0.0
            model, loading = AutoModelForTokenClassification.from_pretrained(
                checkpoint, config=config, dtype=dtype, local_files_only=local_only, attn_implementation=attention,
                output_loading_info=True)
    except (OSError, ValueError) as error:
        raise _load_error("critic", path, where, error) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = [key for key in loading.get("missing_keys", ()) if not key.startswith(HEAD_PREFIX)]
    if missing:
        raise SpecError(f"the critic's starting checkpoint {path} lacks {len(missing)} weights of its "
                        f"{type(model).__name__}, e.g. {sorted(missing)[0]}: it is not a model of this architecture",
                        where=where, hint="point critic.path at a causal LM (or a critic) of the policy's family, "
                                          "or leave it unset to start from the policy's weights")
    model = model.to(device).eval()
    if compute_dtype is not None and compute_dtype != dtype:
        compute_in(model, compute_dtype)
    return model


def value_loss(values: Any, old_values: Any, returns: Any, mask: Any, *, cliprange: float, mode: str,
               **scale: Any) -> tuple[Any, Any]:
    """verl's `compute_value_loss`: the clipped squared error, halved, aggregated like the policy loss
    (`grpo.aggregate`, `scale` its micro-batch normalizer); and the share of tokens the clip set."""
    import torch

    from beyondagent_plugin_torch import grpo

    clipped = torch.clamp(values, old_values - cliprange, old_values + cliprange)  # inside the range: exactly `values`
    plain_error = (values - returns) ** 2
    clipped_error = (clipped - returns) ** 2
    loss = 0.5 * grpo.aggregate(torch.maximum(plain_error, clipped_error), mask, mode, **scale)
    valid = mask.bool()
    clip_fraction = (clipped_error > plain_error)[valid].float().mean() if valid.any() else torch.zeros(())
    return loss, clip_fraction.detach()


class Critic:
    """The value model with its AdamW (`critic.lr`, the backend's weight decay)."""

    def __init__(self, model: Any, section: Any, *, weight_decay: float):
        self.section, self.weight_decay = section, weight_decay
        self.model, self.optimizer = model, self._optimizer(model)

    def _optimizer(self, model: Any) -> Any:
        import torch

        return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=self.section.lr,
                                 weight_decay=self.weight_decay)

    def memory(self) -> dict[str, float]:
        """What the critic holds, in MB: its weights, and its gradients and AdamW state (float32) once it trains."""
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        trained, total = trainable_parameters(self.model)
        grads = sum(p.numel() * p.element_size() for p in self.model.parameters() if p.requires_grad)
        return {"parameters": float(total), "trained_parameters": float(trained), "weights_mb": weights / 2**20,
                "gradients_mb": grads / 2**20, "optimizer_mb": 2 * trained * 4 / 2**20}

    def values(self, batch: Any, chunk: int) -> Any:
        """The value of each column of `batch` (`update.TrainBatch`: column t is token t+1), [B, W-1]
        float32, without gradients, `chunk` rows a forward pass."""
        import torch

        out = torch.zeros_like(batch.loss_mask)
        self.model.eval()
        with torch.no_grad():
            for index in torch.arange(batch.size).split(chunk):
                part = batch.rows(index)
                out[index, : part.loss_mask.shape[1]] = self._forward(part)
        return out

    def _forward(self, part: Any) -> Any:
        logits = self.model(input_ids=part.input_ids, attention_mask=part.attention_mask, use_cache=False).logits
        return logits[:, :-1, 0].float()

    def update(self, batch: Any, *, algorithm: Any, config: Any, generator: Any) -> dict[str, float]:
        """Regress the values of `batch` (its `values`, as the step saw them, and `returns`) over
        `config.ppo_epochs`, its mini- and micro-batches; the `critic/` metrics (verl's names)."""
        import torch

        from beyondagent_plugin_torch import grpo

        micro, mini_size = config.micro_batch_size, config.mini_batch_size or batch.size
        shuffle = config.ppo_epochs > 1 or mini_size < batch.size
        params = [p for p in self.model.parameters() if p.requires_grad]
        losses, clip_fractions, grad_norms, tokens = [], [], [], []
        self.model.train()
        try:
            for _ in range(config.ppo_epochs):
                order = torch.randperm(batch.size, generator=generator) if shuffle else torch.arange(batch.size)
                for mini in order.split(mini_size):
                    mask = batch.loss_mask[mini]
                    if not bool(mask.any()):  # no model token here: nothing to regress
                        continue
                    share = None if batch.episode_share is None else batch.episode_share[mini]
                    scale = {"normalizer": grpo.loss_normalizer(mask, algorithm.loss_agg_mode, sequence_share=share),
                             "loss_scale_factor": float(batch.loss_mask.shape[1])}
                    self.optimizer.zero_grad(set_to_none=True)
                    mini_loss = 0.0
                    for index in mini.split(micro):
                        part = batch.rows(index)
                        scale.update(part.weighting())
                        loss, clip_fraction = value_loss(
                            self._forward(part), part.values, part.returns, part.loss_mask,
                            cliprange=self.section.cliprange_value, mode=algorithm.loss_agg_mode, **scale)
                        loss.backward()
                        mini_loss += float(loss.detach())
                        clip_fractions.append(float(clip_fraction))
                        tokens.append(float(part.loss_mask.sum()))
                    grad_norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                    if torch.isfinite(grad_norm):
                        self.optimizer.step()
                    grad_norms.append(float(grad_norm))
                    losses.append(mini_loss)
        finally:
            self.model.eval()
        if not losses:
            return {}
        weight = max(sum(tokens), 1.0)
        return {"critic/vf_loss": sum(losses) / len(losses),
                "critic/vf_clipfrac": sum(f * t for f, t in zip(clip_fractions, tokens)) / weight,
                "critic/grad_norm": sum(grad_norms) / len(grad_norms),
                "critic/lr": self.optimizer.param_groups[0]["lr"]}

    def save(self, directory: Path) -> None:
        """The critic into `directory` (a checkpoint's `critic/`): the model (a LoRA run: its adapters
        and head) and its optimizer's state."""
        import torch

        self.model.save_pretrained(directory)
        torch.save(self.optimizer.state_dict(), directory / OPTIMIZER_FILE)

    def load(self, directory: Path, *, model_from: Callable[[Path], Any]) -> None:
        """The critic a checkpoint saved in `directory`: `model_from(directory)` loads its model (a LoRA
        run: its adapters on the starting base), then its optimizer's state."""
        import torch

        if not (directory / OPTIMIZER_FILE).is_file():
            raise RunError(f"the checkpoint has no critic ({directory} is missing or incomplete)", where=str(directory),
                           hint="the run trains a critic (backend.advantage uses values): resume from a checkpoint "
                                "of such a run, or start a new run without --resume")
        self.model = model_from(directory)
        self.optimizer = self._optimizer(self.model)
        self.optimizer.load_state_dict(torch.load(directory / OPTIMIZER_FILE, weights_only=True))


def explained_variance(values: Any, returns: Any, mask: Any) -> float:
    """1 - Var(R - V) / Var(R) over the model tokens (verl's `critic/vf_explained_var`); nan with
    fewer than two tokens or returns that do not vary."""
    valid = mask.bool()
    if int(valid.sum()) < 2:
        return math.nan
    returns, values = returns[valid].double(), values[valid].double()
    variance = float(returns.var())
    return 1.0 - float((returns - values).var()) / variance if variance > 0 else math.nan
