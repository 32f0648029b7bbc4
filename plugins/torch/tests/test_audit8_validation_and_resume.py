"""When a torch run validates, and what a resume keeps of `episodes.jsonl` (eighth mutation audit).

`backend.eval_every: 2` over three steps validates before the first step, after step 2 (a multiple
of eval_every) and after the last, step 3: never after step 1. A run resumed from its step-1
checkpoint keeps the step-1 records the killed run wrote to `episodes.jsonl` and replaces those of
step 2: each step's episodes once.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.trainer import read_episode_records
from torch_test_envs import word_game_spec

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers")


def small_spec(tmp_path: Path, **backend) -> dict:
    settings = {"batch_size": 2, "micro_batch_size": 4, "save_every": 0, "report": False, "samples_per_step": 0}
    spec = word_game_spec(tmp_path, **{**settings, **backend})
    spec["algorithm"]["group_size"] = 2
    return spec


def test_eval_every_validates_on_its_multiples_and_after_the_last_step(run_spec, test_envs, tmp_path: Path) -> None:
    result = run_spec(small_spec(tmp_path, total_steps=3, eval_every=2))
    validated = [record["step"] for record in read_metrics(result.run_dir) if "val/pass@1" in record]
    assert validated == [0, 2, 3]


def test_a_resume_keeps_the_checkpoint_steps_episode_records_once(run_spec, test_envs, tmp_path: Path) -> None:
    spec = small_spec(tmp_path, total_steps=2, save_every=1, keep_checkpoints=2)
    del spec["tasks"]["val"]
    spec["logging"] = {"episodes": "all"}
    first = run_spec(spec)
    per_step = 2 * 2  # batch_size x group_size
    assert Counter(r["step"] for r in read_episode_records(first.run_dir)) == {1: per_step, 2: per_step}
    shutil.rmtree(first.run_dir / "checkpoints" / "step_000002")  # killed before step 2's checkpoint was final
    resumed = run_spec(spec, resume=True)
    assert Counter(r["step"] for r in read_episode_records(resumed.run_dir)) == {1: per_step, 2: per_step}
