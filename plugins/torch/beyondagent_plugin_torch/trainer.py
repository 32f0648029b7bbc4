"""The torch backend's training loop: rollout, score, advantages, update, log, save.

Each step takes the next `batch_size` tasks of the epoch's mix, runs each
`algorithm.group_size` times through the workflow against the policy (episodes in flight
together, their model turns batched), computes group-normalized advantages from the rewards,
and updates the policy with GRPO's clipped loss. Validation runs on the val tasks every
`eval_every` steps (and before the first and after the last step); checkpoints every
`save_every` steps and at the end; `report.html` at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import json
import math
import random
import shutil
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import torch

from beyondagent_core import metric_names, reproduce
from beyondagent_core.advantages import (
    AdvantageBatch,
    AdvantageError,
    ESTIMATOR_FILE,
    estimate_finished,
    load_estimator,
    save_estimator,
    scored_episode,
    uses_critic,
)
from beyondagent_core.context import DEFAULT_ADVANTAGE, RunContext, TrainingData
from beyondagent_core.episode_records import (
    EPISODES_FILE,
    EpisodeSampling,
    PieceCache,
    episode_record,
    token_view,
)
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.failures import FailureTally, check_failures
from beyondagent_plugin_gateway.samples import joined_view
from beyondagent_core.jsonl import append_jsonl, write_jsonl
from beyondagent_core.logs import get_logger
from beyondagent_core.runtime.guidance import (
    Guidance,
    stripped_sequence,
    trains_stripped,
)
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.spec import CriticSection, Spec
from beyondagent_core.types import Task
from beyondagent_plugin_torch.async_rollout import (
    DeviceTurns,
    RolloutPipeline,
    policy_version,
    rollout_lag,
    split_stale,
)
from beyondagent_plugin_torch.checkpoint import (
    check_resumable,
    checkpoints,
    latest_checkpoint,
    load_training_state,
    save_checkpoint,
)
from beyondagent_plugin_torch.critic import CRITIC_DIR, Critic, explained_variance, load_value_model

from beyondagent_plugin_torch.config import RESUMABLE_KEYS, TorchConfig, check_algorithm, overlong_max_len
from beyondagent_plugin_torch.device_memory import peak_metrics, reset_peak
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.slots import make_scheduler
from beyondagent_plugin_torch.grpo import overlong_penalty
from beyondagent_plugin_torch.lora import (
    MERGED_DIR,
    BaseWeights,
    is_adapter_dir,
    load_adapters,
    merged_model,
    trainable_parameters,
    with_adapters,
)
from beyondagent_plugin_torch.metrics_log import (
    SAMPLES_FILE,
    MetricsLog,
    read_metrics,
    read_samples,
)
from beyondagent_plugin_torch.models import (
    enable_gradient_checkpointing,
    load_policy,
    resolve_attention,
    resolve_device,
    resolve_model_path,
)
from beyondagent_plugin_torch.opponent_pool import POOL_DIR, OpponentPool, describe_pool
from beyondagent_plugin_torch.policy_llm import PolicyLLM
from beyondagent_plugin_torch.precision import RolloutWeights, resolve_precision
from beyondagent_plugin_torch.rollout import Episode, episode_seed, rollout
from beyondagent_plugin_torch.sft import KEY as SFT_KEY
from beyondagent_plugin_torch.sft import (
    data_file,
    end_of_turn_id,
    file_examples,
    is_sft_only,
    reference_examples,
    sft_update,
)
from beyondagent_plugin_torch.update import episode_arrays, grpo_update, make_batch

log = get_logger("beyondagent.torch")

GAME_OUTCOMES = ("win", "draw", "loss", "unfinished")  # against an opponent: outcome_metrics
# What a fresh run moves aside when its run directory holds an earlier training.
TRAINING_OUTPUTS = ("checkpoints", "metrics.jsonl", "samples.jsonl", "episode_errors.jsonl", "report.html",
                    "tensorboard", EPISODES_FILE)


class TorchBackend:
    """`backend: {name: torch}`: GRPO in this process (see the module docstring)."""

    def __init__(self, config: TorchConfig):
        self.config = config

    def train(self, data: TrainingData, run: RunContext) -> dict[str, Any]:
        return Trainer(self.config, data, run).fit()

    def describe(self, run: RunContext) -> str:
        """`--dry-run`: the algorithm's settings checked as a run checks them, and what the steps will do."""
        check_algorithm(run.spec, self.config)
        return describe_algorithm(run.spec, self.config)

    @staticmethod
    def checkpoint_model(root: Path, *, merge: bool, say: Callable[[str], None]) -> Path | None:
        """`beyondagent eval --checkpoint NAME`: a model the torch plugin makes (`tiny`, a known model
        name, a `.gguf` file) as its checkpoint directory, fetched or converted first unless `merge`
        is False (a dry run: where it would be); None for anything else (a directory: the core's)."""
        from beyondagent_plugin_torch.known_models import KNOWN_MODELS
        from beyondagent_plugin_torch.models import is_prepared_here, resolve_model_path

        lora_step = lora_checkpoint(root)
        if lora_step is not None:  # adapters only: merged into the base model once (lora.py)
            return merged_model(lora_step, say=say) if merge else lora_step / MERGED_DIR
        name = str(root)
        if not is_prepared_here(name):
            return None
        if not merge and name in KNOWN_MODELS:
            from beyondagent_plugin_torch.model_fetch import fetched_dir

            return fetched_dir(name)
        say(f"preparing {name} (fetched or converted once, then cached)")
        return Path(resolve_model_path(name, where="--checkpoint"))

    def check_resume(self, run_dir: Path, spec: Spec) -> None:
        """Refuse a `--resume` with no checkpoint or a changed spec, before the run dir is touched."""
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise RunError(f"nothing to resume: {run_dir} has no checkpoint", where=str(run_dir / "checkpoints"),
                           hint="run without --resume to start, or set backend.save_every to save during a run")
        check_resumable(checkpoint, spec_snapshot(spec), backend_volatile=RESUMABLE_KEYS, spec_path=str(spec.path),
                        backend_defaults=attrs.asdict(TorchConfig()))

    @contextlib.contextmanager
    def policy_llm(self, run: RunContext) -> Iterator[PolicyLLM]:
        """The starting policy as a chat LLM (`llm: policy` during exploration, before training)."""
        spec, config = run.spec, self.config
        device = resolve_device(config.device, where=f"{spec.path}, key backend.device")
        # Inference only: the weights are loaded in the compute dtype (no optimizer to keep them for).
        dtype = resolve_precision(spec.model.dtype, spec.model.param_dtype, device, where=str(spec.path)).compute
        attention = resolve_attention(config.attn_implementation, device, dtype,
                                      where=f"{spec.path}, key backend.attn_implementation")
        model, tokenizer = load_policy(spec.model.path, tokenizer=spec.model.tokenizer, device=device, dtype=dtype,
                                       attention=attention, where=f"{spec.path}, key model.path")
        template = ChatTemplate(tokenizer)
        scheduler = make_scheduler(model, kv_layout=config.kv_layout, compile_decode=config.compile_decode,
                                   max_episode_tokens=config.max_episode_tokens, where=str(spec.path),
                                   eos_token_ids=stop_token_ids(model, tokenizer, template),
                                   pad_token_id=tokenizer.pad_token_id, max_batch_size=config.max_concurrency,
                                   kv_cache_tokens=config.kv_cache_tokens, batching=config.batching)
        yield PolicyLLM(scheduler, template, Sampling(config.temperature, config.top_p, config.max_new_tokens),
                        max_episode_tokens=config.max_episode_tokens, seed=run.info.seed)


@attrs.define
class RolloutBatch:
    """A step's episodes: every one generated, those the update trains on, and the rollout's metrics."""

    epoch: int
    generated: list[Episode]
    trained: list[Episode]
    metrics: dict[str, float]


class Trainer:
    critic: Critic | None = None  # PPO's value model (an estimator that uses values), set in __init__

    def __init__(self, config: TorchConfig, data: TrainingData, run: RunContext):
        spec = run.spec
        check_algorithm(spec, config)
        self.config, self.data, self.run, self.algorithm = config, data, run, spec.algorithm
        self.runner = run.episode_runner()  # env, workflow and judge fail here, before the model loads
        self.estimator = run.advantage_estimator()
        experience = spec.component("experience")
        self.guidance = (Guidance(experience.block, run.build("experience"))
                         if experience is not None and experience.registration is not None else None)
        self.estimator_name = (spec.component("backend.advantage").name
                               if spec.component("backend.advantage") is not None else None) or DEFAULT_ADVANTAGE
        self.spec_snapshot = spec_snapshot(spec)
        self._warned_flat_groups = False
        self._warned_empty_pool = False
        self.resumed_from: Path | None = None  # the checkpoint directory a --resume loaded
        first_epoch = data.epoch_tasks(0)
        if not first_epoch:
            raise RunError("there are no training tasks", where=f"{spec.path}, key tasks.train",
                           hint="check the task source and the mixture")
        self.steps_per_epoch = math.ceil(len(first_epoch) / config.batch_size)
        # `total_steps` (when set) is the run's length; the epochs then follow from it.
        self.total_steps = config.total_steps or config.epochs * self.steps_per_epoch
        self._epoch_cache: dict[int, list[Task]] = {0: first_epoch}
        # a run stopped by Ctrl-C or SIGTERM says "stopped at step 20 of 80" (in its report too, unless off)
        run.planned_steps, run.report = self.total_steps, config.report

        device = resolve_device(config.device, where=f"{spec.path}, key backend.device")
        # float32 weights and optimizer state, bf16 compute on a GPU (precision.py)
        self.precision = resolve_precision(spec.model.dtype, spec.model.param_dtype, device, where=str(spec.path))
        self.attention = resolve_attention(config.attn_implementation, device, self.precision.compute,
                                           where=f"{spec.path}, key backend.attn_implementation")
        self.device = device
        self.model, self.tokenizer = self._load_policy(spec.model.path, tokenizer=spec.model.tokenizer,
                                                       where=f"{spec.path}, key model.path")
        log.info("train.precision", precision=self.precision.describe())
        reproduce.add(run.run_dir, backend="torch", device=str(device), torch=torch.__version__,
                      precision={"compute": str(self.precision.compute).removeprefix("torch."),
                                 "params": str(self.precision.params).removeprefix("torch.")},
                      model={"spec": spec.model.path, **reproduce.model_digest(resolve_model_path(spec.model.path))})
        self.lora = spec.model.lora
        if self.lora is not None:  # adapters only: the base weights stay frozen (lora.py)
            self.model = with_adapters(self.model, self.lora, seed=run.info.seed, where=f"{spec.path}, key model.lora")
            trainable, total = trainable_parameters(self.model)
            log.info("train.lora", trainable_parameters=trainable, parameters=total,
                     share=round(trainable / max(total, 1), 5))
        context = getattr(self.model.config, "max_position_embeddings", None)
        if context is not None and config.max_episode_tokens > context:
            raise SpecError(f"backend.max_episode_tokens={config.max_episode_tokens} is longer than the model's "
                            f"context ({context} positions)", where=f"{spec.path}, key backend.max_episode_tokens",
                            hint=f"use at most {context}")
        # A frozen copy of the starting policy for the KL loss; none (and no memory) when kl_coef is 0.
        self.ref_model = None
        if self.algorithm.kl_coef > 0:  # with LoRA: the same weights, adapters off (no second copy)
            self.ref_model = self._reference()
        self.template = ChatTemplate(self.tokenizer)
        self.episode_sampling = EpisodeSampling(spec.logging.episodes, seed=run.info.seed)
        self.pieces = PieceCache(lambda ids: self.tokenizer.batch_decode(ids, skip_special_tokens=False))
        self.optimizer = torch.optim.AdamW(trained_parameters(self.model), lr=config.lr,
                                           weight_decay=config.weight_decay)
        warmup = config.warmup_steps
        self.lr_schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / (warmup + 1)) if warmup else 1.0)
        # PPO: an estimator that reads values (gae) gets a critic to give them (critic.py)
        self.critic = self._critic() if uses_critic(spec) else None
        self.start_step = self._resume_or_start_fresh()
        if spec.model.gradient_checkpointing:  # train mode only: rollouts keep their KV cache
            for model in (self.model, *([] if self.critic is None else [self.critic.model])):  # as resumed
                enable_gradient_checkpointing(model, where=f"{spec.path}, key model.gradient_checkpointing")
        # The rollout samples with the policy, or under mixed precision with a copy of it in the compute
        # dtype, refreshed after every optimizer step (precision.py).
        self.rollout_weights = RolloutWeights(self.model, self.precision)
        self.rollout_weights.follow(self.optimizer)
        # Asynchronous rollout: generation and update take turns on the device (async_rollout.py).
        self.turns = DeviceTurns()
        self.scheduler = self.make_scheduler(
            self.rollout_weights.model,
            device_turn=self.turns.generation if config.rollout_mode != "sync" else contextlib.nullcontext)
        # Multi-seat games against frozen snapshots of the policy (opponent_pool.py; rollout sync only).
        self.pool = self._opponent_pool() if config.opponent_pool is not None else None
        # `llm: policy` (a judge, a filter) asks the policy being trained.
        run.policy_llm = PolicyLLM(self.scheduler, self.template,
                                   Sampling(config.temperature, config.top_p, config.max_new_tokens),
                                   max_episode_tokens=config.max_episode_tokens, seed=run.info.seed)

    def make_scheduler(self, model: Any, **options: Any) -> ChatScheduler:
        """The rollout's ChatScheduler over `model` (the policy's rollout weights, or a pool snapshot)."""
        config = self.config
        return make_scheduler(
            model, kv_layout=config.kv_layout, compile_decode=config.compile_decode,
            max_episode_tokens=config.max_episode_tokens, where=str(self.run.spec.path),
            eos_token_ids=stop_token_ids(self.model, self.tokenizer, self.template),
            pad_token_id=self.tokenizer.pad_token_id, max_batch_size=config.max_concurrency,
            kv_cache_tokens=config.kv_cache_tokens, batching=config.batching, **options)

    # --- the loop -------------------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        config, run = self.config, self.run
        if is_sft_only():  # `beyondagent sft`
            return self.fit_warm_up_only()
        # Everything imported and loaded so far lives for the whole run: keep it out of the
        # garbage collector's full passes (each took ~0.35 s on this heap).
        gc.collect()
        gc.freeze()
        final: dict[str, Any] = {}
        log.info("train.started", steps=self.total_steps, start=self.start_step, device=str(self.device),
                 model=run.spec.model.path, tasks_per_epoch=len(self._epoch_cache[0]),
                 group_size=self.algorithm.group_size)
        # On resume, TensorBoard drops what an earlier process logged after the checkpoint (purge_step).
        purge = self.start_step + 1 if self.start_step else None
        with MetricsLog(run.run_dir, tensorboard=config.tensorboard, purge_step=purge) as metrics_log, Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"), transient=False,
        ) as progress:
            bar = progress.add_task("train", total=self.total_steps, completed=self.start_step, info="")
            # The SFT warm-up (algorithm.sft) runs once, before step 0's validation; a resumed run's
            # checkpoint already holds it (`beyondagent sft` then `run --resume`: RL from its step 0).
            fresh = self.start_step == 0 and not self.run.resume
            warm_up = self.warm_up() if fresh and self.algorithm.sft is not None else {}
            if self.pool is not None and not self.pool.entries:  # its first snapshot: the policy RL starts from
                self.pool.take(self.start_step)
            if self.start_step == 0 and self.data.val:
                # said, because it can take a while (a real model on a CPU) and eval_every: 0 does not skip it
                log.info("train.validating", step=0, tasks=len(self.data.val),
                         when="before the first step and after the last, and every backend.eval_every steps",
                         skip="tasks.val: null turns validation off")
                val = self.validate(0, metrics_log)
                metrics_log.write(0, {**warm_up, **val})
                final.update(val)
            elif warm_up:
                metrics_log.write(0, warm_up)
            final.update(warm_up)
            pipeline = self.rollout_pipeline()
            try:
                for step in range(self.start_step + 1, self.total_steps + 1):
                    final.update(self.fit_step(step, metrics_log, pipeline, progress, bar))
            finally:
                if pipeline is not None:
                    pipeline.close()
        if config.report:
            final["report"] = str(self.write_report())
        final["steps"] = self.total_steps
        return {key: value for key, value in final.items() if not key.startswith(("perf/", "rollout/"))}

    def fit_step(self, step: int, metrics_log: MetricsLog, pipeline: RolloutPipeline | None, progress: Any,
                 bar: Any) -> dict[str, Any]:
        """One training step with its validation, checkpoint and progress line; its metrics."""
        config = self.config
        metrics = self.train_step(step, metrics_log, pipeline)
        if self.data.val and (step == self.total_steps or (config.eval_every and step % config.eval_every == 0)):
            with pipeline.paused() if pipeline is not None else contextlib.nullcontext():
                metrics.update(self.validate(step, metrics_log))
        metrics_log.write(step, metrics)
        self.run.step_finished(step, metrics)
        if self.is_save_step(step):
            self.save(step)
        progress.update(bar, completed=step, info=f"reward {metrics['train/reward_mean']:.3f}  "
                        f"success {metrics['train/success_rate']:.2f}")
        return metrics

    def is_save_step(self, step: int) -> bool:
        return step == self.total_steps or bool(self.config.save_every and step % self.config.save_every == 0)

    def rollout_pipeline(self) -> RolloutPipeline | None:
        """The rollout thread of `backend.rollout_mode` one_step_off or async (async_rollout.py); None in sync."""
        config = self.config
        if config.rollout_mode == "sync" or self.start_step >= self.total_steps:
            return None
        lag = rollout_lag(config.rollout_mode, config.max_staleness)
        start = self.start_step

        def version_of(step: int) -> int:
            return policy_version(step, lag=lag, start_step=start, save_steps=self.is_save_step)

        log.info("train.async_rollout", mode=config.rollout_mode, lag=lag, tis_cap=config.tis_cap)
        return RolloutPipeline(self.produce_batch, start_step=start, total_steps=self.total_steps,
                               version_of=version_of)

    def produce_batch(self, step: int, version: int) -> RolloutBatch:
        """Generate the episodes of `step` with the policy as it is (version `version`, see async_rollout.py)."""
        started = time.perf_counter()
        epoch, tasks = self.step_tasks(step)
        generated_before = self.scheduler.stats.generated_tokens
        kv_before = self.scheduler.kv.stats.as_dict()
        generated_episodes, episodes, sampling_metrics = self.sample_batch(step, epoch, tasks)
        for episode in generated_episodes:
            episode.policy_version = version
        seconds = time.perf_counter() - started
        generated = self.scheduler.stats.generated_tokens - generated_before
        kv_metrics = {f"rollout/kv_{name}": value - kv_before[name]
                      for name, value in self.scheduler.kv.stats.as_dict().items()}
        return RolloutBatch(epoch, generated_episodes, episodes, {
            **sampling_metrics, **kv_metrics,
            "perf/tokens_per_s": generated / max(seconds, 1e-9), "perf/rollout_s": seconds})

    def train_step(self, step: int, metrics_log: MetricsLog, pipeline: RolloutPipeline | None = None
                   ) -> dict[str, Any]:
        started = time.perf_counter()
        reset_peak(self.device)
        if pipeline is None:
            rollout_batch, waited = self.produce_batch(step, step - 1), 0.0
        else:  # generated by the rollout thread, while earlier steps updated
            rollout_batch, waited = pipeline.take(step)
        epoch, generated_episodes = rollout_batch.epoch, rollout_batch.generated
        episodes, staleness_metrics = self.fresh_episodes(step, rollout_batch.trained)

        trainable = [i for i, episode in enumerate(episodes) if episode.trainable]
        rows = [episodes[i] for i in trainable]
        # the batch is padded once: the critic values it before the estimator has advantages to place in it
        batch = (make_batch(rows, [0.0] * len(rows), pad_token_id=self.tokenizer.pad_token_id, device=self.device)
                 if rows else None)
        values = self.critic_values(episodes, trainable, batch)
        advantages, step_values, advantage_metrics, returns = self.estimate_advantages(step, episodes, values)
        self.write_episodes(metrics_log, step, "train", episodes, advantages, step_values)
        flat_groups = self.count_flat_groups(step, generated_episodes)
        if not trainable:
            first = next((e.trajectory.error for e in episodes if e.trajectory.error), "no tokens were generated")
            raise RunError(f"step {step}: every episode failed, nothing to train on; first error: {first}",
                           hint="run with -v; episode_errors.jsonl in the run directory has each failure")
        update_started = time.perf_counter()
        batch.advantages = batch.placed(rows, [advantages[i] for i in trainable])
        generator = torch.Generator().manual_seed(episode_seed(self.run.info.seed, "minibatches", step))
        critic_metrics: dict[str, float] = {}
        if self.critic is not None:  # verl's order: the critic regresses on the returns, then the policy updates
            batch.returns = batch.placed(rows, [returns[i] for i in trainable])
            with self.turns.update(self.critic.model) if pipeline is not None else contextlib.nullcontext():
                critic_metrics = self.critic.update(batch, algorithm=self.algorithm, config=self.config,
                                                    generator=torch.Generator().manual_seed(
                                                        episode_seed(self.run.info.seed, "critic", step)))
            explained = explained_variance(batch.values, batch.returns, batch.loss_mask)
            if math.isfinite(explained):  # undefined when the returns do not vary (every episode scored alike)
                critic_metrics["critic/vf_explained_var"] = explained
        if pipeline is None:  # else train mode only within the update's device turns (DeviceTurns)
            self.model.train()
        off_policy_clip = None
        if self.guidance is not None:
            off_policy_clip = (self.guidance.block.off_clip_high, self.guidance.block.dual_clip)
        lagging: dict[str, Any] = {}
        weights_waited = []
        if pipeline is not None:  # gradients while the rollout runs; weights change once it is done
            lagging = {"device_turn": lambda: self.turns.update(self.model),
                       "before_weights_change": lambda: weights_waited.append(pipeline.wait_for_generation())}
        # truncated importance weights: for the lag of an asynchronous rollout, or (rollout_is: true) for
        # the sampling weights' rounding (a bf16 rollout copy under mixed precision)
        if self.config.rollout_is if self.config.rollout_is is not None else pipeline is not None:
            lagging["tis_cap"] = self.config.tis_cap
        if self.critic is not None and step <= self.critic.section.warmup_steps:
            actor = {"actor/update_skipped": 1.0}  # critic.warmup_steps: the policy waits for its critic
            if pipeline is not None:
                weights_waited.append(pipeline.wait_for_generation())
        else:
            actor = grpo_update(self.model, self.ref_model, self.optimizer, batch, algorithm=self.algorithm,
                                config=self.config, temperature=self.config.temperature or 1.0, generator=generator,
                                off_policy_clip=off_policy_clip, **lagging)
            with warnings.catch_warnings():  # a step with nothing to learn took no optimizer step: that is fine
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
                self.lr_schedule.step()
        self.model.eval()
        check_finite(step, self.model, actor)
        if pipeline is not None:
            pipeline.advance()
        update_seconds = time.perf_counter() - update_started
        pool_metrics = self.pool_games(step, generated_episodes) if self.pool is not None else {}
        self.write_samples(metrics_log, step, "train", generated_episodes)
        experience_metrics = self.learn_from(step, generated_episodes) if self.guidance is not None else {}
        step_seconds = time.perf_counter() - started
        return {
            "epoch": epoch,
            **experience_metrics,
            **episode_metrics("train", generated_episodes),
            metric_names.TRAIN_FLAT_GROUPS: flat_groups,
            **advantage_metrics,
            **critic_metrics,
            **actor,
            **pool_metrics,
            "actor/lr": self.optimizer.param_groups[0]["lr"],
            **rollout_batch.metrics,
            **staleness_metrics,
            "perf/step_time_s": step_seconds,
            "perf/update_s": update_seconds,
            **peak_metrics(self.device),
            **({} if pipeline is None else {metric_names.PERF_ROLLOUT_WAIT_S: waited,
                                            metric_names.PERF_WEIGHTS_WAIT_S: sum(weights_waited)}),
        }

    def fit_warm_up_only(self) -> dict[str, Any]:
        """`beyondagent sft`: the warm-up, its metrics at step 0 and its checkpoint (step 0), no RL."""
        with MetricsLog(self.run.run_dir, tensorboard=self.config.tensorboard) as metrics_log:
            metrics = self.warm_up()
            metrics_log.write(0, metrics)
        self.save(0)
        return {**metrics, "checkpoint": str(checkpoints(self.run.run_dir)[0].path)}

    def warm_up(self) -> dict[str, float]:
        """`algorithm.sft`: supervised steps on its data (sft.py) with their own AdamW (`sft.lr`, else
        `backend.lr`); RL then starts with a fresh optimizer state. The KL reference stays the spec's model."""
        sft = self.algorithm.sft
        started = time.perf_counter()
        examples, counts = self.sft_examples(sft)
        optimizer = torch.optim.AdamW(trained_parameters(self.model), lr=sft.lr or self.config.lr,
                                      weight_decay=self.config.weight_decay)
        generator = torch.Generator().manual_seed(episode_seed(self.run.info.seed, "sft", 0))
        metrics = sft_update(self.model, optimizer, examples, epochs=sft.epochs, batch_size=sft.batch_size,
                             micro_batch_size=self.config.micro_batch_size, grad_clip=self.config.grad_clip,
                             pad_token_id=self.tokenizer.pad_token_id, device=self.device, generator=generator)
        check_finite(0, self.model, {"actor/pg_loss": metrics["sft/loss"]})
        self.rollout_weights.refresh()
        metrics.update({f"sft/{name}": float(value) for name, value in counts.items()})
        metrics["sft/seconds"] = time.perf_counter() - started
        log.info("train.sft_done", data=sft.data, **{k.split("/", 1)[1]: v for k, v in metrics.items()})
        return metrics

    def sft_examples(self, sft: Any) -> tuple[list[Any], dict[str, int]]:
        """The warm-up's examples from `sft.data`, and counts of what was kept and dropped; none is an error."""
        where = f"{self.run.spec.path}, key {SFT_KEY}"
        end_id = end_of_turn_id(self.template, stop_token_ids(self.model, self.tokenizer, self.template),
                                self.tokenizer.eos_token_id)
        if sft.data == "successful":
            tasks = self._epoch_cache[0]
            size = self.algorithm.group_size
            jobs = [(group, task) for group, task in enumerate(tasks) for _ in range(size)]
            sampling = Sampling(self.config.temperature, self.config.top_p, self.config.max_new_tokens)
            episodes = self.rollout(jobs, sampling, seed=(self.run.info.seed, "sft"))
            self.record_failures(0, episodes)
            kept = [e for e in episodes if e.trainable and e.trajectory.reward is not None
                    and e.trajectory.reward.success]
            if not kept:
                raise RunError(f"{SFT_KEY}: successful: none of the starting policy's {len(episodes)} rollouts of the "
                               f"{len(tasks)} training tasks succeeded, so there is nothing to imitate", where=where,
                               hint="use synthetic_references or a JSONL file of good conversations, or drop "
                                    "algorithm.sft")
            return kept, {"rollouts": len(episodes)}
        if sft.data == "synthetic_references":
            examples, counts = reference_examples(self.data.synthetic, self.runner, self.template, end_id,
                                                  concurrency=self.config.max_concurrency)
            if not examples:
                raise RunError(f"{SFT_KEY}: synthetic_references: no reference solution replayed successfully "
                               f"({counts['synthetic_tasks']} synthetic tasks, {counts['no_reference']} without a "
                               f"list of actions as ground_truth, {counts['failed_replays']} failed replays)",
                               where=where, hint="explore first (beyondagent explore) with a mixture that trains on "
                                                 "synthetic tasks, or use successful or a JSONL file")
            return examples, counts
        return file_examples(data_file(sft.data, self.run.spec.path), self.template, end_id), {}

    def sample_batch(self, step: int, epoch: int, tasks: list[Task]
                     ) -> tuple[list[Episode], list[Episode], dict[str, float]]:
        """The step's episodes: every one generated, those the update trains on, and the sampling metrics.

        One generation batch runs `tasks`, `group_size` times each. With `algorithm.dynamic_sampling`
        (DAPO), groups whose rewards are all equal (advantage 0: no signal) are dropped and another
        batch of `batch_size` tasks is generated until `batch_size` groups are left, at most
        `max_gen_batches` batches; groups past `batch_size` are not trained, and a batch still short
        after the last one is topped up with dropped groups (advantage 0, as without dynamic
        sampling). The extra batches' tasks are drawn from the epoch's mix at random, seeded by the run
        seed, the step and the batch number, so a resumed run samples the same ones.
        """
        algo = self.algorithm
        generated: list[Episode] = []
        informative: list[list[Episode]] = []
        flat: list[list[Episode]] = []
        batches = 0
        while True:
            batches += 1
            batch_tasks = tasks if batches == 1 else self.extra_tasks(step, epoch, batches)
            episodes = self.generate(step, batch_tasks, batches, first_group=len(generated) // algo.group_size)
            generated += episodes
            if not algo.dynamic_sampling:
                return generated, generated, self.overlong_metrics(generated)
            for group in group_episodes(episodes):
                (flat if is_flat(group) else informative).append(group)
            if len(informative) >= len(tasks) or batches >= algo.max_gen_batches:
                break
        kept = informative[:len(tasks)]
        topped_up = flat[:len(tasks) - len(kept)]
        if topped_up:
            log.warning("train.dynamic_sampling_short", step=step, informative_groups=len(kept),
                        batch_size=len(tasks), gen_batches=batches,
                        hint="after algorithm.max_gen_batches generation batches the step still had too few groups "
                             "whose rewards differ; it is topped up with groups of advantage 0. Raise "
                             "max_gen_batches, or the tasks are too hard or too easy for the policy")
        trained = [episode for group in kept + topped_up for episode in group]
        return generated, trained, {
            metric_names.TRAIN_GEN_BATCHES: float(batches),
            metric_names.TRAIN_DROPPED_GROUPS: float(len(flat) - len(topped_up)),
            **self.overlong_metrics(generated),
        }

    def generate(self, step: int, tasks: list[Task], batch: int, *, first_group: int) -> list[Episode]:
        """One generation batch: each task `group_size` times (groups numbered from `first_group`),
        failures recorded, guided episodes stripped, rewards shaped (`algorithm.overlong`)."""
        size = self.algorithm.group_size
        jobs = [(first_group + group, task) for group, task in enumerate(tasks) for _ in range(size)]
        sampling = Sampling(self.config.temperature, self.config.top_p, self.config.max_new_tokens)
        # The first batch keeps the seeds a step always had; extra batches (dynamic sampling) get their own.
        extra = () if batch == 1 else (batch,)
        guides = None
        if self.guidance is not None:
            guides = self.guidance.guides(tasks, size, seed=(self.run.info.seed, "guides", step, *extra))
        opponents = self.pool.opponents(step, jobs, *extra) if self.pool is not None else None
        episodes = self.rollout(jobs, sampling, seed=(self.run.info.seed, "train", step, *extra), guides=guides,
                                opponents=opponents)
        self.record_failures(step, episodes)
        if self.guidance is not None:
            self.strip_guided(episodes)
        if self.algorithm.overlong is not None:
            self.shape_overlong(episodes)
        return episodes

    def extra_tasks(self, step: int, epoch: int, batch: int) -> list[Task]:
        """`batch_size` tasks of the epoch's mix for an extra generation batch (dynamic sampling)."""
        tasks = self._epoch_cache.get(epoch) or self.data.epoch_tasks(epoch)
        rng = random.Random(episode_seed(self.run.info.seed, "dynamic_sampling", step, batch))
        return rng.sample(tasks, min(self.config.batch_size, len(tasks)))

    def shape_overlong(self, episodes: list[Episode]) -> None:
        """DAPO's soft overlong punishment, added to each scored episode's reward (`grpo.overlong_penalty` of
        its generated tokens); the penalty is kept in the reward's details and the trajectory's metrics."""
        overlong = self.algorithm.overlong
        max_len = overlong_max_len(overlong, self.config)
        for episode in episodes:
            trajectory = episode.trajectory
            if trajectory.reward is None or trajectory.error is not None:
                continue
            penalty = overlong_penalty(episode.generated_tokens, max_len=max_len, buffer_len=overlong.buffer_len,
                                       penalty_factor=overlong.penalty_factor)
            trajectory.metrics["overlong_penalty"] = penalty
            if penalty:
                reward = trajectory.reward
                trajectory.reward = attrs.evolve(reward, score=reward.score + penalty,
                                                 details={**reward.details, "overlong_penalty": penalty})

    def overlong_metrics(self, episodes: list[Episode]) -> dict[str, float]:
        if self.algorithm.overlong is None:
            return {}
        penalties = [float(e.trajectory.metrics.get("overlong_penalty", 0.0)) for e in episodes]
        return {metric_names.TRAIN_OVERLONG_PENALTY: statistics.fmean(penalties),
                metric_names.TRAIN_OVERLONG_FRACTION: statistics.fmean(float(p < 0) for p in penalties)}

    def fresh_episodes(self, step: int, episodes: list[Episode]) -> tuple[list[Episode], dict[str, float]]:
        """The episodes within `backend.max_staleness` policy versions of the policy that trains on them
        at `step` (version step - 1), and the staleness metrics (asynchronous rollout only)."""
        if self.config.rollout_mode == "sync":
            return episodes, {}
        trainer_version = step - 1
        kept, dropped = split_stale([e.policy_version for e in episodes], trainer_version=trainer_version,
                                    max_staleness=self.config.max_staleness)
        metrics = {metric_names.ROLLOUT_STALENESS: statistics.fmean(trainer_version - e.policy_version
                                                                    for e in episodes),
                   metric_names.ROLLOUT_STALE_DROPPED: float(len(dropped))}
        if dropped:
            log.warning("train.stale_samples_dropped", step=step, dropped=len(dropped), episodes=len(episodes),
                        max_staleness=self.config.max_staleness)
        if not kept:
            raise RunError(f"step {step}: all {len(episodes)} episodes lag more than backend.max_staleness = "
                           f"{self.config.max_staleness} policy versions", hint="raise backend.max_staleness")
        return [episodes[i] for i in kept], metrics

    def critic_values(self, episodes: list[Episode], trainable: list[int], batch: Any) -> list[Any] | None:
        """The critic's value of each token of each trainable episode (None for the others: failed,
        they never reach the estimator), kept in the columns of the step's training `batch` too
        (`batch.values`, what its update clips against); None without a critic."""
        if self.critic is None or batch is None:
            return None
        batch.values = self.critic.values(batch, self.config.micro_batch_size)
        values: list[Any] = [None] * len(episodes)
        for index, array in zip(trainable, episode_arrays(batch.values, [episodes[i] for i in trainable])):
            values[index] = array
        return values

    def estimate_advantages(self, step: int, episodes: list[Episode], values: list[Any] | None = None
                            ) -> tuple[list[Any], list[Any] | None, dict[str, float], list[Any] | None]:
        """Per-token advantages of each episode from the run's estimator, its per-step values (for the
        viewer; None when it gives none), its metrics (`advantage/...`) and the critic's returns (None
        without a critic). A failed episode (an error, or not `trainable`) stays out of its group's
        statistics and gets 0 (`estimate_finished`). `values`: the critic's, per episode."""
        values = values or [None] * len(episodes)
        batch = AdvantageBatch(
            episodes=tuple(scored_episode(e.baseline_group, e.trajectory, *joined_view(e.samples)[:2], trainable=e.trainable,
                                          values=value) for e, value in zip(episodes, values)),
            step=step, total_steps=self.total_steps, norm_by_std=self.algorithm.norm_adv_by_std)
        who = f"advantage estimator {self.estimator_name!r} (backend.advantage)"
        try:
            result = estimate_finished(self.estimator, batch, who=who)
        except AdvantageError as exc:
            raise RunError(f"step {step}: {exc}", hint="report this to the estimator's author") from exc
        metrics = {f"{metric_names.ADVANTAGE_PREFIX}{name}": float(value) for name, value in result.metrics.items()}
        if self.critic is not None and result.returns is None:
            raise RunError(f"step {step}: {who} reads the critic's values but answered no returns to train it on",
                           hint="report this to the estimator's author (Advantages.returns)")
        return result.per_token, result.per_step, metrics, result.returns

    def strip_guided(self, episodes: list[Episode]) -> None:
        """Guided episodes trained without their experience (`experience.training`) get the replayed,
        experience-free token sequence and are marked off-policy for the loss."""
        for episode in episodes:
            reward = episode.trajectory.reward
            success = bool(reward is not None and reward.success)
            if episode.guided and episode.trainable and trains_stripped(self.guidance.block.training, success):
                episode.sequence = stripped_sequence(episode.trajectory, self.template)
                episode.off_policy = True

    def learn_from(self, step: int, episodes: list[Episode]) -> dict[str, float]:
        """Summarize the step's episodes into the experience store; the experience metrics."""
        trajectories = [episode.trajectory for episode in episodes if episode.trajectory.error is None]
        added = asyncio.run(self.guidance.learn(trajectories, step))
        success = [bool(e.trajectory.reward is not None and e.trajectory.reward.success) for e in episodes]
        return self.guidance.metrics([e.guided for e in episodes], success, added,
                                     prefixed=[e.prefixed for e in episodes])

    def validate(self, step: int, metrics_log: MetricsLog) -> dict[str, float]:
        """pass@1 and mean reward on the val tasks (greedy unless `val_temperature` > 0); with
        `experience.val_mode: all`, each shown the experiences of other tasks (never its own)."""
        sampling = Sampling(self.config.val_temperature, self.config.top_p, self.config.max_new_tokens)
        guides, leaks_before = None, 0
        if self.guidance is not None:
            leaks_before = self.guidance.leaks_blocked
            guides = self.guidance.val_guides(self.data.val)
        episodes = self.rollout(list(enumerate(self.data.val)), sampling, seed=(self.run.info.seed, "val", step),
                                guides=guides)
        for episode in episodes:
            episode.policy_version = step  # validation after step `step` runs the policy it left
        self.write_samples(metrics_log, step, "val", episodes)
        self.write_episodes(metrics_log, step, "val", episodes, None)
        scores = [episode.score for episode in episodes]
        val = {
            "val/pass@1": statistics.fmean(float(e.trajectory.reward.success) if e.trajectory.reward else 0.0
                                           for e in episodes),
            "val/reward_mean": statistics.fmean(scores),
            # failed episodes count 0 above; how many there were, so a crashing agent is not a silent 0
            metric_names.VAL_EPISODE_ERRORS: float(sum(1 for e in episodes if e.trajectory.error is not None)),
            **outcome_metrics("val", episodes),
            **(self.guidance.val_metrics(guides, leaks_before) if self.guidance is not None else {}),
        }
        log.info("train.validated", step=step, **val)
        return val

    def rollout(self, jobs: list[tuple[int, Task]], sampling: Sampling, seed: tuple[object, ...],
                guides: list[Any] | None = None, opponents: list[Any] | None = None) -> list[Episode]:
        return asyncio.run(rollout(
            jobs, runner=self.runner, scheduler=self.scheduler, template=self.template, sampling=sampling,
            max_episode_tokens=self.config.max_episode_tokens, max_concurrency=self.config.max_concurrency,
            seed=seed, guides=guides, opponents=opponents))

    def pool_games(self, step: int, episodes: list[Episode]) -> dict[str, float]:
        """The step's games against the opponent pool into its Elo ratings, then the snapshot it is due; the
        `pool/` metrics. The first step without a pool game is warned about once (one-seat episodes?)."""
        results = [(e.opponent.entry, e.pool_score) for e in episodes
                   if e.opponent is not None and e.pool_score is not None]
        metrics = self.pool.record(results)
        if not any(e.opponent is not None for e in episodes) and not self._warned_empty_pool:
            self._warned_empty_pool = True
            log.warning("train.opponent_pool_unused", step=step,
                        hint="backend.opponent_pool plays the other seats of multi-seat games; this step had none "
                             "against it (one-seat episodes, a workflow that does not say its seats, or "
                             "opponent_pool.games too low)")
        self.pool.after_update(step)
        return metrics

    def _opponent_pool(self) -> OpponentPool:
        """The pool as the checkpoint resumed from kept it, else empty: `fit` takes its first snapshot, of the
        policy RL starts from (after an SFT warm-up: `beyondagent sft`'s checkpoint keeps an empty pool)."""
        trained = {name for name, parameter in self.model.named_parameters() if parameter.requires_grad}
        pool = OpponentPool(self.config.opponent_pool, rollout_model=self.rollout_weights.model, trained=trained,
                            make_scheduler=self.make_scheduler, seed=self.run.info.seed)
        if self.resumed_from is None:
            return pool
        try:
            pool.load(self.resumed_from / POOL_DIR)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise RunError(f"cannot resume the opponent pool from {self.resumed_from}: {exc}",
                           where=str(self.resumed_from / POOL_DIR),
                           hint="resume from a checkpoint of a run with the same backend.opponent_pool") from exc
        return pool

    def step_tasks(self, step: int) -> tuple[int, list[Task]]:
        """The epoch and tasks of `step` (1-based): the data position follows from the step alone."""
        epoch, index = divmod(step - 1, self.steps_per_epoch)
        if epoch not in self._epoch_cache:
            self._epoch_cache = {epoch: self.data.epoch_tasks(epoch)}
        tasks = self._epoch_cache[epoch]
        size = self.config.batch_size
        # A mixer may give a later epoch fewer tasks than the first: wrap around within the epoch.
        index %= max(math.ceil(len(tasks) / size), 1)
        batch = tasks[index * size:(index + 1) * size]
        if not batch:
            raise RunError(f"the mixer gave epoch {epoch} no tasks", where=self.run.spec.component("mixture").described)
        return epoch, batch

    # --- outputs --------------------------------------------------------------------------

    def count_flat_groups(self, step: int, episodes: list[Episode]) -> float:
        """The share of groups whose finished episodes' rewards are all equal, or that failures left with
        fewer than two finished episodes (zero advantage: nothing to learn there).

        Warned about once per run: every group flat for a step means the reward gives no signal
        (all fail, or all succeed) and that step trains nothing.
        """
        groups = group_episodes(episodes, per_seat=True)
        if self.critic is not None:  # the critic is the baseline: an all-equal group still has advantages
            return 0.0
        flat = sum(1 for group in groups if len(finished_scores(group)) <= 1)
        if flat and not self._warned_flat_groups:
            self._warned_flat_groups = True
            log.warning("train.flat_groups", step=step, flat=flat, groups=len(groups),
                        hint="groups whose rollouts all score the same get advantage 0; if this persists, the "
                             "tasks are too hard or too easy for the policy, or the reward gives no partial credit "
                             f"(the share per step is {metric_names.TRAIN_FLAT_GROUPS} in metrics.jsonl)")
        return flat / max(len(groups), 1)

    def record_failures(self, step: int, episodes: list[Episode]) -> None:
        failed = [episode.trajectory for episode in episodes if episode.trajectory.error]
        if not failed:
            return
        log.warning("train.episode_errors", step=step, failed=len(failed), episodes=len(episodes),
                    first=failed[0].error)
        append_jsonl(self.run.run_dir / "episode_errors.jsonl",
                     [{"step": step, "trajectory": trajectory.to_dict()} for trajectory in failed])
        tally = FailureTally()
        for trajectory in failed:
            tally.add(trajectory.task.task_id, trajectory.error or "?")
        check_failures(f"step {step}, episodes", tally, len(episodes), self.config.max_failed_fraction,
                       key="backend.max_failed_fraction",
                       where=f"{self.run.spec.path}; each failure is in {self.run.run_dir / 'episode_errors.jsonl'}")

    def write_samples(self, metrics_log: MetricsLog, step: int, split: str, episodes: list[Episode]) -> None:
        """A few episodes per step: the best and the worst first, then in order."""
        count = self.config.samples_per_step
        if not count or not episodes:
            return
        ranked = sorted(range(len(episodes)), key=lambda i: episodes[i].score)
        picked = list(dict.fromkeys([ranked[-1], ranked[0], *range(len(episodes))]))[:count]
        metrics_log.write_samples(step, split, [episodes[i].trajectory for i in sorted(picked)])

    def write_episodes(self, metrics_log: MetricsLog, step: int, split: str, episodes: list[Episode],
                       advantages: list[Any] | None, step_values: list[Any] | None = None) -> None:
        """The token records of the episodes `logging.episodes` keeps (`episodes.jsonl`, for `beyondagent view`)."""
        failed = [e.trajectory.error is not None or not (e.trajectory.reward and e.trajectory.reward.success)
                  for e in episodes]
        picked = self.episode_sampling.picked(step, split, [e.group for e in episodes], failed)
        records = []
        for i in picked:
            episode = episodes[i]
            per_token = None if advantages is None else [float(a) for a in advantages[i]]
            tokens = samples_token_view(episode.samples, per_token, self.pieces.pieces)
            values = None if step_values is None or step_values[i] is None else [float(v) for v in step_values[i]]
            records.append(episode_record(step=step, split=split, index=i, group=episode.group,
                                          trajectory=episode.trajectory, tokens=tokens, guided=episode.guided,
                                          off_policy=episode.off_policy, step_values=values,
                                          policy_version=episode.policy_version))
        metrics_log.write_episodes(records)

    def save(self, step: int) -> None:
        path = save_checkpoint(self.run.run_dir, step, model=self.model, tokenizer=self.tokenizer,
                               optimizer=self.optimizer, scheduler=self.lr_schedule, spec=self.spec_snapshot,
                               keep=self.config.keep_checkpoints, extra=self.save_extras)
        log.info("train.checkpoint_saved", step=step, path=str(path))

    def save_extras(self, staging: Path) -> None:
        """What a checkpoint holds besides the policy: the critic, the estimator's state across steps."""
        if self.critic is not None:
            self.critic.save(staging / CRITIC_DIR)
        save_estimator(self.estimator, staging)
        if self.pool is not None:
            self.pool.save(staging / POOL_DIR)

    def write_report(self) -> Path | None:
        from beyondagent_core.reports import write_run_report

        try:
            path = write_run_report(self.run.manager, self.run.run_dir, title=self.run.info.name)
        except Exception:  # noqa: BLE001 - a plotting failure must not fail a finished run
            log.error("train.report_failed", exc_info=True)
            return None
        if path is not None:
            log.info("train.report_written", path=str(path))
        return path

    # --- resume ---------------------------------------------------------------------------

    def _reference(self) -> Any:
        """The frozen starting policy for the KL loss."""
        if self.lora is not None:
            return BaseWeights(self.model)
        return copy.deepcopy(self.model).eval().requires_grad_(False)

    def _critic(self) -> Critic:
        """The run's critic (`critic:`, its defaults when unset), its memory logged."""
        spec = self.run.spec
        critic = Critic(self._value_model(), spec.critic or CriticSection(), weight_decay=self.config.weight_decay)
        log.info("train.critic", path=critic.section.path or spec.model.path,
                 **{name: round(value, 1) for name, value in critic.memory().items()})
        return critic

    def _value_model(self, *, adapters: bool = True) -> Any:
        """The critic's starting value model (`critic.path`, else the policy's starting weights), with
        fresh LoRA adapters when the policy has them (unless `adapters` is false: the base alone)."""
        spec = self.run.spec
        section = spec.critic or CriticSection()
        path, where = ((section.path, f"{spec.path}, key critic.path") if section.path
                       else (spec.model.path, f"{spec.path}, key model.path"))
        model = self._load_value_model(path, where=where)
        if self.lora is not None and adapters:
            model = with_adapters(model, self.lora, seed=self.run.info.seed, where=f"{spec.path}, key model.lora",
                                  task_type="TOKEN_CLS")
        return model

    def _load_value_model(self, path: str, *, where: str) -> Any:
        return load_value_model(path, device=self.device, dtype=self.precision.params,
                                compute_dtype=self.precision.compute, attention=self.attention,
                                seed=self.run.info.seed, where=where)

    def _saved_value_model(self, directory: Path) -> Any:
        """The value model a checkpoint's `critic/` holds: its adapters on the starting base, or itself."""
        if is_adapter_dir(directory):
            return load_adapters(self._value_model(adapters=False), directory)
        return self._load_value_model(str(directory), where=f"checkpoint {directory}")

    def _load_policy(self, path: str, *, tokenizer: str | None = None, where: str) -> tuple[Any, Any]:
        """The policy at `path` in the run's precision: weights in `param_dtype`, forwards in `dtype`."""
        return load_policy(path, tokenizer=tokenizer, device=self.device, dtype=self.precision.params,
                           compute_dtype=self.precision.compute, attention=self.attention, where=where)

    def _load_checkpoint(self, checkpoint: Any) -> None:
        saved = checkpoint.path / "model"
        if is_adapter_dir(saved):  # a LoRA run's checkpoint: the spec's base model, then its adapters
            spec = self.run.spec
            base, _ = self._load_policy(spec.model.path, tokenizer=spec.model.tokenizer,
                                        where=f"{spec.path}, key model.path")
            self.model = load_adapters(base, saved)
            if self.ref_model is not None:
                self.ref_model = self._reference()
        else:
            self.model, _ = self._load_policy(str(saved), where=f"checkpoint {checkpoint.path}")
        self.optimizer = torch.optim.AdamW(trained_parameters(self.model), lr=self.config.lr,
                                           weight_decay=self.config.weight_decay)
        self.lr_schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.lr_schedule.lr_lambdas[0])
        load_training_state(checkpoint, optimizer=self.optimizer, scheduler=self.lr_schedule)
        if self.critic is not None:
            self.critic.load(checkpoint.path / CRITIC_DIR, model_from=self._saved_value_model)
        try:
            load_estimator(self.estimator, checkpoint.path,
                           who=f"advantage estimator {self.estimator_name!r} (backend.advantage)")
        except ValueError as exc:
            raise RunError(f"cannot resume from {checkpoint.path}: {exc}",
                           where=str(checkpoint.path / ESTIMATOR_FILE)) from exc

    def _resume_or_start_fresh(self) -> int:
        run_dir = self.run.run_dir
        if not self.run.resume:
            archive_previous_training(run_dir)
            return 0
        found = checkpoints(run_dir)
        if not found:
            raise RunError(f"nothing to resume: {run_dir} has no checkpoint", where=str(run_dir / "checkpoints"),
                           hint="run without --resume to start, or set backend.save_every to save during a run")
        damaged = []
        for checkpoint in found:  # newest first; a damaged one falls back to the one before
            check_resumable(checkpoint, self.spec_snapshot, backend_volatile=RESUMABLE_KEYS,
                            spec_path=str(self.run.spec.path), backend_defaults=attrs.asdict(TorchConfig()))
            try:
                self._load_checkpoint(checkpoint)
                break
            except Exception as exc:  # noqa: BLE001 - a torn safetensors file, a truncated optimizer.pt
                damaged.append(f"{checkpoint.path.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                log.warning("train.checkpoint_damaged", checkpoint=str(checkpoint.path), error=damaged[-1])
        else:
            raise RunError(f"cannot resume: no checkpoint in {run_dir / 'checkpoints'} can be loaded:\n"
                           + "\n".join(damaged), hint="run without --resume to start again")
        # Steps after the checkpoint that a killed run had logged are run again: drop their lines.
        kept = [record for record in read_metrics(run_dir) if record["step"] <= checkpoint.step]
        write_jsonl(run_dir / "metrics.jsonl", kept)
        if (run_dir / SAMPLES_FILE).is_file():
            write_jsonl(run_dir / SAMPLES_FILE, [r for r in read_samples(run_dir) if r["step"] <= checkpoint.step])
        if (run_dir / EPISODES_FILE).is_file():
            write_jsonl(run_dir / EPISODES_FILE,
                        [r for r in read_episode_records(run_dir) if r["step"] <= checkpoint.step])
        log.info("train.resumed", step=checkpoint.step, checkpoint=str(checkpoint.path))
        self.resumed_from = checkpoint.path
        return checkpoint.step


def describe_algorithm(spec: Spec, config: TorchConfig) -> str:
    """One paragraph of what a step does, in the spec's keys (the torch backend's `--dry-run` text)."""
    algo = spec.algorithm
    low = algo.clip_ratio if algo.clip_ratio_low is None else algo.clip_ratio_low
    high = algo.clip_ratio if algo.clip_ratio_high is None else algo.clip_ratio_high
    loss = (f"policy loss {algo.policy_loss} (ratio clipped to [1 - {low:g}, 1 + {high:g}]"
            + (f", dual clip {algo.clip_ratio_c:g})" if algo.policy_loss == "vanilla" else ", one ratio per sequence)")
            + f", loss aggregation {algo.loss_agg_mode}")
    if uses_critic(spec):
        critic = spec.critic or CriticSection()
        name = spec.component("backend.advantage").name
        lines = [f"torch backend: PPO with a critic ({name}), {config.batch_size} tasks x {algo.group_size} rollouts "
                 f"a step; {loss}",
                 f"critic: from {critic.path or 'the policy (model.path)'} with a new value head, lr {critic.lr:g}, "
                 f"value clip {critic.cliprange_value:g}; it regresses on the step's returns before the policy "
                 f"updates" + (f", and alone for the first {critic.warmup_steps} steps" if critic.warmup_steps else "")]
    else:
        lines = [f"torch backend: GRPO, {config.batch_size} tasks x {algo.group_size} rollouts a step; {loss}"]
    if algo.sft is not None:
        sft = algo.sft
        lines.insert(0, f"SFT warm-up first: {sft.epochs} epoch(s) on {sft.data}, {sft.batch_size} examples a step, "
                        f"lr {sft.lr or config.lr:g}, loss on the model's tokens only")
    if config.rollout_mode != "sync":
        lag = "one policy version" if config.rollout_mode == "one_step_off" else \
            f"up to {config.max_staleness} policy versions"
        lines.append(f"rollout {config.rollout_mode}: the next steps' rollouts run while a step updates, {lag} "
                     f"behind; truncated importance weights capped at {config.tis_cap:g}")
    if config.opponent_pool is not None:
        lines.append(describe_pool(config.opponent_pool))
    if algo.dynamic_sampling:
        lines.append(f"dynamic sampling: groups whose rewards are all equal are dropped and more are generated, "
                     f"at most {algo.max_gen_batches} generation batches a step")
    if algo.overlong is not None:
        overlong = algo.overlong
        max_len = overlong_max_len(overlong, config)
        source = "algorithm.overlong.max_len" if overlong.max_len is not None else "backend.max_new_tokens"
        lines.append(f"overlong shaping (DAPO): an episode that generates more than {max_len - overlong.buffer_len} "
                     f"tokens loses reward linearly, up to {overlong.penalty_factor:g} at {max_len} tokens "
                     f"(algorithm.overlong: buffer_len {overlong.buffer_len}, penalty_factor "
                     f"{overlong.penalty_factor:g}; max_len {max_len} from {source})")
    lines.append(describe_validation(spec, config))
    return "\n".join(lines)


def describe_validation(spec: Spec, config: TorchConfig) -> str:
    """When validation runs, and how to turn it off (`tasks.val: null`): `eval_every: 0` does not."""
    val = spec.component("tasks.val")
    if val is None or val.registration is None:
        return "validation: none (tasks.val is not set)"
    every = (f"every {config.eval_every} steps, " if config.eval_every else "")
    return (f"validation: the tasks.val tasks {every}before the first step and after the last "
            f"(backend.eval_every: {config.eval_every}{'' if config.eval_every else ', none in between'}); "
            "tasks.val: null turns validation off")


def group_episodes(episodes: list[Episode], *, per_seat: bool = False) -> list[list[Episode]]:
    """`episodes` by GRPO group (a task's rollouts), in the order the groups first appear; `per_seat`: by
    the group each is measured against (`Episode.baseline_group`: a multi-seat episode's seats apart)."""
    groups: dict[Any, list[Episode]] = {}
    for episode in episodes:
        groups.setdefault(episode.baseline_group if per_seat else episode.group, []).append(episode)
    return list(groups.values())


def is_flat(group: list[Episode]) -> bool:
    """Whether a task's group has no signal: in each of its baseline groups (one, or one per seat), the
    finished episodes all score the same (or fewer than two finished)."""
    return all(len(finished_scores(part)) <= 1 for part in group_episodes(group, per_seat=True))


def read_episode_records(run_dir: Path) -> list[dict[str, Any]]:
    """`episodes.jsonl`'s records (a torn or bad line left out), for trimming on resume."""
    from beyondagent_core.jsonl import BadRecords, json_lines

    return [obj for _, _, obj in json_lines(run_dir / EPISODES_FILE, BadRecords("skip"))
            if isinstance(obj, dict) and isinstance(obj.get("step"), int)]


def archive_previous_training(run_dir: Path) -> None:
    """Move an earlier training's outputs into `previous/<time>/`: a new run never deletes them."""
    found = [run_dir / name for name in TRAINING_OUTPUTS if (run_dir / name).exists()]
    if not found:
        return
    target = run_dir / "previous" / time.strftime("%Y%m%d-%H%M%S")
    suffix = 1
    while target.exists():
        suffix += 1
        target = target.with_name(f"{target.name.split('.')[0]}.{suffix}")
    target.mkdir(parents=True)
    for path in found:
        shutil.move(str(path), target / path.name)
    log.info("train.previous_run_moved", to=str(target))


def stop_token_ids(model: Any, tokenizer: Any, template: ChatTemplate) -> list[int]:
    """Where a model turn ends: the eos token(s) and the chat template's end-of-turn token
    (`ChatTemplate.end_of_turn_id`: were it missed, a base checkpoint's turns would run on to the limit)."""
    ids = {tokenizer.eos_token_id, template.end_of_turn_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return sorted(i for i in ids if i is not None)


def finished_scores(group: list[Episode]) -> set[float]:
    """The distinct scores of a group's finished episodes: failed ones are in no group's statistics, so a
    group with fewer than two of them (all equal, or failures left one or none) gets advantage 0."""
    return {episode.score for episode in group if episode.trainable}


def episode_metrics(split: str, episodes: list[Episode]) -> dict[str, float]:
    scores = [episode.score for episode in episodes]
    trajectories = [episode.trajectory for episode in episodes]
    return {
        f"{split}/reward_mean": statistics.fmean(scores),
        f"{split}/reward_std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
        f"{split}/success_rate": statistics.fmean(float(t.reward.success) if t.reward else 0.0 for t in trajectories),
        f"{split}/response_length": statistics.fmean(e.generated_tokens for e in episodes),
        f"{split}/turns": statistics.fmean(e.model_turns for e in episodes),
        f"{split}/episode_errors": float(sum(1 for t in trajectories if t.error)),
        f"{split}/truncated": statistics.fmean(float(bool(t.metrics.get("truncated"))) for t in trajectories),
        **origin_metrics(split, episodes),
        **outcome_metrics(split, episodes),
        **gateway_metrics(episodes),
    }


def lora_checkpoint(root: Path) -> Path | None:
    """The step directory of a LoRA run's checkpoint named by `root`: the step directory, its
    `model/`, or a run directory (its newest checkpoint); None when `root` is none of these."""
    root = Path(root)
    candidates = [root, root.parent] if root.name == "model" else [root]
    if (root / "checkpoints").is_dir():
        found = checkpoints(root)
        candidates = [found[0].path] if found else []
    return next((step for step in candidates if is_adapter_dir(step / "model")), None)


def trained_parameters(model: Any) -> list[Any]:
    """What the optimizer updates: every weight, or only the LoRA adapters (the rest is frozen)."""
    return [p for p in model.parameters() if p.requires_grad]


def samples_token_view(samples: list[TokenSequence], advantages: list[float] | None,
                       pieces: Any) -> dict[str, Any]:
    """The token block of an episode's record: its samples laid end to end, as the advantage
    estimator saw them (`joined_view`); a split gateway episode's block says where each sample
    starts (`sample_starts`), so the viewer shows them together, one after the other."""
    spans, _, offsets = joined_view(samples)
    ids = [t for sample in samples for t in sample.input_ids]
    tokens = token_view(ids, [b for sample in samples for b in sample.loss_mask],
                        [x for sample in samples for x in sample.logprobs], advantages, pieces(ids), spans,
                        samples[0].prompt_length)
    if len(samples) > 1:
        tokens["sample_starts"] = offsets
    return tokens


def gateway_metrics(episodes: list[Episode]) -> dict[str, float]:
    """With `agent` episodes (calls through the gateway): the share that split into several samples,
    samples and calls per episode."""
    served = [e for e in episodes if "gateway_calls" in e.trajectory.metrics]
    if not served:
        return {}
    return {
        metric_names.GATEWAY_SPLIT_EPISODES: statistics.fmean(
            float(e.trajectory.metrics.get("gateway_splits", 0) > 0) for e in served),
        metric_names.GATEWAY_SAMPLES_PER_EPISODE: statistics.fmean(len(e.samples) for e in served),
        metric_names.GATEWAY_CALLS_PER_EPISODE: statistics.fmean(e.trajectory.metrics["gateway_calls"] for e in served),
    }


def outcome_metrics(split: str, episodes: list[Episode]) -> dict[str, float]:
    """Against an opponent (a reward whose details name an `opponent` and the game's `outcome`: the
    two-player textarena games), the share of each outcome, `<split>/win_rate`, `draw_rate`, `loss_rate`
    (and `unfinished_rate` when a game was cut), and in self-play each seat's (`<split>/seat0_win_rate`,
    ...); nothing for an env without an opponent."""
    outcomes = [game_outcome(e.trajectory.reward) for e in episodes]
    if not any(outcomes):
        return {}
    names = dict.fromkeys(("win", "draw", "loss", *sorted({o for o in outcomes if o})))
    metrics = {f"{split}/{name}_rate": sum(o == name for o in outcomes) / len(outcomes) for name in names}
    # self-play: both sides of every game are here (the rates above are about even); each seat's own
    for seat in sorted({e.seat for e in episodes if e.seat is not None}):
        mine = [o for o, e in zip(outcomes, episodes) if e.seat == seat]
        metrics.update({f"{split}/seat{seat}_{name}_rate": sum(o == name for o in mine) / len(mine) for name in names})
    return metrics


def game_outcome(reward: Any) -> str | None:
    """A game's outcome for the policy (win, draw, loss, unfinished) when it played an opponent, else None."""
    details = getattr(reward, "details", None)
    if not isinstance(details, dict) or "opponent" not in details:
        return None
    outcome = details.get("outcome")
    return outcome if isinstance(outcome, str) and outcome in GAME_OUTCOMES else None


def origin_metrics(split: str, episodes: list[Episode]) -> dict[str, float]:
    """With synthetic tasks in the batch: their share, and reward and success per origin."""
    synthetic = [e for e in episodes if e.trajectory.task.origin == "synthetic"]
    if not synthetic:
        return {}
    metrics = {f"{split}/synthetic_fraction": len(synthetic) / len(episodes)}
    original = [e for e in episodes if e.trajectory.task.origin != "synthetic"]
    for origin, group in (("original", original), ("synthetic", synthetic)):
        if group:
            metrics[f"{split}/reward_mean_{origin}"] = statistics.fmean(e.score for e in group)
            metrics[f"{split}/success_rate_{origin}"] = statistics.fmean(
                float(e.trajectory.reward.success) if e.trajectory.reward else 0.0 for e in group)
    return metrics


def check_finite(step: int, model: Any, actor: dict[str, float]) -> None:
    """Stop at the first step whose loss or updated weights are NaN/inf (before a checkpoint saves them).

    A non-finite gradient norm alone skips that optimizer step (as verl does, counted in the
    metrics); a non-finite loss means the policy's own log-probs are, and weights that became
    non-finite cannot be trained back: the run fails here with the cause.
    """
    loss = actor.get("actor/pg_loss", 0.0)
    if math.isfinite(loss) and all(bool(torch.isfinite(p).all()) for p in model.parameters()):
        return
    raise RunError(f"step {step}: training diverged: the policy's loss or weights are NaN or infinite "
                   f"(loss {loss}, grad norm {actor.get('actor/grad_norm')})",
                   hint="lower backend.lr (or set backend.grad_clip); --resume continues from the last good "
                        "checkpoint, which holds no NaN")


def spec_snapshot(spec: Spec) -> dict[str, Any]:
    """The redacted spec as plain JSON values: what a checkpoint records and a resume compares."""
    return json.loads(json.dumps(spec.redacted(), default=str))

