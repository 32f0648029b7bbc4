"""What the torch backend's `--dry-run` says (issue 36, item 6): the overlong-shaping line reads as a
sentence with its numbers named, no line of the backend's text is cut by the console's width, and
the validation schedule is spelled out with how to turn validation off (`eval_every: 0` does not)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
OVERLONG = ("overlong shaping (DAPO): an episode that generates more than 12 tokens loses reward linearly, up to 0.5 "
            "at 16 tokens (algorithm.overlong: buffer_len 4, penalty_factor 0.5; max_len 16 from "
            "backend.max_new_tokens)")


def dry_run(tmp_path: Path, *overrides: str) -> list[str]:
    pytest.importorskip("beyondagent_plugin_gym")
    result = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", "examples/quickstart.yaml",
                             "--dry-run", f"run.output_dir={tmp_path}", "backend.max_new_tokens=16", *overrides],
                            cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()


def test_the_overlong_line_and_the_validation_schedule_read_whole(tmp_path: Path) -> None:
    lines = dry_run(tmp_path, "algorithm.overlong={buffer_len: 4, penalty_factor: 0.5}", "backend.eval_every=0")
    assert OVERLONG in lines  # whole, on one line, though the console is 80 columns wide
    assert any(line.startswith("torch backend: GRPO, 4 tasks x 8 rollouts a step; policy loss vanilla (ratio "
                               "clipped to [1 - 0.2, 1 + 0.2], dual clip 3)") for line in lines)
    assert ("validation: the tasks.val tasks before the first step and after the last (backend.eval_every: 0, "
            "none in between); tasks.val: null turns validation off") in lines


def test_tasks_val_null_turns_validation_off(tmp_path: Path) -> None:
    off = dry_run(tmp_path, "tasks.val=null")
    assert "validation: none (tasks.val is not set)" in off and any(line.startswith("original tasks: 32   val tasks: 0")
                                                                    for line in off)


def test_ppo_says_it_trains_a_critic_and_how(tmp_path: Path) -> None:
    lines = dry_run(tmp_path, "backend.advantage.name=gae", "algorithm.group_size=1", "critic.lr=0.0003",
                    "critic.warmup_steps=2")
    assert any(line.startswith("torch backend: PPO with a critic (gae), 4 tasks x 1 rollouts a step") for line in lines)
    assert ("critic: from the policy (model.path) with a new value head, lr 0.0003, value clip 0.5; it regresses on "
            "the step's returns before the policy updates, and alone for the first 2 steps") in lines
