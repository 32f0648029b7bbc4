"""`beyondagent run SPEC --dry-run` with `backend: verl`: verl's own Hydra config, composed and validated.

Real verl (in its venv): `compose.py` composes `ppo_trainer` with Hydra, applies our mapping and
the `verl:` block, and runs verl's `validate_config`; the CLI prints the result and writes
`verl_config.yaml`. Errors from verl come back as our key-path errors.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]


def dry_run(tmp_path: Path, backend: dict[str, Any] | None = None) -> subprocess.CompletedProcess:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = "runs"  # relative, as in the examples: verl must still get absolute paths
    data["backend"].update(backend or {})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)


def test_dry_run_prints_and_writes_the_composed_verl_config(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    started = time.monotonic()
    proc = dry_run(tmp_path)
    print(f"dry run with verl's compose + validate_config: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    written = tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml"
    assert written.is_file()
    config = yaml.safe_load(written.read_text())
    rollout, actor = config["actor_rollout_ref"]["rollout"], config["actor_rollout_ref"]["actor"]
    # our mapping, as verl holds it after composing its own defaults around it
    assert rollout["n"] == 8 and config["data"]["train_batch_size"] == 4
    assert actor["optim"]["lr"] == 0.005 and actor["use_kl_loss"] is False and actor["entropy_coeff"] == 0.01
    assert config["algorithm"]["adv_estimator"] == "grpo"
    assert config["actor_rollout_ref"]["model"]["path"] == tiny_model
    assert rollout["agent"]["default_agent_loop"] == "beyondagent"
    assert config["trainer"]["default_local_dir"].startswith(str(tmp_path / "runs" / "verl_frozenlake"))
    # the `verl:` block
    assert config["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"] is False
    assert rollout["agent"]["num_workers"] == 2
    # model.dtype auto / model.param_dtype float32 on a GPU: fp32 master weights, bf16 compute (issue 33)
    mixed = {"param_dtype": "bf16", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    for role in ("actor", "ref"):
        fsdp = config["actor_rollout_ref"][role]["fsdp_config"]
        assert (fsdp["model_dtype"], fsdp["mixed_precision"]) == ("fp32", mixed), role
    assert rollout["dtype"] == "bfloat16"
    # verl's defaults are all there (a key we never set)
    assert "ppo_max_token_len_per_gpu" in actor
    agent_loop = yaml.safe_load(Path(rollout["agent"]["agent_loop_config_path"]).read_text())
    assert agent_loop[0]["_target_"] == "beyondagent_plugin_verl.agent_loop.BeyondAgentLoop"
    assert Path(agent_loop[0]["spec_path"]).is_file()
    out = proc.stdout
    assert "actor_rollout_ref:" in out and "agent loop `beyondagent` in verl's venv: registered" in out
    assert "dry run: nothing was explored or trained" in out


def test_a_typo_in_the_verl_block_names_the_key_and_the_closest_one(verl_venv: Any, tiny_model: str,
                                                                   tmp_path: Path) -> None:
    proc = dry_run(tmp_path, {"verl": {"actor_rollout_ref.actor.ppo_epoch": 2}})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = proc.stderr
    assert "verl has no key 'actor_rollout_ref.actor.ppo_epoch'" in err
    assert "backend.verl.actor_rollout_ref.actor.ppo_epoch" in err
    assert "actor_rollout_ref.actor.ppo_epochs" in err  # did you mean
    assert "Traceback" not in err


def test_verl_validator_rejections_come_back_as_errors(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    proc = dry_run(tmp_path, {"verl": {"actor_rollout_ref.actor.ppo_mini_batch_size": 16}})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "validate_config rejected the config" in proc.stderr and "ppo_mini_batch_size" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_verl_setup_reports_the_venv_and_the_registered_agent_loop(verl_venv: Any) -> None:
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "verl", "setup"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stderr.split())  # rich wraps lines
    assert f"verl venv: ready at {verl_venv.path}" in out
    assert "verl 0.9.1" in out and "transformers 5.10" in out and "ray " in out
    assert "agent loop `beyondagent`: registered (beyondagent_plugin_verl.agent_loop.BeyondAgentLoop)" in out


def test_a_known_model_name_resolves_in_verls_venv_to_the_shared_cache(verl_venv: Any) -> None:
    """`model.path: smollm2-135m-instruct` with the verl backend: composed in verl's venv, the name
    becomes the checkpoint the torch plugin fetched once (the same cache, nothing fetched again)."""
    from beyondagent_plugin_torch.testing import real_model_cache, real_model_dir

    fetched = real_model_dir()
    env = {**verl_venv.environ(), "BEYONDAGENT_CACHE": str(real_model_cache())}
    script = ("from beyondagent_plugin_verl.compose import resolve_model_path as r; "
              "print(r('smollm2-135m-instruct')); print(r('/data/checkpoint'))")
    result = verl_venv.run(["-c", script], timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [str(fetched), "/data/checkpoint"]


def test_the_7b_self_play_example_validates_with_our_trainer_and_estimator(verl_venv: Any, tmp_path: Path) -> None:
    """examples/verl_selfplay_7b.yaml (8 GPUs, not run here) composes and passes verl's validation; its
    multi-seat episodes train with our estimator (`rae`) in our trainer, which groups each seat apart."""
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(ROOT / "examples" / "verl_selfplay_7b.yaml"),
                           "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = yaml.safe_load((tmp_path / "runs" / "verl_selfplay_7b" / "verl" / "verl_config.yaml").read_text())
    assert config["trainer"]["v1"]["trainer_mode"] == "beyondagent_sync"
    assert config["actor_rollout_ref"]["rollout"]["n"] == 4 and config["trainer"]["n_gpus_per_node"] == 8
