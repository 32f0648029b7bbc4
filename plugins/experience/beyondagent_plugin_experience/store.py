"""The `experience` store: sqlite records, BM25 or embedding retrieval, hindsight, trajectory or LLM summaries.

Records live in one sqlite file (a table `experiences`, keyed by the hash of the normalized text,
so a lesson learned twice is kept once; a lesson equal to a stored one but for case, punctuation
and spacing, or with embeddings one whose vector is within `dedup_similarity`, is a near duplicate
and not added either). Retrieval ranks every record by BM25 (`lexical`) of the task's query
against the record's task query and text, or, with `embedding` set, by the cosine similarity of
their vectors (`vectors`, `embeddings`), optionally fused with BM25. Then the task's own newest
lessons fill up to `k` — except with `exclude_own` (validation), which leaves out every record
learned on the task itself (`same_task`). Summaries turn a step's finished trajectories into new
records (`summarize`, then `add`), each with the problem it was learned on (`task_key`):

- `hindsight` (offline, no LLM): per task, the shortest successful episode's actions, as a lesson
  for that task ("a successful attempt took these actions: ...");
- `trajectory` (offline, no LLM): per task, up to `max_per_task` distinct successful episodes,
  shortest first, each kept whole as a worked example (kind `example`: the task, each
  observation and action, the outcome);
- `llm`: per task, the LLM reads up to 4 successful and 4 failed attempts and writes lessons of
  AgentEvolver's three kinds — from a success, from a failure, from comparing the two.

`hindsight` and `trajectory` records keep the episode's model turns (`metadata["turns"]`), so
`examples_of(task)` can hand prefix sampling (`experience.prefix_ratio`) the task's stored
successes to replay.

Several processes may share one file (parallel runs, a Ray cluster's workers): the file is in
WAL mode (readers never wait for the writer), each store writes through its one connection, and
an `add` takes the write lock first (`BEGIN IMMEDIATE`) so its duplicate checks and inserts are
one transaction that no other writer interleaves with; a writer that finds the file locked waits
(`BUSY_TIMEOUT_S`) and retries. A record that cannot be read back (metadata that is not a JSON
object, a text that is not text) is skipped and counted (`bad_records`); a file that is damaged
or not a store is a `RunError` naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.experience import Experience, same_task, task_key
from beyondagent_core.llm import OpenAIChat
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_experience.config import ExperienceStoreConfig
from beyondagent_plugin_experience.lexical import Bm25Ranking, document, normalized_key, task_text

if TYPE_CHECKING:
    import numpy as np

    from beyondagent_core.protocols import ChatLLM, Run
    from beyondagent_plugin_experience.vectors import VectorIndex

log = get_logger("beyondagent.experience")
_T = TypeVar("_T")

DEFAULT_FILE = "experiences.sqlite"
SCHEMA = """CREATE TABLE IF NOT EXISTS experiences (
    experience_id TEXT PRIMARY KEY, text TEXT NOT NULL, kind TEXT, task_id TEXT, query TEXT, outcome REAL,
    source_run TEXT, step INTEGER, metadata TEXT, created REAL, norm_key TEXT)"""
NORM_INDEX = "CREATE INDEX IF NOT EXISTS experiences_norm_key ON experiences (norm_key)"
COLUMNS = ("experience_id", "text", "kind", "task_id", "query", "outcome", "source_run", "step", "metadata")
ATTEMPTS_SHOWN = 4
BUSY_TIMEOUT_S = 30.0  # how long one attempt waits for another process's write lock
LOCK_ATTEMPTS = 3  # attempts before a locked file is an error
RRF_K = 60  # reciprocal-rank fusion's constant (Cormack et al. 2009)
QUERY_CACHE = 4096  # query vectors kept: the same tasks come back every step
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


def learned_on(task: Task, success: Trajectory | None = None) -> dict[str, Any]:
    """A record's metadata: the problem it was learned on (`task_key`, and a synthetic task's seed task,
    so validation can refuse it for that problem) and, for a successful episode, its model turns
    (what prefix sampling replays)."""
    metadata: dict[str, Any] = {"task_key": task_key(task)}
    if not task.query:  # what retrieval matches a query-less task by (lexical.document)
        metadata["task_text"] = task_text(task)
    if task.seed_task_id:
        metadata["seed_task_id"] = task.seed_task_id
    if success is not None:
        metadata["turns"] = [{"content": turn.content, "tool_calls": turn.tool_calls}
                             for turn in success.turns if turn.role == "assistant"]
    return metadata


def _locked(exc: Exception) -> bool:
    """Whether a sqlite error is another connection's lock (worth waiting for), not damage."""
    return any(word in str(exc).lower() for word in ("locked", "busy"))


def succeeded(trajectory: Trajectory) -> bool:
    return trajectory.error is None and trajectory.reward is not None and bool(trajectory.reward.success)


class SqliteExperienceStore:
    """The `ExperienceStore` protocol over one sqlite file (thread-safe)."""

    def __init__(self, config: ExperienceStoreConfig | None = None, *, path: str | Path | None = None,
                 llm: ChatLLM | None = None, run_name: str | None = None):
        self.config = config or ExperienceStoreConfig()
        self._path = Path(path or self.config.path) if (path or self.config.path) else None
        self._db: Any = None  # sqlite3's connection, or pysqlite3's where sqlite-vec needs it
        self._lock = threading.Lock()
        if llm is None and self.config.llm is not None:
            llm = OpenAIChat(self.config.llm, key_path="experience.llm")
        self.llm = llm
        self.run_name = run_name
        self.counters = {"added": 0, "duplicates": 0, "near_duplicates": 0, "retrievals": 0, "retrieval_hits": 0,
                         "retrieved": 0, "summary_failures": 0, "bad_records": 0}
        self._bm25 = Bm25Ranking()
        self._records: list[Experience] | None = None
        self._rows = 0  # the row count `_records` was read at (bad records are rows too)
        self._bad: set[str] = set()  # ids of the records that cannot be read
        self._dbapi: Any = sqlite3
        self.embedder = None
        self._vectors: VectorIndex | None = None
        self._synced = -1  # the record count the vectors were last checked against
        self._queries: dict[str, np.ndarray] = {}
        if self.config.embedding is not None:
            from beyondagent_plugin_experience.embeddings import Embedder

            self.embedder = Embedder(self.config.embedding)
            self.counters.update(embedding_failures=0)

    def bind(self, run: Run) -> None:
        """The run's directory holds the file unless `path` is set; the run's `llm` summarizes.
        Prefix sampling needs trajectories to replay, which the `llm` summarizer does not keep."""
        experience = run.spec.component("experience") if getattr(run, "spec", None) is not None else None
        prefix_ratio = getattr(getattr(experience, "block", None), "prefix_ratio", 0)
        if prefix_ratio and self.config.summarizer == "llm":
            raise SpecError(f"experience.prefix_ratio is {prefix_ratio}, but summarizer llm stores lessons, not the "
                            "successful trajectories prefix sampling replays", where="experience.prefix_ratio",
                            hint="use experience.summarizer: trajectory (or hindsight), or set prefix_ratio: 0")
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

    def _connection(self) -> Any:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.embedder is not None:
                from beyondagent_plugin_experience.vectors import connect

                self._db, self._dbapi = connect(self.path, timeout=BUSY_TIMEOUT_S)
            else:
                try:
                    self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
                except sqlite3.Error as exc:  # a directory, a folder without write permission
                    raise self._unusable("cannot be opened", exc) from exc
            try:
                # WAL: readers (every retrieval) never block the writer, nor it them; a file that is
                # not sqlite fails here. The mode is the file's: set once, kept by every later open.
                self._use_wal(self._db)
                self._write(self._db, self._migrate)
            except self._dbapi.DatabaseError as exc:
                self._db.close()
                self._db = None
                raise self._unusable("cannot be opened", exc) from exc
            if self.embedder is not None:
                self._open_vectors()
        return self._db

    def _use_wal(self, db: Any) -> None:
        """Switch the file to WAL, waiting out other processes that open it at the same moment.

        sqlite answers the switch with "database is locked" *without* waiting for its busy timeout
        on some paths (another process recovering or switching the same file), so a lock is
        retried here until the same overall deadline as a write."""
        deadline = time.monotonic() + LOCK_ATTEMPTS * BUSY_TIMEOUT_S
        pause = 0.05
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except self._dbapi.OperationalError as exc:
                if not _locked(exc) or time.monotonic() + pause > deadline:
                    raise
                log.debug("experience.locked_opening", path=str(self.path))
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def _unusable(self, what: str, exc: Exception) -> RunError:
        return RunError(f"the experience store {self.path} {what}: {exc}", where="experience.path",
                        hint="point experience.path at a new file, or remove the damaged one")

    def _write(self, db: Any, work: Callable[[Any], _T]) -> _T:
        """`work(db)` as one write transaction, begun with the write lock held so that no other
        process's writer interleaves; a file locked past the busy timeout is tried again."""
        if db.in_transaction:  # one left open by a vector write that failed before its commit
            db.rollback()
        for attempt in range(1, LOCK_ATTEMPTS + 1):
            try:
                db.execute("BEGIN IMMEDIATE")
            except self._dbapi.OperationalError as exc:
                if not _locked(exc):
                    raise
                if attempt == LOCK_ATTEMPTS:
                    raise RunError(f"the experience store {self.path} stayed locked by another writer for "
                                   f"{LOCK_ATTEMPTS * BUSY_TIMEOUT_S:g}s", where="experience.path",
                                   hint="another process holds a write transaction open; stop it, or give "
                                        "this run its own experience.path") from exc
                log.warning("experience.locked", path=str(self.path), attempt=attempt)
                time.sleep(0.1 * attempt)
                continue
            try:
                result = work(db)
                db.commit()
                return result
            except BaseException:
                db.rollback()
                raise
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _reading_file(self) -> Iterator[None]:
        """sqlite errors inside the block (a page damaged after the file opened) name the file."""
        try:
            yield
        except self._dbapi.DatabaseError as exc:
            if _locked(exc):
                raise self._unusable("is locked by another process", exc) from exc
            raise self._unusable("is damaged or is not an experience store", exc) from exc

    @staticmethod
    def _migrate(db: Any) -> None:
        """The table, and the normalized-text column that files written before near-duplicate checks lack."""
        db.execute(SCHEMA)
        if "norm_key" not in {row[1] for row in db.execute("PRAGMA table_info(experiences)")}:
            db.execute("ALTER TABLE experiences ADD COLUMN norm_key TEXT")
        stale = db.execute("SELECT experience_id, text FROM experiences WHERE norm_key IS NULL").fetchall()
        db.executemany("UPDATE experiences SET norm_key = ? WHERE experience_id = ?",
                       [(normalized_key(text), key) for key, text in stale if isinstance(text, str)])
        db.execute(NORM_INDEX)

    def _open_vectors(self) -> None:
        from beyondagent_plugin_experience.embeddings import EmbeddingUnavailable
        from beyondagent_plugin_experience.vectors import VectorIndex

        self._vectors = VectorIndex(self._db, self.embedder, self.config.embedding, self.path)
        documents = self._documents()
        try:
            self._vectors.open(documents)
            self._synced = len(documents)
        except EmbeddingUnavailable as exc:  # records stay; their vectors come at the next sync
            self._embedding_failed("open", exc)
        except BaseException:  # refused (another model, a rejected key): the next call checks again
            self._db.close()
            self._db, self._vectors = None, None
            raise

    def _documents(self) -> dict[str, str]:
        return {record.experience_id: document(record) for record in self._read_records(self._db)}

    def _embedding_failed(self, during: str, exc: Exception) -> None:
        self.counters["embedding_failures"] += 1
        log.warning("experience.embedding_failed", during=during, path=str(self._path),
                    fallback="bm25" if during == "retrieve" else "vectors later", error=str(exc).splitlines()[0])

    def add(self, experiences: Sequence[Experience]) -> int:
        """Store the new ones; exact and near duplicates (of stored ones or of each other) are counted, not added."""
        from beyondagent_plugin_experience.embeddings import EmbeddingUnavailable

        with self._lock, self._reading_file():
            db = self._connection()
            # Without the lock first (embedding is a request away): what is new as far as the file
            # knows now; the transaction below checks again, since another writer may add meanwhile.
            fresh = self._unique(db, experiences)
            vectors = None
            if self._vectors is not None and fresh:
                try:
                    vectors = self.embedder.embed([document(e) for e in fresh])
                except EmbeddingUnavailable as exc:  # stored without vectors; the next sync embeds them
                    self._embedding_failed("add", exc)
            added = self._write(db, lambda db: self._insert(db, fresh, vectors))
            if vectors is not None and self._synced >= 0:
                self._synced += added
        self.counters["added"] += added
        return added

    def _unique(self, db: Any, experiences: Sequence[Experience]) -> list[Experience]:
        """The experiences that are neither stored nor repeated among themselves (counting the rest)."""
        fresh: list[Experience] = []
        ids: set[str] = set()
        keys: set[str] = set()
        for experience in experiences:
            experience = attrs.evolve(experience, text=experience.text[: self.config.max_chars],
                                      source_run=experience.source_run or self.run_name)
            key = normalized_key(experience.text)
            if experience.experience_id in ids or self._stored(db, experience):
                self.counters["duplicates"] += 1
            elif key in keys or db.execute("SELECT 1 FROM experiences WHERE norm_key = ?", (key,)).fetchone():
                self.counters["duplicates"] += 1
                self.counters["near_duplicates"] += 1
            else:
                fresh.append(experience)
            ids.add(experience.experience_id)
            keys.add(key)
        return fresh

    @staticmethod
    def _stored(db: Any, experience: Experience) -> bool:
        return db.execute("SELECT 1 FROM experiences WHERE experience_id = ?",
                          (experience.experience_id,)).fetchone() is not None

    def _insert(self, db: Any, fresh: Sequence[Experience], vectors: np.ndarray | None) -> int:
        """Inside the write transaction: what another writer added since `_unique` is a duplicate now."""
        added = 0
        for index, experience in enumerate(fresh):
            if self._stored(db, experience) or db.execute(
                    "SELECT 1 FROM experiences WHERE norm_key = ?", (normalized_key(experience.text),)).fetchone():
                self.counters["duplicates"] += 1
                continue
            if vectors is not None:
                nearest = self._vectors.nearest(vectors[index], 1)
                if nearest and nearest[0][1] >= self.config.embedding.dedup_similarity:
                    self.counters["duplicates"] += 1
                    self.counters["near_duplicates"] += 1
                    continue
            db.execute(f"INSERT INTO experiences ({', '.join(COLUMNS)}, created, norm_key) "
                       f"VALUES ({', '.join('?' * (len(COLUMNS) + 2))})",
                       (experience.experience_id, experience.text, experience.kind, experience.task_id,
                        experience.query, experience.outcome, experience.source_run, experience.step,
                        json.dumps(experience.metadata, default=str), time.time(),
                        normalized_key(experience.text)))
            if vectors is not None:
                self._vectors.put([experience.experience_id], vectors[index: index + 1])
            added += 1
        return added

    def all(self) -> list[Experience]:
        """Every readable record, oldest first. Records are never changed or removed, so the row count
        tells when the cached list (read again only when the file has grown, by this store or
        another) is stale."""
        with self._lock, self._reading_file():
            db = self._connection()
            count = db.execute("SELECT COUNT(*) FROM experiences").fetchone()[0]
            if self._records is None or self._rows != count:
                self._records = self._read_records(db)
                self._rows = count
            return list(self._records)

    def _read_records(self, db: Any) -> list[Experience]:
        """The records, oldest first; one that cannot be read is left out, counted and logged once."""
        rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM experiences ORDER BY created").fetchall()
        records = []
        for row in rows:
            try:
                records.append(self._record(row))
            except (ValueError, TypeError) as exc:
                key = str(row[0])
                if key not in self._bad:
                    self._bad.add(key)
                    self.counters["bad_records"] = len(self._bad)
                    log.warning("experience.bad_record", path=str(self._path), experience_id=key, reason=str(exc))
        return records

    @staticmethod
    def _record(row: Sequence[Any]) -> Experience:
        """One row as an Experience; ValueError or TypeError says what about it is wrong."""
        data = dict(zip(COLUMNS, row))
        if not isinstance(data["text"], str):
            raise TypeError(f"text is {type(data['text']).__name__}, not text")
        metadata = json.loads(data["metadata"] or "{}")  # JSONDecodeError is a ValueError
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata is a JSON {type(metadata).__name__}, not an object")
        for key in ("kind", "task_id", "query", "source_run"):
            if data[key] is not None and not isinstance(data[key], str):
                raise TypeError(f"{key} is {type(data[key]).__name__}, not text")
        if data["outcome"] is not None and not isinstance(data["outcome"], (int, float)):
            raise TypeError(f"outcome is {type(data['outcome']).__name__}, not a number")
        if data["step"] is not None and not isinstance(data["step"], int):
            raise TypeError(f"step is {type(data['step']).__name__}, not an integer")
        data["metadata"] = metadata
        return Experience(**data)

    # --- retrieval ----------------------------------------------------------------------------

    def retrieve(self, task: Task, k: int, *, exclude_own: bool = False) -> list[Experience]:
        """The `k` records most relevant to `task` (BM25 or vectors), then its own task's newest records;
        with `exclude_own` (a rollout that is scored), none learned on `task` itself (`same_task`)."""
        records = self.all()
        self.counters["retrievals"] += 1
        if not records or k <= 0:
            return []
        own = {record.experience_id for record in records if same_task(record, task)} if exclude_own else set()
        by_id = {record.experience_id: record for record in records if record.experience_id not in own}
        query = task_text(task)
        wide = k + len(own)  # the ranking covers every record; the task's own are dropped after it
        ranked = self._vector_ranking(query, records, wide) if self.embedder is not None else None
        if ranked is None:
            ranked = self._bm25.rank(query, records, wide)
        chosen = [by_id[key] for key in ranked if key in by_id][:k]
        for record in reversed(records):  # then the newest lessons of this very task (or problem)
            if len(chosen) >= k or exclude_own:
                break
            if same_task(record, task) and record not in chosen:
                chosen.append(record)
        chosen = chosen[:k]
        self.counters["retrieved"] += len(chosen)
        self.counters["retrieval_hits"] += int(bool(chosen))
        return chosen

    def _vector_ranking(self, query: str, records: Sequence[Experience], k: int) -> list[str] | None:
        """Ids by cosine similarity (`hybrid`: fused with BM25); None when the endpoint is unavailable."""
        from beyondagent_plugin_experience.embeddings import EmbeddingUnavailable

        config = self.config.embedding
        wide = k if config.ranking == "vector" else max(4 * k, 20)
        try:
            with self._lock, self._reading_file():
                if self._synced != len(records):  # records another store object added, or vectors that failed
                    self._vectors.backfill({record.experience_id: document(record) for record in records})
                    self._synced = len(records)
                vector = self._query_vector(query)
                similar = [key for key, similarity in self._vectors.nearest(vector, wide)
                           if similarity >= config.min_similarity]
        except EmbeddingUnavailable as exc:
            self._embedding_failed("retrieve", exc)
            return None
        if config.ranking == "vector":
            return similar
        fused: dict[str, float] = {}
        for ranking in (similar, self._bm25.rank(query, records, wide)):
            for rank, key in enumerate(ranking):
                fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
        return sorted(fused, key=lambda key: -fused[key])

    def examples_of(self, task: Task) -> list[Experience]:
        """The stored successful trajectories of `task` itself (its id, or the same problem: `task_key`)
        that carry their model turns (`hindsight` and `trajectory` records), oldest first."""
        key = task_key(task)
        return [record for record in self.all() if isinstance(record.metadata.get("turns"), list)
                and (record.task_id == task.task_id or record.metadata.get("task_key") == key)]

    def _query_vector(self, query: str) -> np.ndarray:
        vector = self._queries.get(query)
        if vector is None:
            if len(self._queries) >= QUERY_CACHE:
                self._queries.clear()
            vector = self._queries[query] = self.embedder.embed([query])[0]
        return vector

    # --- summaries ----------------------------------------------------------------------------

    async def summarize(self, trajectories: Sequence[Trajectory], *, step: int) -> list[Experience]:
        by_task: dict[str, list[Trajectory]] = {}
        for trajectory in trajectories:
            by_task.setdefault(trajectory.task.task_id, []).append(trajectory)
        if self.config.summarizer == "hindsight":
            return [e for group in by_task.values() for e in self.hindsight(group, step)]
        if self.config.summarizer == "trajectory":
            return [e for group in by_task.values() for e in self.examples(group, step)]
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
                           query=task.query, outcome=float(best.reward.score), source_run=self.run_name, step=step,
                           metadata=learned_on(task, best))]

    def examples(self, group: Sequence[Trajectory], step: int) -> list[Experience]:
        """Up to `max_per_task` distinct successful episodes of one task, shortest first, each a worked example."""
        wins = sorted((t for t in group if succeeded(t) and actions_of(t)), key=lambda t: len(actions_of(t)))
        made: list[Experience] = []
        seen: set[tuple[str, ...]] = set()
        for trajectory in wins:
            actions = tuple(actions_of(trajectory))
            if actions in seen:
                continue
            seen.add(actions)
            task = trajectory.task
            made.append(Experience(text=self.example_text(trajectory)[: self.config.max_chars], kind="example",
                                   task_id=task.task_id, query=task.query, outcome=float(trajectory.reward.score),
                                   source_run=self.run_name, step=step, metadata=learned_on(task, trajectory)))
            if len(made) >= self.config.max_per_task:
                break
        return made

    def example_text(self, trajectory: Trajectory) -> str:
        """A successful episode as a worked example: the outcome and task, then each observation (cut at
        `observation_chars`; none with 0) and the action taken after it. The system prompt is left out."""
        query = (trajectory.task.query or "").strip()
        lines = [f"A successful attempt (reward {trajectory.reward.score:g})"
                 + (f" at the task: {query}" if query else ":")]
        cut = self.config.observation_chars
        pending: list[str] = []
        step = 0
        for turn in trajectory.turns:
            if turn.role == "system":
                continue
            if turn.role != "assistant":
                pending.append(turn.content.strip())
                continue
            step += 1
            observation = "\n".join(text for text in pending if text)
            pending = []
            if cut and observation:
                lines.append(f"Observation {step}: "
                             + (observation if len(observation) <= cut else observation[:cut].rstrip() + " ..."))
            lines.append(f"Action {step}: {turn.content.strip()[:200]}")
        return "\n".join(lines)

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
                           source_run=self.run_name, step=step, metadata=learned_on(task))
                for kind, text in found if text.strip()]

    # --- the rest of the protocol -------------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Counts of this store object's life, `total` records in the file and, with embeddings, requests made."""
        with self._lock, self._reading_file():
            total = self._connection().execute("SELECT COUNT(*) FROM experiences").fetchone()[0]
        out = {"total": float(total), **{key: float(value) for key, value in self.counters.items()}}
        if self.embedder is not None:
            out.update({f"embedding_{key}": float(value) for key, value in self.embedder.usage.items()})
            out["reembedded"] = float(self._vectors.reembedded if self._vectors is not None else 0)
        return out

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
                self._vectors = None
                self._records = None
            if self.embedder is not None:
                self.embedder.close()
