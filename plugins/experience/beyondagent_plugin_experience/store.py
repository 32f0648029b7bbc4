"""The `experience` store: sqlite records, BM25 retrieval, hindsight or LLM summaries.

Records live in one sqlite file (a table `experiences`, keyed by the hash of the normalized text,
so a lesson learned twice is kept once). Retrieval ranks every record by BM25 (`bm25s`) of the
task's query against the record's task query and text; the index is rebuilt when the store has
grown. Summaries turn a step's finished trajectories into new records (`summarize`, then `add`):

- `hindsight` (offline, no LLM): per task, the shortest successful episode's actions, as a lesson
  for that task ("a successful attempt took these actions: ...");
- `llm`: per task, the LLM reads up to 4 successful and 4 failed attempts and writes lessons of
  AgentEvolver's three kinds — from a success, from a failure, from comparing the two.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from beyondagent_core.errors import RunError
from beyondagent_core.experience import Experience
from beyondagent_core.llm import OpenAIChat
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_experience.config import ExperienceStoreConfig

if TYPE_CHECKING:
    from beyondagent_core.protocols import ChatLLM, Run

log = structlog.get_logger("beyondagent.experience")

DEFAULT_FILE = "experiences.sqlite"
SCHEMA = """CREATE TABLE IF NOT EXISTS experiences (
    experience_id TEXT PRIMARY KEY, text TEXT NOT NULL, kind TEXT, task_id TEXT, query TEXT, outcome REAL,
    source_run TEXT, step INTEGER, metadata TEXT, created REAL)"""
COLUMNS = ("experience_id", "text", "kind", "task_id", "query", "outcome", "source_run", "step", "metadata")
ATTEMPTS_SHOWN = 4
LESSON = re.compile(r"<lesson\s+kind=\"?(success|failure|comparison)\"?\s*>(.*?)</lesson>", re.DOTALL | re.IGNORECASE)

SUMMARY_PROMPT = """\
An AI agent attempted the task below several times. Learn from its attempts: write short, concrete \
lessons another attempt at this or a similar task can use. Write lessons of three kinds where the \
attempts allow: what made a success work (kind "success"), what made a failure fail (kind "failure"), \
and what the successes did that the failures did not (kind "comparison"). At most {most} lessons, \
each one or two sentences, each as <lesson kind="success">...</lesson>.

# Task
{query}

# Attempts
{attempts}"""


def actions_of(trajectory: Trajectory) -> list[str]:
    return [turn.content.strip() for turn in trajectory.turns if turn.role == "assistant" and turn.content.strip()]


def succeeded(trajectory: Trajectory) -> bool:
    return trajectory.error is None and trajectory.reward is not None and bool(trajectory.reward.success)


class SqliteExperienceStore:
    """The `ExperienceStore` protocol over one sqlite file (thread-safe)."""

    def __init__(self, config: ExperienceStoreConfig | None = None, *, path: str | Path | None = None,
                 llm: ChatLLM | None = None, run_name: str | None = None):
        self.config = config or ExperienceStoreConfig()
        self._path = Path(path or self.config.path) if (path or self.config.path) else None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._index: tuple[int, Any, list[str]] | None = None  # (row count, BM25 index, ids in index order)
        if llm is None and self.config.llm is not None:
            llm = OpenAIChat(self.config.llm, key_path="experience.llm")
        self.llm = llm
        self.run_name = run_name
        self.counters = {"added": 0, "duplicates": 0, "retrievals": 0, "retrieval_hits": 0, "retrieved": 0,
                         "summary_failures": 0}

    def bind(self, run: Run) -> None:
        """The run's directory holds the file unless `path` is set; the run's `llm` summarizes."""
        if self._path is None:
            self._path = Path(run.run_dir) / DEFAULT_FILE
        self.run_name = self.run_name or run.info.name
        if self.llm is None and self.config.summarizer == "llm":
            self.llm = run.chat_llm()

    # --- storage ------------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        if self._path is None:
            raise RunError("the experience store has no file", where="experience.path",
                           hint="set experience.path, or use the store inside a run (it defaults to the run directory)")
        return self._path

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = sqlite3.connect(self.path, check_same_thread=False)
                self._db.execute(SCHEMA)
                self._db.commit()
            except sqlite3.DatabaseError as exc:
                raise RunError(f"the experience store {self.path} cannot be opened: {exc}", where="experience.path",
                               hint="point experience.path at a new file, or remove the damaged one") from exc
        return self._db

    def add(self, experiences: Sequence[Experience]) -> int:
        added = 0
        with self._lock:
            db = self._connection()
            for experience in experiences:
                row = (experience.experience_id, experience.text[: self.config.max_chars], experience.kind,
                       experience.task_id, experience.query, experience.outcome,
                       experience.source_run or self.run_name, experience.step,
                       json.dumps(experience.metadata, default=str), time.time())
                cursor = db.execute(f"INSERT OR IGNORE INTO experiences ({', '.join(COLUMNS)}, created) "
                                    f"VALUES ({', '.join('?' * (len(COLUMNS) + 1))})", row)
                added += cursor.rowcount
            db.commit()
        self.counters["added"] += added
        self.counters["duplicates"] += len(experiences) - added
        return added

    def all(self) -> list[Experience]:
        with self._lock:
            rows = self._connection().execute(f"SELECT {', '.join(COLUMNS)} FROM experiences ORDER BY created").fetchall()
        return [self._record(row) for row in rows]

    @staticmethod
    def _record(row: Sequence[Any]) -> Experience:
        data = dict(zip(COLUMNS, row))
        data["metadata"] = json.loads(data["metadata"] or "{}")
        return Experience(**data)

    # --- retrieval ----------------------------------------------------------------------------

    def retrieve(self, task: Task, k: int) -> list[Experience]:
        """The `k` records most relevant to `task`: BM25 of its query, then its own task's records."""
        import bm25s

        records = self.all()
        self.counters["retrievals"] += 1
        if not records or k <= 0:
            return []
        if self._index is None or self._index[0] != len(records):
            corpus = [f"{record.query or ''} {record.text}" for record in records]
            index = bm25s.BM25()
            index.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
            self._index = (len(records), index, [record.experience_id for record in records])
        _, index, ids = self._index
        by_id = {record.experience_id: record for record in records}
        chosen: list[Experience] = []
        query = task.query or task.task_id
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if tokens.vocab:
            found, scores = index.retrieve(tokens, k=min(k, len(records)), show_progress=False)
            chosen = [by_id[ids[int(i)]] for i, score in zip(found[0], scores[0]) if score > 0]
        for record in reversed(records):  # then the newest lessons of this very task
            if len(chosen) >= k:
                break
            if record.task_id in (task.task_id, task.seed_task_id) and record not in chosen:
                chosen.append(record)
        chosen = chosen[:k]
        self.counters["retrieved"] += len(chosen)
        self.counters["retrieval_hits"] += int(bool(chosen))
        return chosen

    # --- summaries ----------------------------------------------------------------------------

    async def summarize(self, trajectories: Sequence[Trajectory], *, step: int) -> list[Experience]:
        by_task: dict[str, list[Trajectory]] = {}
        for trajectory in trajectories:
            by_task.setdefault(trajectory.task.task_id, []).append(trajectory)
        if self.config.summarizer == "hindsight":
            return [e for group in by_task.values() for e in self.hindsight(group, step)]
        if self.llm is None:
            raise RunError("experience.summarizer is llm but no LLM is configured", where="experience.llm",
                           hint="set experience.llm (model, base_url) or the spec's llm, or use summarizer: hindsight")
        results = await asyncio.gather(*(self.lessons(group, step) for group in by_task.values()))
        return [experience for lessons in results for experience in lessons]

    def hindsight(self, group: Sequence[Trajectory], step: int) -> list[Experience]:
        wins = [t for t in group if succeeded(t) and actions_of(t)]
        if not wins:
            return []
        best = min(wins, key=lambda t: len(actions_of(t)))
        task = best.task
        text = (f"For the task \"{(task.query or task.task_id).strip()}\", a successful attempt took these actions: "
                + " -> ".join(action[:200] for action in actions_of(best)))
        return [Experience(text=text[: self.config.max_chars], kind="hindsight", task_id=task.task_id,
                           query=task.query, outcome=float(best.reward.score), source_run=self.run_name, step=step)]

    async def lessons(self, group: Sequence[Trajectory], step: int) -> list[Experience]:
        task = group[0].task
        wins = [t for t in group if succeeded(t)][:ATTEMPTS_SHOWN]
        losses = [t for t in group if not succeeded(t)][:ATTEMPTS_SHOWN]
        attempts = []
        for number, trajectory in enumerate([*wins, *losses], start=1):
            outcome = "SUCCESS" if succeeded(trajectory) else "FAILURE"
            score = trajectory.reward.score if trajectory.reward is not None else 0.0
            steps = "\n".join(f"  {i}. {action[:300]}" for i, action in enumerate(actions_of(trajectory), start=1))
            attempts.append(f"Attempt {number} ({outcome}, reward {score:g}):\n{steps or '  (no actions)'}")
        prompt = SUMMARY_PROMPT.format(most=self.config.max_per_task, query=task.query or task.task_id,
                                       attempts="\n\n".join(attempts))
        try:
            turn = await self.llm.chat([{"role": "user", "content": prompt}])
        except Exception as exc:  # noqa: BLE001 - a failed summary loses lessons, never the run
            self.counters["summary_failures"] += 1
            log.warning("experience.summary_failed", task=task.task_id, error=f"{type(exc).__name__}: {exc}")
            return []
        outcome = max((t.reward.score for t in group if t.reward is not None), default=0.0)
        found = LESSON.findall(turn.content or "")[: self.config.max_per_task]
        if not found:
            self.counters["summary_failures"] += 1
            log.warning("experience.no_lessons", task=task.task_id, answer=(turn.content or "")[-200:])
        return [Experience(text=" ".join(text.split())[: self.config.max_chars], kind=kind.lower(),
                           task_id=task.task_id, query=task.query, outcome=float(outcome),
                           source_run=self.run_name, step=step) for kind, text in found if text.strip()]

    # --- the rest of the protocol -------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        with self._lock:
            total = self._connection().execute("SELECT COUNT(*) FROM experiences").fetchone()[0]
        return {"total": float(total), **{key: float(value) for key, value in self.counters.items()}}

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
