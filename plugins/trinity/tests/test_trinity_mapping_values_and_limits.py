"""Trinity's mapping (mapping.py, config.py), class-wide: the exact value each key becomes, and every limit.

test_trinity_every_key.py checks *which* trinity keys each spec key moves; this checks *to what*: each
value hand-derived from the setting (the model length is prompt + response, warm-up 0 is trinity's -1,
no validation is an interval no run reaches, LoRA's target list is one comma-joined string, each KL name
is trinity's...), keys left out when unset (total_steps, ray_address, the eval taskset), and the origin
an error from trinity would cite. Then every refusal exactly on its limit and one past (the group size,
the explorer's GPUs against the cluster's, colocate on one GPU, the rollout-mode conflicts, the turn
budget against the response budget), each unknown name refused, and the backend block's documented
defaults. In the main venv; one prepared spec for the module, changed with `attrs.evolve`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from beyondagent_plugin_trinity.config import TrinityConfig
from beyondagent_plugin_trinity.mapping import (
    ADVANTAGE_NAME,
    MONITOR_NAME,
    WORKFLOW_NAME,
    RunFiles,
    resolved_mode,
    trainer_strategy,
    trinity_overrides,
)
from test_trinity_mapping import spec_of

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import LoraSection

TASKSETS, EVAL_TASKSETS = "buffer.explorer_input.tasksets", "buffer.explorer_input.eval_tasksets"
FSDP = "+trainer.trainer_config.actor_rollout_ref"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, TrinityConfig, Path]:
    tmp = tmp_path_factory.mktemp("trinity")
    spec = spec_of(tmp)
    return spec, spec.component("backend").config, tmp


def overrides(example, *, val: bool = True, algorithm: dict[str, Any] | None = None,
              model: dict[str, Any] | None = None, **backend: Any) -> dict[str, tuple[Any, str]]:
    """trinity key -> (value, origin) for the example with `backend`, `algorithm` and `model` fields changed."""
    spec, config, tmp = example
    if algorithm:
        spec = attrs.evolve(spec, algorithm=attrs.evolve(spec.algorithm, **algorithm))
    if model:
        spec = attrs.evolve(spec, model=attrs.evolve(spec.model, **model))
    config = attrs.evolve(config, **backend)
    files = RunFiles(run_dir=tmp / "run", spec_path=tmp / "run" / "trinity" / "spec.yaml",
                     train_dir=tmp / "train", val_dir=tmp / "val" if val else None)
    return {o.key: (o.value, o.origin) for o in trinity_overrides(spec, config, files, model_path="/models/m")}


def value(example, key: str, **changes: Any) -> Any:
    return overrides(example, **changes)[key][0]


# --- exact values --------------------------------------------------------------------------------------


def test_the_run_files_and_fixed_keys_are_inside_the_run_directory(example) -> None:
    got = overrides(example, epochs=3)
    run = example[2] / "run"
    assert got["checkpoint_root_dir"] == (str(run / "trinity" / "checkpoints"), "run.output_dir")
    assert got["monitor.monitor_args"] == ({"metrics_dir": str(run / "trinity")}, "run.output_dir")
    assert got["monitor.monitor_type"][0] == MONITOR_NAME and got["continue_from_checkpoint"][0] is True
    assert got["buffer.total_epochs"] == (1, "backend.epochs")  # 3 epochs: every mix is in the taskset already
    assert got["explorer.concurrent_mode"][0] == "asynchronous"
    assert got["name"] == ("trinity_frozenlake", "run.name")
    assert got["algorithm.advantage_fn_args"][0] == {"spec_path": str(run / "trinity" / "spec.yaml"),
                                                     "cwd": str(Path.cwd())}
    assert got["algorithm.advantage_fn"] == (ADVANTAGE_NAME, "algorithm.norm_adv_by_std")


def test_the_taskset_rows_carry_the_turn_budget_and_sampling_exactly(example) -> None:
    got = overrides(example, max_new_tokens=3, max_prompt_tokens=100, max_response_tokens=200, top_p=0.9,
                    temperature=0.7, val_temperature=0.3)
    (train,), (val,) = got[TASKSETS][0], got[EVAL_TASKSETS][0]
    arguments = {"spec_path": str(example[2] / "run" / "trinity" / "spec.yaml"), "run_dir": str(example[2] / "run"),
                 "cwd": str(Path.cwd()), "max_new_tokens": 3, "max_prompt_tokens": 100, "max_response_tokens": 200,
                 "records_steps": True}
    assert train == {"name": "train", "storage_type": "file", "path": str(example[2] / "train"), "split": "train",
                     "default_workflow_type": WORKFLOW_NAME, "workflow_args": arguments,
                     "rollout_args": {"temperature": 0.7, "top_p": 0.9, "logprobs": 0}}
    assert val == {"name": "val", "storage_type": "file", "path": str(example[2] / "val"), "split": "test",
                   "default_workflow_type": WORKFLOW_NAME, "workflow_args": arguments, "repeat_times": 1,
                   "rollout_args": {"temperature": 0.3, "top_p": 0.9, "logprobs": 0}}
    assert got["model.max_model_len"] == (300, "backend.max_response_tokens")  # prompt + response
    assert (got["model.max_prompt_tokens"][0], got["model.max_response_tokens"][0]) == (100, 200)
    assert (got["model.temperature"][0], got["model.top_p"][0]) == (0.7, 0.9)


def test_without_val_tasks_there_is_no_eval_taskset_and_no_validation_on_startup(example) -> None:
    got = overrides(example, val=False, eval_every=5)
    assert EVAL_TASKSETS not in got and got["explorer.eval_on_startup"][0] is False
    assert got["explorer.eval_interval"] == (5, "backend.eval_every")


@pytest.mark.parametrize(("backend", "key", "expected"), [
    ({"warmup_steps": 0}, "algorithm.optimizer.lr_warmup_steps", -1),  # trinity's "no warm-up"
    ({"warmup_steps": 1}, "algorithm.optimizer.lr_warmup_steps", 1),
    ({"eval_every": 0}, "explorer.eval_interval", 1 << 30),
    ({"eval_every": 1}, "explorer.eval_interval", 1),
    ({"grad_clip": 0.25}, "trainer.grad_clip", 0.25),
    ({"grad_clip": 0.25}, "algorithm.optimizer.clip_grad", 0.25),
    ({"lr": 0.003}, "algorithm.optimizer.lr", 0.003),
    ({"weight_decay": 0.2}, "algorithm.optimizer.weight_decay", 0.2),
    ({"batch_size": 5}, "buffer.batch_size", 5),
    ({"total_steps": 7}, "buffer.total_steps", 7),
    ({"save_every": 3}, "trainer.save_interval", 3),
    ({"keep_checkpoints": 5}, "trainer.max_checkpoints_to_keep", 5),
    ({"sync_interval": 4}, "synchronizer.sync_interval", 4),
    ({"rollout_engines": 3, "gpus_per_node": 8}, "explorer.rollout_model.engine_num", 3),
    ({"tensor_parallel": 2, "gpus_per_node": 8}, "explorer.rollout_model.tensor_parallel_size", 2),
    ({"gpu_memory_utilization": 0.55}, "explorer.rollout_model.gpu_memory_utilization", 0.55),
    ({"ray_address": "ray://head:10001"}, "cluster.ray_address", "ray://head:10001"),
    ({"project": "p2"}, "project", "p2"),
], ids=lambda v: str(v) if not isinstance(v, dict) else ",".join(f"{k}={x}" for k, x in v.items()))
def test_each_backend_key_becomes_its_exact_trinity_value(example, backend: dict[str, Any], key: str,
                                                         expected: Any) -> None:
    assert value(example, key, **backend) == expected


def test_keys_left_unset_are_left_to_trinity(example) -> None:
    got = overrides(example, total_steps=None, ray_address=None)
    assert "buffer.total_steps" not in got and "cluster.ray_address" not in got
    assert f"{FSDP}.model.enable_gradient_checkpointing" not in got  # trinity's own default (on)


@pytest.mark.parametrize(("kl_type", "trinity"), [("kl", "k1"), ("k1", "k1"), ("abs", "abs"), ("mse", "k2"),
                                                  ("k2", "k2"), ("low_var_kl", "low_var_kl"), ("k3", "k3")])
def test_each_kl_type_is_trinitys_name_for_it_and_none_without_a_kl_loss(example, kl_type: str, trinity: str) -> None:
    got = overrides(example, algorithm={"kl_coef": 0.02, "kl_type": kl_type})
    assert got["algorithm.kl_loss_fn"] == (trinity, "algorithm.kl_type")
    assert got["algorithm.kl_loss_fn_args"] == ({"kl_coef": 0.02}, "algorithm.kl_coef")
    assert got["algorithm.kl_penalty_fn"][0] == "none"  # KL as a loss, never in the reward
    assert value(example, "algorithm.kl_loss_fn", algorithm={"kl_coef": 0.0, "kl_type": kl_type}) == "none"


def test_entropy_and_the_policy_loss_arguments(example) -> None:
    assert value(example, "algorithm.entropy_loss_fn", algorithm={"entropy_coeff": 0.0}) == "none"
    got = overrides(example, algorithm={"entropy_coeff": 0.03})
    assert got["algorithm.entropy_loss_fn"][0] == "default"
    assert got["algorithm.entropy_loss_fn_args"][0] == {"entropy_coef": 0.03}
    vanilla = overrides(example, algorithm={"clip_ratio": 0.3, "clip_ratio_low": 0.1, "clip_ratio_c": 4.0,
                                            "loss_agg_mode": "seq-mean-token-sum"})
    assert vanilla["algorithm.policy_loss_fn"] == ("ppo", "algorithm.policy_loss")
    assert vanilla["algorithm.policy_loss_fn_args"][0] == {"clip_range": 0.3, "clip_range_low": 0.1,
                                                           "clip_range_high": 0.3, "loss_agg_mode": "seq-mean-token-sum",
                                                           "clip_ratio_c": 4.0}
    assert vanilla["algorithm.loss_agg_mode"][0] == "seq-mean-token-sum"
    gspo = overrides(example, algorithm={"policy_loss": "gspo", "clip_ratio_c": 4.0})
    assert gspo["algorithm.policy_loss_fn"][0] == "gspo"
    assert "clip_ratio_c" not in gspo["algorithm.policy_loss_fn_args"][0]  # the dual clip is vanilla PPO's


def test_lora_becomes_one_trinity_lora_config(example) -> None:
    model = {"dtype": "float32", "lora": LoraSection(rank=6, alpha=12.0, target_modules=["q_proj", "v_proj"])}
    assert overrides(example, model=model)["model.lora_configs"] == (
        [{"name": "beyondagent", "lora_rank": 6, "lora_alpha": 12, "target_modules": "q_proj,v_proj"}], "model.lora")
    model["lora"] = LoraSection(rank=2)
    [config] = value(example, "model.lora_configs", model=model)
    assert (config["target_modules"], config["lora_rank"], config["lora_alpha"]) == ("all-linear", 2, 16)
    assert "model.lora_configs" not in overrides(example)
    assert isinstance(config["lora_alpha"], int)  # trinity's LoRAConfig.lora_alpha is an int


def test_the_seed_dtype_and_named_estimator_origin(example) -> None:
    spec, config, tmp = example
    got = overrides(example, model={"dtype": "float32"})
    assert spec.run.seed == 0 and value(example, "explorer.rollout_model.seed", model={}) == 0
    spec = attrs.evolve(spec, run=attrs.evolve(spec.run, seed=11))
    assert overrides((spec, config, tmp))["explorer.rollout_model.seed"] == (11, "run.seed")
    assert got["explorer.rollout_model.seed"] == (0, "run.seed") and got["explorer.rollout_model.dtype"][0] == "float32"
    (tmp / "named").mkdir(exist_ok=True)
    named = spec_of(tmp / "named", backend={"advantage": {"name": "grpo"}})
    files = RunFiles(run_dir=tmp, spec_path=tmp / "s.yaml", train_dir=tmp, val_dir=None)
    origins = {o.key: o.origin for o in trinity_overrides(named, named.component("backend").config, files,
                                                          model_path="/m")}
    assert origins["algorithm.advantage_fn"] == "backend.advantage.name"


def test_the_trinity_block_comes_last_its_origin_without_the_plus(example) -> None:
    spec, config, tmp = example
    config = attrs.evolve(config, trinity={"+trainer.trainer_config.x": 1, "trainer.save_interval": 9})
    files = RunFiles(run_dir=tmp, spec_path=tmp / "s.yaml", train_dir=tmp, val_dir=None)
    out = trinity_overrides(spec, config, files, model_path="/m")
    assert [(o.key, o.value, o.origin) for o in out[-2:]] == [
        ("+trainer.trainer_config.x", 1, "backend.trinity.trainer.trainer_config.x"),
        ("trainer.save_interval", 9, "backend.trinity.trainer.save_interval")]
    assert trainer_strategy(TrinityConfig()) == "fsdp2"
    assert trainer_strategy(TrinityConfig(trinity={"trainer.trainer_strategy": "megatron"})) == "megatron"


# --- limits: exactly on, one past ------------------------------------------------------------------------


def refused(example, **changes: Any) -> SpecError:
    with pytest.raises(SpecError) as caught:
        overrides(example, **changes)
    return caught.value


def test_a_group_of_two_is_the_smallest_grpo_group(example) -> None:
    assert value(example, "algorithm.repeat_times", algorithm={"group_size": 2}) == 2
    error = refused(example, algorithm={"group_size": 1})
    assert error.where.endswith("key algorithm.group_size") and "at least 2" in str(error)


@pytest.mark.parametrize(("backend", "accepted"), [
    ({"gpus_per_node": 4, "rollout_engines": 3}, True),  # 3 of 4 GPUs: one left for the trainer
    ({"gpus_per_node": 4, "rollout_engines": 4}, False),
    ({"gpus_per_node": 4, "rollout_engines": 1, "tensor_parallel": 3}, True),
    ({"gpus_per_node": 4, "rollout_engines": 2, "tensor_parallel": 2}, False),
    ({"nodes": 2, "gpus_per_node": 2, "rollout_engines": 3}, True),  # GPUs are nodes x gpus_per_node
    ({"nodes": 2, "gpus_per_node": 2, "rollout_engines": 4}, False),
    ({"mode": "both", "gpus_per_node": 1}, False),  # one GPU split in two: none left for the trainer
    ({"mode": "colocate", "gpus_per_node": 1}, True),
    ({"mode": "colocate", "nodes": 1, "gpus_per_node": 2}, False),
    ({"mode": "colocate", "nodes": 2, "gpus_per_node": 1}, False),
], ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else str(v))
def test_the_explorers_gpus_against_the_clusters_on_and_past_the_limit(example, backend: dict[str, Any],
                                                                        accepted: bool) -> None:
    if accepted:
        got = overrides(example, **backend)
        assert got["mode"][0] == resolved_mode(attrs.evolve(example[1], **backend))
    else:
        error = refused(example, **backend)
        assert error.where.endswith(("key backend.rollout_engines", "key backend.mode")), error


def test_explicit_modes_are_kept_and_auto_picks_by_the_gpu_count(example) -> None:
    assert value(example, "mode", mode="both", gpus_per_node=4) == "both"
    assert value(example, "mode", mode="colocate", gpus_per_node=1) == "colocate"
    assert value(example, "mode", mode="auto", gpus_per_node=1) == "colocate"


@pytest.mark.parametrize(("backend", "key"), [
    ({"rollout_mode": "async", "sync_offset": 0}, None),
    ({"rollout_mode": "async", "sync_offset": 1}, "backend.sync_offset"),
    ({"rollout_mode": "one_step_off", "max_staleness": 1}, None),
    ({"rollout_mode": "one_step_off", "sync_offset": 1}, "backend.sync_offset"),
    ({"rollout_mode": "sync", "sync_offset": 3, "max_staleness": 4}, None),  # staleness read by async only
    ({"rollout_mode": "async", "max_staleness": 4}, None),
])
def test_rollout_mode_conflicts_on_and_past_the_limit(example, backend: dict[str, Any], key: str | None) -> None:
    if key is None:
        got = overrides(example, **backend)
        expected = {"sync": backend.get("sync_offset", 0), "one_step_off": 1,
                    "async": backend.get("max_staleness", 1)}[backend["rollout_mode"]]
        assert got["synchronizer.sync_offset"][0] == expected
    else:
        assert refused(example, **backend).where.endswith(f"key {key}")


@pytest.mark.parametrize(("change", "key", "says"), [
    ({"algorithm": {"loss_agg_mode": "token-sum"}}, "algorithm.loss_agg_mode", "unknown algorithm.loss_agg_mode"),
    ({"algorithm": {"policy_loss": "cispo"}}, "algorithm.policy_loss", "unknown algorithm.policy_loss"),
    ({"algorithm": {"kl_coef": 0.1, "kl_type": "full"}}, "algorithm.kl_type", "no 'full'"),
    ({"model": {"tokenizer": "/tok"}}, "model.tokenizer", "reads the tokenizer from the model's directory"),
    ({"trinity": {"buffer.explorer_input.default_eval_workflow_type": "math_workflow"}},
     "backend.trinity.buffer.explorer_input.default_eval_workflow_type", "our Workflow"),
])
def test_each_unknown_name_is_refused_naming_its_key(example, change: dict[str, Any], key: str, says: str) -> None:
    error = refused(example, **change)
    assert error.where.endswith(f"key {key}") and says in str(error), error


def test_the_nearest_accepted_forms_of_those_refusals(example) -> None:
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        assert value(example, "algorithm.loss_agg_mode", algorithm={"loss_agg_mode": mode}) == mode
    # our own workflow named in a trinity key is no conflict
    got = overrides(example, trinity={"buffer.explorer_input.default_workflow_type": WORKFLOW_NAME})
    assert got["buffer.explorer_input.default_workflow_type"][0] == WORKFLOW_NAME
    lora = {"dtype": "float32", "lora": LoraSection(rank=4, dropout=0.0)}  # no dropout: trinity's LoRA
    assert value(example, "model.lora_configs", model=lora)[0]["lora_rank"] == 4
    error = refused(example, model={"dtype": "float32", "lora": LoraSection(rank=4, dropout=1e-6)})
    assert error.where.endswith("key model.lora.dropout")
    # trinity's lora_alpha is an int: a fractional alpha is refused, not cut (12.5 -> 12 changes the scale)
    error = refused(example, model={"dtype": "float32", "lora": LoraSection(rank=4, alpha=12.5)})
    assert error.where.endswith("key model.lora.alpha") and "12.5" in str(error)


@pytest.mark.parametrize(("fields", "says"), [
    ({"max_new_tokens": 256, "max_response_tokens": 256}, None),
    ({"max_new_tokens": 257, "max_response_tokens": 256}, "cannot exceed max_response_tokens"),
    ({"device": "cpu"}, "device must be cuda"),
    ({"mode": "split"}, "mode must be one of auto, both, colocate"),
    ({"rollout_mode": "later"}, "rollout_mode must be one of sync, one_step_off, async"),
    ({"sync_style": "eager"}, "sync_style must be one of fixed, dynamic_by_explorer, dynamic_by_trainer"),
    ({"mode": "colocate", "rollout_mode": "async", "sync_style": "dynamic_by_trainer"}, None),
])
def test_the_backend_blocks_own_checks_on_and_past_the_limit(fields: dict[str, Any], says: str | None) -> None:
    if says is None:
        config = TrinityConfig(**fields)
        assert all(getattr(config, key) == value for key, value in fields.items())
    else:
        with pytest.raises(ValueError, match=says):
            TrinityConfig(**fields)


def test_the_documented_defaults_of_the_backend_block() -> None:
    assert attrs.asdict(TrinityConfig()) == {
        "epochs": 1, "total_steps": None, "batch_size": 8, "lr": 1e-6, "warmup_steps": 0, "weight_decay": 0.01,
        "grad_clip": 1.0, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 512, "max_prompt_tokens": 2048,
        "max_response_tokens": 8192, "val_temperature": 0.0, "mode": "auto", "sync_style": "fixed",
        "sync_interval": 1, "sync_offset": 0, "rollout_mode": "sync", "max_staleness": 1, "tis_cap": None,
        "device": "cuda", "nodes": 1, "gpus_per_node": 2, "rollout_engines": 1, "tensor_parallel": 1,
        "gpu_memory_utilization": 0.6, "workflow_runners": 8, "ray_address": None, "eval_every": 0, "save_every": 0,
        "keep_checkpoints": 2, "project": "beyondagent", "timeout_s": None, "trinity": {}}
    assert resolved_mode(TrinityConfig()) == "both"  # 2 GPUs by default: explorer and trainer apart
