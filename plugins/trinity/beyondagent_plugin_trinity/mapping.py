"""Our spec -> Trinity-RFT's `Config` keys: one table, read top to bottom (no trinity import here).

`trinity_overrides(...)` returns `Override`s (the core's `native_overrides`): the trinity key,
its value, and the key of ours it came from, so an error trinity raises about a key names the
spec key the user wrote. The `trinity:` block of the backend comes last and wins. What trinity
has no equivalent for is refused here, as a `SpecError` that says why (`check`); trinity's own
`Config.check_and_update` then validates the composed config (`compose.py`, in its venv).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.advantages import uses_critic
from beyondagent_core.errors import SpecError
from beyondagent_core.native_overrides import Override, flatten
from beyondagent_core.precision import SHORT, refuse_native_conflict, resolve, warn_if_pure
from beyondagent_core.spec import Spec
from beyondagent_plugin_trinity.config import TrinityConfig

WORKFLOW_NAME = "beyondagent"  # our Workflow in trinity's WORKFLOWS registry (trinity_workflow.py)
ADVANTAGE_NAME = "beyondagent"  # our estimators in trinity's ADVANTAGE_FN registry (trinity_advantage.py)
MONITOR_NAME = "beyondagent"  # trinity's TensorBoard monitor + JSON lines in the run dir (trinity_monitor.py)
# Every estimator runs as our ADVANTAGE_FN, trinity's `grpo` math included (the same numbers): only
# ours leaves failed episodes out of their groups' statistics (`advantages.estimate_finished`).
KL_TYPES = {"kl": "k1", "k1": "k1", "abs": "abs", "mse": "k2", "k2": "k2", "low_var_kl": "low_var_kl", "k3": "k3"}
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
POLICY_LOSSES = {"vanilla": "ppo", "gspo": "gspo"}  # algorithm.policy_loss -> trinity's POLICY_LOSS_FN
TRAINER_CONFIG = "+trainer.trainer_config.actor_rollout_ref"  # free-form verl keys trinity's build_verl_config merges


@attrs.frozen
class RunFiles:
    """Where the backend puts what trinity reads, all inside the run directory (absolute paths)."""

    run_dir: Path
    spec_path: Path  # the spec for trinity's workflow runners (secrets as ${oc.env:...})
    train_dir: Path  # the taskset: train.jsonl, one row per task (every epoch's mix in order)
    val_dir: Path | None  # val tasks as test.jsonl

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "trinity" / "checkpoints"


def resolved_mode(config: TrinityConfig) -> str:
    """trinity's `mode`: `colocate` on one GPU (explorer and trainer share it), else `both`."""
    if config.mode != "auto":
        return config.mode
    return "colocate" if config.nodes * config.gpus_per_node == 1 else "both"


def workflow_args(spec: Spec, config: TrinityConfig, files: RunFiles) -> dict[str, Any]:
    """What our Workflow needs in trinity's runners: the spec, the run dir, the turn budget."""
    return {"spec_path": str(files.spec_path), "run_dir": str(files.run_dir), "cwd": str(Path.cwd()),
            "max_new_tokens": config.max_new_tokens, "max_prompt_tokens": config.max_prompt_tokens,
            "max_response_tokens": config.max_response_tokens, "records_steps": True}


def trinity_overrides(spec: Spec, config: TrinityConfig, files: RunFiles, *, model_path: str) -> list[Override]:
    """Every trinity key we set, then the `trinity:` block's keys; raises SpecError on what trinity lacks."""
    check(spec, config)
    algo = spec.algorithm
    out: list[Override] = []

    def put(key: str, value: Any, origin: str) -> None:
        out.append(Override(key, value, origin))

    # the run: trinity's names and checkpoints inside our run directory
    put("mode", resolved_mode(config), "backend.mode")
    put("project", config.project, "backend.project")
    put("name", spec.run.name, "run.name")
    put("checkpoint_root_dir", str(files.checkpoints), "run.output_dir")
    put("continue_from_checkpoint", True, "--resume")
    # model
    put("model.model_path", model_path, "model.path")
    put("model.max_prompt_tokens", config.max_prompt_tokens, "backend.max_prompt_tokens")
    put("model.max_response_tokens", config.max_response_tokens, "backend.max_response_tokens")
    put("model.max_model_len", config.max_prompt_tokens + config.max_response_tokens, "backend.max_response_tokens")
    put("model.temperature", config.temperature, "backend.temperature")
    put("model.top_p", config.top_p, "backend.top_p")
    lora = spec.model.lora
    if lora is not None:  # trinity's LoRAConfig (vLLM + verl's FSDP LoRA); no dropout (check())
        targets = list(lora.target_modules)
        put("model.lora_configs", [{"name": "beyondagent", "lora_rank": lora.rank, "lora_alpha": int(lora.alpha),
                                    "target_modules": "all-linear" if targets == ["all-linear"] else ",".join(targets)}],
            "model.lora")
    if spec.model.gradient_checkpointing is not None:  # unset: trinity's own default (on), through its verl config
        put(f"{TRAINER_CONFIG}.model.enable_gradient_checkpointing",  # a free-form mapping
            spec.model.gradient_checkpointing, "model.gradient_checkpointing")
    for key, value, origin in precision_settings(spec, config):
        put(key, value, origin)
    # the cluster trinity plans GPUs for: declared, so validation never asks Ray what this machine has
    put("cluster.node_num", config.nodes, "backend.nodes")
    put("cluster.gpu_per_node", config.gpus_per_node, "backend.gpus_per_node")
    if config.ray_address:
        put("cluster.ray_address", config.ray_address, "backend.ray_address")
    # GRPO (algorithm:)
    put("algorithm.algorithm_type", "grpo", "algorithm.name")
    put("algorithm.repeat_times", algo.group_size, "algorithm.group_size")
    put("algorithm.advantage_fn", ADVANTAGE_NAME, advantage_origin(spec))
    put("algorithm.advantage_fn_args", {"spec_path": str(files.spec_path), "cwd": str(Path.cwd())},
        advantage_origin(spec))
    policy_args: dict[str, Any] = {"clip_range": algo.clip_ratio,
                                   "clip_range_low": algo.clip_ratio if algo.clip_ratio_low is None else algo.clip_ratio_low,
                                   "clip_range_high": algo.clip_ratio if algo.clip_ratio_high is None else algo.clip_ratio_high,
                                   "loss_agg_mode": algo.loss_agg_mode}
    if algo.policy_loss == "vanilla":
        policy_args["clip_ratio_c"] = algo.clip_ratio_c
    put("algorithm.policy_loss_fn", POLICY_LOSSES[algo.policy_loss], "algorithm.policy_loss")
    put("algorithm.policy_loss_fn_args", policy_args, "algorithm.clip_ratio")
    put("algorithm.loss_agg_mode", algo.loss_agg_mode, "algorithm.loss_agg_mode")
    put("algorithm.kl_penalty_fn", "none", "algorithm.kl_coef")  # KL as a loss, as verl's GRPO
    put("algorithm.kl_loss_fn", KL_TYPES[algo.kl_type] if algo.kl_coef > 0 else "none", "algorithm.kl_type")
    put("algorithm.kl_loss_fn_args", {"kl_coef": algo.kl_coef}, "algorithm.kl_coef")
    put("algorithm.entropy_loss_fn", "default" if algo.entropy_coeff > 0 else "none", "algorithm.entropy_coeff")
    put("algorithm.entropy_loss_fn_args", {"entropy_coef": algo.entropy_coeff}, "algorithm.entropy_coeff")
    # the optimizer
    put("algorithm.optimizer.lr", config.lr, "backend.lr")
    put("algorithm.optimizer.lr_warmup_steps", config.warmup_steps if config.warmup_steps else -1, "backend.warmup_steps")
    put("algorithm.optimizer.weight_decay", config.weight_decay, "backend.weight_decay")
    put("algorithm.optimizer.clip_grad", config.grad_clip, "backend.grad_clip")
    put("trainer.grad_clip", config.grad_clip, "backend.grad_clip")
    # the tasks: our rows, run by our Workflow (registered in trinity's WORKFLOWS)
    put("buffer.batch_size", config.batch_size, "backend.batch_size")
    put("buffer.total_epochs", 1, "backend.epochs")  # the taskset holds every epoch's mix back to back
    if config.total_steps is not None:
        put("buffer.total_steps", config.total_steps, "backend.total_steps")
    arguments = workflow_args(spec, config, files)
    put("buffer.explorer_input.tasksets", [{
        "name": "train", "storage_type": "file", "path": str(files.train_dir), "split": "train",
        "default_workflow_type": WORKFLOW_NAME, "workflow_args": arguments,
        "rollout_args": {"temperature": config.temperature, "top_p": config.top_p, "logprobs": 0}}], "tasks.train")
    if files.val_dir is not None:
        put("buffer.explorer_input.eval_tasksets", [{
            "name": "val", "storage_type": "file", "path": str(files.val_dir), "split": "test",
            "default_workflow_type": WORKFLOW_NAME, "workflow_args": arguments, "repeat_times": 1,
            "rollout_args": {"temperature": config.val_temperature, "top_p": config.top_p, "logprobs": 0}}],
            "tasks.val")
    # the explorer: vLLM engines with their OpenAI server on (our Workflow generates token in, token out there)
    rollout = "explorer.rollout_model"
    put(f"{rollout}.engine_num", config.rollout_engines, "backend.rollout_engines")
    put(f"{rollout}.tensor_parallel_size", config.tensor_parallel, "backend.tensor_parallel")
    put(f"{rollout}.gpu_memory_utilization", config.gpu_memory_utilization, "backend.gpu_memory_utilization")
    put(f"{rollout}.enable_openai_api", True, "backend.name")
    put(f"{rollout}.seed", spec.run.seed, "run.seed")
    put(f"{rollout}.dtype", resolve(spec.model, gpu=True, where=spec.path or "the spec").compute, "model.dtype")
    put("explorer.runner_per_model", config.workflow_runners, "backend.workflow_runners")
    put("explorer.concurrent_mode", "asynchronous", "backend.workflow_runners")  # our Workflow is async
    put("explorer.eval_interval", config.eval_every if config.eval_every else 1 << 30, "backend.eval_every")
    put("explorer.eval_on_startup", bool(config.eval_every and files.val_dir), "backend.eval_every")
    # rollout ahead of training: how the explorer's weights follow the trainer's
    put("synchronizer.sync_style", config.sync_style, "backend.sync_style")
    put("synchronizer.sync_interval", config.sync_interval, "backend.sync_interval")
    put("synchronizer.sync_offset", *sync_offset(config))
    # step metrics: TensorBoard as trinity writes it, and JSON lines in the run directory
    put("monitor.monitor_type", MONITOR_NAME, "backend.name")
    put("monitor.monitor_args", {"metrics_dir": str(files.run_dir / "trinity")}, "run.output_dir")
    # checkpoints
    put("trainer.save_interval", config.save_every, "backend.save_every")
    put("trainer.max_checkpoints_to_keep", config.keep_checkpoints, "backend.keep_checkpoints")
    # the user's own trinity keys last: they win
    for key, value in flatten(config.trinity).items():
        put(key, value, f"backend.trinity.{key.lstrip('+')}")
    return out


def trainer_strategy(config: TrinityConfig) -> str:
    """trinity's `trainer.trainer_strategy` (its default fsdp2; fsdp or megatron through `backend.trinity`)."""
    return str(flatten(config.trinity).get("trainer.trainer_strategy", "fsdp2"))


def precision_settings(spec: Spec, config: TrinityConfig) -> list[tuple[str, Any, str]]:
    """`model.param_dtype` and `model.dtype` on trinity's trainer: verl 0.8's FSDP engine underneath,
    configured by trinity's `build_verl_config`, which merges `trainer.trainer_config` into it.

    trinity builds each FSDP engine config with `model_dtype: fp32` (the dtype verl loads the model
    in and FSDP keeps sharded: weights, gradients, AdamW's state) and `mixed_precision: {}` (FSDP's
    compute dtype, `param_dtype`, then verl's default bf16); both are set here for the actor and the
    reference policy, as on the verl backend. A Megatron trainer (`trainer_strategy: megatron`)
    has no FSDP keys: trinity strips them, so none are set (Megatron keeps its own fp32 main weights).
    """
    precision = resolve(spec.model, gpu=True, where=spec.path or "the spec")  # trinity runs on GPUs only
    warn_if_pure(precision, backend="trinity")
    if not trainer_strategy(config).startswith("fsdp"):
        return []
    mixed = {"param_dtype": SHORT[precision.compute], "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    out: list[tuple[str, Any, str]] = []
    for role in ("actor", "ref"):
        out.append((f"{TRAINER_CONFIG}.{role}.fsdp_config.model_dtype", SHORT[precision.params], "model.param_dtype"))
        out.append((f"{TRAINER_CONFIG}.{role}.fsdp_config.mixed_precision", dict(mixed), "model.dtype"))
    return out


def sync_offset(config: TrinityConfig) -> tuple[int, str]:
    """Trinity's `sync_offset` and the key it came from: `backend.rollout_mode` where that lags."""
    if config.rollout_mode == "one_step_off":
        return 1, "backend.rollout_mode"
    if config.rollout_mode == "async":
        return config.max_staleness, "backend.max_staleness"
    return config.sync_offset, "backend.sync_offset"


def estimator_name(spec: Spec) -> str:
    """The name `backend.advantage` selects (`grpo` when unset)."""
    advantage = spec.component("backend.advantage")
    return (advantage.name if advantage is not None else None) or "grpo"


def advantage_origin(spec: Spec) -> str:
    advantage = spec.component("backend.advantage")
    return "backend.advantage.name" if advantage is not None and advantage.name else "algorithm.norm_adv_by_std"


def check(spec: Spec, config: TrinityConfig) -> None:
    """What trinity has no equivalent for, refused in our keys with the reason."""
    algo, where = spec.algorithm, f"{spec.path or 'the spec'}"

    def refuse(key: str, message: str, hint: str) -> None:
        raise SpecError(message, where=f"{where}, key {key}", hint=hint)

    if spec.model.tokenizer:
        refuse("model.tokenizer", f"model.tokenizer is {spec.model.tokenizer!r}, but Trinity-RFT reads the tokenizer "
               "from the model's directory (it sets its tokenizer_path keys from model.model_path), so this one would "
               "be ignored", "remove model.tokenizer, or put the tokenizer's files in the model's directory")
    if algo.name != "grpo":
        refuse("algorithm.name", f"the trinity backend maps algorithm.name grpo, not {algo.name!r}",
               "set algorithm.name: grpo; other Trinity-RFT algorithms: backend.trinity: {algorithm.algorithm_type: ...}")
    if uses_critic(spec):
        refuse("backend.advantage.name", f"the advantage estimator {estimator_name(spec)!r} reads a critic's values; "
               "the trinity backend runs our estimators as Trinity-RFT's ADVANTAGE_FN on experiences that carry no "
               "values, and Trinity-RFT's own PPO (its critic) is not mapped",
               "train PPO on the torch backend (backend: {name: torch}), or pick a critic-free estimator")
    if algo.group_size < 2:
        refuse("algorithm.group_size", f"algorithm.group_size is {algo.group_size}; GRPO compares rollouts within a "
               "group, so it needs at least 2", "use 4 to 16")
    if algo.kl_type not in KL_TYPES:
        refuse("algorithm.kl_type", f"Trinity-RFT's KL_FN has no {algo.kl_type!r} (it has k1, k2, k3, low_var_kl, "
               "abs and corrected_k3)", f"one of {', '.join(KL_TYPES)}")
    if algo.loss_agg_mode not in LOSS_AGG_MODES:
        refuse("algorithm.loss_agg_mode", f"unknown algorithm.loss_agg_mode {algo.loss_agg_mode!r}",
               f"one of {', '.join(LOSS_AGG_MODES)}")
    if algo.policy_loss not in POLICY_LOSSES:
        refuse("algorithm.policy_loss", f"unknown algorithm.policy_loss {algo.policy_loss!r}",
               f"one of {', '.join(POLICY_LOSSES)} (trinity's POLICY_LOSS_FN ppo and gspo)")
    if algo.overlong is not None:
        refuse("algorithm.overlong", "the trinity backend cannot apply algorithm.overlong: Trinity-RFT shapes "
               "overlong responses in its reward functions (DAPO's), which never run on our episodes: our Workflow "
               "sets each Experience's reward from the spec's judge", "remove it, or use the torch backend")
    if algo.dynamic_sampling:
        refuse("algorithm.dynamic_sampling", "the trinity backend does not map algorithm.dynamic_sampling: "
               "Trinity-RFT filters groups in its experience pipeline (buffer operators), not by refilling the "
               "batch from the next tasks as ours does (max_gen_batches), so the two would train on different data",
               "remove it; Trinity-RFT's own filters are set with backend.trinity: {data_processor...}")
    if algo.sft is not None:
        refuse("algorithm.sft", "the trinity backend does not map algorithm.sft: a Trinity-RFT warm-up is a separate "
               "`stages:` entry (its sft algorithm on a messages dataset), not our SFT data format",
               "remove it and warm up with the torch backend (`beyondagent sft SPEC`), then set model.path to that "
               "checkpoint")
    if spec.model.lora is not None and spec.model.lora.alpha != int(spec.model.lora.alpha):
        refuse("model.lora.alpha", f"Trinity-RFT's LoRAConfig takes an integer lora_alpha, but model.lora.alpha is "
               f"{spec.model.lora.alpha} (cutting it to {int(spec.model.lora.alpha)} would change alpha/rank, the "
               "adapters' scale)", "set model.lora.alpha to a whole number")
    if spec.model.lora is not None and spec.model.lora.dropout:
        refuse("model.lora.dropout", f"Trinity-RFT's LoRA (LoRAConfig: lora_rank, lora_alpha, target_modules) has "
               f"no dropout, but model.lora.dropout is {spec.model.lora.dropout}", "set model.lora.dropout: 0")
    experience = spec.component("experience")
    if experience is not None and experience.registration is not None:
        refuse("experience", "the trinity backend does not run experience-guided rollouts: they pick guided samples "
               "per group and train some of them without their lessons, which needs our own policy loss (the torch "
               "and verl backends have it; Trinity-RFT's explorer and trainer do not)",
               "remove the experience block, or use backend: torch or verl")
    if config.rollout_mode != "sync" and config.sync_offset:
        refuse("backend.sync_offset", f"backend.rollout_mode {config.rollout_mode} sets trinity's sync_offset itself "
               f"(one_step_off: 1, async: backend.max_staleness), but backend.sync_offset is {config.sync_offset} too",
               "set one of the two")
    if config.rollout_mode == "one_step_off" and config.max_staleness != 1:
        refuse("backend.max_staleness", f"backend.rollout_mode one_step_off lags one policy version, but "
               f"backend.max_staleness is {config.max_staleness}", "use rollout_mode: async for a larger lag")
    if config.tis_cap is not None:
        refuse("backend.tis_cap", "the trinity backend does not map backend.tis_cap: our truncated importance "
               "weights live in the torch backend's loss (and verl's rollout_correction); Trinity-RFT's policy loss "
               "has its own off-policy options", "remove it; set trinity's through backend.trinity: {algorithm...}")
    workflow_keys = [key for key, value in flatten(config.trinity).items()
                     if key.startswith("buffer.explorer_input") and "workflow_type" in key and value != WORKFLOW_NAME]
    if workflow_keys:
        refuse(f"backend.trinity.{workflow_keys[0]}",
               "the spec's workflow, env and judges run in trinity as our Workflow (`beyondagent`); another trinity "
               "workflow would not run them", "remove that key (the spec's workflow: block picks the workflow)")
    check_precision(spec, config, where)
    gpus = config.nodes * config.gpus_per_node
    engines = config.rollout_engines * config.tensor_parallel
    if resolved_mode(config) == "both" and engines >= gpus:
        refuse("backend.rollout_engines", f"the explorer's vLLM engines take backend.rollout_engines x "
               f"backend.tensor_parallel = {engines} GPU(s) of {gpus} (backend.nodes x backend.gpus_per_node), "
               "leaving none for the trainer", "lower rollout_engines, or give the run more GPUs")
    if resolved_mode(config) == "colocate" and gpus != 1:
        refuse("backend.mode", f"Trinity-RFT's colocate mode runs on exactly 1 GPU, but the run has {gpus}",
               "use mode: both (or auto)")


def check_precision(spec: Spec, config: TrinityConfig, where: str) -> None:
    """Where trinity's trainer would keep low-precision trained weights that `model.param_dtype` did
    not ask for: a `backend.trinity` key that says otherwise, or LoRA on FSDP2 (trinity's
    `_maybe_patch_lora_fsdp2` casts the adapters to FSDP's compute dtype before wrapping them)."""
    precision = resolve(spec.model, gpu=True, where=where)
    refuse_native_conflict(flatten(config.trinity), precision, spec.model, backend="trinity",
                           rollout_dtype_key="explorer.rollout_model.dtype", where=where,
                           sets="the trainer's weights and AdamW's state, FSDP's compute dtype and the explorer's vLLM")
    if (spec.model.lora is not None and trainer_strategy(config) == "fsdp2" and not precision.pure
            and precision.compute != precision.params):
        raise SpecError(f"Trinity-RFT's FSDP2 trainer keeps LoRA adapters in its compute dtype: with model.lora, "
                        f"model.dtype {spec.model.dtype} ({precision.compute}) would train {precision.compute} "
                        "adapters and AdamW state, where updates smaller than their spacing are rounded away, "
                        "though model.param_dtype is float32", where=f"{where}, key model.dtype",
                        hint="set model.dtype: float32 (float32 throughout), or model.param_dtype: "
                             f"{precision.compute} to train {precision.compute} adapters knowingly, or "
                             "backend.trinity: {trainer.trainer_strategy: fsdp} (FSDP1 keeps float32 adapters)")
