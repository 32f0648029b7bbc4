"""The `backend:` block of the verl backend (GRPO's own settings are in the spec's `algorithm:`).

The names follow the torch backend where the meaning is the same (`batch_size`, `lr`,
`max_new_tokens`, `save_every`...), so switching a spec from `torch` to `verl` changes the
`name` and the hardware keys. What verl has and this block does not name is reachable through
`verl:`, dotted verl keys validated by verl itself:

    backend:
      name: verl
      gpus_per_node: 8
      verl:
        actor_rollout_ref.actor.fsdp_config.param_offload: true
        trainer.logger: [console, wandb]

`docs/verl.md` has the whole mapping table.
"""

from __future__ import annotations

from typing import Any

import attrs

from beyondagent_core.checks import (
    BATCH_WHY,
    CHECKPOINTS_WHY,
    COEF_WHY,
    EPOCHS_WHY,
    FRACTION_WHY,
    GRAD_CLIP_WHY,
    LR_WHY,
    MAX_BATCH,
    MAX_CHECKPOINTS,
    MAX_COEF,
    MAX_EPOCHS,
    MAX_GRAD_CLIP,
    MAX_LR,
    MAX_NODES,
    MAX_PPO_EPOCHS,
    MAX_RATIO,
    MAX_SECONDS,
    MAX_STALENESS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    NODES_WHY,
    PPO_EPOCHS_WHY,
    RATIO_WHY,
    SECONDS_WHY,
    STALENESS_WHY,
    STEPS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    number,
)

# Keys of `backend` that may change between a run and its `--resume`.
DEVICES = ("cuda", "cpu")
ROLLOUT_MODES = ("sync", "one_step_off", "async")
RESUMABLE_KEYS = ("epochs", "total_steps", "save_every", "eval_every", "keep_checkpoints", "timeout_s")


@attrs.define
class VerlConfig:
    """Training, rollout and cluster settings for a verl run.

    A step takes `batch_size` tasks and rolls each out `algorithm.group_size` times
    (`rollout.n`); the actor is updated over mini-batches of `mini_batch_size` tasks (None: the
    whole batch, one optimizer step), split into micro-batches of `micro_batch_size` sequences
    per GPU. An episode is one sequence of at most `max_prompt_tokens` (the first prompt) plus
    `max_response_tokens` (every model turn and every observation after it); each model turn
    gets at most `max_new_tokens`.
    """

    # length of the run
    epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_EPOCHS, why=EPOCHS_WHY))
    total_steps: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_STEPS, why=STEPS_WHY))
    batch_size: int = attrs.field(default=8, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))
    # optimizer
    lr: float = attrs.field(default=1e-6, validator=number(gt=0, le=MAX_LR, why=LR_WHY))
    warmup_steps: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    weight_decay: float = attrs.field(default=0.01, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    grad_clip: float = attrs.field(default=1.0, validator=number(gt=0, le=MAX_GRAD_CLIP, why=GRAD_CLIP_WHY))
    ppo_epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_PPO_EPOCHS, why=PPO_EPOCHS_WHY))
    mini_batch_size: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))
    micro_batch_size: int = attrs.field(default=4, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))
    # rollout
    temperature: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    top_p: float = attrs.field(default=1.0, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_new_tokens: int = attrs.field(default=512, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_prompt_tokens: int = attrs.field(default=2048, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_response_tokens: int = attrs.field(default=8192, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    val_temperature: float = attrs.field(default=0.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    # asynchronous rollout: sync | one_step_off | async -> verl's V1 `colocate_async` trainer (mapping.py)
    rollout_mode: str = "sync"
    # policy versions a sample may lag (one_step_off: 1)
    max_staleness: int = attrs.field(default=1, validator=number(ge=1, le=MAX_STALENESS, why=STALENESS_WHY))
    # truncated importance sampling cap (verl's algorithm.rollout_correction.rollout_is_threshold)
    tis_cap: float = attrs.field(default=2.0, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    # hardware: `cuda` is verl's own stack (vLLM rollout, FSDP on NCCL); `cpu` is ours for tests and
    # development on a machine without GPUs (transformers rollout, FSDP2 on gloo, fp32; see cpu_rollout.py)
    device: str = "cuda"
    nodes: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    gpus_per_node: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    tensor_parallel: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    gpu_memory_utilization: float = attrs.field(default=0.6, validator=number(gt=0, le=1, why=FRACTION_WHY))
    ray_address: str | None = None  # join a running Ray cluster (multi-node); None starts a local one
    # validation, checkpoints, outputs
    eval_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    save_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    keep_checkpoints: int = attrs.field(default=2, validator=number(ge=1, le=MAX_CHECKPOINTS, why=CHECKPOINTS_WHY))
    project: str = "beyondagent"
    # stop verl after this many seconds (None: no limit)
    timeout_s: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_SECONDS, why=SECONDS_WHY))
    # verl keys this block does not name, dotted (`actor_rollout_ref.actor.ppo_epochs: 2`)
    verl: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:  # each number's range is its field's validator
        if self.rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout_mode must be one of {', '.join(ROLLOUT_MODES)}, got {self.rollout_mode!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.max_new_tokens > self.max_response_tokens:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens}) cannot exceed max_response_tokens "
                             f"({self.max_response_tokens}): a turn must fit in the episode's response")
