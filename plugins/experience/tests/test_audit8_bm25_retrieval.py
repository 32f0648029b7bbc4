"""BM25 retrieval returns only records that share a word with the task (`lexical`), from the eighth audit.

A record whose document (the query it was learned on, and its text) has none of the task's
words scores 0 and is not relevant: it is never ranked, so a guided rollout is not shown a lesson
of an unrelated task just because `k` has room (only the task's own newest lessons fill up to
`k`). Real store, real sqlite file, real `bm25s`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from beyondagent_plugin_experience.lexical import Bm25Ranking
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience
from beyondagent_core.types import Task

pytestmark = pytest.mark.beyondagent_plugins("experience")

LAKE_DOWN = Experience(text="Go down first, then right.", task_id="lake1", query="cross the frozen lake")
TAXI = Experience(text="Pick up the passenger before driving.", task_id="taxi1", query="drive the taxi")
LAKE_HOLES = Experience(text="Avoid the holes near the edge.", task_id="lake2", query="frozen lake with holes")
CHESS = Experience(text="Castle early.", task_id="chess1", query="win the chess game")
RECORDS = [LAKE_DOWN, TAXI, LAKE_HOLES, CHESS]


def test_the_ranking_leaves_out_records_without_a_shared_word() -> None:
    ranked = Bm25Ranking().rank("frozen lake crossing", RECORDS, 4)
    assert sorted(ranked) == sorted([LAKE_DOWN.experience_id, LAKE_HOLES.experience_id])
    assert Bm25Ranking().rank("submarine periscope", RECORDS, 4) == []


def test_retrieval_with_room_to_spare_shows_no_unrelated_lesson(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    assert store.add(RECORDS) == 4
    found = store.retrieve(Task(task_id="lake9", query="frozen lake crossing"), 4)
    assert sorted(e.task_id for e in found) == ["lake1", "lake2"]
    assert store.retrieve(Task(task_id="sub1", query="submarine periscope"), 4) == []
    assert store.stats()["retrieval_hits"] == 1
    store.close()


def test_the_tasks_own_lessons_fill_the_room_not_unrelated_ones(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    own = Experience(text="Castle on the queen side.", task_id="lake9", query="an old query of the task")
    store.add([*RECORDS, own])
    found = store.retrieve(Task(task_id="lake9", query="frozen lake crossing"), 4)
    assert sorted(e.task_id for e in found) == ["lake1", "lake2", "lake9"]
    store.close()
