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
    micro_batch_size: int = 4
    # rollout
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    max_prompt_tokens: int = 2048
    max_response_tokens: int = 8192
    val_temperature: float = 0.0
    # asynchronous rollout: sync | one_step_off | async -> verl's V1 `colocate_async` trainer (mapping.py)
    rollout_mode: str = "sync"
    max_staleness: int = 1  # policy versions a sample may lag (one_step_off: 1)
    tis_cap: float = 2.0  # truncated importance sampling cap (verl's algorithm.rollout_correction.rollout_is_threshold)
    # hardware: `cuda` is verl's own stack (vLLM rollout, FSDP on NCCL); `cpu` is ours for tests and
    # development on a machine without GPUs (transformers rollout, FSDP2 on gloo, fp32; see cpu_rollout.py)
    device: str = "cuda"
    nodes: int = 1
    gpus_per_node: int = 1
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.6
    ray_address: str | None = None  # join a running Ray cluster (multi-node); None starts a local one
    # validation, checkpoints, outputs
    eval_every: int = 0
    save_every: int = 0
    keep_checkpoints: int = 2
    project: str = "beyondagent"
    timeout_s: int | None = None  # stop verl after this many seconds (None: no limit)
    # verl keys this block does not name, dotted (`actor_rollout_ref.actor.ppo_epochs: 2`)
    verl: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        positive = ("epochs", "batch_size", "ppo_epochs", "micro_batch_size", "max_new_tokens",
                    "max_prompt_tokens", "max_response_tokens", "nodes", "gpus_per_node", "tensor_parallel",
                    "keep_checkpoints")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("total_steps", "mini_batch_size", "timeout_s"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        for name in ("warmup_steps", "eval_every", "save_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout_mode must be one of {', '.join(ROLLOUT_MODES)}, got {self.rollout_mode!r}")
        if self.max_staleness < 1:
            raise ValueError(f"max_staleness must be >= 1, got {self.max_staleness}")
        if not self.tis_cap > 0:
            raise ValueError(f"tis_cap must be > 0, got {self.tis_cap}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.temperature < 0 or self.val_temperature < 0:
            raise ValueError("temperature and val_temperature must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.max_new_tokens > self.max_response_tokens:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens}) cannot exceed max_response_tokens "
                             f"({self.max_response_tokens}): a turn must fit in the episode's response")
