"""Our spec -> Trinity-RFT keys (mapping.py), in the main venv: mapped keys, `trinity:` blocks, refusals.

trinity itself is not needed here; test_dry_run.py runs the same overrides through trinity's
Config schema and check_and_update in its venv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_trinity.mapping import ADVANTAGE_NAME, WORKFLOW_NAME, RunFiles, trinity_overrides

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def spec_of(tmp_path: Path, backend: dict[str, Any] | None = None, algorithm: dict[str, Any] | None = None,
            **sections: Any) -> Any:
    data = yaml.safe_load((ROOT / "examples" / "trinity_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["backend"].update(backend or {})
    data["algorithm"].update(algorithm or {})
    data.update(sections)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return prepare(path, manager=PluginManager(Switches(autoload=True))).spec


def mapped(spec: Any, tmp_path: Path) -> list[Any]:
    files = RunFiles(run_dir=tmp_path / "run", spec_path=tmp_path / "run" / "trinity" / "spec.yaml",
                     train_dir=tmp_path / "train", val_dir=tmp_path / "val")
    return trinity_overrides(spec, spec.component("backend").config, files, model_path="/models/m")


def test_the_examples_settings_reach_trinitys_keys(tmp_path: Path) -> None:
    overrides = mapped(spec_of(tmp_path), tmp_path)
    got = {o.key: o.value for o in overrides}
    assert {key: got[key] for key in ("mode", "cluster.node_num", "cluster.gpu_per_node", "algorithm.algorithm_type",
                                      "algorithm.repeat_times", "algorithm.advantage_fn", "algorithm.kl_loss_fn",
                                      "algorithm.entropy_loss_fn", "buffer.batch_size", "buffer.total_steps",
                                      "model.model_path", "model.max_prompt_tokens", "model.max_response_tokens",
                                      "explorer.rollout_model.enable_openai_api", "synchronizer.sync_offset")} == {
        "mode": "both", "cluster.node_num": 1, "cluster.gpu_per_node": 2, "algorithm.algorithm_type": "grpo",
        "algorithm.repeat_times": 8, "algorithm.advantage_fn": ADVANTAGE_NAME, "algorithm.kl_loss_fn": "none",
        "algorithm.entropy_loss_fn": "default", "buffer.batch_size": 4, "buffer.total_steps": 80,
        "model.model_path": "/models/m", "model.max_prompt_tokens": 256, "model.max_response_tokens": 256,
        "explorer.rollout_model.enable_openai_api": True, "synchronizer.sync_offset": 0}
    taskset = got["buffer.explorer_input.tasksets"][0]
    assert taskset["default_workflow_type"] == WORKFLOW_NAME and taskset["path"] == str(tmp_path / "train")
    assert taskset["workflow_args"]["max_new_tokens"] == 2 and taskset["workflow_args"]["records_steps"]
    assert got["buffer.explorer_input.eval_tasksets"][0]["rollout_args"]["temperature"] == 1.0
    # the backend's `trinity:` block comes last, with the spec key it came from
    assert (overrides[-1].key, overrides[-1].value, overrides[-1].origin) == (
        "explorer.rollout_model.enforce_eager", True, "backend.trinity.explorer.rollout_model.enforce_eager")


def test_one_gpu_is_trinitys_colocate_mode_and_estimators_of_ours_run_as_its_advantage_fn(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, backend={"gpus_per_node": 1, "advantage": {"name": "gigpo"}},
                   algorithm={"kl_coef": 0.001, "kl_type": "mse"})
    got = {o.key: o.value for o in mapped(spec, tmp_path)}
    assert got["mode"] == "colocate" and got["algorithm.kl_loss_fn"] == "k2"
    assert got["algorithm.advantage_fn"] == ADVANTAGE_NAME
    assert got["algorithm.advantage_fn_args"]["spec_path"].endswith("spec.yaml")
    assert got["buffer.explorer_input.tasksets"][0]["workflow_args"]["records_steps"] is True
    spec = spec_of(tmp_path, algorithm={"norm_adv_by_std": False})  # Dr. GRPO: ours, not trinity's grpo
    assert {o.key: o.value for o in mapped(spec, tmp_path)}["algorithm.advantage_fn"] == ADVANTAGE_NAME


@pytest.mark.parametrize(("change", "key", "says"), [
    ({"algorithm": {"overlong": {"buffer_len": 8}}}, "algorithm.overlong", "reward functions"),
    ({"algorithm": {"dynamic_sampling": True}}, "algorithm.dynamic_sampling", "experience pipeline"),
    ({"algorithm": {"sft": {"data": "x.jsonl"}}}, "algorithm.sft", "stages"),
    ({"algorithm": {"kl_coef": 0.001, "kl_type": "full"}}, "algorithm.kl_type", "no 'full'"),
    ({"model": {"path": "tiny", "lora": {"rank": 4, "dropout": 0.1}}}, "model.lora.dropout", "no dropout"),
    ({"experience": {"name": "experience", "summarizer": "hindsight"}}, "experience", "experience-guided"),
    ({"backend": {"rollout_engines": 2}}, "backend.rollout_engines", "leaving none for the trainer"),
    ({"backend": {"advantage": {"name": "gae"}}}, "backend.advantage.name", "PPO (its critic) is not mapped"),
    ({"backend": {"trinity": {"buffer.explorer_input.default_workflow_type": "math_workflow"}}},
     "backend.trinity.buffer.explorer_input.default_workflow_type", "our Workflow"),
])
def test_what_trinity_has_no_equivalent_for_is_refused_with_the_reason(tmp_path: Path, change: dict[str, Any],
                                                                         key: str, says: str) -> None:
    spec = spec_of(tmp_path, backend=change.pop("backend", None), algorithm=change.pop("algorithm", None), **change)
    with pytest.raises(SpecError) as error:
        mapped(spec, tmp_path)
    assert f"key {key}" in str(error.value.where) and says in str(error.value)


def test_a_cpu_device_is_refused_with_what_runs_on_a_cpu(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as error:
        spec_of(tmp_path, backend={"device": "cpu"})
    assert "device must be cuda" in str(error.value) and "--dry-run" in str(error.value)


@pytest.mark.parametrize(("backend", "offset", "origin"), [
    ({}, 0, "backend.sync_offset"),
    ({"sync_offset": 2}, 2, "backend.sync_offset"),
    ({"rollout_mode": "one_step_off"}, 1, "backend.rollout_mode"),
    ({"rollout_mode": "async", "max_staleness": 3}, 3, "backend.max_staleness"),
])
def test_rollout_mode_sets_trinitys_sync_offset(tmp_path: Path, backend: dict[str, Any], offset: int,
                                                origin: str) -> None:
    (override,) = [o for o in mapped(spec_of(tmp_path, backend), tmp_path) if o.key == "synchronizer.sync_offset"]
    assert (override.value, override.origin) == (offset, origin)


@pytest.mark.parametrize(("backend", "key"), [
    ({"rollout_mode": "async", "sync_offset": 2}, "backend.sync_offset"),
    ({"rollout_mode": "one_step_off", "max_staleness": 2}, "backend.max_staleness"),
    ({"tis_cap": 2.0}, "backend.tis_cap"),
])
def test_rollout_mode_conflicts_are_refused_naming_the_key(tmp_path: Path, backend: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError, match=key.replace(".", r"\.")):
        mapped(spec_of(tmp_path, backend), tmp_path)


def test_gradient_checkpointing_reaches_trinitys_verl_trainer_config_only_when_set(tmp_path: Path) -> None:
    key = "+trainer.trainer_config.actor_rollout_ref.model.enable_gradient_checkpointing"
    assert key not in {o.key for o in mapped(spec_of(tmp_path), tmp_path)}
    overrides = mapped(spec_of(tmp_path, model={"path": "tiny", "gradient_checkpointing": False}), tmp_path)
    assert [(o.value, o.origin) for o in overrides if o.key == key] == [(False, "model.gradient_checkpointing")]


def precision_keys(overrides: list[Any]) -> dict[str, Any]:
    got = {o.key: o.value for o in overrides}
    verl = "+trainer.trainer_config.actor_rollout_ref"
    return {"weights": got[f"{verl}.actor.fsdp_config.model_dtype"],
            "compute": got[f"{verl}.actor.fsdp_config.mixed_precision"],
            "ref_weights": got[f"{verl}.ref.fsdp_config.model_dtype"],
            "ref_compute": got[f"{verl}.ref.fsdp_config.mixed_precision"],
            "rollout": got["explorer.rollout_model.dtype"]}


@pytest.mark.parametrize(("model", "weights", "compute", "rollout", "warned"), [
    ({}, "fp32", "bf16", "bfloat16", False),  # the default (GPUs): fp32 master weights, bf16 compute
    ({"dtype": "float32"}, "fp32", "fp32", "float32", False),
    ({"param_dtype": "bfloat16"}, "bf16", "bf16", "bfloat16", True),  # pure bf16: asked for, warned
])
def test_model_dtype_and_param_dtype_reach_trinitys_verl_trainer_and_explorer(
        tmp_path: Path, model: dict[str, Any], weights: str, compute: str, rollout: str, warned: bool) -> None:
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        overrides = mapped(spec_of(tmp_path, model={"path": "tiny", **model}), tmp_path)
    mixed = {"param_dtype": compute, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert precision_keys(overrides) == {"weights": weights, "compute": mixed, "ref_weights": weights,
                                         "ref_compute": mixed, "rollout": rollout}
    origins = {o.key: o.origin for o in overrides}
    assert origins["+trainer.trainer_config.actor_rollout_ref.actor.fsdp_config.model_dtype"] == "model.param_dtype"
    assert origins["explorer.rollout_model.dtype"] == "model.dtype"
    assert any(event["event"] == "train.pure_low_precision" for event in logs) is warned


@pytest.mark.parametrize(("model", "backend", "key"), [
    ({"param_dtype": "bfloat16", "dtype": "float32"}, {}, "model.dtype"),
    # trinity's FSDP2 casts LoRA adapters to the compute dtype: bf16 adapters nobody asked for
    ({"lora": {"rank": 4}}, {}, "model.dtype"),
    ({}, {"trinity": {"trainer.trainer_config.actor_rollout_ref.actor.fsdp_config.model_dtype": "bf16"}},
     "backend.trinity.trainer.trainer_config.actor_rollout_ref.actor.fsdp_config.model_dtype"),
    ({}, {"trinity": {"explorer.rollout_model.dtype": "float16"}}, "backend.trinity.explorer.rollout_model.dtype"),
])
def test_low_precision_weights_nobody_asked_for_are_refused(tmp_path: Path, model: dict[str, Any],
                                                            backend: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as error:
        mapped(spec_of(tmp_path, backend, model={"path": "tiny", **model}), tmp_path)
    assert str(error.value.where).endswith(f"key {key}"), error.value


def test_lora_keeps_float32_adapters_where_trinity_can(tmp_path: Path) -> None:
    lora = {"path": "tiny", "lora": {"rank": 4}}
    for model, backend in (({**lora, "dtype": "float32"}, {}),  # float32 throughout
                           ({**lora, "param_dtype": "bfloat16"}, {}),  # pure bf16, asked for
                           (lora, {"trinity": {"trainer.trainer_strategy": "fsdp"}})):  # FSDP1: no cast
        assert mapped(spec_of(tmp_path, backend, model=model), tmp_path)
    megatron = mapped(spec_of(tmp_path, {"trinity": {"trainer.trainer_strategy": "megatron"}}), tmp_path)
    assert not [o for o in megatron if "fsdp_config" in o.key]  # trinity would strip them
