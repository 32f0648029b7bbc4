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

from beyondagent_core.checks import (
    BATCH_WHY,
    CHECKPOINTS_WHY,
    COEF_WHY,
    CONCURRENCY_WHY,
    EPOCHS_WHY,
    FRACTION_WHY,
    GRAD_CLIP_WHY,
    LR_WHY,
    MAX_BATCH,
    MAX_CHECKPOINTS,
    MAX_COEF,
    MAX_CONCURRENCY,
    MAX_EPOCHS,
    MAX_GRAD_CLIP,
    MAX_LR,
    MAX_NODES,
    MAX_RATIO,
    MAX_SECONDS,
    MAX_STALENESS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    NODES_WHY,
    RATIO_WHY,
    SECONDS_WHY,
    STALENESS_WHY,
    STEPS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    number,
)

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
    epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_EPOCHS, why=EPOCHS_WHY))
    total_steps: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_STEPS, why=STEPS_WHY))
    batch_size: int = attrs.field(default=8, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))
    # optimizer
    lr: float = attrs.field(default=1e-6, validator=number(gt=0, le=MAX_LR, why=LR_WHY))
    warmup_steps: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    weight_decay: float = attrs.field(default=0.01, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    grad_clip: float = attrs.field(default=1.0, validator=number(gt=0, le=MAX_GRAD_CLIP, why=GRAD_CLIP_WHY))
    # rollout
    temperature: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    top_p: float = attrs.field(default=1.0, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_new_tokens: int = attrs.field(default=512, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_prompt_tokens: int = attrs.field(default=2048, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_response_tokens: int = attrs.field(default=8192, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    val_temperature: float = attrs.field(default=0.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    # explorer/trainer split and weight sync
    mode: str = "auto"
    sync_style: str = "fixed"
    sync_interval: int = attrs.field(default=1, validator=number(ge=1, le=MAX_STEPS, why=STEPS_WHY))
    sync_offset: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STALENESS, why=STALENESS_WHY))
    rollout_mode: str = "sync"
    max_staleness: int = attrs.field(default=1, validator=number(ge=1, le=MAX_STALENESS, why=STALENESS_WHY))
    tis_cap: float | None = attrs.field(default=None, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    # hardware: Trinity-RFT's explorer is vLLM and its trainer verl's FSDP, both on NVIDIA GPUs
    device: str = "cuda"
    nodes: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    gpus_per_node: int = attrs.field(default=2, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    rollout_engines: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    tensor_parallel: int = attrs.field(default=1, validator=number(ge=1, le=MAX_NODES, why=NODES_WHY))
    gpu_memory_utilization: float = attrs.field(default=0.6, validator=number(gt=0, le=1, why=FRACTION_WHY))
    # trinity's explorer.runner_per_model: episodes in flight per engine
    workflow_runners: int = attrs.field(default=8, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    ray_address: str | None = None  # join a running Ray cluster; None: trinity starts a local one
    # validation, checkpoints, outputs
    eval_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    save_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    keep_checkpoints: int = attrs.field(default=2, validator=number(ge=1, le=MAX_CHECKPOINTS, why=CHECKPOINTS_WHY))
    project: str = "beyondagent"
    # stop Trinity-RFT after this many seconds (None: no limit)
    timeout_s: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_SECONDS, why=SECONDS_WHY))
    # Trinity-RFT keys this block does not name, dotted (`trainer.param_offload: true`)
    trinity: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:  # each number's range is its field's validator
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
        if self.max_new_tokens > self.max_response_tokens:
            raise ValueError(f"max_new_tokens ({self.max_new_tokens}) cannot exceed max_response_tokens "
                             f"({self.max_response_tokens}): a turn must fit in the episode's response")
