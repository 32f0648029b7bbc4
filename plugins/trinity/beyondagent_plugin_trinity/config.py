"""The `backend:` block of the trinity backend (GRPO's own settings are in the spec's `algorithm:`).

The names follow the torch and verl backends where the meaning is the same (`batch_size`, `lr`,
`max_new_tokens`, `max_prompt_tokens`, `save_every`...), so switching a spec to Trinity-RFT
changes the `backend:` block only. What Trinity-RFT has and this block does not name is reachable
through `trinity:`, dotted keys of trinity's own `Config`, validated by trinity itself:

    backend:
      name: trinity
      gpus_per_node: 8
      sync_style: dynamic_by_explorer
      trinity:
        explorer.rollout_model.enforce_eager: true
        trainer.param_offload: true

`docs/trinity.md` has the whole mapping table.
"""

from __future__ import annotations

from typing import Any

import attrs

# Trinity-RFT's `mode`: explorer and trainer on separate GPUs (`both`), or sharing one (`colocate`,
# trinity's own choice for a single GPU); `auto` picks by the GPU count.
MODES = ("auto", "both", "colocate")
# Trinity-RFT's `synchronizer.sync_style` values (how the explorer's weights follow the trainer's).
SYNC_STYLES = ("fixed", "dynamic_by_explorer", "dynamic_by_trainer")
# The torch and verl backends' `rollout_mode` values; here they set how far the explorer runs ahead.
ROLLOUT_MODES = ("sync", "one_step_off", "async")
DEVICES = ("cuda",)


@attrs.define
class TrinityConfig:
    """Training, rollout, weight-sync and cluster settings for a Trinity-RFT run.

    A step takes `batch_size` tasks and rolls each out `algorithm.group_size` times
    (`algorithm.repeat_times`). An episode is one sequence of at most `max_prompt_tokens` (the
    first prompt) plus `max_response_tokens` (every model turn and observation after it); each
    model turn gets at most `max_new_tokens`. The explorer may run `sync_offset` steps ahead of
    the trainer and takes new weights every `sync_interval` steps (`sync_style`).

    `rollout_mode` is the torch and verl backends' key, mapped onto trinity's own: `one_step_off`
    is `sync_offset: 1`, `async` is `sync_offset: max_staleness` (`sync` leaves `sync_offset` as
    set). `tis_cap` is refused when set: Trinity-RFT's policy loss has its own off-policy options.
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
    # rollout
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    max_prompt_tokens: int = 2048
    max_response_tokens: int = 8192
    val_temperature: float = 0.0
    # explorer/trainer split and weight sync
    mode: str = "auto"
    sync_style: str = "fixed"
    sync_interval: int = 1
    sync_offset: int = 0
    rollout_mode: str = "sync"
    max_staleness: int = 1
    tis_cap: float | None = None
    # hardware: Trinity-RFT's explorer is vLLM and its trainer verl's FSDP, both on NVIDIA GPUs
    device: str = "cuda"
    nodes: int = 1
    gpus_per_node: int = 2
    rollout_engines: int = 1
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.6
    workflow_runners: int = 8  # trinity's explorer.runner_per_model: episodes in flight per engine
    ray_address: str | None = None  # join a running Ray cluster; None: trinity starts a local one
    # validation, checkpoints, outputs
    eval_every: int = 0
    save_every: int = 0
    keep_checkpoints: int = 2
    project: str = "beyondagent"
    timeout_s: int | None = None  # stop Trinity-RFT after this many seconds (None: no limit)
    # Trinity-RFT keys this block does not name, dotted (`trainer.param_offload: true`)
    trinity: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        positive = ("epochs", "batch_size", "max_new_tokens", "max_prompt_tokens", "max_response_tokens", "nodes",
                    "gpus_per_node", "rollout_engines", "tensor_parallel", "keep_checkpoints", "sync_interval",
                    "workflow_runners", "max_staleness")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("total_steps", "timeout_s"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        for name in ("warmup_steps", "eval_every", "save_every", "sync_offset"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be cuda, got {self.device!r}: Trinity-RFT's explorer is vLLM and its "
                             "trainer hard-codes CUDA; on a CPU, `--dry-run` composes and validates the config, and "
                             "`backend: torch` trains the same spec (docs/trinity.md)")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout_mode must be one of {', '.join(ROLLOUT_MODES)}, got {self.rollout_mode!r}")
        if self.sync_style not in SYNC_STYLES:
            raise ValueError(f"sync_style must be one of {', '.join(SYNC_STYLES)}, got {self.sync_style!r}")
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
