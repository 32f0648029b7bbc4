"""Spec keys of the `experience` store that reach their code: `max_chars`, `max_per_task`.

Real stores on sqlite files, each summarizer's real summary (the LLM summarizer talks to
`openai_server`, an OpenAI-compatible server on loopback standing in for a hosted LLM). Checked,
against the defaults (1200 characters, 3 per task) each time:

- `max_chars: 100`: every summary's text (hindsight, trajectory, llm) is the first 100 characters
  of what the default makes, and a lesson added directly is stored cut to 100 characters;
- `max_per_task: 2`: the trajectory summarizer keeps 2 worked examples of each task's group (of 5
  distinct successes) and the store holds 2 records per task; the LLM summarizer asks for at most
  2 lessons and keeps the first 2 of the 5 it is given.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.experience import Experience
from beyondagent_core.llm import LLMConfig
from beyondagent_core.types import Reward, Task, Trajectory, Turn

CUT = 100
LONG_LESSON = " ".join(f"step{n} matters" for n in range(40))  # ~550 characters: under the default 1200
FIVE_LESSONS = "\n".join(f'<lesson kind="success">Lesson number {n}: go down before going right.</lesson>'
                         for n in range(1, 6))


def episode(task: str, actions: list[str], success: bool = True) -> Trajectory:
    turns = [Turn("user", f"start of {task}")]
    for action in actions:
        turns += [Turn("assistant", action, token_ids=[1]), Turn("user", f"after {action}")]
    return Trajectory(task=Task(task_id=task, query=f"reach the goal of {task}"), turns=turns,
                      reward=Reward(score=float(success), success=success))


def store(tmp_path: Path, name: str, server: Any = None, **settings: Any) -> SqliteExperienceStore:
    llm = LLMConfig(model="m", base_url=server.base_url, max_llm_retries=0) if server is not None else None
    return SqliteExperienceStore(ExperienceStoreConfig(llm=llm, **settings), path=tmp_path / f"{name}.sqlite")


def summaries(made_by: SqliteExperienceStore, group: list[Trajectory]) -> list[Experience]:
    return asyncio.run(made_by.summarize(group, step=1))


@pytest.mark.parametrize("summarizer", ["hindsight", "trajectory", "llm"])
def test_max_chars_cuts_each_summarys_text(tmp_path: Path, openai_server: Any, summarizer: str) -> None:
    openai_server.responder = lambda body: f'<lesson kind="success">{LONG_LESSON}</lesson>'
    group = [episode("a", [f"move number {n} to the right" for n in range(20)])]
    whole = summaries(store(tmp_path, "whole", openai_server, summarizer=summarizer), group)
    cut_store = store(tmp_path, "cut", openai_server, summarizer=summarizer, max_chars=CUT)
    cut = summaries(cut_store, group)
    assert len(whole) == len(cut) == 1
    assert CUT < len(whole[0].text) <= 1200  # the default leaves it whole
    assert cut[0].text == whole[0].text[:CUT]
    assert cut_store.add(cut) == 1 and [len(e.text) for e in cut_store.all()] == [CUT]


def test_max_chars_cuts_a_lesson_when_it_is_stored(tmp_path: Path) -> None:
    lesson = Experience(text=LONG_LESSON, task_id="a", query="reach the goal of a")
    whole, cut = store(tmp_path, "whole"), store(tmp_path, "cut", max_chars=CUT)
    assert whole.add([lesson]) == 1 and cut.add([lesson]) == 1
    assert [e.text for e in whole.all()] == [LONG_LESSON]
    assert [e.text for e in cut.all()] == [LONG_LESSON[:CUT]]


def test_max_per_task_caps_the_worked_examples_of_each_task(tmp_path: Path) -> None:
    group = [episode(task, ["down"] * n + ["right"]) for task in ("a", "b") for n in range(5)]  # 5 distinct wins each
    default_store = store(tmp_path, "default", summarizer="trajectory")
    capped_store = store(tmp_path, "capped", summarizer="trajectory", max_per_task=2)
    default, capped = summaries(default_store, group), summaries(capped_store, group)
    assert Counter(e.task_id for e in default) == {"a": 3, "b": 3}
    assert Counter(e.task_id for e in capped) == {"a": 2, "b": 2}
    assert [e.text for e in capped if e.task_id == "a"] == [e.text for e in default if e.task_id == "a"][:2]  # shortest
    capped_store.add(capped)
    assert Counter(e.task_id for e in capped_store.all()) == {"a": 2, "b": 2}


def test_max_per_task_caps_the_llms_lessons_of_each_task(tmp_path: Path, openai_server: Any) -> None:
    openai_server.responder = lambda body: FIVE_LESSONS
    group = [episode("a", ["down"]), episode("a", ["up"], success=False)]
    default = summaries(store(tmp_path, "default", openai_server, summarizer="llm"), group)
    capped = summaries(store(tmp_path, "capped", openai_server, summarizer="llm", max_per_task=2), group)
    assert [e.text[:16] for e in default] == [f"Lesson number {n}:" for n in (1, 2, 3)]
    assert [e.text[:16] for e in capped] == [f"Lesson number {n}:" for n in (1, 2)]
    prompts = [request["messages"][0]["content"] for request in openai_server.requests]
    assert "At most 3 lessons" in prompts[0] and "At most 2 lessons" in prompts[1]
