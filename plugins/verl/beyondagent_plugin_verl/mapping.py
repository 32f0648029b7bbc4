"""Our spec -> verl's `ppo_trainer` keys: one table, read top to bottom (no verl import here).

`verl_overrides(...)` returns `Override`s: the verl key, its value, and the key of ours it came
from, so an error verl raises about a key can name the spec key the user wrote. The `verl:`
block of the backend comes last and wins over the mapped keys. Checks that need only our own
numbers (divisibility, GPU counts) are made here, before verl is started, as `SpecError`s
naming our keys; verl's own validator runs on the composed config afterwards (`compose.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.advantages import uses_critic
from beyondagent_core.errors import SpecError
from beyondagent_core.native_overrides import Override, flatten
from beyondagent_core.precision import SHORT, refuse_native_conflict, resolve, warn_if_pure
from beyondagent_core.spec import CriticSection, Spec
from beyondagent_plugin_verl.config import VerlConfig

AGENT_NAME = "beyondagent"  # the name our agent loop is registered under in verl
CPU_ROLLOUT = "beyondagent_hf"  # cpu_rollout.py's replica, for backend.device: cpu
CPU_PLATFORM = "beyondagent_cpu"  # cpu_platform.py, picked by VERL_PLATFORM
OUR_TRAINER = "beyondagent_sync"  # sync_trainer.py: verl's sync trainer + our estimator and guided rollouts
TRAINER_MODULE = "beyondagent_plugin_verl.sync_trainer"  # loaded through VERL_USE_EXTERNAL_MODULES
ADVANTAGE_RECORD = "beyondagent_advantage"  # the agent loop's per-episode record for the estimator
GUIDANCE_RECORD = "beyondagent_guidance"  # the agent loop's per-episode record of experience guidance
OFF_POLICY_LOSS = "beyondagent_off_policy"  # off_policy_loss.py: verl's PPO clip, its own bounds on guided rows
CPU_RAY_SLOTS = 16  # Ray's CPU count is logical: verl's actors each ask for one, the OS shares the cores
CPU_AGENT_LOOP_WORKERS = 2  # concurrent episodes still interleave inside each worker (asyncio)
# `backend.advantage.name` -> verl's own `algorithm.adv_estimator` (verl 0.9.1's core_algos computes these
# itself); any other estimator of ours runs in our trainer (`own_estimator`). `dr_grpo` is verl's GRPO with
# norm_adv_by_std_in_grpo false; `reinforce_plus_plus` takes its gamma as `algorithm.gamma`.
ADV_ESTIMATORS = {
    "grpo": "grpo",
    "dr_grpo": "grpo",
    "rloo": "rloo",
    "reinforce_plus_plus": "reinforce_plus_plus",
    "reinforce_plus_plus_baseline": "reinforce_plus_plus_baseline",
    "gae": "gae",  # PPO: verl's critic worker gives the values (critic_settings)
}
ALGORITHMS = ("grpo",)  # algorithm.name: group rollouts and verl's PPO-clip actor loss
KL_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full")
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
POLICY_LOSSES = ("vanilla", "gspo")  # algorithm.policy_loss -> actor.policy_loss.loss_mode, the same names


@attrs.frozen
class RunFiles:
    """Where the launcher puts what verl reads, all inside the run directory."""

    run_dir: Path
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]
    agent_loop_config: Path

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"


def verl_overrides(spec: Spec, config: VerlConfig, files: RunFiles, *, model_path: str) -> list[Override]:
    """Every verl key we set, then the `verl:` block's keys; raises SpecError on impossible settings."""
    check(spec, config)
    algo = spec.algorithm
    out: list[Override] = []

    def put(key: str, value: Any, origin: str) -> None:
        out.append(Override(key, value, origin))

    actor, rollout, ref = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"
    # model
    put("actor_rollout_ref.model.path", model_path, "model.path")
    if spec.model.tokenizer:
        put("actor_rollout_ref.model.tokenizer_path", spec.model.tokenizer, "model.tokenizer")
    lora = spec.model.lora
    if lora is not None:  # verl's FSDP LoRA (peft underneath); it has no dropout setting (check())
        put("actor_rollout_ref.model.lora_rank", lora.rank, "model.lora.rank")
        put("actor_rollout_ref.model.lora_alpha", lora.alpha, "model.lora.alpha")
        targets = list(lora.target_modules)
        put("actor_rollout_ref.model.target_modules", "all-linear" if targets == ["all-linear"] else targets,
            "model.lora.target_modules")
    if spec.model.gradient_checkpointing is not None:  # unset: verl's own default (on)
        put("actor_rollout_ref.model.enable_gradient_checkpointing", spec.model.gradient_checkpointing,
            "model.gradient_checkpointing")
    for key, value, origin in precision_settings(spec, config):
        put(key, value, origin)
    # GRPO (algorithm:) and the advantage estimator: verl's own where it has ours, else verl's GRPO (ours replaces it)
    advantage = spec.component("backend.advantage")
    estimator = estimator_name(spec)
    put("algorithm.adv_estimator", ADV_ESTIMATORS.get(estimator, "grpo"),
        "backend.advantage.name" if advantage is not None and advantage.name else "algorithm.name")
    own_norm = getattr(advantage.config, "norm_by_std", None) if advantage is not None else None
    if estimator == "dr_grpo":
        put("algorithm.norm_adv_by_std_in_grpo", False, "backend.advantage.name")
    elif own_norm is not None:  # `backend.advantage: {name: grpo, norm_by_std: ...}` wins, as in the torch backend
        put("algorithm.norm_adv_by_std_in_grpo", own_norm, "backend.advantage.norm_by_std")
    else:
        put("algorithm.norm_adv_by_std_in_grpo", algo.norm_adv_by_std, "algorithm.norm_adv_by_std")
    if estimator == "reinforce_plus_plus":
        put("algorithm.gamma", advantage.config.gamma, "backend.advantage.gamma")
    if uses_critic(spec):
        for key, value, origin in critic_settings(spec, config, model_path=model_path):
            put(key, value, origin)
    put("algorithm.use_kl_in_reward", False, "algorithm.kl_coef")
    put(f"{rollout}.n", algo.group_size, "algorithm.group_size")
    put(f"{actor}.clip_ratio", algo.clip_ratio, "algorithm.clip_ratio")
    # clip-higher: verl's own clip_ratio_low/high (0.2 each) would win over clip_ratio, so both are always set
    for side, own in (("low", algo.clip_ratio_low), ("high", algo.clip_ratio_high)):
        put(f"{actor}.clip_ratio_{side}", algo.clip_ratio if own is None else own,
            "algorithm.clip_ratio" if own is None else f"algorithm.clip_ratio_{side}")
    put(f"{actor}.clip_ratio_c", algo.clip_ratio_c, "algorithm.clip_ratio_c")
    put(f"{actor}.use_kl_loss", algo.kl_coef > 0, "algorithm.kl_coef")
    put(f"{actor}.kl_loss_coef", algo.kl_coef, "algorithm.kl_coef")
    put(f"{actor}.kl_loss_type", algo.kl_type, "algorithm.kl_type")
    put(f"{actor}.loss_agg_mode", algo.loss_agg_mode, "algorithm.loss_agg_mode")
    put(f"{actor}.entropy_coeff", algo.entropy_coeff, "algorithm.entropy_coeff")
    # batches and the optimizer
    put("data.train_batch_size", config.batch_size, "backend.batch_size")
    put(f"{actor}.ppo_mini_batch_size", config.mini_batch_size or config.batch_size, "backend.mini_batch_size")
    for key in (f"{actor}.ppo_micro_batch_size_per_gpu", f"{rollout}.log_prob_micro_batch_size_per_gpu",
                f"{ref}.log_prob_micro_batch_size_per_gpu"):
        put(key, config.micro_batch_size, "backend.micro_batch_size")
    put(f"{actor}.ppo_epochs", config.ppo_epochs, "backend.ppo_epochs")
    put(f"{actor}.optim.lr", config.lr, "backend.lr")
    put(f"{actor}.optim.lr_warmup_steps", config.warmup_steps if config.warmup_steps else -1, "backend.warmup_steps")
    put(f"{actor}.optim.weight_decay", config.weight_decay, "backend.weight_decay")
    put(f"{actor}.grad_clip", config.grad_clip, "backend.grad_clip")
    # our trainer (sync_trainer.py): verl computes GRPO, then our estimator replaces it; guided samples
    # trained without their lessons are marked off-policy, and our policy loss clips them
    if own_trainer(spec):
        put("trainer.v1.trainer_mode", OUR_TRAINER, "backend.advantage.name" if own_estimator(spec)
            else "experience" if guided(spec) else "backend.rollout_mode")
    if config.rollout_mode != "sync":
        for key, value in async_rollout_settings(config).items():
            put(key, value, f"backend.{'tis_cap' if 'rollout_correction' in key else 'rollout_mode'}")
    if guided(spec):
        put(f"{actor}.policy_loss.loss_mode", OFF_POLICY_LOSS, "experience.training")
    elif algo.policy_loss != "vanilla":  # GSPO: verl's "gspo" loss mode
        put(f"{actor}.policy_loss.loss_mode", algo.policy_loss, "algorithm.policy_loss")
    # rollout: vLLM (or our CPU rollout), token budgets, sampling, our agent loop
    put(f"{rollout}.name", "vllm" if config.device == "cuda" else CPU_ROLLOUT, "backend.device")
    put(f"{rollout}.mode", "async", "backend.name")
    put(f"{rollout}.calculate_log_probs", True, "backend.name")
    put("data.max_prompt_length", config.max_prompt_tokens, "backend.max_prompt_tokens")
    put("data.max_response_length", config.max_response_tokens, "backend.max_response_tokens")
    put(f"{rollout}.temperature", config.temperature, "backend.temperature")
    put(f"{rollout}.top_p", config.top_p, "backend.top_p")
    put(f"{rollout}.val_kwargs.temperature", config.val_temperature, "backend.val_temperature")
    put(f"{rollout}.val_kwargs.do_sample", config.val_temperature > 0, "backend.val_temperature")
    put(f"{rollout}.tensor_model_parallel_size", config.tensor_parallel, "backend.tensor_parallel")
    put(f"{rollout}.gpu_memory_utilization", config.gpu_memory_utilization, "backend.gpu_memory_utilization")
    put(f"{rollout}.agent.default_agent_loop", AGENT_NAME, "backend.name")
    put(f"{rollout}.agent.agent_loop_config_path", str(files.agent_loop_config), "backend.name")
    # data: the mixed tasks, written by the launcher (each epoch's mix in order: no shuffling here)
    put("data.train_files", list(files.train_files), "tasks.train")
    put("data.val_files", list(files.val_files or files.train_files), "tasks.val")
    put("data.shuffle", False, "mixture")
    put("data.seed", spec.run.seed, "run.seed")
    put("data.return_raw_chat", True, "backend.name")
    # length of the run: the data file holds every epoch's mix back to back (see data.py)
    put("trainer.total_epochs", 1, "backend.epochs")
    if config.total_steps is not None:
        put("trainer.total_training_steps", config.total_steps, "backend.total_steps")
    # cluster
    put("trainer.nnodes", config.nodes, "backend.nodes")
    put("trainer.n_gpus_per_node", config.gpus_per_node, "backend.gpus_per_node")
    if config.device == "cpu":
        for key, value in cpu_settings(config).items():
            put(key, value, "backend.device")
    # outputs: names, checkpoints in our run dir, validation, logging to a file we read
    put("trainer.project_name", config.project, "backend.project")
    put("trainer.experiment_name", spec.run.name, "run.name")
    put("trainer.default_local_dir", str(files.checkpoints), "run.output_dir")
    put("trainer.save_freq", config.save_every if config.save_every else -1, "backend.save_every")
    put("trainer.max_actor_ckpt_to_keep", config.keep_checkpoints, "backend.keep_checkpoints")
    put("trainer.test_freq", config.eval_every if config.eval_every else -1, "backend.eval_every")
    put("trainer.val_before_train", bool(config.eval_every and files.val_files), "backend.eval_every")
    put("trainer.resume_mode", "auto", "--resume")
    put("trainer.logger", ["console", "file"], "backend.name")
    # the user's own verl keys last: they win
    for key, value in flatten(config.verl).items():
        if key == "trainer.logger":  # our metrics.jsonl is read from verl's file logger: keep it
            value = [value] if isinstance(value, str) else list(value)
            value += [] if "file" in value else ["file"]
        put(key, value, f"backend.verl.{key.lstrip('+')}")
    return out


def estimator_name(spec: Spec) -> str:
    """The name `backend.advantage` selects (`grpo` when unset)."""
    advantage = spec.component("backend.advantage")
    return (advantage.name if advantage is not None else None) or "grpo"


def own_estimator(spec: Spec) -> bool:
    """True when `backend.advantage` names an estimator verl does not have (`gigpo`, `adca`, a third
    party's): it runs in our trainer. verl computes those of `ADV_ESTIMATORS` itself."""
    return estimator_name(spec) not in ADV_ESTIMATORS


def guided(spec: Spec) -> bool:
    """True when the spec has experience-guided rollouts (an `experience` store)."""
    experience = spec.component("experience")
    return experience is not None and experience.registration is not None


def failure_aware(spec: Spec) -> bool:
    """True for a synchronous run that leaves verl's trainer mode to us (no native
    `trainer.v1.trainer_mode`): our trainer then writes every estimator's advantages, so that a
    failed episode leaves its group's statistics (`advantages.estimate_finished`), which verl's own
    estimators cannot do. Ours equal verl's otherwise (plugins/advantages' parity tests). In verl's
    other (V1) trainers our agent loop keeps failures out of verl's groups instead (`group_gate`)."""
    config = spec.component("backend").config
    native = flatten(getattr(config, "verl", None) or {}).get("trainer.v1.trainer_mode")
    return getattr(config, "rollout_mode", "sync") == "sync" and native in (None, OUR_TRAINER)


def our_advantages(spec: Spec) -> bool:
    """True when our estimator writes the advantages in verl's trainer: an estimator verl lacks, or
    any critic-free estimator of a synchronous run (`failure_aware`). verl computes `gae` itself,
    from its critic worker's values (a failed episode's tokens stay in, with its reward 0)."""
    return own_estimator(spec) or (failure_aware(spec) and not uses_critic(spec))


def own_trainer(spec: Spec) -> bool:
    """True when verl runs our trainer (sync_trainer.py): our advantages or guided rollouts."""
    return our_advantages(spec) or guided(spec)


def async_rollout_settings(config: VerlConfig) -> dict[str, Any]:
    """`backend.rollout_mode` one_step_off | async as verl 0.9.1's V1 `colocate_async` trainer.

    verl 0.9.1 ships three asynchronous trainers: `verl.experimental.one_step_off_policy` and
    `verl.experimental.fully_async_policy` (inside the wheel, each with its own entry point and a
    rollout GPU pool apart from the trainer's), and the V1 trainer's `trainer.v1.trainer_mode`
    `colocate_async` / `separate_async` (`verl.trainer.ppo.v1`), selected in the `main_ppo` we launch.
    `colocate_async` shares the GPUs as our sync runs do: it starts `num_warmup_batches` batches ahead,
    interrupts the rollout for each update (partial rollouts resume with the new weights, invisibly
    to the agent loop) and drops samples whose prompt started more than `max_off_policy_threshold`
    versions back, counting the current one (hence max_staleness + 1). The lag is corrected by
    verl's token-level TIS: `rollout_correction.rollout_is: token` capped at `rollout_is_threshold`.
    `separate_async` needs a rollout pool of its own (set it through `backend.verl` yourself).
    """
    return {
        "trainer.v1.trainer_mode": "colocate_async",
        "trainer.v1.colocate_async.num_warmup_batches": config.max_staleness,
        "trainer.v1.sampler.max_off_policy_threshold": config.max_staleness + 1,
        "trainer.v1.sampler.max_off_policy_strategy": "drop",
        "algorithm.rollout_correction.rollout_is": "token",
        "algorithm.rollout_correction.rollout_is_threshold": config.tis_cap,
    }


def precision_settings(spec: Spec, config: VerlConfig) -> list[tuple[str, Any, str]]:
    """`model.param_dtype` and `model.dtype` as verl 0.9.1's FSDP engine reads them (key, value, our key).

    `fsdp_config.model_dtype` is the dtype verl loads the model in and FSDP keeps sharded: the
    weights, their gradients and AdamW's state (verl's own default fp32). `fsdp_config.mixed_precision`
    is FSDP's `MixedPrecision` (`MixedPrecisionPolicy` on fsdp2): its `param_dtype` is what the
    unsharded weights are cast to for forward and backward, and verl's `forward_step` autocasts to
    it too (none when fp32); a float16 one gets verl's `ShardedGradScaler`. Unset, it computes in bf16,
    so it is always set, for the actor and the reference policy (which computes the KL to the
    actor's log-probs). `fsdp_config.dtype` is read by verl's Megatron engine only. The rollout's
    vLLM computes in `rollout.dtype`. On `backend.device: cpu` (our fp32 rollout, FSDP2 on gloo)
    only float32 runs (`check_precision`).
    """
    precision = resolve(spec.model, gpu=config.device == "cuda", where=spec.path or "the spec")
    warn_if_pure(precision, backend="verl")
    out: list[tuple[str, Any, str]] = []
    for role in ("actor", "ref"):
        out.append((f"actor_rollout_ref.{role}.fsdp_config.model_dtype", SHORT[precision.params], "model.param_dtype"))
        out.append((f"+actor_rollout_ref.{role}.fsdp_config.mixed_precision", fsdp_mixed_precision(precision),
                    "model.dtype"))
    out.append(("actor_rollout_ref.rollout.dtype", precision.compute, "model.dtype"))
    return out


def critic_settings(spec: Spec, config: VerlConfig, *, model_path: str) -> list[tuple[str, Any, str]]:
    """PPO's critic as verl's critic worker (key, value, our key): its model (`critic.path`, else the
    policy's), optimizer, clip, warm-up, and the backend's batches, epochs, precision, LoRA and
    gradient checkpointing, as the torch backend's critic has them; on `backend.device: cpu` the same
    FSDP2-over-gloo settings as the actor (`cpu_settings`)."""
    critic, advantage = spec.critic or CriticSection(), spec.component("backend.advantage").config
    out: list[tuple[str, Any, str]] = [
        ("algorithm.gamma", advantage.gamma, "backend.advantage.gamma"),
        ("algorithm.lam", advantage.lam, "backend.advantage.lam"),
        ("critic.enable", True, "backend.advantage.name"),
        ("critic.model.path", critic.path or model_path, "critic.path" if critic.path else "model.path"),
        ("critic.model.tokenizer_path", spec.model.tokenizer or model_path,
         "model.tokenizer" if spec.model.tokenizer else "model.path"),
        ("critic.optim.lr", critic.lr, "critic.lr"),
        ("critic.optim.weight_decay", config.weight_decay, "backend.weight_decay"),
        ("critic.optim.clip_grad", config.grad_clip, "backend.grad_clip"),
        ("critic.ppo_micro_batch_size_per_gpu", config.micro_batch_size, "backend.micro_batch_size"),
        ("critic.cliprange_value", critic.cliprange_value, "critic.cliprange_value"),
        ("trainer.critic_warmup", critic.warmup_steps, "critic.warmup_steps"),
    ]
    precision = resolve(spec.model, gpu=config.device == "cuda", where=spec.path or "the spec")
    out += [("critic.fsdp.model_dtype", SHORT[precision.params], "model.param_dtype"),
            ("+critic.fsdp.mixed_precision", fsdp_mixed_precision(precision), "model.dtype")]
    if spec.model.gradient_checkpointing is not None:
        out.append(("critic.model.enable_gradient_checkpointing", spec.model.gradient_checkpointing,
                    "model.gradient_checkpointing"))
    lora = spec.model.lora
    if lora is not None:
        targets = list(lora.target_modules)
        out += [("critic.model.lora_rank", lora.rank, "model.lora.rank"),
                ("critic.model.lora_alpha", lora.alpha, "model.lora.alpha"),
                ("critic.model.target_modules", "all-linear" if targets == ["all-linear"] else targets,
                 "model.lora.target_modules")]
    if config.device == "cpu":
        out += [("critic.strategy", "fsdp2", "backend.device"),
                ("critic.fsdp.strategy", "fsdp2", "backend.device"),
                ("critic.fsdp.use_torch_compile", False, "backend.device"),
                ("critic.model.use_remove_padding", False, "backend.device"),
                ("critic.model.external_lib", "beyondagent_plugin_verl.cpu_process_group", "backend.device"),
                ("critic.model.override_config", {"attn_implementation": "sdpa"}, "backend.device")]
    return out


def fsdp_mixed_precision(precision: Any) -> dict[str, str]:
    """FSDP's mixed precision for a resolved precision: compute in its dtype, reduce and buffer in fp32."""
    return {"param_dtype": SHORT[precision.compute], "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def cpu_settings(config: VerlConfig) -> dict[str, Any]:
    """verl's trainer on CPU processes: our platform and rollout (cpu_platform.py, cpu_rollout.py).

    Each of `gpus_per_node` trainer workers is a process holding one *logical* Ray GPU (Ray only
    counts them); FSDP2 over gloo in fp32 with PyTorch's own attention (no flash-attn, no padding
    removal, no torch.compile); one transfer-queue storage unit, one reward worker and
    `CPU_AGENT_LOOP_WORKERS` agent-loop workers where verl defaults to eight each, for a machine
    with a few cores (each worker is a process importing torch and verl: eight of them took ~65 s
    of a 1-step CPU run's start on 2 cores).
    """
    actor, ref, model = "actor_rollout_ref.actor", "actor_rollout_ref.ref", "actor_rollout_ref.model"
    return {
        "trainer.device": "cpu",
        f"{actor}.strategy": "fsdp2",
        f"{ref}.strategy": "fsdp2",
        f"{actor}.fsdp_config.strategy": "fsdp2",  # float32 throughout: precision_settings (auto: float32)
        f"{actor}.fsdp_config.use_torch_compile": False,
        f"{actor}.use_torch_compile": False,
        f"{model}.use_remove_padding": False,
        f"{model}.external_lib": "beyondagent_plugin_verl.cpu_process_group",
        f"{model}.override_config": {"attn_implementation": "sdpa"},
        "actor_rollout_ref.rollout.free_cache_engine": False,
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
        "reward.num_workers": 1,
        "actor_rollout_ref.rollout.agent.num_workers": CPU_AGENT_LOOP_WORKERS,
        "data.dataloader_num_workers": 0,
        "ray_kwargs.ray_init.num_cpus": CPU_RAY_SLOTS,
        "+ray_kwargs.ray_init.num_gpus": config.gpus_per_node,
        # Ray's dashboard is ten more processes on a few cores; verl reads its cluster from the GCS
        # (ray.nodes()), never from the dashboard.
        "+ray_kwargs.ray_init.include_dashboard": False,
    }


def check(spec: Spec, config: VerlConfig) -> None:
    """What verl would reject later (or worse, accept), said in our keys."""
    algo, where = spec.algorithm, f"{spec.path or 'the spec'}"
    if uses_critic(spec) and estimator_name(spec) not in ADV_ESTIMATORS:
        raise SpecError(f"the advantage estimator {estimator_name(spec)!r} reads a critic's values; on the verl "
                        "backend only verl's own critic estimator (gae) runs with a critic",
                        where=f"{where}, key backend.advantage.name",
                        hint="use backend.advantage: {name: gae} here, or the torch backend, whose trainer gives any "
                             "estimator its critic's values")
    if spec.model.lora is not None and spec.model.lora.dropout:
        raise SpecError(f"the verl backend's LoRA has no dropout (verl's FSDP LoRA takes lora_rank, lora_alpha and "
                        f"target_modules only), but model.lora.dropout is {spec.model.lora.dropout}",
                        where=f"{where}, key model.lora.dropout",
                        hint="set model.lora.dropout: 0 for verl (the torch backend applies it)")
    if algo.name not in ALGORITHMS:
        raise SpecError(f"the verl backend maps algorithm.name {', '.join(ALGORITHMS)}, not {algo.name!r}",
                        where=f"{where}, key algorithm.name",
                        hint="set algorithm.name: grpo; the advantage estimator is backend.advantage.name "
                             f"(verl's own: {', '.join(ADV_ESTIMATORS)}; others run in our trainer)")
    if flatten(config.verl).get("data.shuffle") not in (None, False):
        raise SpecError("backend.verl sets data.shuffle, but the data file holds every epoch's mix in the order the "
                        "mixer chose (a step's rows are its tasks; episode records and resume rely on it)",
                        where=f"{where}, key backend.verl.data.shuffle",
                        hint="remove it: the mixer (mixture:) orders each epoch, seeded by run.seed")
    if config.device == "cpu" and (config.ray_address or config.nodes > 1):
        raise SpecError("backend.device: cpu starts a local Ray with logical GPUs on this machine; it does not join "
                        "a cluster", where=f"{where}, key backend.device",
                        hint="use device: cuda on a GPU cluster, or nodes: 1 and no ray_address on CPU")
    trainer_mode = flatten(config.verl).get("trainer.v1.trainer_mode")
    if own_estimator(spec) and trainer_mode not in (None, OUR_TRAINER):
        raise SpecError(f"backend.advantage {spec.component('backend.advantage').name!r} runs in verl's synchronous "
                        f"trainer (ours, `{OUR_TRAINER}`), but backend.verl sets trainer.v1.trainer_mode: "
                        f"{trainer_mode}", where=f"{where}, key backend.verl.trainer.v1.trainer_mode",
                        hint="remove that key, or use backend.advantage: {name: grpo} with verl's async trainers")
    if guided(spec) and trainer_mode not in (None, OUR_TRAINER):
        raise SpecError(f"experience-guided rollouts run in verl's synchronous trainer (ours, `{OUR_TRAINER}`), but "
                        f"backend.verl sets trainer.v1.trainer_mode: {trainer_mode}",
                        where=f"{where}, key backend.verl.trainer.v1.trainer_mode",
                        hint="remove that key, or the experience block, to use verl's async trainers")
    check_rollout_mode(spec, config, where, trainer_mode)
    check_precision(spec, config, where)
    loss_mode = flatten(config.verl).get("actor_rollout_ref.actor.policy_loss.loss_mode")
    if guided(spec) and loss_mode not in (None, OFF_POLICY_LOSS):
        raise SpecError(f"experience-guided rollouts train with our policy loss (`{OFF_POLICY_LOSS}`: verl's PPO clip, "
                        f"with experience.off_clip_high and dual_clip on samples trained without their lessons), but "
                        f"backend.verl sets actor_rollout_ref.actor.policy_loss.loss_mode: {loss_mode}",
                        where=f"{where}, key backend.verl.actor_rollout_ref.actor.policy_loss.loss_mode",
                        hint="remove that key, or the experience block")
    if algo.group_size < 2 and not uses_critic(spec):
        raise SpecError(f"algorithm.group_size is {algo.group_size}; GRPO compares rollouts within a group, "
                        "so it needs at least 2", where=f"{where}, key algorithm.group_size",
                        hint="use 4 to 16, or PPO (backend.advantage: {name: gae}), whose critic is the baseline")
    if algo.kl_type not in KL_TYPES:
        raise SpecError(f"unknown algorithm.kl_type {algo.kl_type!r}", where=f"{where}, key algorithm.kl_type",
                        hint=f"verl's KL types: {', '.join(KL_TYPES)}")
    if algo.loss_agg_mode not in LOSS_AGG_MODES:
        raise SpecError(f"unknown algorithm.loss_agg_mode {algo.loss_agg_mode!r}",
                        where=f"{where}, key algorithm.loss_agg_mode", hint=f"one of {', '.join(LOSS_AGG_MODES)}")
    check_dapo_options(spec, where)
    gpus = config.nodes * config.gpus_per_node
    sequences = config.batch_size * algo.group_size
    if sequences % gpus:
        raise SpecError(f"a step has backend.batch_size x algorithm.group_size = {config.batch_size} x "
                        f"{algo.group_size} = {sequences} episodes, which {gpus} GPUs (backend.nodes x "
                        "backend.gpus_per_node) cannot share evenly",
                        where=f"{where}, key backend.batch_size", hint=f"make {sequences} a multiple of {gpus}")
    mini = config.mini_batch_size or config.batch_size
    if config.batch_size % mini:
        raise SpecError(f"backend.mini_batch_size {mini} does not divide backend.batch_size {config.batch_size}",
                        where=f"{where}, key backend.mini_batch_size", hint="use a divisor of batch_size, or null")
    if (mini * algo.group_size) % gpus:
        raise SpecError(f"a mini-batch has {mini} x {algo.group_size} episodes, which {gpus} GPUs cannot share "
                        "evenly", where=f"{where}, key backend.mini_batch_size",
                        hint=f"make mini_batch_size x group_size a multiple of {gpus}")
    if config.gpus_per_node % config.tensor_parallel:
        raise SpecError(f"backend.tensor_parallel {config.tensor_parallel} does not divide backend.gpus_per_node "
                        f"{config.gpus_per_node}", where=f"{where}, key backend.tensor_parallel",
                        hint="a vLLM replica's GPUs must be on one node: use a divisor of gpus_per_node")


def check_rollout_mode(spec: Spec, config: VerlConfig, where: str, trainer_mode: Any) -> None:
    """`backend.rollout_mode` runs verl's `colocate_async` trainer: not with ours, nor another mode set by hand."""
    if config.rollout_mode == "sync":
        return
    if config.rollout_mode == "one_step_off" and config.max_staleness != 1:
        raise SpecError(f"backend.rollout_mode one_step_off lags one policy version, but backend.max_staleness is "
                        f"{config.max_staleness}", where=f"{where}, key backend.max_staleness",
                        hint="remove max_staleness (one_step_off means 1), or use rollout_mode: async for more")
    if own_trainer(spec):
        reason = (f"backend.advantage {spec.component('backend.advantage').name!r}" if own_estimator(spec)
                  else "experience-guided rollouts")
        raise SpecError(f"backend.rollout_mode {config.rollout_mode} runs verl's colocate_async trainer, but "
                        f"{reason} run in verl's synchronous trainer (ours, `{OUR_TRAINER}`)",
                        where=f"{where}, key backend.rollout_mode",
                        hint="use rollout_mode: sync with them, or verl's own estimator (backend.advantage: "
                             "{name: grpo}) without an experience block")
    if trainer_mode not in (None, "colocate_async"):
        raise SpecError(f"backend.rollout_mode {config.rollout_mode} maps to trainer.v1.trainer_mode: "
                        f"colocate_async, but backend.verl sets {trainer_mode}",
                        where=f"{where}, key backend.verl.trainer.v1.trainer_mode",
                        hint="remove that key, or set backend.rollout_mode: sync and choose verl's mode yourself")


def check_precision(spec: Spec, config: VerlConfig, where: str) -> None:
    """Float32 only on CPU; no `backend.verl` key that keeps other weights or computes in another dtype
    than `model.param_dtype` / `model.dtype` say (pure bf16 training only when the spec asks for it)."""
    model = spec.model
    if config.device == "cpu":
        for key, value in (("model.dtype", model.dtype), ("model.param_dtype", model.param_dtype)):
            if value not in ("auto", "float32"):
                raise SpecError(f"backend.device: cpu trains in float32 only (our CPU rollout and FSDP2 on gloo), "
                                f"but {key} is {value}", where=f"{where}, key {key}",
                                hint=f"remove {key} (auto and the float32 default are float32 on CPU), or "
                                     "use device: cuda")
    precision = resolve(model, gpu=config.device == "cuda", where=where)
    refuse_native_conflict(flatten(config.verl), precision, model, backend="verl",
                           rollout_dtype_key="actor_rollout_ref.rollout.dtype", where=where,
                           sets="the actor's weights and AdamW's state, FSDP's compute dtype and vLLM's")


def check_dapo_options(spec: Spec, where: str) -> None:
    """DAPO's and GSPO's `algorithm` options: verl's own keys where verl 0.9.1 honours them, else refused."""
    algo = spec.algorithm
    if algo.policy_loss not in POLICY_LOSSES:
        raise SpecError(f"unknown algorithm.policy_loss {algo.policy_loss!r}", where=f"{where}, key algorithm.policy_loss",
                        hint=f"one of {', '.join(POLICY_LOSSES)} (verl's actor.policy_loss.loss_mode of the same name)")
    if algo.policy_loss != "vanilla" and guided(spec):
        raise SpecError(f"algorithm.policy_loss {algo.policy_loss!r} cannot go with experience-guided rollouts on "
                        f"verl: they train with our own loss mode (`{OFF_POLICY_LOSS}`: verl's vanilla PPO clip with "
                        "experience.off_clip_high and dual_clip on samples trained without their lessons)",
                        where=f"{where}, key algorithm.policy_loss",
                        hint="use policy_loss: vanilla with experience on verl, or the torch backend (both there)")
    if algo.overlong is not None:
        raise SpecError("the verl backend cannot apply algorithm.overlong: verl's overlong buffer belongs to its "
                        "`dapo` reward manager (reward.reward_kwargs.overlong_buffer_cfg), which never runs on our "
                        "episodes: our agent loop scores each one with the spec's judge and hands verl the score",
                        where=f"{where}, key algorithm.overlong",
                        hint="remove algorithm.overlong, or use the torch backend (which applies it)")
    if algo.dynamic_sampling:
        raise SpecError("the verl backend cannot honour algorithm.dynamic_sampling: verl 0.9.1's V1 trainer filters "
                        "groups (algorithm.filter_groups) but its replay buffer ignores max_num_gen_batches, so "
                        "nothing bounds the refills (a step whose groups all score alike samples on and on), and its "
                        "refills read the next rows of the data file, whose rows are each step's tasks in the "
                        "mixer's order (episode records, guidance and --resume rely on that)",
                        where=f"{where}, key algorithm.dynamic_sampling",
                        hint="use the torch backend, or set backend.verl.algorithm.filter_groups: {enable: true, "
                             "metric: reward} yourself if you accept both")
    if algo.sft is not None:
        raise SpecError("the verl backend cannot run algorithm.sft before RL: verl's PPO trainer has no warm-up "
                        "phase; supervised fine-tuning is its separate trainer (verl.trainer.fsdp_sft_trainer) on a "
                        "parquet of conversations, whose checkpoint an RL run then starts from",
                        where=f"{where}, key algorithm.sft",
                        hint="remove algorithm.sft and run verl's SFT trainer first (model.path: its checkpoint), "
                             "or warm up with the torch backend (`beyondagent sft SPEC` saves a checkpoint)")
