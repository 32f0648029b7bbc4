"""The `backend:` block of the torch backend, and checks of the spec's `algorithm:` for it."""

from __future__ import annotations

import attrs

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import Spec

# Keys of `backend` that may change between a run and its `--resume`: they change how long
# or how often, not what is learned.
RESUMABLE_KEYS = ("epochs", "total_steps", "save_every", "eval_every", "keep_checkpoints",
                  "samples_per_step", "tensorboard", "report")


@attrs.define
class TorchConfig:
    """Training and rollout settings (GRPO's own settings are in `algorithm:`).

    A step takes `batch_size` tasks, runs each `algorithm.group_size` times, and updates the
    policy `ppo_epochs` times over the episodes in mini-batches of `mini_batch_size` episodes
    (None: all of them, one optimizer step), each split into micro-batches of
    `micro_batch_size` episodes for gradient accumulation. `total_steps`, when set, is the
    run's length in steps (epochs of the mix follow one another as needed) instead of `epochs`.
    """

    device: str = "auto"
    epochs: int = 1
    total_steps: int | None = None
    batch_size: int = 8
    # optimizer
    lr: float = 1e-6
    warmup_steps: int = 0
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    ppo_epochs: int = 1
    mini_batch_size: int | None = None
    micro_batch_size: int = 16
    # rollout
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    max_episode_tokens: int = 1024
    max_concurrency: int = 64
    # validation, checkpoints, outputs
    eval_every: int = 0
    val_temperature: float = 0.0
    save_every: int = 0
    keep_checkpoints: int = 2
    samples_per_step: int = 2
    tensorboard: bool | None = None
    report: bool = True

    def __attrs_post_init__(self) -> None:
        positive = ("epochs", "batch_size", "ppo_epochs", "micro_batch_size", "max_new_tokens",
                    "max_episode_tokens", "max_concurrency", "keep_checkpoints")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("total_steps", "mini_batch_size"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        for name in ("warmup_steps", "eval_every", "save_every", "samples_per_step"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.temperature < 0 or self.val_temperature < 0:
            raise ValueError("temperature and val_temperature must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def check_algorithm(spec: Spec) -> None:
    """What the torch backend needs of `algorithm:`; errors name the key."""
    from beyondagent_plugin_torch.grpo import KL_TYPES, LOSS_AGG_MODES

    algo = spec.algorithm
    where = f"{spec.path}, key algorithm"
    if algo.name != "grpo":
        raise SpecError(f"the torch backend implements GRPO, not {algo.name!r}", where=f"{where}.name",
                        hint="set algorithm.name: grpo")
    if algo.group_size < 2:
        raise SpecError(f"algorithm.group_size is {algo.group_size}; GRPO compares rollouts within a group, "
                        "so it needs at least 2", where=f"{where}.group_size", hint="use 4 to 16")
    if algo.kl_type not in KL_TYPES:
        raise SpecError(f"unknown algorithm.kl_type {algo.kl_type!r}", where=f"{where}.kl_type",
                        hint=f"one of {', '.join(KL_TYPES)}")
    if algo.loss_agg_mode not in LOSS_AGG_MODES:
        raise SpecError(f"unknown algorithm.loss_agg_mode {algo.loss_agg_mode!r}", where=f"{where}.loss_agg_mode",
                        hint=f"one of {', '.join(LOSS_AGG_MODES)}")
    if algo.kl_coef < 0 or algo.clip_ratio <= 0 or algo.clip_ratio_c <= 1:
        raise SpecError("algorithm needs kl_coef >= 0, clip_ratio > 0 and clip_ratio_c > 1", where=where)
