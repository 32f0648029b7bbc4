"""`backend.advantage` on the verl backend: each estimator verl 0.9.1 has becomes its own
`algorithm.adv_estimator` (verl computes it; our trainer is not needed), the others run in our
trainer; `algorithm.name` naming an estimator is refused with the choices.

The mapping tests run in the main venv (no verl); the dry run composes and validates the mapped
config with verl's own Hydra config in its venv, as `test_compose.py` does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_verl.mapping import (
    ADV_ESTIMATORS,
    OUR_TRAINER,
    RunFiles,
    our_advantages,
    own_estimator,
    verl_overrides,
)

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def write_spec(tmp_path: Path, advantage: dict[str, Any] | None = None, algorithm: dict[str, Any] | None = None,
               output_dir: str | None = None) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = output_dir or str(tmp_path / "runs")
    if advantage is not None:
        data["backend"]["advantage"] = advantage
    data["algorithm"].update(algorithm or {})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def mapped(tmp_path: Path, advantage: dict[str, Any] | None = None, algorithm: dict[str, Any] | None = None
           ) -> tuple[Any, dict[str, Any]]:
    spec = prepare(write_spec(tmp_path, advantage, algorithm), manager=PluginManager(Switches(autoload=True))).spec
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=("v.parquet",),
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    overrides = verl_overrides(spec, spec.component("backend").config, files, model_path="/models/m")
    return spec, {o.key: (o.value, o.origin) for o in overrides}


@pytest.mark.parametrize(("advantage", "estimator", "norm", "gamma"), [
    (None, "grpo", True, None),
    ({"name": "grpo"}, "grpo", True, None),
    ({"name": "dr_grpo"}, "grpo", False, None),  # Dr. GRPO's advantage: verl's GRPO without the std
    ({"name": "rloo"}, "rloo", True, None),
    ({"name": "reinforce_plus_plus"}, "reinforce_plus_plus", True, 1.0),
    ({"name": "reinforce_plus_plus", "gamma": 0.9}, "reinforce_plus_plus", True, 0.9),
    ({"name": "reinforce_plus_plus_baseline"}, "reinforce_plus_plus_baseline", True, None),
])
def test_estimators_verl_has_become_its_own(tmp_path: Path, advantage: dict | None, estimator: str, norm: bool,
                                            gamma: float | None) -> None:
    spec, got = mapped(tmp_path, advantage, algorithm={"norm_adv_by_std": True})
    assert got["algorithm.adv_estimator"] == (estimator, "backend.advantage.name" if advantage else "algorithm.name")
    assert got["algorithm.norm_adv_by_std_in_grpo"][0] is norm
    if advantage and advantage["name"] == "dr_grpo":
        assert got["algorithm.norm_adv_by_std_in_grpo"][1] == "backend.advantage.name"
    assert got.get("algorithm.gamma", (None,))[0] == gamma
    # verl computes it, then ours (equal by plugins/advantages' parity tests) replaces it in a synchronous
    # run, leaving failed episodes out of the groups' statistics
    assert got["trainer.v1.trainer_mode"] == (OUR_TRAINER, "backend.rollout_mode")
    assert not own_estimator(spec) and our_advantages(spec)


def test_estimators_verl_lacks_run_in_our_trainer(tmp_path: Path) -> None:
    spec, got = mapped(tmp_path, {"name": "gigpo"})
    assert own_estimator(spec) and got["trainer.v1.trainer_mode"][0] == OUR_TRAINER
    assert got["algorithm.adv_estimator"][0] == "grpo"  # verl's GRPO first, then ours replaces it
    assert "gigpo" not in ADV_ESTIMATORS and "adca" not in ADV_ESTIMATORS


def test_every_mapped_estimator_is_registered(tmp_path: Path) -> None:
    from beyondagent_core.registry import Registry

    registered = set(Registry(PluginManager(Switches(autoload=True)).load()).names("advantage"))
    assert set(ADV_ESTIMATORS) <= registered


@pytest.mark.parametrize("name", ["rloo", "reinforce_plus_plus", "dr_grpo"])
def test_an_estimator_in_algorithm_name_is_refused_with_the_choices(tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecError) as caught:
        mapped(tmp_path, algorithm={"name": name})
    error = caught.value
    assert "algorithm.name" in error.where
    assert f"backend.advantage: {{name: {name}}}" in error.hint
    assert "reinforce_plus_plus_baseline" in error.hint and "gigpo" in error.hint  # the choices


def test_other_algorithm_names_are_refused_by_the_backend(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        mapped(tmp_path, algorithm={"name": "ppo"})
    assert "algorithm.name" in caught.value.where and "backend.advantage.name" in caught.value.hint


def test_reinforce_plus_plus_dry_runs_through_verls_config(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"name": "reinforce_plus_plus", "gamma": 0.9}, output_dir="runs")
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), "--dry-run"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = yaml.safe_load((tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml").read_text())
    assert config["algorithm"]["adv_estimator"] == "reinforce_plus_plus" and config["algorithm"]["gamma"] == 0.9
    assert config["trainer"]["v1"]["trainer_mode"] == OUR_TRAINER  # verl's estimator first, then ours (failures out)


def test_gae_brings_verls_critic_worker_with_our_critic_settings(tmp_path: Path) -> None:
    spec, got = mapped(tmp_path, {"name": "gae", "gamma": 0.99, "lam": 0.9}, algorithm={"group_size": 1})
    assert got["algorithm.adv_estimator"] == ("gae", "backend.advantage.name")
    assert got["algorithm.gamma"] == (0.99, "backend.advantage.gamma")
    assert got["algorithm.lam"] == (0.9, "backend.advantage.lam")
    assert got["critic.enable"][0] is True and got["critic.model.path"] == ("/models/m", "model.path")
    assert got["critic.optim.lr"] == (1e-5, "critic.lr") and got["trainer.critic_warmup"] == (0, "critic.warmup_steps")
    assert got["critic.cliprange_value"] == (0.5, "critic.cliprange_value")
    # verl computes GAE from its critic's values: our trainer would have none to give our estimator
    assert not our_advantages(spec) and "trainer.v1.trainer_mode" not in got
    data = yaml.safe_load(write_spec(tmp_path, {"name": "gae"}).read_text())
    data["critic"] = {"path": "/models/critic", "lr": 3e-5, "warmup_steps": 2, "cliprange_value": 0.2}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    spec = prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
    files = RunFiles(run_dir=tmp_path / "run", train_files=("t.parquet",), val_files=("v.parquet",),
                     agent_loop_config=tmp_path / "run" / "verl" / "agent_loop.yaml")
    got = {o.key: (o.value, o.origin) for o in verl_overrides(spec, spec.component("backend").config, files,
                                                              model_path="/models/m")}
    assert got["critic.model.path"] == ("/models/critic", "critic.path")
    assert got["critic.model.tokenizer_path"] == ("/models/m", "model.path")  # the policy's tokens
    assert (got["critic.optim.lr"][0], got["trainer.critic_warmup"][0], got["critic.cliprange_value"][0]) == (3e-5, 2, 0.2)


def test_gae_dry_runs_through_verls_config_with_its_critic(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, {"name": "gae", "lam": 0.95}, algorithm={"group_size": 1}, output_dir="runs")
    data = yaml.safe_load(spec.read_text())
    data["backend"]["device"] = "cpu"
    spec.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), "--dry-run"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = yaml.safe_load((tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml").read_text())
    assert config["algorithm"]["adv_estimator"] == "gae" and config["algorithm"]["lam"] == 0.95
    assert config["critic"]["enable"] is True and config["critic"]["strategy"] == "fsdp2"
    assert config["critic"]["model"]["path"] == config["actor_rollout_ref"]["model"]["path"]  # tiny, built
    assert Path(config["critic"]["model"]["path"]).is_dir()
