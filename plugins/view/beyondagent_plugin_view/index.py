"""An incremental sqlite index of a run's `episodes.jsonl`, kept in the run directory.

`EpisodeIndex.refresh()` reads only the lines appended since the last call (the byte offset is
stored), so a run that is still writing shows its new episodes on the next request. One row per
line holds the columns the list filters and sorts on plus the line's byte offset and length:
an episode is read back from the JSONL file itself, so the index stays small. The episodes.jsonl
of `beyondagent eval` is read too (`as_view_record`). Turn text goes to
an FTS5 table (contentless) for full-text search; without FTS5 a plain table and LIKE do.

Bad lines: a last line without its newline is not indexed yet (it is being written, or a
kill tore it: `torn_bytes` says how much); a complete line that is not a JSON object becomes a
row with `bad` set, listed as such, and the rest stays browsable. A file replaced or cut shorter
(a new run moved the old one aside, a resume trimmed it) is indexed again from the start.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from beyondagent_core.episode_records import EPISODES_FILE, as_view_record, token_count

INDEX_FILE = "view-index.sqlite"
INDEX_VERSION = "1"
HEAD_BYTES = 4096  # the file's first bytes, hashed: a different file under the same name is noticed
CHUNK_BYTES = 8 * 1024 * 1024
FTS_MAX_CHARS = 20_000  # text per episode given to full-text search

COLUMNS = ("step", "split", "idx", "grp", "task_id", "origin", "score", "success", "turns", "tokens", "trained",
           "error", "guided", "bad")
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS episodes (
  id INTEGER PRIMARY KEY, line INTEGER, offset INTEGER, length INTEGER,
  step INTEGER, split TEXT, idx INTEGER, grp TEXT, task_id TEXT, origin TEXT, score REAL, success INTEGER,
  turns INTEGER, tokens INTEGER, trained INTEGER, error TEXT, guided INTEGER, bad TEXT);
CREATE INDEX IF NOT EXISTS by_step ON episodes (step);
CREATE INDEX IF NOT EXISTS by_task ON episodes (task_id);
CREATE INDEX IF NOT EXISTS by_score ON episodes (score);
CREATE INDEX IF NOT EXISTS by_turns ON episodes (turns);
CREATE INDEX IF NOT EXISTS by_tokens ON episodes (tokens);
CREATE INDEX IF NOT EXISTS by_group ON episodes (step, split, grp);
CREATE INDEX IF NOT EXISTS by_split ON episodes (split);
CREATE INDEX IF NOT EXISTS by_origin ON episodes (origin);
CREATE INDEX IF NOT EXISTS bad_lines ON episodes (bad) WHERE bad IS NOT NULL;
"""


def has_fts5() -> bool:
    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False


def index_path_for(run_dir: Path) -> Path:
    """`<run_dir>/view-index.sqlite`, or a file in the temp directory when the run dir is read-only."""
    if os.access(run_dir, os.W_OK):
        return run_dir / INDEX_FILE
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "beyondagent-view"
    folder.mkdir(exist_ok=True)
    return folder / f"{digest}.sqlite"


class EpisodeIndex:
    """The index of one run directory (thread-safe: one connection behind a lock)."""

    def __init__(self, run_dir: Path, *, index_path: Path | None = None, min_interval_s: float = 0.5):
        self.run_dir = Path(run_dir)
        self.source = self.run_dir / EPISODES_FILE
        self.path = index_path or index_path_for(self.run_dir)
        self.min_interval_s = min_interval_s
        self.fts = has_fts5()
        self.torn_bytes = 0
        self.last_refresh_s = 0.0  # how long the last refresh that found new lines took
        self._checked = 0.0
        self._memo: dict[str, Any] = {}  # results that change only when the rows do (`memo`)
        self._memo_offset: str | None = None
        self._lock = threading.RLock()
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self._create()

    def _create(self) -> None:
        with self._lock:
            version = None
            try:
                version = self._meta("version")
            except sqlite3.OperationalError:
                pass
            if version not in (None, f"{INDEX_VERSION}:{int(self.fts)}"):
                self._drop()
            self.db.executescript(SCHEMA)
            if self.fts:
                self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS search USING fts5(text, content='')")
            else:
                self.db.execute("CREATE TABLE IF NOT EXISTS search (rowid INTEGER PRIMARY KEY, text TEXT)")
            self._set_meta("version", f"{INDEX_VERSION}:{int(self.fts)}")

    def _drop(self) -> None:
        for statement in ("DROP TABLE IF EXISTS episodes", "DROP TABLE IF EXISTS search", "DELETE FROM meta"):
            self.db.execute(statement)

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, str(value)))

    def close(self) -> None:
        with self._lock:
            self.db.close()

    # -- indexing ----------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> int:
        """Index the lines appended since the last refresh; returns how many. Cheap when nothing
        changed (one stat), and at most once per `min_interval_s` unless `force`."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._checked < self.min_interval_s:
                return 0
            self._checked = now
            try:
                stat = self.source.stat()
            except FileNotFoundError:
                if self._meta("offset") not in (None, "0"):
                    self._reset()
                self.torn_bytes = 0
                return 0
            offset = int(self._meta("offset") or 0)
            self._forget_if_moved()
            if self._replaced(stat, offset):
                self._reset()
                offset = 0
            if stat.st_size == offset:
                self.torn_bytes = 0
                return 0
            started = time.perf_counter()
            added = self._index_from(offset, stat)
            if added:
                self.last_refresh_s = time.perf_counter() - started
            self._forget_if_moved()
            return added

    def _forget_if_moved(self) -> None:
        """Drop remembered summaries when the index moved on (here, or in another viewer of the run)."""
        offset = self._meta("offset")
        if offset != self._memo_offset:
            self._memo.clear()
            self._memo_offset = offset

    def _replaced(self, stat: os.stat_result, offset: int) -> bool:
        if self._meta("inode") not in (None, str(stat.st_ino)) or stat.st_size < offset:
            return True
        head = self._meta("head")
        return head is not None and offset >= HEAD_BYTES and head != self._head()

    def _head(self) -> str:
        with self.source.open("rb") as handle:
            return hashlib.sha256(handle.read(HEAD_BYTES)).hexdigest()

    def _reset(self) -> None:
        self._memo.clear()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DELETE FROM episodes")
        self.db.execute("DELETE FROM search" if not self.fts else "INSERT INTO search(search) VALUES('delete-all')")
        self.db.execute("DELETE FROM meta WHERE key != 'version'")
        self.db.execute("COMMIT")

    def _index_from(self, offset: int, stat: os.stat_result) -> int:
        line = int(self._meta("lines") or 0)
        added = 0
        with self.source.open("rb") as handle:
            handle.seek(offset)
            pending = b""
            self.db.execute("BEGIN IMMEDIATE")
            if int(self._meta("offset") or 0) != offset:  # another viewer of this run indexed it meanwhile
                self.db.execute("ROLLBACK")
                return 0
            try:
                while True:
                    chunk = handle.read(CHUNK_BYTES)
                    if not chunk:
                        break
                    data = pending + chunk
                    start = 0
                    while True:
                        end = data.find(b"\n", start)
                        if end < 0:
                            break
                        raw = data[start:end]
                        line += 1
                        if raw.strip():
                            self._add(line, offset + start, len(raw), raw)
                            added += 1
                        start = end + 1
                    offset += start
                    pending = data[start:]
                self.torn_bytes = len(pending)
                self._set_meta("offset", offset)
                self._set_meta("lines", line)
                self._set_meta("inode", stat.st_ino)
                if offset >= HEAD_BYTES and self._meta("head") is None:
                    self._set_meta("head", self._head())
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return added

    def _add(self, line: int, offset: int, length: int, raw: bytes) -> None:
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError(f"a JSON {type(record).__name__}, not an object")
            record = as_view_record(record)
            values = row_values(record)
            bad = None
        except (ValueError, TypeError, AttributeError, KeyError) as exc:  # not JSON, or fields of the wrong type
            values = dict.fromkeys(COLUMNS)
            bad = f"line {line} cannot be read: {str(exc)[:200]}"
            record = {}
        values["bad"] = bad
        cursor = self.db.execute(
            f"INSERT INTO episodes (line, offset, length, {', '.join(COLUMNS)}) "
            f"VALUES (?, ?, ?, {', '.join('?' * len(COLUMNS))})",
            (line, offset, length, *(values[c] for c in COLUMNS)))
        text = search_text(record) if not bad else ""
        if text:
            self.db.execute("INSERT INTO search (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))

    # -- reading -----------------------------------------------------------------------------

    def read(self, episode_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(the row, the record from the JSONL file) of an episode; None for an unknown id."""
        with self._lock:
            row = self.db.execute(f"SELECT id, line, offset, length, {', '.join(COLUMNS)} FROM episodes WHERE id = ?",
                                  (episode_id,)).fetchone()
        if row is None:
            return None
        found = dict(zip(("id", "line", "offset", "length", *COLUMNS), row, strict=True))
        if found["bad"]:
            return found, {}
        with self.source.open("rb") as handle:
            handle.seek(found["offset"])
            return found, as_view_record(json.loads(handle.read(found["length"])))

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.db.execute(sql, params).fetchall()

    def memo(self, key: str, compute: Any) -> Any:
        """`compute()`, remembered until the next refresh that changes the rows (whole-table summaries)."""
        with self._lock:
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]


def row_values(record: dict[str, Any]) -> dict[str, Any]:
    """The indexed columns of one record (missing fields are None)."""
    tokens, trained = token_count(record)
    group = record.get("group")
    score = record.get("score")
    turns = record.get("turns") if isinstance(record.get("turns"), list) else []
    return {
        "step": record.get("step") if isinstance(record.get("step"), int) else None,
        "split": _text(record.get("split")),
        "idx": record.get("index") if isinstance(record.get("index"), int) else None,
        "grp": None if group is None else str(group), "task_id": _text(record.get("task_id")),
        "origin": _text(record.get("origin")), "score": score if isinstance(score, int | float) else None,
        "success": int(bool(record.get("success"))), "turns": len(turns), "tokens": tokens, "trained": trained,
        "error": _text(record.get("error")), "guided": int(bool(record.get("guided"))),
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def search_text(record: dict[str, Any]) -> str:
    """What full-text search looks in: the turns, the task id, the judge's reason and the error."""
    parts = [str(record.get(key) or "") for key in ("task_id", "reason", "error")]
    for turn in record.get("turns") or []:
        if isinstance(turn, dict):
            parts.append(str(turn.get("content") or ""))
    return "\n".join(part for part in parts if part)[:FTS_MAX_CHARS]
