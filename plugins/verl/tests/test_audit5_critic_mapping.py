"""PPO's critic on the verl backend takes the backend's and the model's settings as the actor does
(`mapping.critic_settings`; issue 37's fifth mutation audit): its FSDP weights in `model.param_dtype`
and its compute in `model.dtype` (reduced and buffered in fp32), the backend's micro-batch, weight
decay and gradient clip, the policy's LoRA rank and alpha, and on `backend.device: cpu` the actor's
FSDP2-over-gloo settings (none of them on a GPU). The mapping runs in the main venv (no verl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from beyondagent_plugin_verl.mapping import RunFiles, verl_overrides

from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def critic_keys(tmp_path: Path, *, model: dict[str, Any] | None = None, backend: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["algorithm"]["group_size"] = 1
    data["backend"].update({"advantage": {"name": "gae"}, **(backend or {})})
    data["model"].update(model or {})
    data["critic"] = {"lr": 2e-5}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    spec = prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=("v.parquet",),
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    return {o.key: o.value for o in verl_overrides(spec, spec.component("backend").config, files, model_path="/m")}


def test_the_critic_trains_in_the_models_precision_with_the_backends_batches(tmp_path: Path) -> None:
    got = critic_keys(tmp_path, model={"param_dtype": "float32", "dtype": "bfloat16"},
                      backend={"micro_batch_size": 3, "weight_decay": 0.05, "grad_clip": 0.7})
    assert got["critic.fsdp.model_dtype"] == "fp32"  # the weights AdamW updates: param_dtype, not the compute dtype
    mixed = {"param_dtype": "bf16", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert got["+critic.fsdp.mixed_precision"] == mixed
    assert got["+critic.fsdp.mixed_precision"] == got["+actor_rollout_ref.actor.fsdp_config.mixed_precision"]
    assert (got["critic.ppo_micro_batch_size_per_gpu"], got["critic.optim.weight_decay"],
            got["critic.optim.clip_grad"]) == (3, 0.05, 0.7)


def test_a_lora_policy_gives_the_critic_its_rank_and_alpha(tmp_path: Path) -> None:
    got = critic_keys(tmp_path, model={"lora": {"rank": 8, "alpha": 32}})
    assert (got["critic.model.lora_rank"], got["critic.model.lora_alpha"]) == (8, 32)


def test_on_cpu_the_critic_gets_the_actors_fsdp2_over_gloo_and_on_a_gpu_verls_defaults(tmp_path: Path) -> None:
    cpu = critic_keys(tmp_path, backend={"device": "cpu"})
    assert cpu["critic.strategy"] == cpu["critic.fsdp.strategy"] == "fsdp2"
    assert cpu["critic.model.external_lib"] == cpu["actor_rollout_ref.model.external_lib"]
    assert cpu["critic.model.use_remove_padding"] is False and cpu["critic.fsdp.model_dtype"] == "fp32"
    gpu = critic_keys(tmp_path)
    assert not {"critic.strategy", "critic.model.external_lib", "critic.model.override_config"} & set(gpu)
