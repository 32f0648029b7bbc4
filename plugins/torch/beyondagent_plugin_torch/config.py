"""The `backend:` block of the torch backend, and checks of the spec's `algorithm:` for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    MAX_PPO_EPOCHS,
    MAX_RATIO,
    MAX_STALENESS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    PPO_EPOCHS_WHY,
    RATIO_WHY,
    STALENESS_WHY,
    STEPS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    FieldRangeError,
    number,
)
from beyondagent_core.errors import SpecError

if TYPE_CHECKING:
    from beyondagent_core.spec import Spec

# Keys of `backend` that may change between a run and its `--resume`: they change how long
# or how often, not what is learned.
RESUMABLE_KEYS = ("epochs", "total_steps", "save_every", "eval_every", "keep_checkpoints",
                  "samples_per_step", "tensorboard", "report", "max_failed_fraction", "kv_cache_tokens", "batching",
                  "kv_layout", "compile_decode")


ROLLOUT_MODES = ("sync", "one_step_off", "async")
MAX_POOL = 8


@attrs.define
class OpponentPoolSettings:
    """`backend.opponent_pool`: frozen earlier versions of the policy that play the other seats of some
    games (opponent_pool.py). `size`: snapshots kept (the newest; the starting policy is the first);
    `refresh_every`: a snapshot after every that many updates; `games`: the share of a step's task
    groups played against a snapshot (the rest are self-play)."""

    size: int = attrs.field(default=2, validator=number(
        ge=1, le=MAX_POOL, why="memory: each snapshot is a copy of the policy's weights with a KV cache of its own"))
    refresh_every: int = attrs.field(default=10, validator=number(ge=1, le=MAX_STEPS, why=STEPS_WHY))
    games: float = attrs.field(default=0.5, validator=number(ge=0, le=1, why=FRACTION_WHY))


@attrs.define
class TorchConfig:
    """Training and rollout settings (GRPO's own settings are in `algorithm:`).

    A step takes `batch_size` tasks, runs each `algorithm.group_size` times, and updates the
    policy `ppo_epochs` times over the episodes in mini-batches of `mini_batch_size` episodes
    (None: all of them, one optimizer step), each split into micro-batches of
    `micro_batch_size` episodes for gradient accumulation. `total_steps`, when set, is the
    run's length in steps (epochs of the mix follow one another as needed) instead of `epochs`.
    Rollout keeps each episode's KV cache between its turns within `kv_cache_tokens` (or, with
    `kv_layout: slots`, in a slot of one preallocated cache: `slots.py`), and batches turns in
    `lockstep` or `continuous`ly (see `generation.py`).
    """

    device: str = "auto"
    # auto: flash_attention_2 on CUDA in bf16/fp16 with flash-attn installed (the `gpu` extra), else sdpa
    attn_implementation: str = attrs.field(default="auto", validator=attrs.validators.in_(
        ("auto", "sdpa", "eager", "flash_attention_2")))
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
    micro_batch_size: int = attrs.field(default=16, validator=number(ge=1, le=MAX_BATCH, why=BATCH_WHY))
    # rollout
    temperature: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                   why=TEMPERATURE_WHY))  # 0 = greedy
    top_p: float = attrs.field(default=1.0, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_new_tokens: int = attrs.field(default=64, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_episode_tokens: int = attrs.field(default=1024, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    max_concurrency: int = attrs.field(default=64, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    # Tokens of episodes' KV caches kept between their turns (0: re-prefill every turn); see kv_cache.py.
    kv_cache_tokens: int = attrs.field(default=65536, validator=number(
        ge=0, le=1 << 30, why="memory: a KV cache of a billion tokens is terabytes even for a small model"))
    # lockstep: a turn's batch waits for every episode in flight (reproducible batches);
    # continuous: episodes join the decode batch when their env answers (faster with slow, uneven envs).
    batching: str = attrs.field(default="lockstep", validator=attrs.validators.in_(("lockstep", "continuous")))
    # sessions: each episode's KV cache kept as its own tensors (within kv_cache_tokens), the batch's
    # rebuilt as rows come and go; slots: one cache allocated once, a slot of max_episode_tokens per
    # episode (max_concurrency slots), every forward at fixed shapes (slots.py)
    kv_layout: str = attrs.field(default="sessions", validator=attrs.validators.in_(("sessions", "slots")))
    # slots only: compile the decode step once per run (torch.compile, CUDA graphs on a GPU)
    compile_decode: bool = False
    # of a step's episodes
    max_failed_fraction: float = attrs.field(default=0.5, validator=number(ge=0, le=1, why=FRACTION_WHY))
    # asynchronous rollout (async_rollout.py): sync | one_step_off (the next step's rollouts run while
    # this step updates) | async (up to max_staleness steps ahead); the loss weighs the lagging
    # samples by truncated importance weights capped at tis_cap (verl's rollout_is_threshold)
    rollout_mode: str = attrs.field(default="sync", validator=lambda _, attribute, value: one_of(
        attribute.name, value, ROLLOUT_MODES))
    # policy versions a sample may lag
    max_staleness: int = attrs.field(default=1, validator=number(ge=1, le=MAX_STALENESS, why=STALENESS_WHY))
    tis_cap: float = attrs.field(default=2.0, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    # the same truncated importance weights in a sync rollout too (true), for what the sampling policy's
    # rounding differs from the trainer's (a bf16 rollout copy under mixed precision); None: only in
    # one_step_off/async, false: never (verl's algorithm.rollout_is)
    rollout_is: bool | None = None
    # validation, checkpoints, outputs
    eval_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    val_temperature: float = attrs.field(default=0.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    save_every: int = attrs.field(default=0, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    keep_checkpoints: int = attrs.field(default=2, validator=number(ge=1, le=MAX_CHECKPOINTS, why=CHECKPOINTS_WHY))
    samples_per_step: int = attrs.field(default=2, validator=number(ge=0, le=MAX_BATCH, why=BATCH_WHY))
    tensorboard: bool | None = None
    report: bool = True
    # multi-seat games: frozen snapshots of the policy play the other seats of some games (None: self-play)
    opponent_pool: OpponentPoolSettings | None = None


def one_of(field: str, value: Any, choices: tuple[str, ...]) -> None:
    """A choice field's check: its error names the field (the spec loader adds the section's path)."""
    if value not in choices:
        raise FieldRangeError(field, f"must be one of {', '.join(choices)}, got {value!r}")


def check_algorithm(spec: Spec, config: TorchConfig | None = None) -> None:
    """What the torch backend needs of `algorithm:`; errors name the key and its valid values."""
    from beyondagent_core.advantages import uses_critic
    from beyondagent_plugin_torch.grpo import KL_TYPES, LOSS_AGG_MODES, POLICY_LOSSES

    algo = spec.algorithm
    where = f"{spec.path}, key algorithm"
    if algo.name != "grpo":
        raise SpecError(f"the torch backend implements GRPO, not {algo.name!r}", where=f"{where}.name",
                        hint="set algorithm.name: grpo")
    critic = uses_critic(spec)
    if algo.group_size < 2 and not critic:
        raise SpecError(f"algorithm.group_size is {algo.group_size}; GRPO compares rollouts within a group, "
                        "so it needs at least 2", where=f"{where}.group_size",
                        hint="use 4 to 16, or PPO (backend.advantage: {name: gae}), whose critic is the baseline")
    if critic and algo.dynamic_sampling:
        raise SpecError("algorithm.dynamic_sampling drops groups whose rewards are all equal; with a critic "
                        f"({spec.component('backend.advantage').name}) such a group still has advantages",
                        where=f"{where}.dynamic_sampling", hint="remove algorithm.dynamic_sampling")
    if algo.kl_type not in KL_TYPES:
        raise SpecError(f"unknown algorithm.kl_type {algo.kl_type!r}", where=f"{where}.kl_type",
                        hint=f"one of {', '.join(KL_TYPES)}")
    if algo.loss_agg_mode not in LOSS_AGG_MODES:
        raise SpecError(f"unknown algorithm.loss_agg_mode {algo.loss_agg_mode!r}", where=f"{where}.loss_agg_mode",
                        hint=f"one of {', '.join(LOSS_AGG_MODES)}")
    if algo.policy_loss not in POLICY_LOSSES:
        raise SpecError(f"unknown algorithm.policy_loss {algo.policy_loss!r}", where=f"{where}.policy_loss",
                        hint=f"one of {', '.join(POLICY_LOSSES)} (gspo: one importance ratio per sequence)")
    if algo.kl_coef < 0 or algo.clip_ratio <= 0 or algo.clip_ratio_c <= 1:
        raise SpecError("algorithm needs kl_coef >= 0, clip_ratio > 0 and clip_ratio_c > 1", where=where)
    if algo.sft is not None:
        from beyondagent_plugin_torch.sft import check_sft

        check_sft(algo.sft, getattr(spec, "path", None), str(spec.path))
    if config is not None:
        check_rollout_mode(spec, config)
        if config.compile_decode and config.kv_layout != "slots":
            raise SpecError("backend.compile_decode compiles the decode step of kv_layout slots (fixed shapes); "
                            f"kv_layout is {config.kv_layout!r}", where=f"{spec.path}, key backend.compile_decode",
                            hint="set backend.kv_layout: slots, or remove compile_decode")
    if algo.overlong is not None and config is not None:
        max_len = overlong_max_len(algo.overlong, config)
        if max_len <= algo.overlong.buffer_len:
            raise SpecError(f"algorithm.overlong.buffer_len {algo.overlong.buffer_len} leaves no length unpunished: "
                            f"the maximum length is {max_len} (algorithm.overlong.max_len, else "
                            "backend.max_new_tokens)", where=f"{where}.overlong.buffer_len",
                            hint=f"use a buffer_len below {max_len}, or set algorithm.overlong.max_len")


def overlong_max_len(overlong: Any, config: TorchConfig) -> int:
    """The length `algorithm.overlong` punishes towards: its `max_len`, else one model turn's limit."""
    return overlong.max_len if overlong.max_len is not None else config.max_new_tokens


def check_rollout_mode(spec: Spec, config: TorchConfig) -> None:
    """`backend.rollout_mode` with the keys that go with it; errors name the key."""
    where = f"{spec.path}, key backend"
    if config.rollout_mode == "one_step_off" and config.max_staleness != 1:
        raise SpecError(f"backend.rollout_mode one_step_off lags one policy version, but backend.max_staleness is "
                        f"{config.max_staleness}", where=f"{where}.max_staleness",
                        hint="remove max_staleness (one_step_off means 1), or use rollout_mode: async for more")
    if config.rollout_mode == "sync":
        return
    if config.opponent_pool is not None:
        raise SpecError(f"backend.opponent_pool takes its snapshots between steps, while with rollout_mode "
                        f"{config.rollout_mode} the next step's games are already being played",
                        where=f"{where}.opponent_pool", hint="use rollout_mode: sync with an opponent pool")
    experience = spec.component("experience")
    if experience is not None and experience.registration is not None:
        raise SpecError(f"backend.rollout_mode {config.rollout_mode} cannot go with experience-guided rollouts: a "
                        "step's lessons are summarized after its update, while the next step's rollouts are already "
                        "running", where=f"{where}.rollout_mode",
                        hint="use rollout_mode: sync with an experience block, or remove the experience block")
