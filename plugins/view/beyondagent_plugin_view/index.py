"""An incremental sqlite index of a run's `episodes.jsonl`: a cache, never trusted.

`EpisodeIndex.refresh()` reads only the lines appended since the last call (the byte offset is
stored), so a run that is still writing shows its new episodes on the next request. One row per
line holds the columns the list filters and sorts on plus the line's byte offset and length: an
episode is read back from the JSONL file itself (and checked again), so the index stays small.
The episodes.jsonl of `beyondagent eval` is read too (`as_view_record`). Turn text goes to an
FTS5 table (contentless) for full-text search; without FTS5 a plain table and LIKE do.

Where it lives: `<run dir>/view-index.sqlite` when the run directory is writable, else (or when
that name is a symlink, or another user's file) a file in the private per-user folder
(`private_dir`). What is trusted: only an index signed with this user's key (`private_dir.index_key`)
for this run directory; any other file under that name (copied in with the run, not a database,
another version) is deleted and built again. A signed index must still match the file: its
device, inode and the bytes at both ends of the indexed part; otherwise (a new run moved the old
file aside, a resume cut it, it was rewritten in place) it is indexed again from the start.

Bad lines: a last line without its newline is not indexed yet (it is being written, or a kill
tore it: `torn_bytes` says how much); a complete line that cannot be shown (`records.parse_line`)
or is longer than `MAX_LINE_BYTES` becomes a row with `bad` set, naming the file and line, and the
rest stays browsable. An `episodes.jsonl` that is a symlink or not a regular file is not read
(`problem` says so).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from beyondagent_core.episode_records import EPISODES_FILE

from beyondagent_plugin_view.bounds import MAX_LINE_BYTES
from beyondagent_plugin_view.private_dir import index_key, private_dir
from beyondagent_plugin_view.records import COLUMNS, BadRecord, parse_line, row_values, search_text
from beyondagent_plugin_view.safe_files import UnsafeFile, open_regular, regular_or_missing

INDEX_FILE = "view-index.sqlite"
INDEX_VERSION = "2"
SIDE_FILES = ("-wal", "-shm", "-journal")  # sqlite's files beside the index
EDGE_BYTES = 4096  # the indexed part's first and last bytes, hashed: a different file is noticed
CHUNK_BYTES = 8 * 1024 * 1024
UNREADABLE = (ValueError, TypeError, AttributeError, KeyError, OverflowError, RecursionError)

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


def index_path_for(run_dir: Path) -> tuple[Path, str | None]:
    """(where the index of `run_dir` lives, why it is not in the run directory when it could be)."""
    local = Path(run_dir) / INDEX_FILE
    note = None
    if os.access(run_dir, os.W_OK):
        try:
            found = [regular_or_missing(Path(f"{local}{suffix}")) for suffix in ("", *SIDE_FILES)]
        except UnsafeFile as exc:
            note = f"{exc}; the index is kept in {private_dir()} instead"
        else:
            if all(item is None or item.st_uid == os.geteuid() for item in found):
                return local, None
            note = f"{INDEX_FILE} in {run_dir} belongs to another user; the index is kept in {private_dir()} instead"
    digest = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:24]
    return private_dir() / f"{digest}.sqlite", note


def remove_index(path: Path) -> None:
    """The index file and sqlite's files beside it (a symlink is removed, never followed)."""
    for suffix in ("", *SIDE_FILES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class EpisodeIndex:
    """The index of one run directory (thread-safe: one connection behind a lock)."""

    def __init__(self, run_dir: Path, *, index_path: Path | None = None, min_interval_s: float = 0.5):
        self.run_dir = Path(run_dir)
        self.source = self.run_dir / EPISODES_FILE
        self.path, self.note = (Path(index_path), None) if index_path else index_path_for(self.run_dir)
        self.min_interval_s = min_interval_s
        self.fts = has_fts5()
        self.torn_bytes = 0
        self.problem: str | None = None  # why episodes.jsonl is not read (a symlink, a FIFO)
        self.last_refresh_s = 0.0  # how long the last refresh that found new lines took
        self._checked = 0.0
        self._memo: dict[str, Any] = {}  # results that change only when the rows do (`memo`)
        self._memo_offset: str | None = None
        self._lock = threading.RLock()
        self._owner = hmac.new(index_key(), f"{INDEX_VERSION}:{int(self.fts)}:{self.run_dir.resolve()}".encode(),
                               hashlib.sha256).hexdigest()
        self.db = self._open()

    # -- opening: ours, or built again ----------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA trusted_schema=OFF")  # a planted schema's views/triggers run no functions
        return db

    def _open(self) -> sqlite3.Connection:
        db = self._connect()
        if not self._ours(db):
            db.close()
            remove_index(self.path)
            db = self._connect()
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        with self._lock:
            self.db = db
            self._create()
        return db

    def _ours(self, db: sqlite3.Connection) -> bool:
        """Whether the file is an index this user's viewer wrote for this run (empty counts as ours)."""
        try:
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables == 0:
                return True
            row = db.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()
        except sqlite3.DatabaseError:  # not a database, no meta table, damaged
            return False
        return row is not None and isinstance(row[0], str) and hmac.compare_digest(row[0], self._owner)

    def _create(self) -> None:
        self.db.executescript(SCHEMA)
        if self.fts:
            self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS search USING fts5(text, content='')")
        else:
            self.db.execute("CREATE TABLE IF NOT EXISTS search (rowid INTEGER PRIMARY KEY, text TEXT)")
        self._set_meta("owner", self._owner)

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
        changed (a stat and two small reads), and at most once per `min_interval_s` unless `force`."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._checked < self.min_interval_s:
                return 0
            self._checked = now
            offset = int(self._meta("offset") or 0)
            try:
                handle = open_regular(self.source)
            except OSError as exc:
                self.problem = None if isinstance(exc, FileNotFoundError) else (
                    str(exc) if isinstance(exc, UnsafeFile) else f"{EPISODES_FILE}: {exc.strerror or exc}")
                if offset:
                    self._reset()
                self.torn_bytes = 0
                self._forget_if_moved()
                return 0
            self.problem = None
            with handle:
                stat = os.fstat(handle.fileno())
                self._forget_if_moved()
                if offset and not self._matches(handle, stat, offset):
                    self._reset()
                    offset = 0
                if stat.st_size == offset:
                    self.torn_bytes = 0
                    return 0
                started = time.perf_counter()
                added = self._index_from(handle, offset, stat)
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

    def _matches(self, handle: BinaryIO, stat: os.stat_result, offset: int) -> bool:
        """Whether the indexed part is still the file's: same file, not shorter, same bytes at both ends."""
        if stat.st_size < offset or self._meta("file") != f"{stat.st_dev}:{stat.st_ino}":
            return False
        return self._meta("edges") == _edges(handle, offset)

    def _reset(self) -> None:
        self._memo.clear()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DELETE FROM episodes")
        self.db.execute("DELETE FROM search" if not self.fts else "INSERT INTO search(search) VALUES('delete-all')")
        self.db.execute("DELETE FROM meta WHERE key != 'owner'")
        self.db.execute("COMMIT")

    def _index_from(self, handle: BinaryIO, offset: int, stat: os.stat_result) -> int:
        line = int(self._meta("lines") or 0)
        added = 0
        handle.seek(offset)
        self.db.execute("BEGIN IMMEDIATE")
        if int(self._meta("offset") or 0) != offset:  # another viewer of this run indexed it meanwhile
            self.db.execute("ROLLBACK")
            return 0
        try:
            start, cursor = offset, offset  # where the unfinished line starts; the next byte to read
            pending, too_long = b"", False  # the unfinished line's bytes (none kept once it is too long)
            while chunk := handle.read(CHUNK_BYTES):
                begin = 0
                while (end := chunk.find(b"\n", begin)) >= 0:
                    line += 1
                    length = cursor + end - start
                    if too_long:
                        self._add_bad(line, start, length, f"the line is longer than the limit of {MAX_LINE_BYTES} "
                                                           "bytes")
                        added += 1
                    else:
                        raw = pending + chunk[begin:end]
                        if raw.strip():
                            self._add(line, start, length, raw)
                            added += 1
                    pending, too_long = b"", False
                    begin = end + 1
                    start = cursor + begin
                if not too_long:
                    pending += chunk[begin:]
                    if len(pending) > MAX_LINE_BYTES:
                        pending, too_long = b"", True
                cursor += len(chunk)
            self.torn_bytes = cursor - start
            self._set_meta("offset", start)
            self._set_meta("lines", line)
            self._set_meta("file", f"{stat.st_dev}:{stat.st_ino}")
            self._set_meta("edges", _edges(handle, start))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return added

    def _add(self, line: int, offset: int, length: int, raw: bytes) -> None:
        try:
            record = parse_line(raw)
            values, text = row_values(record), search_text(record)
        except BadRecord as exc:
            self._add_bad(line, offset, length, str(exc))
            return
        except UNREADABLE as exc:  # a field of a type no check foresaw: this line only
            self._add_bad(line, offset, length, f"{type(exc).__name__}: {str(exc)[:200]}")
            return
        cursor = self.db.execute(
            f"INSERT INTO episodes (line, offset, length, {', '.join(COLUMNS)}) "
            f"VALUES (?, ?, ?, {', '.join('?' * len(COLUMNS))})",
            (line, offset, length, *(values.get(c) for c in COLUMNS)))
        if text:
            self.db.execute("INSERT INTO search (rowid, text) VALUES (?, ?)", (cursor.lastrowid, text))

    def _add_bad(self, line: int, offset: int, length: int, reason: str) -> None:
        self.db.execute("INSERT INTO episodes (line, offset, length, bad) VALUES (?, ?, ?, ?)",
                        (line, offset, length, f"{EPISODES_FILE} line {line} cannot be read: {reason}"))

    # -- reading -----------------------------------------------------------------------------

    def read(self, episode_id: int) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(the row, the record from the JSONL file) of an episode; None for an unknown id. A line
        that cannot be shown (or changed since it was indexed) comes back with `bad` set and no record."""
        with self._lock:
            row = self.db.execute(f"SELECT id, line, offset, length, {', '.join(COLUMNS)} FROM episodes WHERE id = ?",
                                  (episode_id,)).fetchone()
        if row is None:
            return None
        found = dict(zip(("id", "line", "offset", "length", *COLUMNS), row, strict=True))
        if found["bad"]:
            return found, {}
        try:
            with open_regular(self.source) as handle:
                handle.seek(found["offset"])
                raw = handle.read(min(found["length"], MAX_LINE_BYTES) + 1)
            if len(raw) != found["length"] + 1 or not raw.endswith(b"\n"):
                raise BadRecord("the file changed since it was indexed (reload the page)")
            return found, parse_line(raw[:-1])
        except (OSError, BadRecord) as exc:
            return {**found, "bad": f"{EPISODES_FILE} line {found['line']} cannot be read: {exc}"}, {}

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.db.execute(sql, params).fetchall()

    def memo(self, key: str, compute: Any) -> Any:
        """`compute()`, remembered until the next refresh that changes the rows (whole-table summaries)."""
        with self._lock:
            if key not in self._memo:
                self._memo[key] = compute()
            return self._memo[key]


def _edges(handle: BinaryIO, end: int) -> str:
    """A hash of the first and the last `EDGE_BYTES` of the file's first `end` bytes."""
    size = min(end, EDGE_BYTES)
    fd = handle.fileno()
    return hashlib.sha256(os.pread(fd, size, 0) + b"|" + os.pread(fd, size, end - size)).hexdigest()
