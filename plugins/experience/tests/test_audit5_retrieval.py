"""A scored rollout's retrieval (`exclude_own`) still gets `k` records when the task's own records
rank above every other (issue 37's fifth mutation audit): the ranking is widened by the records
it will drop, so they do not take the places of the others."""

from __future__ import annotations

from pathlib import Path

import pytest
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience
from beyondagent_core.types import Task

pytestmark = pytest.mark.beyondagent_plugins("experience")


def test_the_tasks_own_records_do_not_crowd_out_the_others(tmp_path: Path) -> None:
    store = SqliteExperienceStore(path=tmp_path / "x.sqlite")
    store.add([Experience(text="Drive the taxi to the hotel, then stop at the hotel door.", task_id="t1"),
               Experience(text="Drive the taxi to the hotel by the east road.", task_id="t1"),
               Experience(text="Pick up the passenger before you drive the taxi.", task_id="taxi2"),
               Experience(text="The hotel is where the passenger wants to go.", task_id="taxi3"),
               Experience(text="Unrelated words entirely.", task_id="t9")])
    task = Task(task_id="t1", query="drive the taxi to the hotel")
    assert [e.task_id for e in store.retrieve(task, 2)][:1] == ["t1"]  # its own rank first
    assert sorted(e.task_id for e in store.retrieve(task, 2, exclude_own=True)) == ["taxi2", "taxi3"]
