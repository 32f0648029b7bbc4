"""Experience-guided training end to end: the tiny policy on gymnasium FrozenLake, torch backend.

The store is seeded with lessons for the tasks (as an earlier run would have left them: the file
outlives runs), so guided rollouts happen from the first step; the LLM summarizer's lessons come
from `openai_server` (a loopback stand-in for a hosted LLM), so the store grows deterministically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
SHRINK = ("backend.total_steps=2", "backend.batch_size=2", "algorithm.group_size=4", "backend.eval_every=0",
          "backend.save_every=0", "tasks.train.count=2", "tasks.val.count=2", "backend.report=false")
pytestmark = pytest.mark.beyondagent_plugins("gym", "mixers", "torch", "experience")


def rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            if "experience/added" in line]


@pytest.mark.parametrize("training", ["strip", "keep"])
def test_guided_rollouts_train_and_the_store_grows(run_spec, tmp_path, openai_server, training) -> None:
    store_path = tmp_path / "lessons.sqlite"
    seeded = SqliteExperienceStore(path=store_path)
    seeded.add([Experience(text="On FrozenLake, move right then down to reach the goal.", task_id="any",
                           query="Reach the goal G without falling into a hole")])
    seeded.close()
    openai_server.responder = lambda body: '<lesson kind="failure">Walking into the wall wastes a turn.</lesson>'
    result = run_spec(QUICKSTART, *SHRINK, f"run.output_dir={tmp_path / 'runs'}", "experience.name=experience",
                      f"experience.path={store_path}", "experience.summarizer=llm", "experience.mode=mixed",
                      "experience.ratio=0.5", f"experience.training={training}",
                      f"experience.llm.base_url={openai_server.base_url}", "experience.llm.model=m")
    first, second = rows(result.run_dir)
    assert first["experience/guided_fraction"] == 0.5 and first["experience/hit_rate"] == 1.0
    assert "train/success_rate_guided" in first and "train/success_rate_unguided" in first
    assert first["experience/added"] == 1 and second["experience/added"] == 0  # the same lesson again: kept once
    assert second["experience/total"] == 2
    store = SqliteExperienceStore(path=store_path)
    assert [e.kind for e in store.all()] == ["hindsight", "failure"]


def test_mode_all_guides_every_training_rollout_and_validation_still_runs(run_spec, tmp_path) -> None:
    store_path = tmp_path / "lessons.sqlite"
    seeded = SqliteExperienceStore(path=store_path)
    seeded.add([Experience(text="Reach the goal by going right.", query="Reach the goal G")])
    seeded.close()
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=1", "backend.eval_every=1",
                      f"run.output_dir={tmp_path / 'runs'}", "experience.name=experience",
                      f"experience.path={store_path}", "experience.mode=all")
    samples = [json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    assert {s["split"] for s in samples} == {"train", "val"}
    (row,) = rows(result.run_dir)
    assert row["experience/guided_fraction"] == 1.0
    metrics = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("val/pass@1" in m for m in metrics)


def test_guided_rollouts_retrieve_by_embedding(run_spec, tmp_path, embedding_server) -> None:
    import sqlite3

    store_path = tmp_path / "lessons.sqlite"
    seeded = SqliteExperienceStore(path=store_path)  # a BM25 run's file: its records get vectors
    seeded.add([Experience(text="Reach the goal by going right, then down.", query="Reach the goal G")])
    seeded.close()
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=1", f"run.output_dir={tmp_path / 'runs'}",
                      "experience.name=experience", f"experience.path={store_path}", "experience.mode=all",
                      "experience.embedding.model=bow", f"experience.embedding.base_url={embedding_server.base_url}")
    (row,) = rows(result.run_dir)
    assert row["experience/guided_fraction"] == 1.0 and row["experience/hit_rate"] == 1.0
    texts = embedding_server.texts()
    assert texts[0] == "Reach the goal G\nReach the goal by going right, then down."  # backfilled at open
    assert len(texts) >= 2  # then the tasks' queries (and the step's new lessons)
    with sqlite3.connect(store_path) as db:
        assert dict(db.execute("SELECT key, value FROM experience_meta"))["embedding_model"] == "bow|native"
