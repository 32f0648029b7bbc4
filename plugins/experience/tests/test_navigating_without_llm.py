"""Navigating without an LLM: successful trajectories kept as worked examples, retrieved into the
prompt and replayed as prefixes — and the guard that no rollout being scored is shown a record of
its own task (under its id, or the same problem under another id).

The store is the real sqlite store; the trajectories are FrozenLake episodes played in the real
gymnasium env (`frozenlake_episodes.solved`), so their observations, maps and task keys are the env's own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from frozenlake_episodes import frozenlake, solved
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.errors import BeyondAgentError, SpecError
from beyondagent_core.experience import Experience, ExperienceBlock, same_task, task_key
from beyondagent_core.runtime.guidance import Guidance
from beyondagent_core.types import Reward, Task, Trajectory

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
pytestmark = pytest.mark.beyondagent_plugins("gym", "experience")


@pytest.fixture
def store(tmp_path: Path) -> SqliteExperienceStore:
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory", observation_chars=80),
                                  path=tmp_path / "examples.sqlite", run_name="r1")
    yield store
    store.close()


def test_successes_become_worked_examples_with_their_turns(store: SqliteExperienceStore) -> None:
    short, long = solved("frozenlake-train-0"), solved("frozenlake-train-0", detour=True)
    failed = Trajectory(task=short.task, turns=short.turns[:3], reward=Reward(score=0.0, success=False))
    made = asyncio.run(store.summarize([long, failed, short, short], step=3))
    assert [e.kind for e in made] == ["example", "example"]  # each distinct success once, shortest first
    first = made[0]
    assert first.text.startswith("A successful attempt (reward 1):\nObservation 1: Reach the goal G")
    assert "Action 1: Action: " in first.text and "You play FrozenLake" not in first.text  # no system prompt
    assert [turn["content"] for turn in first.metadata["turns"]] == [t.content for t in short.turns
                                                                      if t.role == "assistant"]
    assert first.metadata["task_key"] == task_key(short.task) and (first.step, first.source_run) == (3, "r1")
    assert store.add(made) == 2 and store.add(made) == 0
    actions_only = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory", observation_chars=0),
                                         path=store.path)
    (text,) = [e.text for e in actions_only.examples([short], step=1)]
    assert "Observation" not in text and text.count("Action ") == len(first.metadata["turns"])


def test_a_scored_task_gets_examples_of_other_problems_only(store: SqliteExperienceStore) -> None:
    """FrozenLake 2x2 has few maps: a val task often poses a train task's problem under another id;
    its example is the val task's answer and must not be shown (task_key), however well it ranks."""
    train = [solved(f"frozenlake-train-{i}") for i in range(6)]
    store.add(asyncio.run(store.summarize(train, step=1)))
    _, reset = frozenlake("frozenlake-val-0")
    scored = Task(task_id="frozenlake-val-0", env="frozenlake", metadata=reset.info["metadata"])
    twins = [t.task.task_id for t in train if task_key(t.task) == task_key(scored)]
    assert twins, "the fixture wants a train task with the val task's map"
    records = store.all()
    assert any(same_task(e, scored) for e in store.retrieve(scored, 6))  # training may see them
    found = store.retrieve(scored, 6, exclude_own=True)
    assert found and not any(same_task(e, scored) for e in found)
    assert {e.task_id for e in found} <= {e.task_id for e in records} - set(twins)
    block = ExperienceBlock(name="experience", k=6, val_mode="all")
    (guide,) = Guidance(block, store).val_guides([scored])
    assert guide.experiences == tuple(found)
    assert Guidance(ExperienceBlock(name="experience"), store).val_guides([scored]) == [None]  # woexp


class IgnoresExclusion(SqliteExperienceStore):
    """A store whose `retrieve` predates `exclude_own` (a third party's): it returns a task's own records."""

    def retrieve(self, task: Task, k: int) -> list[Experience]:  # type: ignore[override]
        return super().retrieve(task, k)


def test_the_runtime_guard_drops_what_a_store_returns_of_the_scored_task(tmp_path: Path) -> None:
    store = IgnoresExclusion(ExperienceStoreConfig(summarizer="trajectory"), path=tmp_path / "x.sqlite")
    store.add(asyncio.run(store.summarize([solved("frozenlake-train-0"), solved("frozenlake-train-1")], step=1)))
    scored = solved("frozenlake-train-0").task
    assert any(same_task(e, scored) for e in store.retrieve(scored, 3))
    guidance = Guidance(ExperienceBlock(name="experience", val_mode="all"), store)
    guides = guidance.val_guides([scored], samples=2)
    shown = [e for guide in guides if guide is not None for e in guide.experiences]
    assert not any(same_task(e, scored) for e in shown)
    assert guidance.leaks_blocked == 1  # the record of its own map, dropped (one retrieval, for both samples)
    assert guidance.val_metrics(guides)["experience/val_leaks_blocked"] == 1
    store.close()


def test_prefixes_come_from_the_same_task_only(store: SqliteExperienceStore) -> None:
    store.add(asyncio.run(store.summarize([solved("frozenlake-train-0", detour=True)], step=1)))
    block = ExperienceBlock(name="experience", mode="woexp", prefix_ratio=0.5, prefix_fraction=0.5)
    guidance = Guidance(block, store)
    task = solved("frozenlake-train-0").task
    turns = [t["content"] for t in store.examples_of(task)[0].metadata["turns"]]
    guides = guidance.guides([task, Task(task_id="other", env="frozenlake", metadata={"map": ["SG", "FF"]})], 4,
                             seed=("run", 1))
    mine, other = guides[:4], guides[4:]
    started = [g for g in mine if g is not None]
    assert len(started) == 2 and not any(g.guided for g in started)
    assert all([t["content"] for t in g.prefix] == turns[:len(g.prefix)] and 1 <= g.prefixed < len(turns)
               for g in started)
    assert other == [None] * 4  # no stored success of that task: it starts from the beginning
    metrics = guidance.metrics([False] * 8, [True, False] * 4, 0, prefixed=[g.prefixed if g else 0 for g in guides])
    assert metrics["experience/prefixed_fraction"] == 0.25 and "train/success_rate_prefixed" in metrics


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch", "experience")
def test_prefix_sampling_needs_a_store_that_keeps_trajectories(run_spec, tmp_path: Path) -> None:
    with pytest.raises(BeyondAgentError, match="summarizer llm stores lessons") as caught:
        run_spec(QUICKSTART, "backend.total_steps=1", f"run.output_dir={tmp_path / 'runs'}",
                 "experience.name=experience", "experience.summarizer=llm", "experience.llm.model=m",
                 "experience.prefix_ratio=0.25")
    assert "experience.prefix_ratio" in caught.value.where

    class LessonsOnly:  # a store of lessons that keeps no trajectories (no examples_of)
        def retrieve(self, task: Task, k: int) -> list[Experience]:
            return []

    with pytest.raises(SpecError, match="examples_of"):
        Guidance(ExperienceBlock(name="experience", prefix_ratio=0.25), LessonsOnly())
