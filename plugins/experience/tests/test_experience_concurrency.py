"""Several processes writing one experience store at once lose nothing (WAL, the write lock taken
first, busy waits): 8 real processes x 150 adds, each add with a lesson of its own and one that
every process adds too (the race on a duplicate a check-then-insert store loses)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience

pytestmark = pytest.mark.beyondagent_plugins("experience")

WRITERS = 8
ADDS = 150


def write(path: str, writer: int, results: multiprocessing.Queue) -> None:
    store = SqliteExperienceStore(path=path)
    added = 0
    for index in range(ADDS):
        added += store.add([Experience(text=f"Lesson {index} of writer {writer}.", task_id=f"w{writer}"),
                            Experience(text=f"A lesson every writer learns, number {index}.", task_id="shared")])
    results.put((writer, added, store.stats()["duplicates"]))
    store.close()


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as separate runs are
    results = context.Queue()
    writers = [context.Process(target=write, args=(path, number, results)) for number in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=240)
    assert [process.exitcode for process in writers] == [0] * WRITERS
    reports = [results.get(timeout=5) for _ in writers]
    # Every own lesson is stored, each shared one exactly once; the rest were counted as duplicates.
    assert sum(added for _, added, _ in reports) == WRITERS * ADDS + ADDS
    assert sum(duplicates for _, _, duplicates in reports) == (WRITERS - 1) * ADDS
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM experiences").fetchone()[0] == WRITERS * ADDS + ADDS
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert len(SqliteExperienceStore(path=path).all()) == WRITERS * ADDS + ADDS



def test_a_store_opened_while_another_connection_writes_waits_for_it(tmp_path: Path) -> None:
    # The CI failure: a writer opening the file while another process held the write lock got
    # "database is locked" at once from the switch to WAL, which sqlite does not wait out itself
    # when the file is still in rollback mode and another connection holds its reserved lock.
    path = tmp_path / "busy.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE unrelated (value INTEGER)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO unrelated VALUES (1)")
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    try:
        store = SqliteExperienceStore(path=str(path))
        assert store.add([Experience(text="A lesson.", task_id="t")]) == 1
        store.close()
    finally:
        release.join()
        other.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
