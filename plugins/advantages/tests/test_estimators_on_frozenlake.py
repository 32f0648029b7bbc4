"""The estimators inside real training runs: the tiny policy on gymnasium FrozenLake, torch backend.

FrozenLake is where GiGPO's anchor states exist: every rollout of a task starts on the same board,
and a move into a wall leaves the board as it was, so later steps share states too. `adca`'s step
judge is the loopback `openai_server` (a stand-in for a hosted LLM). The outcome estimators verl
also has (`dr_grpo`, `rloo`, the REINFORCE++ pair) each train a step, and the advantages the run
recorded are recomputed from the recorded scores with each estimator's formula.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from beyondagent_core.episode_records import expand_runs

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
    # grpo has no metrics of its own; every backend adds the failed-episode counts (advantages.estimate_finished)
    own = {key for row in rows for key in row if key.startswith("advantage/") and not key.startswith("advantage/dropped_")}
    assert rows and not own
    assert all(row["advantage/dropped_episodes"] == 0 for row in rows if "advantage/dropped_episodes" in row)
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


def expected_advantages(name: str, records: list[dict[str, Any]], model_tokens: list[np.ndarray]) -> list[np.ndarray]:
    """Each record's per-token advantages by the estimator's formula, from the recorded scores."""
    scores = np.array([record["score"] for record in records], dtype=np.float64)
    groups: dict[Any, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(record["group"], []).append(index)
    centred, loo = scores.copy(), scores.copy()
    for members in groups.values():
        if len(members) > 1:
            mean = scores[members].mean()
            centred[members] = scores[members] - mean  # GRPO's centring; a group of one keeps its score
            loo[members] = [scores[i] - np.delete(scores[members], k).mean() for k, i in enumerate(members)]
    if name in ("dr_grpo", "rloo"):
        per_episode = centred if name == "dr_grpo" else loo
        return [mask * value for mask, value in zip(model_tokens, per_episode)]
    values = [mask * value for mask, value in zip(model_tokens, scores if name == "reinforce_plus_plus" else centred)]
    flat = np.concatenate([v[m > 0] for v, m in zip(values, model_tokens)])  # every model token of the step
    return [(v - flat.mean()) / flat.std(ddof=1) * m for v, m in zip(values, model_tokens)]


@pytest.mark.parametrize("name", ["dr_grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"])
def test_outcome_estimators_train_a_step_with_their_advantages(run_spec, tmp_path, name: str) -> None:
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=1", f"backend.advantage.name={name}",
                      "logging.episodes=all", f"run.output_dir={tmp_path}")
    assert result.metrics["steps"] == 1
    records = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    records = [record for record in records if record["split"] == "train"]
    assert len(records) == 2 * 6 and all(record["tokens"] and record["score"] is not None for record in records)
    assert len({record["score"] for record in records}) > 1  # the step had something to compare
    model_tokens = []
    for record in records:
        mask = np.zeros(len(record["tokens"]["ids"]))
        for start, end in record["tokens"]["turn_spans"]:
            mask[start:end] = 1.0
        model_tokens.append(mask)
    recorded = [np.array(expand_runs(record["tokens"]["advantages"]), dtype=np.float64) for record in records]
    for got, want, record in zip(recorded, expected_advantages(name, records, model_tokens), records):
        np.testing.assert_allclose(got, want, atol=2e-4, err_msg=f"{name}: episode {record['index']}")
    assert f"name: {name}" in (result.run_dir / "spec.resolved.yaml").read_text()
