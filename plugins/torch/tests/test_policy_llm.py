"""`llm: policy`: the model being trained explores, through the torch backend's PolicyLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "explore_frozenlake.yaml"
SHRINK = ("tasks.train.count=3", "tasks.val.count=1", "explore.n=2", "explore.max_explore_step=3",
          "backend.total_steps=1", "algorithm.group_size=2", "backend.eval_every=0", "backend.save_every=0")


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_the_policy_explores_before_training(run_spec, tmp_path) -> None:
    result = run_spec(EXAMPLE, *SHRINK, "llm=policy", "explore.mode=llm", f"run.output_dir={tmp_path}")

    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    finished = next(e for e in events if e["event"] == "explore.finished")
    assert finished["failures"] == 0
    assert finished["llm"]["calls"] >= 6  # 3 seeds x 2 explorations, at least one move each
    assert finished["llm"]["completion_tokens"] > 0
    read_tasks(result.run_dir / "synthetic_tasks.jsonl")  # whatever the random policy reached, readable
    assert result.metrics["steps"] == 1


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_the_policy_cannot_explore_on_ray(run_spec, tmp_path) -> None:
    with pytest.raises(SpecError, match="cannot explore on Ray actors"):
        run_spec(EXAMPLE, *SHRINK, "llm=policy", "explore.mode=llm", "explore.executor=ray",
                 f"run.output_dir={tmp_path}")
