"""Our spec -> verl keys (mapping.py), in the main venv: every mapped key, `verl:` blocks, bad settings.

verl itself is not needed here; `test_compose.py` runs the same overrides through verl's Hydra
config and validator in verl's venv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_verl.mapping import (
    AGENT_NAME,
    CPU_ROLLOUT,
    OFF_POLICY_LOSS,
    OUR_TRAINER,
    RunFiles,
    flatten,
    verl_overrides,
)

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def spec_of(tmp_path: Path, backend: dict[str, Any] | None = None, algorithm: dict[str, Any] | None = None,
            model: dict[str, Any] | None = None) -> Any:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["backend"].update(backend or {})
    data["algorithm"].update(algorithm or {})
    data["model"].update(model or {})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return prepare(path, manager=PluginManager(Switches(autoload=True))).spec


def mapped(spec: Any, tmp_path: Path) -> dict[str, Any]:
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=("v.parquet",),
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    overrides = verl_overrides(spec, spec.component("backend").config, files, model_path="/models/m")
    return {o.key: o.value for o in overrides}


def test_every_setting_reaches_its_verl_key(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, backend={"mini_batch_size": 2, "nodes": 2, "gpus_per_node": 4, "tensor_parallel": 2,
                                      "ppo_epochs": 3, "weight_decay": 0.1, "grad_clip": 0.5, "top_p": 0.9,
                                      "temperature": 0.7, "keep_checkpoints": 3},
                   algorithm={"group_size": 8, "kl_coef": 0.001, "kl_type": "low_var_kl", "clip_ratio": 0.25,
                              "clip_ratio_c": 4.0, "norm_adv_by_std": False, "loss_agg_mode": "seq-mean-token-mean"})
    got = mapped(spec, tmp_path)
    actor, rollout = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    expected = {
        "actor_rollout_ref.model.path": "/models/m",
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": False,
        "algorithm.use_kl_in_reward": False,
        f"{rollout}.n": 8,
        f"{actor}.clip_ratio": 0.25,
        f"{actor}.clip_ratio_c": 4.0,
        f"{actor}.use_kl_loss": True,
        f"{actor}.kl_loss_coef": 0.001,
        f"{actor}.kl_loss_type": "low_var_kl",
        f"{actor}.loss_agg_mode": "seq-mean-token-mean",
        f"{actor}.entropy_coeff": 0.01,
        "data.train_batch_size": 4,
        f"{actor}.ppo_mini_batch_size": 2,
        f"{actor}.ppo_micro_batch_size_per_gpu": 8,
        f"{rollout}.log_prob_micro_batch_size_per_gpu": 8,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 8,
        f"{actor}.ppo_epochs": 3,
        f"{actor}.optim.lr": 0.005,
        f"{actor}.optim.lr_warmup_steps": 2,
        f"{actor}.optim.weight_decay": 0.1,
        f"{actor}.grad_clip": 0.5,
        f"{rollout}.name": "vllm",
        f"{rollout}.mode": "async",
        f"{rollout}.calculate_log_probs": True,
        "data.max_prompt_length": 256,
        "data.max_response_length": 256,
        f"{rollout}.temperature": 0.7,
        f"{rollout}.top_p": 0.9,
        f"{rollout}.val_kwargs.temperature": 1.0,
        f"{rollout}.val_kwargs.do_sample": True,
        f"{rollout}.tensor_model_parallel_size": 2,
        f"{rollout}.gpu_memory_utilization": 0.4,
        f"{rollout}.agent.default_agent_loop": AGENT_NAME,
        f"{rollout}.agent.agent_loop_config_path": str(tmp_path / "run" / "verl" / "agent_loop.yaml"),
        "data.train_files": ["t.parquet"],
        "data.val_files": ["v.parquet"],
        "data.shuffle": False,
        "data.seed": 0,
        "trainer.total_epochs": 1,
        "trainer.total_training_steps": 80,
        "trainer.nnodes": 2,
        "trainer.n_gpus_per_node": 4,
        "trainer.experiment_name": "verl_frozenlake",
        "trainer.default_local_dir": str(tmp_path / "run" / "checkpoints"),
        "trainer.save_freq": 20,
        "trainer.max_actor_ckpt_to_keep": 3,
        "trainer.test_freq": 20,
        "trainer.val_before_train": True,
        "trainer.logger": ["console", "file"],
    }
    for key, value in expected.items():
        assert got.get(key) == value, key


def test_the_verl_block_comes_last_and_wins(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, backend={"verl": {"actor_rollout_ref.actor.ppo_epochs": 5,
                                               "trainer": {"logger": ["console"]}}})
    files = RunFiles(run_dir=tmp_path, train_files=("t",), val_files=(), agent_loop_config=tmp_path / "a.yaml")
    overrides = verl_overrides(spec, spec.component("backend").config, files, model_path="m")
    last = {o.key: o for o in overrides}
    assert last["actor_rollout_ref.actor.ppo_epochs"].value == 5
    assert last["actor_rollout_ref.actor.ppo_epochs"].origin == "backend.verl.actor_rollout_ref.actor.ppo_epochs"
    assert last["trainer.logger"].value == ["console", "file"]  # the file logger feeds metrics.jsonl
    assert [o.key for o in overrides][-1] in ("trainer.logger", "actor_rollout_ref.actor.ppo_epochs")


def test_flatten_keeps_plus_keys_and_nested_mappings() -> None:
    assert flatten({"a": {"b": 1, "c": {"d": 2}}, "e.f": 3, "+g": {"h": 1}, "i": {}}) == {
        "a.b": 1, "a.c.d": 2, "e.f": 3, "+g": {"h": 1}, "i": {}}


@pytest.mark.parametrize(("backend", "algorithm", "key", "words"), [
    ({"batch_size": 3, "gpus_per_node": 2}, {"group_size": 3}, "backend.batch_size", "cannot share evenly"),
    ({"batch_size": 4, "mini_batch_size": 3}, {}, "backend.mini_batch_size", "does not divide"),
    ({"gpus_per_node": 4, "tensor_parallel": 3}, {}, "backend.tensor_parallel", "does not divide"),
    ({}, {"group_size": 1}, "algorithm.group_size", "at least 2"),
    ({}, {"kl_type": "nope"}, "algorithm.kl_type", "unknown"),
    ({"verl": {"data.shuffle": True}}, {}, "backend.verl.data.shuffle", "in the order the mixer chose"),
    ({"device": "cpu", "nodes": 2}, {}, "backend.device", "does not join a cluster"),
    ({}, {"name": "ppo"}, "algorithm.name", "grpo"),
    ({"advantage": {"name": "gigpo"}, "verl": {"trainer.v1.trainer_mode": "colocate_async"}}, {},
     "backend.verl.trainer.v1.trainer_mode", "runs in verl's synchronous trainer"),
])
def test_impossible_settings_name_our_key(tmp_path: Path, backend: dict, algorithm: dict, key: str,
                                          words: str) -> None:
    spec = spec_of(tmp_path, backend=backend, algorithm=algorithm)
    with pytest.raises(SpecError) as caught:
        mapped(spec, tmp_path)
    assert key in caught.value.where and words in caught.value.message


def test_backend_block_typos_are_caught_by_the_spec(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        spec_of(tmp_path, backend={"batch_sise": 4})
    assert "backend.batch_sise" in str(caught.value)


def test_bad_values_are_caught_by_the_config_class(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        spec_of(tmp_path, backend={"max_new_tokens": 512, "max_response_tokens": 256})
    assert "max_new_tokens" in str(caught.value)


def test_the_grpo_estimators_own_norm_setting_reaches_verl(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, backend={"advantage": {"name": "grpo", "norm_by_std": False}},
                   algorithm={"norm_adv_by_std": True})
    assert mapped(spec, tmp_path)["algorithm.norm_adv_by_std_in_grpo"] is False


def test_device_cpu_picks_our_platform_rollout_and_fp32(tmp_path: Path) -> None:
    got = mapped(spec_of(tmp_path, backend={"device": "cpu", "gpus_per_node": 2}), tmp_path)
    actor = "actor_rollout_ref.actor"
    assert got["actor_rollout_ref.rollout.name"] == CPU_ROLLOUT
    assert got["trainer.device"] == "cpu"
    assert got["actor_rollout_ref.model.external_lib"] == "beyondagent_plugin_verl.cpu_process_group"
    assert got[f"{actor}.strategy"] == "fsdp2" and got[f"{actor}.fsdp_config.model_dtype"] == "fp32"
    assert got[f"+{actor}.fsdp_config.mixed_precision"]["param_dtype"] == "fp32"  # model.dtype auto: float32 on CPU
    assert got["actor_rollout_ref.rollout.dtype"] == "float32"
    assert got["+ray_kwargs.ray_init.num_gpus"] == 2  # one logical GPU per trainer worker
    default = mapped(spec_of(tmp_path), tmp_path)
    assert default["actor_rollout_ref.rollout.name"] == "vllm" and "trainer.device" not in default


def test_an_unknown_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        spec_of(tmp_path, backend={"device": "tpu"})
    assert "device must be one of cuda, cpu" in str(caught.value)


def test_an_estimator_other_than_grpo_selects_our_trainer_mode(tmp_path: Path) -> None:
    got = mapped(spec_of(tmp_path, backend={"advantage": {"name": "gigpo"}}), tmp_path)
    assert got["trainer.v1.trainer_mode"] == OUR_TRAINER
    assert got["algorithm.adv_estimator"] == "grpo"  # verl's GRPO runs first; ours replaces it
    # a synchronous run's advantages are ours whatever the estimator: failed episodes leave their groups
    assert mapped(spec_of(tmp_path), tmp_path)["trainer.v1.trainer_mode"] == OUR_TRAINER
    native = mapped(spec_of(tmp_path, backend={"verl": {"trainer.v1.trainer_mode": "colocate_async"}}), tmp_path)
    assert native["trainer.v1.trainer_mode"] == "colocate_async"  # a native trainer mode keeps verl's own estimator


def test_experience_selects_our_trainer_and_our_policy_loss(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    data = yaml.safe_load((tmp_path / "spec.yaml").read_text())
    data["experience"] = {"name": "experience"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    spec = prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
    got = mapped(spec, tmp_path)
    assert got["trainer.v1.trainer_mode"] == OUR_TRAINER
    assert got["actor_rollout_ref.actor.policy_loss.loss_mode"] == OFF_POLICY_LOSS
    assert "actor_rollout_ref.actor.policy_loss.loss_mode" not in mapped(spec_of(tmp_path), tmp_path)
    for key, value in (("trainer.v1.trainer_mode", "colocate_async"),
                       ("actor_rollout_ref.actor.policy_loss.loss_mode", "gspo")):
        data["backend"]["verl"] = {key: value}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
        spec = prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
        with pytest.raises(SpecError) as caught:
            mapped(spec, tmp_path)
        assert f"key backend.verl.{key}" in str(caught.value) and "experience" in str(caught.value)


def test_lora_reaches_verls_fsdp_lora_keys_and_dropout_is_refused(tmp_path: Path) -> None:
    assert "actor_rollout_ref.model.lora_rank" not in mapped(spec_of(tmp_path), tmp_path)  # off by default
    spec = spec_of(tmp_path)
    path = Path(spec.path)
    data = yaml.safe_load(path.read_text())
    data["model"]["lora"] = {"rank": 16, "alpha": 32, "target_modules": ["q_proj", "v_proj"]}
    path.write_text(yaml.safe_dump(data))
    keys = mapped(prepare(path, manager=PluginManager(Switches(autoload=True))).spec, tmp_path)
    assert keys["actor_rollout_ref.model.lora_rank"] == 16 and keys["actor_rollout_ref.model.lora_alpha"] == 32
    assert keys["actor_rollout_ref.model.target_modules"] == ["q_proj", "v_proj"]
    data["model"]["lora"] = {"rank": 16, "dropout": 0.05}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as raised:
        mapped(prepare(path, manager=PluginManager(Switches(autoload=True))).spec, tmp_path)
    assert raised.value.where.endswith("key model.lora.dropout") and "no dropout" in raised.value.message


def test_gradient_checkpointing_reaches_verls_model_key_only_when_set(tmp_path: Path) -> None:
    path = Path(spec_of(tmp_path).path)
    data = yaml.safe_load(path.read_text())
    del data["model"]["gradient_checkpointing"]  # the example sets it
    path.write_text(yaml.safe_dump(data))
    keys = mapped(prepare(path, manager=PluginManager(Switches(autoload=True))).spec, tmp_path)
    assert "actor_rollout_ref.model.enable_gradient_checkpointing" not in keys  # unset: verl's default
    for value in (True, False):
        data["model"]["gradient_checkpointing"] = value
        path.write_text(yaml.safe_dump(data))
        keys = mapped(prepare(path, manager=PluginManager(Switches(autoload=True))).spec, tmp_path)
        assert keys["actor_rollout_ref.model.enable_gradient_checkpointing"] is value


def precision_keys(got: dict[str, Any]) -> dict[str, Any]:
    """What verl's FSDP engine and vLLM read: (actor weights, actor compute, ref weights, ref compute, vLLM)."""
    arr = "actor_rollout_ref"
    return {"weights": got[f"{arr}.actor.fsdp_config.model_dtype"],
            "compute": got[f"+{arr}.actor.fsdp_config.mixed_precision"],
            "ref_weights": got[f"{arr}.ref.fsdp_config.model_dtype"],
            "ref_compute": got[f"+{arr}.ref.fsdp_config.mixed_precision"],
            "rollout": got[f"{arr}.rollout.dtype"]}


@pytest.mark.parametrize(("model", "weights", "compute", "rollout", "warned"), [
    ({}, "fp32", "bf16", "bfloat16", False),  # the default on a GPU: fp32 master weights, bf16 compute
    ({"dtype": "float32"}, "fp32", "fp32", "float32", False),
    ({"dtype": "float16"}, "fp32", "fp16", "float16", False),  # verl's ShardedGradScaler scales the loss
    ({"param_dtype": "bfloat16"}, "bf16", "bf16", "bfloat16", True),  # pure bf16: asked for, warned
    ({"dtype": "float16", "param_dtype": "float16"}, "fp16", "fp16", "float16", True),
])
def test_model_dtype_and_param_dtype_reach_verls_fsdp_and_vllm_keys(tmp_path: Path, model: dict[str, Any],
                                                                    weights: str, compute: str, rollout: str,
                                                                    warned: bool) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        got = mapped(spec_of(tmp_path, model=model), tmp_path)
    mixed = {"param_dtype": compute, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert precision_keys(got) == {"weights": weights, "compute": mixed, "ref_weights": weights,
                                   "ref_compute": mixed, "rollout": rollout}
    assert "actor_rollout_ref.actor.fsdp_config.dtype" not in got  # verl's Megatron engine reads that one only
    pure = [event for event in logs if event["event"] == "train.pure_low_precision"]
    assert bool(pure) is warned
    if warned:
        assert pure[0]["log_level"] == "warning" and "rounded away" in pure[0]["message"]


def test_precision_keys_name_the_spec_key_they_came_from(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=(),
                     agent_loop_config=tmp_path / "a.yaml")
    origins = {o.key: o.origin for o in verl_overrides(spec, spec.component("backend").config, files, model_path="m")}
    assert origins["actor_rollout_ref.actor.fsdp_config.model_dtype"] == "model.param_dtype"
    assert origins["+actor_rollout_ref.actor.fsdp_config.mixed_precision"] == "model.dtype"
    assert origins["actor_rollout_ref.rollout.dtype"] == "model.dtype"


@pytest.mark.parametrize(("backend", "model", "key"), [
    ({}, {"param_dtype": "bfloat16", "dtype": "float32"}, "model.dtype"),  # bf16 weights computing in fp32
    ({"device": "cpu"}, {"dtype": "bfloat16"}, "model.dtype"),  # CPU: float32 only
    ({"device": "cpu"}, {"param_dtype": "bfloat16"}, "model.param_dtype"),
    # a native key that would keep the actor's weights in bf16 behind model.param_dtype's back
    ({"verl": {"actor_rollout_ref.actor.fsdp_config.model_dtype": "bf16"}}, {},
     "backend.verl.actor_rollout_ref.actor.fsdp_config.model_dtype"),
    ({"verl": {"+actor_rollout_ref.actor.fsdp_config.mixed_precision": {"param_dtype": "fp16"}}}, {},
     "backend.verl.actor_rollout_ref.actor.fsdp_config.mixed_precision"),
    ({"verl": {"actor_rollout_ref.rollout.dtype": "float16"}}, {}, "backend.verl.actor_rollout_ref.rollout.dtype"),
])
def test_precision_that_verl_cannot_or_should_not_run_is_refused(tmp_path: Path, backend: dict[str, Any],
                                                                 model: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as caught:
        mapped(spec_of(tmp_path, backend=backend, model=model), tmp_path)
    assert caught.value.where.endswith(f"key {key}"), caught.value


def test_a_native_precision_key_that_agrees_with_the_spec_is_kept(tmp_path: Path) -> None:
    got = mapped(spec_of(tmp_path, backend={"verl": {"actor_rollout_ref.actor.fsdp_config.model_dtype": "float32",
                                                     "actor_rollout_ref.ref.fsdp_config.model_dtype": "bf16"}}),
                 tmp_path)
    assert got["actor_rollout_ref.actor.fsdp_config.model_dtype"] == "float32"  # the block's, last
    assert got["actor_rollout_ref.ref.fsdp_config.model_dtype"] == "bf16"  # the reference policy is not trained
