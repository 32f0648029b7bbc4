"""The `experience` store: sqlite on disk, BM25 retrieval, hindsight and LLM summaries.

The LLM summarizer talks to `openai_server` (an OpenAI-compatible server on loopback standing in
for a hosted LLM) through the real openai client.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.errors import RunError
from beyondagent_core.experience import Experience
from beyondagent_core.llm import LLMConfig
from beyondagent_core.testing.experience_contract import ExperienceStoreContract
from beyondagent_core.types import Reward, Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("experience")


class TestExperienceStore(ExperienceStoreContract):
    @pytest.fixture(params=["hindsight", "trajectory"])
    def implementation(self, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
        return {"name": "experience", "path": str(tmp_path / "lessons.sqlite"), "summarizer": request.param}


def episode(task: str, actions: list[str], success: bool) -> Trajectory:
    turns = [Turn("user", f"start of {task}")]
    for action in actions:
        turns += [Turn("assistant", action, token_ids=[1]), Turn("user", "ok")]
    return Trajectory(task=Task(task_id=task, query=f"reach the goal of {task}"), turns=turns,
                      reward=Reward(score=float(success), success=success))


def test_hindsight_keeps_the_shortest_success_per_task(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite", run_name="r1")
    made = asyncio.run(store.summarize([episode("a", ["left", "down", "right"], True), episode("a", ["down"], True),
                                        episode("a", ["up"], False), episode("b", ["up"], False)], step=4))
    assert [(e.task_id, e.kind, e.step, e.source_run) for e in made] == [("a", "hindsight", 4, "r1")]
    assert made[0].text.endswith("a successful attempt took these actions: down")


def test_retrieval_ranks_by_relevance_then_the_tasks_own_lessons(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    store.add([Experience(text="Unrelated words entirely.", task_id="t9"),
               Experience(text="Pick up the passenger before driving.", task_id="taxi1", query="drive the taxi"),
               Experience(text="Another lesson of t9.", task_id="t9")])
    found = store.retrieve(Task(task_id="t9", query="drive the taxi to the hotel"), 2)
    assert [e.task_id for e in found] == ["taxi1", "t9"] and found[1].text == "Another lesson of t9."
    assert store.stats()["retrieval_hits"] == 1 and store.stats()["total"] == 3


def test_the_llm_writes_lessons_of_three_kinds(tmp_path: Path, openai_server: Any) -> None:
    openai_server.push('<lesson kind="success">Move down first.</lesson>\n'
                       '<lesson kind="failure">Going up hits the wall.</lesson>\n'
                       '<lesson kind=comparison>Winners went down, losers up.</lesson>')
    config = ExperienceStoreConfig(summarizer="llm", llm=LLMConfig(model="m", base_url=openai_server.base_url))
    store = SqliteExperienceStore(config, path=tmp_path / "x.sqlite")
    made = asyncio.run(store.summarize([episode("a", ["down"], True), episode("a", ["up"], False)], step=2))
    assert [(e.kind, e.text) for e in made] == [("success", "Move down first."), ("failure", "Going up hits the wall."),
                                               ("comparison", "Winners went down, losers up.")]
    prompt = openai_server.requests[0]["messages"][0]["content"]
    assert "reach the goal of a" in prompt and "Attempt 1 (SUCCESS" in prompt and "Attempt 2 (FAILURE" in prompt
    assert store.add(made) == 3


def test_a_failed_llm_summary_loses_lessons_not_the_run(tmp_path: Path, openai_server: Any) -> None:
    from beyondagent_core.testing.openai_server import Reply

    openai_server.push(Reply.fault(500), "no tags in this answer")
    llm = LLMConfig(model="m", base_url=openai_server.base_url, max_llm_retries=0)
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer="llm", llm=llm), path=tmp_path / "x.sqlite")
    assert asyncio.run(store.summarize([episode("a", ["x"], True)], step=1)) == []
    assert asyncio.run(store.summarize([episode("b", ["x"], True)], step=1)) == []
    assert store.stats()["summary_failures"] == 2


def test_llm_summaries_without_an_llm_say_what_to_set(tmp_path: Path) -> None:
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer="llm"), path=tmp_path / "x.sqlite")
    with pytest.raises(RunError, match="no LLM is configured"):
        asyncio.run(store.summarize([episode("a", ["x"], True)], step=1))


def test_a_damaged_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunError, match="cannot be opened") as caught:
        SqliteExperienceStore(path=path).add([Experience(text="a")])
    assert "experience.path" in caught.value.where


def test_records_another_store_adds_are_found(tmp_path: Path) -> None:
    reader = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    writer = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    assert reader.retrieve(Task(task_id="n", query="drive the taxi"), 1) == []
    writer.add([Experience(text="Pick up the passenger first.", task_id="taxi", query="drive the taxi")])
    assert [e.task_id for e in reader.retrieve(Task(task_id="n", query="drive the taxi"), 1)] == ["taxi"]


def test_a_file_written_before_near_duplicate_checks_is_upgraded(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE experiences (experience_id TEXT PRIMARY KEY, text TEXT NOT NULL, kind TEXT, task_id "
                   "TEXT, query TEXT, outcome REAL, source_run TEXT, step INTEGER, metadata TEXT, created REAL)")
        db.execute("INSERT INTO experiences VALUES ('abc', 'Move down first.', 'hindsight', 'a', NULL, 1.0, 'r0', 1, "
                   "'{}', 0.0)")
    store = SqliteExperienceStore(path=path)
    assert store.add([Experience(text="move down -- first!")]) == 0 and store.stats()["near_duplicates"] == 1
    assert [e.source_run for e in store.all()] == ["r0"]


def test_a_file_that_cannot_be_opened_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "folder.sqlite").mkdir()  # a path that is no file (or a folder without write permission)
    with pytest.raises(RunError, match="cannot be opened") as caught:
        SqliteExperienceStore(path=tmp_path / "folder.sqlite").all()
    assert str(tmp_path / "folder.sqlite") in str(caught.value)


def test_damage_found_after_opening_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "x.sqlite"
    store = SqliteExperienceStore(path=path)
    store.add([Experience(text=f"Lesson number {index}.") for index in range(20)])
    store.close()
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        [root] = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_experiences_1'").fetchone()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size: root * page_size] = b"\x07" * page_size  # the id index, which opening never reads
    path.write_bytes(bytes(data))
    with pytest.raises(RunError, match="is damaged or is not an experience store") as caught:
        SqliteExperienceStore(path=path).add([Experience(text="A new lesson.")])
    assert str(path) in str(caught.value) and "experience.path" in caught.value.where


def test_a_record_with_bad_metadata_is_skipped_and_counted(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "x.sqlite"
    store = SqliteExperienceStore(path=path)
    store.add([Experience(text="Drive to the hotel.", task_id="taxi", query="drive the taxi"),
               Experience(text="Pick up the passenger first.", task_id="taxi", query="drive the taxi"),
               Experience(text="Look before you leap.", task_id="lake")])
    store.close()
    with sqlite3.connect(path) as db:  # written by another tool, or a bug
        db.execute("UPDATE experiences SET metadata = '{not json' WHERE text = 'Drive to the hotel.'")
        db.execute("UPDATE experiences SET metadata = '[1, 2]' WHERE text = 'Look before you leap.'")
    reader = SqliteExperienceStore(path=path)
    found = reader.retrieve(Task(task_id="n", query="drive the taxi"), 3)
    assert [e.text for e in found] == ["Pick up the passenger first."]
    reader.retrieve(Task(task_id="n", query="drive the taxi"), 3)
    stats = reader.stats()
    assert stats["bad_records"] == 2 and stats["total"] == 3  # counted once each, however often read
