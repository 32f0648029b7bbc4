"""Every spec key the trinity backend reads moves exactly the trinity keys it should (issue 37).

Table-driven, in the main venv (trinity itself is not imported): each case sets one key of
examples/trinity_frozenlake.yaml to a value of its own, in a context where the key matters (a LoRA
alpha needs LoRA on), and the trinity keys whose values differ from the same context without it
must be exactly the listed ones. A key the mapping ignores moves nothing; a key read in another's
place moves a trinity key that is not its own (the seventh audit's trinity mutants were of both
kinds and the example-spec tests saw none of them). The table is complete: every field of the
backend's config and of the spec's `algorithm` and `model` sections is a case here, or refused with
its reason (checked), or takes effect outside the overrides (said where, and which test sees it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_trinity.config import TrinityConfig
from beyondagent_plugin_trinity.mapping import RunFiles, trinity_overrides

from beyondagent_core.plugins import PluginManager
from beyondagent_core.spec import Spec
from beyondagent_core.testing.key_reach import KeyReachTable, prepared

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "trinity_frozenlake.yaml").read_text())
TASKSETS, EVAL_TASKSETS = "buffer.explorer_input.tasksets", "buffer.explorer_input.eval_tasksets"
FSDP = "+trainer.trainer_config.actor_rollout_ref"
LORA_ON = {"model.dtype": "bfloat16", "model.param_dtype": "bfloat16", "model.lora.rank": 8}

# spec key -> (its value, the context it is set in, the trinity keys it must move and no others)
MOVES: dict[str, tuple[Any, dict[str, Any], set[str]]] = {
    "backend.total_steps": (40, {}, {"buffer.total_steps"}),
    "backend.batch_size": (8, {}, {"buffer.batch_size"}),
    "backend.lr": (0.001, {}, {"algorithm.optimizer.lr"}),
    "backend.warmup_steps": (5, {}, {"algorithm.optimizer.lr_warmup_steps"}),
    "backend.weight_decay": (0.05, {}, {"algorithm.optimizer.weight_decay"}),
    "backend.grad_clip": (0.5, {}, {"algorithm.optimizer.clip_grad", "trainer.grad_clip"}),
    "backend.temperature": (0.7, {}, {"model.temperature", TASKSETS}),
    "backend.top_p": (0.9, {}, {"model.top_p", TASKSETS, EVAL_TASKSETS}),
    "backend.max_new_tokens": (3, {}, {TASKSETS, EVAL_TASKSETS}),
    "backend.max_prompt_tokens": (128, {}, {"model.max_prompt_tokens", "model.max_model_len", TASKSETS, EVAL_TASKSETS}),
    "backend.max_response_tokens": (128, {}, {"model.max_response_tokens", "model.max_model_len", TASKSETS,
                                              EVAL_TASKSETS}),
    "backend.val_temperature": (0.5, {}, {EVAL_TASKSETS}),
    "backend.sync_style": ("dynamic_by_explorer", {}, {"synchronizer.sync_style"}),
    "backend.sync_interval": (2, {}, {"synchronizer.sync_interval"}),
    "backend.sync_offset": (1, {}, {"synchronizer.sync_offset"}),
    "backend.rollout_mode": ("async", {}, {"synchronizer.sync_offset"}),
    "backend.max_staleness": (3, {"backend.rollout_mode": "async"}, {"synchronizer.sync_offset"}),
    "backend.nodes": (2, {}, {"cluster.node_num"}),
    "backend.gpus_per_node": (4, {}, {"cluster.gpu_per_node"}),
    "backend.rollout_engines": (2, {"backend.gpus_per_node": 4}, {"explorer.rollout_model.engine_num"}),
    "backend.tensor_parallel": (2, {"backend.gpus_per_node": 4}, {"explorer.rollout_model.tensor_parallel_size"}),
    "backend.gpu_memory_utilization": (0.5, {}, {"explorer.rollout_model.gpu_memory_utilization"}),
    "backend.workflow_runners": (3, {}, {"explorer.runner_per_model"}),
    "backend.ray_address": ("ray://head:10001", {}, {"cluster.ray_address"}),
    "backend.eval_every": (10, {}, {"explorer.eval_interval"}),
    "backend.save_every": (10, {}, {"trainer.save_interval"}),
    "backend.keep_checkpoints": (3, {}, {"trainer.max_checkpoints_to_keep"}),
    "backend.project": ("other", {}, {"project"}),
    "algorithm.group_size": (4, {}, {"algorithm.repeat_times"}),
    "algorithm.clip_ratio": (0.3, {}, {"algorithm.policy_loss_fn_args"}),
    "algorithm.clip_ratio_low": (0.1, {}, {"algorithm.policy_loss_fn_args"}),
    "algorithm.clip_ratio_high": (0.28, {}, {"algorithm.policy_loss_fn_args"}),
    "algorithm.clip_ratio_c": (5.0, {}, {"algorithm.policy_loss_fn_args"}),
    "algorithm.kl_coef": (0.05, {}, {"algorithm.kl_loss_fn", "algorithm.kl_loss_fn_args"}),
    "algorithm.kl_type": ("kl", {"algorithm.kl_coef": 0.05}, {"algorithm.kl_loss_fn"}),
    "algorithm.entropy_coeff": (0.02, {}, {"algorithm.entropy_loss_fn_args"}),
    "algorithm.loss_agg_mode": ("seq-mean-token-mean", {},
                                {"algorithm.loss_agg_mode", "algorithm.policy_loss_fn_args"}),
    "algorithm.policy_loss": ("gspo", {}, {"algorithm.policy_loss_fn", "algorithm.policy_loss_fn_args"}),
    "model.dtype": ("float32", {}, {f"{FSDP}.actor.fsdp_config.mixed_precision",
                                    f"{FSDP}.ref.fsdp_config.mixed_precision", "explorer.rollout_model.dtype"}),
    "model.param_dtype": ("bfloat16", {}, {f"{FSDP}.actor.fsdp_config.model_dtype",
                                           f"{FSDP}.ref.fsdp_config.model_dtype"}),
    "model.lora.rank": (4, LORA_ON, {"model.lora_configs"}),
    "model.lora.alpha": (32, LORA_ON, {"model.lora_configs"}),
    "model.lora.target_modules": (["q_proj", "v_proj"], LORA_ON, {"model.lora_configs"}),
    "model.gradient_checkpointing": (True, {}, {f"{FSDP}.model.enable_gradient_checkpointing"}),
    "run.seed": (3, {}, {"explorer.rollout_model.seed"}),
    "run.name": ("other", {}, {"name"}),
}

# spec key -> (a value trinity cannot honour, its context, a fragment of the refusal)
REFUSED: dict[str, tuple[Any, dict[str, Any], str]] = {
    "backend.mode": ("colocate", {}, "colocate mode runs on exactly 1 GPU, but the run has 2"),
    "backend.tis_cap": (2.0, {}, "does not map backend.tis_cap"),
    "backend.device": ("cpu", {}, "device must be cuda"),
    "algorithm.name": ("dapo", {}, "maps algorithm.name grpo, not 'dapo'"),
    "algorithm.dynamic_sampling": (True, {}, "does not map algorithm.dynamic_sampling"),
    "algorithm.overlong": ({"buffer_len": 2, "penalty_factor": 1.0}, {}, "cannot apply algorithm.overlong"),
    "algorithm.sft": ({"data": "sft.jsonl"}, {}, "does not map algorithm.sft"),
    "model.lora.dropout": (0.1, LORA_ON, "dropout"),
    "model.tokenizer": ("/tokenizers/other", {}, "reads the tokenizer from the model's directory"),
}

# keys that take effect outside the overrides: where, and what sees it
ELSEWHERE = {
    "backend.epochs": "how many mixes the taskset writer writes (data.write_tasksets; test_trinity_tasksets.py)",
    "backend.timeout_s": "how long the backend waits for trinity's process (backend.py)",
    "backend.trinity": "trinity keys passed as they are, last (test_trinity_mapping.py)",
    "algorithm.norm_adv_by_std": "read from the spec by our estimator inside trinity (advantage_fn_args.spec_path)",
    "algorithm.max_gen_batches": "dynamic sampling's batch limit; dynamic_sampling is refused",
    "model.path": "resolved by the backend and passed as model_path (model.model_path; test_trinity_mapping.py)",
    "model.lora": "the section; its keys are cases above",
}


class TestTrinityKeys(KeyReachTable):
    CONFIG, MOVES, REFUSED, ELSEWHERE = TrinityConfig, MOVES, REFUSED, ELSEWHERE

    @pytest.fixture
    def mapped(self, manager: PluginManager, tmp_path: Path):
        return lambda settings: overrides(prepared(EXAMPLE, settings, tmp_path, manager), tmp_path)


def overrides(spec: Spec, tmp_path: Path) -> dict[str, Any]:
    """trinity key -> value for `spec`."""
    files = RunFiles(run_dir=tmp_path / "run", spec_path=tmp_path / "run" / "trinity" / "spec.yaml",
                     train_dir=tmp_path / "train", val_dir=tmp_path / "val")
    return {o.key: o.value for o in trinity_overrides(spec, spec.component("backend").config, files,
                                                      model_path="/models/m")}
