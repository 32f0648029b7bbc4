"""The estimators inside real training runs: the tiny policy on gymnasium FrozenLake, torch backend.

FrozenLake is where GiGPO's anchor states exist: every rollout of a task starts on the same board,
and a move into a wall leaves the board as it was, so later steps share states too. `adca`'s step
judge is the loopback `openai_server` (a stand-in for a hosted LLM).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
SHRINK = ("backend.total_steps=3", "backend.batch_size=2", "algorithm.group_size=6", "backend.eval_every=0",
          "backend.save_every=0", "tasks.train.count=4", "tasks.val.count=2")
pytestmark = pytest.mark.beyondagent_plugins("gym", "mixers", "torch")


def metric_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_gigpo_finds_anchor_states_on_frozenlake(run_spec, tmp_path) -> None:
    # Seed 1: its rollouts come back to a board within 3 steps (whether they do depends on what the
    # noisy tiny policy writes and what the gym plugin reads as a move: seeds 0-3 give 0, 2, 0, 3 such
    # groups since "0 of" is no longer read as move 0).
    result = run_spec(QUICKSTART, *SHRINK, "backend.advantage.name=gigpo", "backend.advantage.gamma=0.9",
                      "run.seed=1", f"run.output_dir={tmp_path}")
    rows = [row for row in metric_rows(result.run_dir) if "advantage/anchor_groups" in row]
    assert len(rows) == 3
    assert all(row["advantage/anchor_groups"] >= 2 for row in rows)  # each group's shared first board at least
    assert sum(row["advantage/later_anchor_groups"] for row in rows) > 0  # boards the rollouts came back to
    resolved = (result.run_dir / "spec.resolved.yaml").read_text()
    assert "name: gigpo" in resolved and "gamma: 0.9" in resolved


def test_the_default_estimator_is_grpo(run_spec, tmp_path) -> None:
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=1", f"run.output_dir={tmp_path}")
    rows = metric_rows(result.run_dir)
    assert rows and not any(key.startswith("advantage/") for row in rows for key in row)  # grpo has no metrics
    assert result.metrics["steps"] == 1


def test_adca_judges_the_steps_of_a_training_run(run_spec, tmp_path, openai_server) -> None:
    def label(body: dict[str, Any]) -> str:
        count = len(re.findall(r"^Step \d+$", body["messages"][-1]["content"], flags=re.MULTILINE))
        return "\n".join(f"Step {n}: {'GOOD' if n % 2 else 'BAD'}" for n in range(1, count + 1))

    openai_server.responder = label
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=2", "backend.advantage.name=adca",
                      "backend.advantage.prm_steps=1", f"backend.advantage.llm.base_url={openai_server.base_url}",
                      "backend.advantage.llm.model=judge", f"run.output_dir={tmp_path}")
    first, second = [row for row in metric_rows(result.run_dir) if "advantage/active" in row]
    assert first["advantage/active"] == 1 and first["advantage/judged"] > 0
    assert first["advantage/fallback_groups"] == 0 and 0 < first["advantage/good_step_share"] < 1
    assert second["advantage/active"] == 0  # past prm_steps: GRPO, no judge
    assert len(openai_server.requests) == first["advantage/judged"]
