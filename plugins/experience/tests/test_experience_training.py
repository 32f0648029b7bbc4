"""Experience-guided training end to end: the tiny policy on gymnasium FrozenLake, torch backend.

The store is seeded with lessons for the tasks (as an earlier run would have left them: the file
outlives runs), so guided rollouts happen from the first step; the LLM summarizer's lessons come
from `openai_server` (a loopback stand-in for a hosted LLM), so the store grows deterministically.
Navigating without an LLM: the store is seeded with successful episodes played in the env
(`frozenlake_episodes.solved`), kept as worked examples and replayed as prefixes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore
from frozenlake_episodes import frozenlake, solved

from beyondagent_core.episode_records import expand_tokens
from beyondagent_core.experience import Experience, same_task
from beyondagent_core.types import Task

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
    seeded.add([Experience(text="On FrozenLake, reach the goal by going right.", query="Reach the goal G")])
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


def test_worked_examples_and_prefixes_train_and_validation_never_shows_a_tasks_own(run_spec, tmp_path) -> None:
    """A group of 4: one rollout shown worked examples, two started from a stored success of their
    task (its first move replayed), one plain. Validation shows every rollout the examples of other
    maps — never one of its own map, though 2x2 FrozenLake's val maps are all train maps too."""
    store_path = tmp_path / "examples.sqlite"
    seeded = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory"), path=store_path)
    seeded.add(asyncio.run(seeded.summarize([solved(f"frozenlake-train-{i}") for i in range(3)], step=0)))
    seeded.close()
    result = run_spec(QUICKSTART, *SHRINK, "backend.total_steps=1", "backend.eval_every=1", "logging.episodes=all",
                      f"run.output_dir={tmp_path / 'runs'}", "experience.name=experience",
                      f"experience.path={store_path}", "experience.summarizer=trajectory", "experience.ratio=0.25",
                      "experience.prefix_ratio=0.5", "experience.val_mode=all")
    (row,) = rows(result.run_dir)
    assert row["experience/guided_fraction"] == 0.25 and row["experience/prefixed_fraction"] == 0.5
    assert row["experience/prefix_turns"] == 1.0 and "train/success_rate_prefixed" in row
    records = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    prefixed = [r for r in records if r["split"] == "train" and r["metrics"].get("prefix_turns")]
    assert len(prefixed) == 4
    for record in prefixed:  # the replayed move is in the prompt; the policy's turns are what trains
        tokens = expand_tokens(record)
        prompt = "".join(t["text"] for t in tokens[:[t["mask"] for t in tokens].index(1)])
        replayed = next(t["content"] for t in record["turns"] if t["role"] == "assistant")
        assert replayed in prompt and "<experience>" not in prompt
    metrics = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    val = next(m for m in metrics if "experience/val_guided_fraction" in m)
    assert val["experience/val_guided_fraction"] == 1.0 and val["experience/val_leaks_blocked"] == 0
    examples = SqliteExperienceStore(path=store_path).all()
    for record in (r for r in records if r["split"] == "val"):
        scored = Task(task_id=record["task_id"], env="frozenlake",
                      metadata=frozenlake(record["task_id"])[1].info["metadata"])
        seen = "".join(t["text"] for t in expand_tokens(record))
        own = [e for e in examples if same_task(e, scored)]
        assert own and not any(e.text in seen for e in own)  # its map's examples exist, and were not shown
        assert any(e.text in seen for e in examples if not same_task(e, scored))
