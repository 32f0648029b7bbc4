"""Bad input to the torch backend: clear errors naming the spec key, or a run that goes on.

A missing model, CUDA on a CPU machine, a group of one, a prompt longer than the context:
errors with the key to fix. A workflow that raises inside an episode, or an env returning a
non-string observation: that episode scores 0 with an error record, and the step goes on; its 0
stays out of its group's statistics (its siblings' advantages are what they would be without it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from beyondagent_plugin_torch.metrics_log import read_metrics
from torch_test_envs import word_game_spec

from beyondagent_core import WorkflowSpec, hookimpl
from beyondagent_core.types import Reward, Trajectory, Turn
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.runtime.react import ReactWorkflow

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers")


def small_spec(tmp_path: Path, **backend) -> dict:
    spec = word_game_spec(tmp_path, total_steps=1, **backend)
    del spec["tasks"]["val"]
    return spec


def test_a_model_path_that_does_not_exist(tmp_path: Path) -> None:
    pytest.importorskip("beyondagent_plugin_gym")  # the CLI needs an installed env plugin
    spec = {
        "run": {"name": "missing", "output_dir": str(tmp_path / "runs")},
        "model": {"path": str(tmp_path / "no-such-model")},
        "tasks": {"train": {"name": "gym_tasks", "env": "frozenlake", "count": 2, "size": 2}},
        "env": {"name": "frozenlake"},
        "mixture": {"name": "original"},
        "backend": {"name": "torch", "device": "cpu"},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2, proc.stderr
    assert "does not exist" in proc.stderr and "model.path" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cuda_on_a_machine_without_it(run_spec, test_envs, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SpecError, match="CUDA") as caught:
        run_spec(small_spec(tmp_path, device="cuda"))
    assert "backend.device" in str(caught.value)


def test_a_group_of_one(run_spec, test_envs, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="at least 2") as caught:
        run_spec(small_spec(tmp_path), "algorithm.group_size=1")
    assert "algorithm.group_size" in str(caught.value)


def test_a_prompt_longer_than_the_context(run_spec, test_envs, tmp_path: Path) -> None:
    with pytest.raises(RunError, match="longer than max_episode_tokens=8") as caught:
        run_spec(small_spec(tmp_path, max_episode_tokens=8))
    assert "step 1, episodes: 32 of 32 failed" in str(caught.value) and "32 x PromptTooLong" in str(caught.value)
    errors = (tmp_path / "runs" / "word" / "episode_errors.jsonl").read_text().splitlines()
    assert len(errors) == 4 * 8  # each failed episode has its record


def test_max_episode_tokens_beyond_the_model_context(run_spec, test_envs, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="longer than the model's context") as caught:
        run_spec(small_spec(tmp_path, max_episode_tokens=100_000))
    assert "backend.max_episode_tokens" in str(caught.value)


class FailsOnSomeTasks(ReactWorkflow):
    async def run(self, task, env, llm):
        if task.task_id in ("q0", "q1"):
            raise RuntimeError(f"workflow bug on {task.task_id}")
        return await super().run(task, env, llm)


class FailingWorkflowPlugin:
    @hookimpl
    def beyondagent_workflows(self):
        return [WorkflowSpec(name="fails_sometimes", factory=lambda config: FailsOnSomeTasks())]


def test_a_workflow_raising_inside_an_episode(run_spec, test_envs, register_plugin, tmp_path: Path) -> None:
    register_plugin(FailingWorkflowPlugin(), name="failing-workflow")
    spec = small_spec(tmp_path, batch_size=8)
    spec["workflow"] = {"name": "fails_sometimes"}
    result = run_spec(spec)
    [step] = read_metrics(result.run_dir)
    assert step["train/episode_errors"] == 16  # two tasks x group of 8; the other 48 episodes trained
    records = [json.loads(line) for line in (result.run_dir / "episode_errors.jsonl").read_text().splitlines()]
    assert len(records) == 16
    trajectory = records[0]["trajectory"]
    assert trajectory["error"].startswith("RuntimeError: workflow bug on q")
    assert trajectory["reward"]["score"] == 0.0
    events = (result.run_dir / "events.jsonl").read_text()
    assert '"train.episode_errors"' in events and '"stage.failures_below_threshold"' in events
    # The two failed tasks' groups all scored 0: no learning signal there, said once per run.
    assert step["train/flat_groups"] >= 2 / 8 and events.count('"train.flat_groups"') == 1
    # Past the step's threshold the run stops, the causes grouped.
    with pytest.raises(RunError) as caught:
        run_spec(spec, "backend.max_failed_fraction=0.1")
    assert "step 1, episodes: 16 of 64 failed (25%, more than backend.max_failed_fraction = 0.1)" in str(caught.value)
    assert "x RuntimeError: workflow bug on q" in str(caught.value)


class SucceedsOrCrashes:
    """One model turn, then reward 1.0; every fourth rollout of a task (its 1st, 5th, ...) crashes after its turn."""

    def __init__(self) -> None:
        self.rollouts: dict[str, int] = {}

    async def run(self, task, env, llm):
        prompt = {"role": "user", "content": task.query or "Which way?"}
        turn = await llm.chat([prompt])
        self.rollouts[task.task_id] = count = self.rollouts.get(task.task_id, 0) + 1
        if count % 4 == 1:
            raise RuntimeError(f"agent bug on {task.task_id}")
        return Trajectory(task=task, turns=[Turn(role="user", content=prompt["content"]), turn],
                          reward=Reward(1.0, success=True), terminated=True)


class CrashingWorkflowPlugin:
    @hookimpl
    def beyondagent_workflows(self):
        return [WorkflowSpec(name="succeeds_or_crashes", factory=lambda config: SucceedsOrCrashes())]


def test_a_crash_moves_no_sibling_s_advantage(run_spec, test_envs, register_plugin, tmp_path: Path) -> None:
    """Groups of four whose finished episodes all scored 1.0 and one crashed: with the crash's 0 in the
    group's mean, the three would get +0.5 and a loss; left out of it, the group is flat."""
    register_plugin(CrashingWorkflowPlugin(), name="crashing-workflow")
    spec = word_game_spec(tmp_path, total_steps=1)
    spec["workflow"] = {"name": "succeeds_or_crashes"}
    spec["algorithm"]["group_size"] = 4
    spec["logging"] = {"episodes": "all"}
    result = run_spec(spec)
    before, step = read_metrics(result.run_dir)  # validation at step 0 (every val task's 1st rollout), step 1
    assert before["step"] == 0 and before["val/episode_errors"] == 4 and before["val/pass@1"] == 0.0
    assert step["val/episode_errors"] == 0 and step["val/pass@1"] == 1.0
    assert step["train/episode_errors"] == 4  # 4 tasks x 4 rollouts, one crash each
    assert step["advantage/dropped_episodes"] == 4 and step["advantage/dropped_error"] == 4
    assert step["advantage/dropped_timeout"] == 0 and step["advantage/dropped_groups"] == 0
    assert step["train/flat_groups"] == 1.0 and step["actor/pg_loss"] == 0.0
    records = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["split"] == "train"]
    assert len(trained) == 16 and sum(1 for r in trained if r["error"]) == 4
    for record in trained:  # survivors and crashes alike: advantage 0 on every token
        assert {value for value, _ in record["tokens"]["advantages"]} == {0.0}, record["tokens"]["advantages"]


def test_an_env_returning_a_non_string_observation(run_spec, test_envs, tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    spec["env"] = {"name": "broken_observation", "turns": 2}
    spec["workflow"] = {"name": "react", "max_turns": 2}
    with pytest.raises(RunError, match="non-string observation"):
        run_spec(spec)


@pytest.mark.parametrize(("override", "message"), [
    ("backend.lr=.inf", "backend.lr must be a finite number (> 0 and <= 1), got inf"),
    ("backend.lr=.nan", "backend.lr must be a finite number (> 0 and <= 1), got nan"),
    ("backend.grad_clip=-1", "backend.grad_clip must be > 0, got -1"),
    ("backend.temperature=.nan", "backend.temperature must be a finite number (>= 0 and <= 100), got nan"),
    ("algorithm.group_size=0", "algorithm.group_size must be >= 1, got 0"),
    ("algorithm.clip_ratio=.nan", "algorithm.clip_ratio must be a finite number (> 0 and <= 100), got nan"),
    ("algorithm.kl_coef=-0.1", "algorithm.kl_coef must be >= 0, got -0.1"),
    ("algorithm.kl_coef=1.0e+308", "algorithm.kl_coef must be <= 10000 (meaning: a coefficient this large drowns"),
    ("algorithm.group_size=100000000000000000000000", "algorithm.group_size must be <= 4096 (memory: all rollouts"),
])
def test_out_of_range_numbers_name_their_key(run_spec, test_envs, tmp_path: Path, override: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        run_spec(small_spec(tmp_path), override, dry_run=True)
    assert message in str(caught.value) and f"key {override.split('=')[0]}" in str(caught.value)


def test_a_diverged_update_stops_the_run_with_the_step() -> None:
    import math

    import torch
    from beyondagent_plugin_torch.trainer import check_finite

    model = torch.nn.Linear(2, 2)
    check_finite(3, model, {"actor/pg_loss": 0.5, "actor/grad_norm": 1.0})  # finite: nothing happens
    with pytest.raises(RunError, match="step 3: training diverged") as caught:
        check_finite(3, model, {"actor/pg_loss": math.nan, "actor/grad_norm": math.nan})
    assert "loss nan" in str(caught.value) and "lower backend.lr" in str(caught.value)
    with torch.no_grad():
        model.weight[0, 0] = math.inf
    with pytest.raises(RunError, match="step 7: training diverged: the policy's loss or weights are NaN"):
        check_finite(7, model, {"actor/pg_loss": 0.5, "actor/grad_norm": 1.0})
