"""Every spec key the verl backend reads moves exactly the verl keys it should (issue 37).

The trinity test's method (test_trinity_every_key.py) on verl's mapping, in the main venv (verl itself
is not imported): each case sets one key of examples/verl_frozenlake.yaml to a value of its own, in a
context where it matters (a LoRA alpha needs LoRA on, `tis_cap` an asynchronous rollout), and the verl
keys whose values differ from the same context without it must be exactly the listed ones: a key the
mapping ignores moves nothing, a key read in another's place moves a verl key that is not its own.
The table is complete: every field of the backend's config and of the spec's `algorithm` and `model`
sections is a case here, or refused with its reason (checked), or takes effect outside the overrides
(said where, and which test sees it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_verl.config import VerlConfig
from beyondagent_plugin_verl.mapping import RunFiles, verl_overrides

from beyondagent_core.plugins import PluginManager
from beyondagent_core.spec import Spec
from beyondagent_core.testing.key_reach import KeyReachTable, prepared

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
ACTOR, ROLLOUT, MODEL = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"
V1 = "trainer.v1"
CORRECTION = "algorithm.rollout_correction"
LORA_ON = {"model.lora.rank": 8}
ASYNC = {"backend.rollout_mode": "async"}

# spec key -> (its value, the context it is set in, the verl keys it must move and no others)
MOVES: dict[str, tuple[Any, dict[str, Any], set[str]]] = {
    "backend.total_steps": (40, {}, {"trainer.total_training_steps"}),
    "backend.batch_size": (8, {}, {"data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size"}),  # mini: the batch
    "backend.lr": (0.001, {}, {f"{ACTOR}.optim.lr"}),
    "backend.warmup_steps": (5, {}, {f"{ACTOR}.optim.lr_warmup_steps"}),
    "backend.weight_decay": (0.05, {}, {f"{ACTOR}.optim.weight_decay"}),
    "backend.grad_clip": (0.5, {}, {f"{ACTOR}.grad_clip"}),
    "backend.ppo_epochs": (2, {}, {f"{ACTOR}.ppo_epochs"}),
    "backend.mini_batch_size": (2, {}, {f"{ACTOR}.ppo_mini_batch_size"}),
    "backend.micro_batch_size": (4, {}, {f"{ACTOR}.ppo_micro_batch_size_per_gpu",
                                         f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu",
                                         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"}),
    "backend.temperature": (0.7, {}, {f"{ROLLOUT}.temperature"}),
    "backend.top_p": (0.9, {}, {f"{ROLLOUT}.top_p"}),
    "backend.max_prompt_tokens": (128, {}, {"data.max_prompt_length"}),
    "backend.max_response_tokens": (128, {}, {"data.max_response_length"}),
    # greedy against the example's 1.0: a value that also turns do_sample (0.5 would move the temperature only)
    "backend.val_temperature": (0.0, {}, {f"{ROLLOUT}.val_kwargs.temperature", f"{ROLLOUT}.val_kwargs.do_sample"}),
    "backend.rollout_mode": ("async", {}, {f"{V1}.trainer_mode", f"{V1}.colocate_async.num_warmup_batches",
                                           f"{V1}.sampler.max_off_policy_strategy",
                                           f"{V1}.sampler.max_off_policy_threshold", f"{CORRECTION}.rollout_is",
                                           f"{CORRECTION}.rollout_is_threshold"}),
    "backend.max_staleness": (3, ASYNC, {f"{V1}.colocate_async.num_warmup_batches",
                                         f"{V1}.sampler.max_off_policy_threshold"}),
    "backend.tis_cap": (3.0, ASYNC, {f"{CORRECTION}.rollout_is_threshold"}),
    "backend.nodes": (2, {}, {"trainer.nnodes"}),
    "backend.gpus_per_node": (4, {}, {"trainer.n_gpus_per_node"}),
    "backend.tensor_parallel": (2, {"backend.gpus_per_node": 4}, {f"{ROLLOUT}.tensor_model_parallel_size"}),
    "backend.gpu_memory_utilization": (0.5, {}, {f"{ROLLOUT}.gpu_memory_utilization"}),
    "backend.eval_every": (10, {}, {"trainer.test_freq"}),
    "backend.save_every": (10, {}, {"trainer.save_freq"}),
    "backend.keep_checkpoints": (3, {}, {"trainer.max_actor_ckpt_to_keep"}),
    "backend.project": ("other", {}, {"trainer.project_name"}),
    "algorithm.group_size": (4, {}, {f"{ROLLOUT}.n"}),
    "algorithm.norm_adv_by_std": (False, {}, {"algorithm.norm_adv_by_std_in_grpo"}),
    "algorithm.clip_ratio": (0.3, {}, {f"{ACTOR}.clip_ratio", f"{ACTOR}.clip_ratio_low", f"{ACTOR}.clip_ratio_high"}),
    "algorithm.clip_ratio_low": (0.1, {}, {f"{ACTOR}.clip_ratio_low"}),
    "algorithm.clip_ratio_high": (0.28, {}, {f"{ACTOR}.clip_ratio_high"}),
    "algorithm.clip_ratio_c": (5.0, {}, {f"{ACTOR}.clip_ratio_c"}),
    "algorithm.kl_coef": (0.05, {}, {f"{ACTOR}.use_kl_loss", f"{ACTOR}.kl_loss_coef"}),
    "algorithm.kl_type": ("kl", {"algorithm.kl_coef": 0.05}, {f"{ACTOR}.kl_loss_type"}),
    "algorithm.loss_agg_mode": ("seq-mean-token-mean", {}, {f"{ACTOR}.loss_agg_mode"}),
    "algorithm.entropy_coeff": (0.02, {}, {f"{ACTOR}.entropy_coeff"}),
    "algorithm.policy_loss": ("gspo", {}, {f"{ACTOR}.policy_loss.loss_mode"}),
    "model.tokenizer": ("/tokenizers/other", {}, {f"{MODEL}.tokenizer_path"}),
    "model.dtype": ("float32", {}, {f"+{ACTOR}.fsdp_config.mixed_precision",
                                    "+actor_rollout_ref.ref.fsdp_config.mixed_precision", f"{ROLLOUT}.dtype"}),
    "model.param_dtype": ("bfloat16", {}, {f"{ACTOR}.fsdp_config.model_dtype",
                                           "actor_rollout_ref.ref.fsdp_config.model_dtype"}),
    "model.lora.rank": (4, LORA_ON, {f"{MODEL}.lora_rank"}),
    "model.lora.alpha": (32, LORA_ON, {f"{MODEL}.lora_alpha"}),
    "model.lora.target_modules": (["q_proj", "v_proj"], LORA_ON, {f"{MODEL}.target_modules"}),
    "model.gradient_checkpointing": (True, {}, {f"{MODEL}.enable_gradient_checkpointing"}),
    "run.seed": (3, {}, {"data.seed"}),
    "run.name": ("other", {}, {"trainer.experiment_name"}),
}

# spec key -> (a value verl cannot honour, its context, a fragment of the refusal)
REFUSED: dict[str, tuple[Any, dict[str, Any], str]] = {
    "algorithm.name": ("dapo", {}, "maps algorithm.name grpo, not 'dapo'"),
    "algorithm.dynamic_sampling": (True, {}, "cannot honour algorithm.dynamic_sampling"),
    "algorithm.overlong": ({"buffer_len": 2, "penalty_factor": 1.0}, {}, "cannot apply algorithm.overlong"),
    "algorithm.sft": ({"data": "sft.jsonl"}, {}, "cannot run algorithm.sft before RL"),
    "model.lora.dropout": (0.1, LORA_ON, "has no dropout"),
}

# keys that take effect outside the overrides: where, and what sees it
ELSEWHERE = {
    "backend.epochs": "how many mixes the data writer writes (data.write_run_data; test_data_and_metrics.py)",
    "backend.max_new_tokens": "a turn's token limit in the agent loop's config (agent_loop.py; test_agent_loop*.py)",
    "backend.device": "cpu selects our platform rollout and fp32 (test_mapping.py::test_device_cpu_picks_...)",
    "backend.ray_address": "RAY_ADDRESS of the launched process (backend.py)",
    "backend.timeout_s": "how long the backend waits for verl's process (backend.py)",
    "backend.verl": "verl keys passed as they are, last (test_mapping.py::test_the_verl_block_comes_last_and_wins)",
    "algorithm.max_gen_batches": "dynamic sampling's batch limit; dynamic_sampling is refused",
    "model.path": "resolved by the backend and passed as model_path (actor_rollout_ref.model.path; test_mapping.py)",
    "model.lora": "the section; its keys are cases above",
}


class TestVerlKeys(KeyReachTable):
    CONFIG, MOVES, REFUSED, ELSEWHERE = VerlConfig, MOVES, REFUSED, ELSEWHERE

    @pytest.fixture
    def mapped(self, manager: PluginManager, tmp_path: Path):
        return lambda settings: overrides(prepared(EXAMPLE, settings, tmp_path, manager), tmp_path)


def overrides(spec: Spec, tmp_path: Path) -> dict[str, Any]:
    """verl key -> value for `spec`."""
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=("v.parquet",),
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    return {o.key: o.value for o in verl_overrides(spec, spec.component("backend").config, files,
                                                   model_path="/models/m")}
