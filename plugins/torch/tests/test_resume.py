"""Checkpoints and `--resume`: a run killed between steps continues where it stopped.

The run is started in a subprocess (tests/run_spec_with_test_envs.py), killed with SIGKILL as
soon as its step-2 checkpoint exists, and resumed; its steps 3 and 4 must match those of the
same run left alone. Rollouts are seeded per step and episode and batched in lockstep, so a
resumed run samples the same episodes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from beyondagent_plugin_torch.metrics_log import read_metrics
from torch_test_envs import word_game_spec

from beyondagent_core.errors import RunError

SCRIPT = Path(__file__).with_name("run_spec_with_test_envs.py")
COMPARED = ("train/reward_mean", "train/response_length", "actor/pg_loss", "actor/grad_norm", "actor/entropy",
            "actor/lr")


def write_spec(tmp_path: Path, output_dir: str, **backend) -> Path:
    spec = word_game_spec(tmp_path, **backend)
    spec["run"]["output_dir"] = str(tmp_path / output_dir)
    del spec["tasks"]["val"]
    path = tmp_path / f"{output_dir}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def start(spec: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), str(spec), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]


def kill_after_checkpoint(spec: Path, run_dir: Path, *, step: int = 2, last: int = 4) -> None:
    """Start `spec`, SIGKILL it once the checkpoint of `step` is written: the run holds there until
    killed (run_spec_with_test_envs.py --hold-after-checkpoint), so step `last` is never saved."""
    process = start(spec, f"--hold-after-checkpoint={step}")
    try:
        _wait_for(run_dir / "held-after-checkpoint", process)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert (run_dir / "checkpoints" / f"step_{step:06d}" / "state.json").exists()
    assert not (run_dir / "checkpoints" / f"step_{last:06d}").exists()
    (run_dir / "held-after-checkpoint").unlink()


def _wait_for(marker: Path, process: subprocess.Popen) -> None:
    """Until `marker` exists (the run is held), failing if the run ends first or takes past 300 s."""
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, f"{marker.name} not written after 300 s"
        time.sleep(0.05)


def by_step(run_dir: Path) -> dict[int, dict]:
    return {record["step"]: record for record in read_metrics(run_dir)}


def test_a_killed_run_resumes_and_reproduces_the_uninterrupted_run(tmp_path: Path) -> None:
    settings = {"total_steps": 4, "save_every": 2}
    finish(start(write_spec(tmp_path, "whole", **settings)))
    whole = by_step(tmp_path / "whole" / "word")

    spec = write_spec(tmp_path, "killed", **settings)
    run_dir = tmp_path / "killed" / "word"
    kill_after_checkpoint(spec, run_dir)

    finish(start(spec, "--resume"))
    resumed = by_step(run_dir)
    assert sorted(resumed) == [1, 2, 3, 4]
    for step in (3, 4):
        for key in COMPARED:
            assert resumed[step][key] == pytest.approx(whole[step][key], rel=1e-4, abs=1e-6), (step, key)


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_resume_refuses_a_changed_spec_and_names_the_keys(run_spec, test_envs, tmp_path: Path) -> None:
    spec = word_game_spec(tmp_path, total_steps=1)
    del spec["tasks"]["val"]
    first = run_spec(spec)
    written = {name: (first.run_dir / name).read_bytes() for name in ("spec.resolved.yaml", "plugins.json")}
    events = (first.run_dir / "events.jsonl").read_bytes()
    with pytest.raises(RunError) as caught:
        run_spec(spec, "algorithm.clip_ratio=0.3", "backend.lr=0.1", "backend.total_steps=3", resume=True)
    message = str(caught.value)
    assert "algorithm.clip_ratio" in message and "backend.lr" in message
    # the refusal came before any write: the run directory still describes the run that was made
    assert {name: (first.run_dir / name).read_bytes() for name in written} == written
    assert (first.run_dir / "events.jsonl").read_bytes() == events
    assert "total_steps" not in message  # how long a run is may change on resume
    # Lengthening the run is a valid resume.
    result = run_spec(spec, "backend.total_steps=2", resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir)] == [1, 2]


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_resume_without_a_checkpoint_says_so(run_spec, test_envs, tmp_path: Path) -> None:
    spec = word_game_spec(tmp_path)
    with pytest.raises(RunError, match="nothing to resume"):
        run_spec(spec, resume=True)


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_a_fresh_run_moves_the_previous_training_aside(run_spec, test_envs, tmp_path: Path) -> None:
    spec = word_game_spec(tmp_path, total_steps=1)
    del spec["tasks"]["val"]
    first = run_spec(spec)
    run_spec(spec)
    previous = list((first.run_dir / "previous").iterdir())
    assert len(previous) == 1 and (previous[0] / "metrics.jsonl").is_file()
    assert (previous[0] / "checkpoints" / "step_000001").is_dir()
    assert [r["step"] for r in read_metrics(first.run_dir)] == [1]


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(run_spec, test_envs, tmp_path: Path) -> None:
    spec = word_game_spec(tmp_path, total_steps=2, save_every=1, keep_checkpoints=2)
    del spec["tasks"]["val"]
    first = run_spec(spec)
    newest = first.run_dir / "checkpoints" / "step_000002" / "model" / "model.safetensors"
    newest.write_bytes(newest.read_bytes()[:100])  # torn by a crash (or a full disk)
    resumed = run_spec(spec, "backend.total_steps=3", resume=True)
    assert [r["step"] for r in read_metrics(resumed.run_dir)] == [1, 2, 3]  # step 2 trained again from step 1
    from collections import Counter

    from beyondagent_plugin_torch.metrics_log import read_samples

    per_step = Counter(record["step"] for record in read_samples(resumed.run_dir))
    assert sorted(per_step) == [1, 2, 3] and len(set(per_step.values())) == 1  # step 2's samples once, not twice
    events = [json.loads(line) for line in (resumed.run_dir / "events.jsonl").read_text().splitlines()]
    damaged = next(e for e in events if e["event"] == "train.checkpoint_damaged")
    assert damaged["checkpoint"].endswith("step_000002")
    assert next(e for e in events if e["event"] == "train.resumed")["step"] == 1


def test_a_checkpoint_from_before_a_key_existed_resumes_when_the_key_is_at_its_default() -> None:
    from beyondagent_plugin_torch.checkpoint import core_defaults, spec_differences

    old = {"model": {"path": "tiny", "dtype": "auto"}, "algorithm": {"group_size": 8}, "backend": {"lr": 0.01}}
    new = {"model": {"path": "tiny", "dtype": "auto", "lora": None},
           "algorithm": {"group_size": 8, "policy_loss": "vanilla", "max_gen_batches": 10},
           "backend": {"lr": 0.01, "new_flag": False}}
    assert spec_differences(old, new, defaults=core_defaults()) == []
    changed = {**new, "model": {**new["model"], "lora": {"rank": 4}}, "algorithm": {**new["algorithm"],
                                                                                    "policy_loss": "gspo"}}
    assert spec_differences(old, changed, defaults=core_defaults()) == ["algorithm.policy_loss", "model.lora"]
