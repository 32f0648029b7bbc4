"""The examples' `smollm2` profiles: each resolves, and the real model trains a step of one.

The real model (`smollm2-135m-instruct`) is fetched once into the user's cache
(`beyondagent_plugin_torch.testing`). The training test is kept to one short step (2 tasks x 4
samples, a 4-task validation); the README's numbers come from the full example run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from beyondagent_plugin_torch.testing import real_model_cache, real_model_dir

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "smollm2"


def examples_with_the_profile() -> list[str]:
    return [path.name for path in sorted((ROOT / "examples").glob("*.yaml"))
            if PROFILE in ((yaml.safe_load(path.read_text()) or {}).get("profiles") or {})]


def test_the_examples_that_a_real_model_can_run_have_the_profile() -> None:
    assert {"quickstart.yaml", "math_arithmetic.yaml", "explore_frozenlake.yaml", "explore_llm.yaml", "math_gsm8k.yaml",
            "self_evolve.yaml", "verl_frozenlake.yaml"} <= set(examples_with_the_profile())


@pytest.mark.parametrize("example", examples_with_the_profile())
def test_each_profile_resolves_against_the_installed_plugins(example: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "validate", f"examples/{example}",
                           "--profile", PROFILE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout.split("\n", 1)[1])
    assert resolved["model"]["path"] == "smollm2-135m-instruct" and resolved["run"]["profile"] == PROFILE


def test_the_real_model_trains_a_step_of_the_arithmetic_example(tmp_path: Path) -> None:
    real_model_dir()  # fetched (once) before the timed child process starts
    env = {**os.environ, "BEYONDAGENT_CACHE": str(real_model_cache())}
    overrides = [f"run.output_dir={tmp_path}", "backend.total_steps=1", "backend.batch_size=2",
                 "algorithm.group_size=4", "tasks.val.count=4", "backend.eval_every=1", "backend.save_every=0",
                 "backend.report=false",
                 # an entropy term trains every row, so the update runs even when every group is flat
                 # (it would skip a step with nothing to learn, and measure no log-prob gap)
                 "algorithm.entropy_coeff=0.0001"]
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", "examples/math_arithmetic.yaml",
                           "--profile", PROFILE, *overrides], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "math_arithmetic_smollm2" / "metrics.jsonl").read_text().splitlines()]
    step = next(row for row in rows if row.get("step") == 1 and "train/reward_mean" in row)
    assert step["train/episode_errors"] == 0
    # the update trains on exactly what was sampled: the policy's log-probs of the sampled tokens
    # match the sampler's (fp32, the same weights)
    assert step["rollout/logprob_diff"] < 1e-3
    assert 0 < step["train/response_length"] <= 16
    assert {row["step"] for row in rows if "val/pass@1" in row} == {0, 1}
