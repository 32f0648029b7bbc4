"""examples/explore_frozenlake.yaml end to end, shrunk: explore offline, mix, train on the result.

Real components throughout: gymnasium FrozenLake, the `random` explorer (random actions), the
`hindsight` summarizer, the `dedup` and `feasibility` filters, the `ratio` mixer and the tiny
policy trained by the torch backend. Synthetic tasks are scored by the env's goal check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "explore_frozenlake.yaml"
SHRINK = ("tasks.train.count=6", "tasks.val.count=2", "explore.n=2", "backend.total_steps=3",
          "backend.batch_size=4", "algorithm.group_size=2", "backend.eval_every=0", "backend.save_every=0",
          "backend.samples_per_step=8")


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_explored_tasks_are_mixed_in_and_judged_by_the_env(run_spec, tmp_path) -> None:
    result = run_spec(EXAMPLE, *SHRINK, f"run.output_dir={tmp_path / 'runs'}")

    synthetic = read_tasks(result.run_dir / "synthetic_tasks.jsonl")
    assert synthetic
    assert all(t.origin == "synthetic" and t.judge == "env" and t.metadata.get("goal") for t in synthetic)
    samples = [json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    trained = [s["trajectory"] for s in samples if s["split"] == "train"]
    origins = {t["task"]["origin"] for t in trained}
    assert origins == {"original", "synthetic"}, "the ratio mixer should put both kinds in the batches"
    for trajectory in trained:
        if trajectory["task"]["origin"] == "synthetic":
            # Scored by the env's check of the task's goal, not by the seed's original objective.
            assert "goal" in trajectory["reward"]["reason"]
            assert trajectory["task"]["query"] in trajectory["turns"][1]["content"]
    assert result.metrics["steps"] == 3
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    mixed = [row for row in rows if "train/synthetic_fraction" in row]
    assert mixed and all(0 < row["train/synthetic_fraction"] <= 1 for row in mixed)
    assert all("train/success_rate_synthetic" in row for row in mixed)
