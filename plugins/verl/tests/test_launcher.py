"""The launcher: `beyondagent run` with `backend: verl` on this CPU machine, and verl failures as one error.

With `backend.device: cuda` (the default) a step needs NVIDIA GPUs (`device: cpu` trains here:
test_verl_cpu_training.py); what runs here for the GPU path is everything before it: the data,
the composed config, the agent-loop check, and the hardware check that stops the run with a
clear error. verl's trainer itself is started for real on a config its
validator rejects, to check that a failure in the child is one `RunError` with the log's path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pyarrow.parquet as pq
import pytest
import yaml
from beyondagent_plugin_verl.backend import VerlBackend, _MetricsReader, failure
from beyondagent_plugin_verl.config import VerlConfig
from structlog.testing import capture_logs

from beyondagent_core.errors import RunError

ROOT = Path(__file__).resolve().parents[3]


def small_spec(tmp_path: Path, **backend: Any) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["tasks"]["train"]["count"] = 8
    data["backend"].update({"total_steps": None, "epochs": 2, "batch_size": 2, **backend})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_cpu_run_writes_everything_then_says_training_needs_gpus(verl_venv: Any, tiny_model: str,
                                                                   tmp_path: Path) -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(small_spec(tmp_path))], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    print(f"beyondagent run (verl, CPU) to its GPU check: {time.monotonic() - started:.1f} s")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "verl's trainer needs 1 GPU(s) on this node (backend.gpus_per_node) but torch in verl's venv sees 0" \
        in proc.stderr
    assert "Traceback" not in proc.stderr
    verl_dir = tmp_path / "runs" / "verl_frozenlake" / "verl"
    rows = pq.read_table(verl_dir / "data" / "train.parquet").to_pylist()
    assert len(rows) == 16 and [r["extra_info"]["epoch"] for r in rows] == [0] * 8 + [1] * 8
    config = yaml.safe_load((verl_dir / "verl_config.yaml").read_text())
    assert config["data"]["train_files"] == [str(verl_dir / "data" / "train.parquet")]
    assert config["data"]["val_files"] == [str(verl_dir / "data" / "val.parquet")]
    worker_spec = yaml.safe_load((verl_dir / "spec.yaml").read_text())
    assert worker_spec["env"]["name"] == "frozenlake" and worker_spec["backend"]["name"] == "verl"
    # composed by the trainer's own process, which the failed check then stopped before any Ray start
    assert json.loads((verl_dir / "compose_answer.json").read_text())["ok"] is True
    log = (verl_dir / "verl.log").read_text()
    assert "==== beyondagent: verl trainer, attempt 0 ====" in log and "Started a local Ray instance" not in log


def test_a_key_verl_lacks_stops_a_real_run_before_training(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    """Composing in the trainer's process (not only in a dry run): verl's answer becomes our key error,
    and the process ends by itself without training."""
    spec = small_spec(tmp_path, device="cpu")
    data = yaml.safe_load(spec.read_text())
    data["backend"]["verl"] = {"actor_rollout_ref.actor.ppo_epoch": 2}  # verl's key is ppo_epochs
    spec.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]  # a spec error
    assert "key backend.verl.actor_rollout_ref.actor.ppo_epoch" in proc.stderr and "ppo_epochs" in proc.stderr
    assert "Traceback" not in proc.stderr
    verl_dir = tmp_path / "runs" / "verl_frozenlake" / "verl"
    assert json.loads((verl_dir / "compose_answer.json").read_text())["ok"] is False
    assert not (verl_dir / "verl_metrics.0.jsonl").exists()  # verl's logger never started


def test_a_verl_failure_is_one_error_naming_the_log(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    """verl's real trainer in its venv, on a config its validator rejects: exit 1, our RunError."""
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(small_spec(tmp_path)),
                           "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config_path = tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] = 64  # > train_batch_size: verl refuses
    config_path.write_text(yaml.safe_dump(config))

    def no_step(step: int, metrics: dict[str, Any]) -> None:
        raise AssertionError("no step can finish")

    run = SimpleNamespace(run_dir=tmp_path / "runs" / "verl_frozenlake", resume=False, step_finished=no_step,
                          spec=SimpleNamespace(secrets=set(), resolved={}))  # what _launch reads of a RunContext
    with pytest.raises(RunError) as caught:
        VerlBackend(VerlConfig())._launch(run, config_path, verl_venv, steps=1)
    error = caught.value
    assert error.message.startswith("verl stopped (exit 1): ")
    assert "ppo_mini_batch_size" in error.message
    log_path = config_path.parent / "verl.log"
    assert str(log_path) in error.where and "Traceback" in log_path.read_text()


def test_log_causes_are_recognised(tmp_path: Path) -> None:
    log = tmp_path / "verl.log"
    log.write_text("...\nRuntimeError: No CUDA GPUs are available\n")
    assert "could not use a CUDA GPU" in failure(log, 1).message
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert "ran out of memory" in failure(log, 1).message
    log.write_text("AssertionError: Agent loop beyondagent not registered, registered agent loops: ['tool_agent']\n")
    assert "did not find our agent loop" in failure(log, 1).message
    log.write_text("(AgentLoopWorkerTQ pid=1) beyondagent_core.errors.SpecError: invalid workflow: workflow.entrypoint: "
                   "cannot import 'agents/lake.py' (FileNotFoundError: no file /x/agents/lake.py)\n"
                   "RuntimeError: Sync replay buffer selected terminal groups with no materializable trajectories.\n")
    message = failure(log, 1).message
    assert "our agent loop failed" in message and "cannot import 'agents/lake.py'" in message


def test_the_metrics_reader_takes_only_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "verl_metrics.0.jsonl"
    reader = _MetricsReader(path)
    assert reader.new_steps() == []
    path.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n" + '{"step": 2, "da')
    assert reader.new_steps() == [(1, {"critic/score/mean": 0.5})]
    with path.open("a") as handle:
        handle.write('ta": {"critic/score/mean": 0.75}}\n')
    assert reader.new_steps() == [(2, {"critic/score/mean": 0.75})]


def test_resume_refuses_changed_learning_settings(tmp_path: Path) -> None:
    from beyondagent_plugin_verl.backend import check_resume

    from beyondagent_core.errors import SpecError
    from beyondagent_core.pipeline import prepare
    from beyondagent_core.plugins import PluginManager, Switches
    from beyondagent_core.spec import CriticSection

    spec = prepare(small_spec(tmp_path), manager=PluginManager(Switches(autoload=True))).spec

    class Run:
        run_dir = tmp_path / "run"
        resume = False

    Run.spec = spec
    config = spec.component("backend").config
    assert check_resume(Run(), config) is None
    Run.resume = True
    (Run.run_dir / "checkpoints").mkdir(parents=True)
    (Run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("20")
    assert check_resume(Run(), attrs.evolve(config, epochs=5, save_every=3)) == 20  # how long/often: fine
    with pytest.raises(SpecError) as caught:
        check_resume(Run(), attrs.evolve(config, lr=0.1))
    assert "backend.lr (0.005 -> 0.1)" in caught.value.message
    # a run from before critics were recorded (no "critic" key) resumes; a PPO run's critic.lr is kept
    path = Run.run_dir / "verl" / "learning_settings.json"
    recorded = json.loads(path.read_text())
    recorded.pop("critic")
    path.write_text(json.dumps(recorded))
    assert check_resume(Run(), config) == 20
    Run.spec, Run.resume = attrs.evolve(spec, critic=CriticSection(lr=1e-4)), False  # a fresh PPO run
    check_resume(Run(), config)
    Run.spec, Run.resume = attrs.evolve(spec, critic=CriticSection(lr=1e-3)), True
    with pytest.raises(SpecError) as caught:
        check_resume(Run(), config)
    assert "critic.lr (0.0001 -> 0.001)" in caught.value.message


def test_step_metrics_get_the_episodes_success_rate(tmp_path: Path) -> None:
    """verl's step line + our agent loop's spooled episode facts -> one metrics.jsonl line in our names."""
    from beyondagent_plugin_verl.episode_spool import spool, take_step

    lines = [{"global_steps": 1, "split": "train", "success": True, "origin": "original"},
             {"global_steps": 1, "split": "train", "success": False, "origin": "synthetic"},
             {"global_steps": 1, "split": "train", "success": True, "origin": "synthetic"},
             {"global_steps": 1, "split": "val", "success": False, "origin": "original"},
             {"global_steps": 2, "split": "train", "success": False, "origin": "original"}]
    for line in lines:
        spool(tmp_path, line["global_steps"], line)
    reported = []

    class Run:
        run_dir = tmp_path

        def step_finished(self, step: int, metrics: dict[str, Any]) -> None:
            reported.append((step, metrics))

    train = [line for line in take_step(tmp_path, 1) if line["split"] == "train"]
    ours = VerlBackend(VerlConfig())._report(Run(), 1, {"critic/score/mean": 0.5}, train)
    assert ours["train/success_rate"] == pytest.approx(2 / 3)
    assert ours["train/synthetic_fraction"] == pytest.approx(2 / 3)
    assert ours["train/success_rate_synthetic"] == 0.5 and ours["train/success_rate_original"] == 1.0
    assert ours["train/reward_mean"] == 0.5
    line = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert line["step"] == 1 and line["train/success_rate"] == pytest.approx(2 / 3)
    assert reported[0][0] == 1 and "verl/critic/score/mean" not in reported[0][1]
    assert take_step(tmp_path, 2)[0]["success"] is False
    failing = [{"success": False, "error": "PromptTooLong: the prompt is 284 tokens"}, {"success": True, "error": None}]
    with capture_logs() as events:
        VerlBackend(VerlConfig())._report(Run(), 2, {}, failing)
    warned = [e for e in events if e["event"] == "verl.episode_errors"]
    assert warned and warned[0]["failed"] == 1 and warned[0]["first"].startswith("PromptTooLong")
    assert "val/episode_errors" not in reported[-1][1]  # no validation that step
    val = [{"split": "val", "success": False, "error": "AgentError: agent a:run raised KeyError: 'x'"},
           {"split": "val", "success": True, "error": None}]
    assert VerlBackend(VerlConfig())._report(Run(), 3, {}, [], val=val)["val/episode_errors"] == 1.0
