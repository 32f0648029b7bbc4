"""The exploration cache and its checkpoint: what makes a killed exploration resumable.

The cache is a JSON-lines file of `Task` records that the rest of the run reads. Beside it,
`<cache>.checkpoint.jsonl` starts with a header naming the fingerprint of the seed set and
the exploration settings, then holds one line per finished exploration (`job`, number of
tasks kept) and a last `finished` line. An exploration's tasks are written to the cache in one
append, flushed and fsynced, before its checkpoint line, so on resume the cache is cut back to
the tasks the checkpoint accounts for (a kill between the two writes, or in the middle of one,
loses at most that exploration, which is redone): nothing lost, nothing twice.

A cache without a checkpoint is a task file the user provides; it is used as it is.

The header's settings are stored with their secrets masked (`secrets.redact_value`: an API key,
the credentials in `llm.base_url`); the fingerprint, a hash, is made from the real values.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.errors import RunError
from beyondagent_core.secrets import redact_value
from beyondagent_core.types import Task

CHECKPOINT_SUFFIX = ".checkpoint.jsonl"
FORMAT = 1


def fingerprint(seeds: Sequence[Task], settings: dict[str, Any]) -> str:
    """A hash of the seed set (order-free) and of the settings that change what is explored."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps(seed.to_dict(), sort_keys=True, default=str) for seed in seeds):
        digest.update(line.encode())
        digest.update(b"\n")
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def checkpoint_path(cache: Path) -> Path:
    return cache.with_name(cache.name + CHECKPOINT_SUFFIX)


def is_finished(cache: Path) -> bool | None:
    """True/False for a checkpointed cache; None for a cache without a checkpoint."""
    state = checkpoint_path(cache)
    if not state.is_file():
        return None
    return any(record.get("finished") for record in _records(state))


def seeds_digest(seeds: Sequence[Task]) -> str:
    """A hash of the seed set alone (order-free), kept in the header to explain a mismatch."""
    return fingerprint(seeds, {})


def check_fingerprint(cache: Path, expected: str, *, seeds: Sequence[Task] | None = None,
                      settings: dict[str, Any] | None = None) -> None:
    """Refuse a checkpointed cache made from other seeds or settings, saying which differ."""
    records = _records(checkpoint_path(cache))
    header = records[0] if records else {}
    found = header.get("fingerprint")
    if found == expected:
        return
    reasons = []
    if seeds is not None and header.get("seeds") and header["seeds"] != seeds_digest(seeds):
        reasons.append(f"the seed tasks differ ({header.get('seed_count', '?')} then, {len(seeds)} now)")
    if settings is not None and isinstance(header.get("settings"), dict):
        masked = _differences(redact_value(header["settings"]), _masked(settings))  # an old header may be unmasked
        reasons += [_describe(key, old, new) for key, old, new in masked]
        if not reasons:  # equal once masked: what differs is masked
            reasons.append(f"a secret among the settings changed (not shown; fingerprint {found}, this run {expected})")
    why = "; ".join(reasons[:8]) if reasons else f"fingerprint {found}, this run {expected}"
    raise RunError(
        f"the exploration cache {cache} was made from another seed set or other exploration settings: {why}",
        where=str(cache),
        hint="run `beyondagent explore SPEC --force` to explore again and replace it, or point explore.cache at a "
             "new file")


_MISSING = object()


def _differences(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(key path, old, new) for each leaf that differs between two nested dicts."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [diff for key in sorted(set(old) | set(new), key=str)
                for diff in _differences(old.get(key, _MISSING), new.get(key, _MISSING),
                                         f"{prefix}.{key}" if prefix else str(key))]
    return [] if old == new else [(prefix, old, new)]


def _masked(settings: dict[str, Any]) -> Any:
    """`settings` as JSON would hold them, with their secrets masked."""
    return redact_value(json.loads(json.dumps(settings, default=str)))


def _describe(key: str, old: Any, new: Any) -> str:
    if old is _MISSING:
        return f"{key} is new (set to {new!r} now; a plugin's config may have gained this key)"
    if new is _MISSING:
        return f"{key} is gone (it was {old!r})"
    return f"{key} was {old!r}, is {new!r} now"


@attrs.define
class Checkpoint:
    """An open exploration cache: `done` jobs and their `tasks` so far; appends as jobs finish."""

    cache: Path
    fingerprint: str
    done: set[str] = attrs.field(factory=set)
    tasks: list[Task] = attrs.field(factory=list)
    finished: bool = False

    @classmethod
    def open(cls, cache: Path, fingerprint: str, *, force: bool = False, seeds: Sequence[Task] | None = None,
             settings: dict[str, Any] | None = None) -> Checkpoint:
        """Start a new cache, or resume the one at `cache` made from the same seeds and settings.

        A cache made from other seeds or settings is refused unless `force` (then it is
        started again from nothing).
        """
        state = checkpoint_path(cache)
        if force or not state.is_file():
            if not force and cache.is_file() and cache.stat().st_size > 0:
                raise RunError(f"{cache} already holds tasks but has no exploration checkpoint",
                               where=str(cache),
                               hint="it looks like a task file of yours: point explore.cache elsewhere, "
                                    "or run `beyondagent explore SPEC --force` to explore again and replace it")
            return cls._start(cache, fingerprint, seeds=seeds, settings=settings)
        check_fingerprint(cache, fingerprint, seeds=seeds, settings=settings)
        records, complete = _complete_records(state)
        if len(complete.encode()) != state.stat().st_size:  # a line torn by a kill: cut it, or later appends join it
            _write_atomic(state, complete)
        checkpoint = cls(cache=cache, fingerprint=fingerprint)
        expected = 0
        for record in records[1:]:
            if "job" in record:
                checkpoint.done.add(record["job"])
                expected += int(record["tasks"])
            checkpoint.finished = checkpoint.finished or bool(record.get("finished"))
        checkpoint.tasks = _cut_cache(cache, expected)
        return checkpoint

    @classmethod
    def _start(cls, cache: Path, fingerprint: str, *, seeds: Sequence[Task] | None,
               settings: dict[str, Any] | None) -> Checkpoint:
        cache.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(cache, "")
        header: dict[str, Any] = {"format": FORMAT, "fingerprint": fingerprint}
        if seeds is not None:  # what the fingerprint was made of, to say what changed when it differs
            header.update(seeds=seeds_digest(seeds), seed_count=len(seeds))
        if settings is not None:
            header["settings"] = _masked(settings)
        _write_atomic(checkpoint_path(cache), json.dumps(header) + "\n")
        return cls(cache=cache, fingerprint=fingerprint)

    def record(self, job: str, tasks: Sequence[Task]) -> None:
        """Append one finished exploration: its tasks first (fsynced), then its checkpoint line."""
        if tasks:
            _append(self.cache, "".join(json.dumps(task.to_dict(), ensure_ascii=False) + "\n" for task in tasks))
        _append(checkpoint_path(self.cache), json.dumps({"job": job, "tasks": len(tasks)}) + "\n")
        self.done.add(job)
        self.tasks.extend(tasks)

    def finish(self) -> None:
        if not self.finished:
            _append(checkpoint_path(self.cache), json.dumps({"finished": True, "tasks": len(self.tasks)}) + "\n")
            self.finished = True


def _records(path: Path) -> list[dict[str, Any]]:
    """The checkpoint's complete lines (a line cut by a kill is ignored)."""
    return _complete_records(path)[0]


def _complete_records(path: Path) -> tuple[list[dict[str, Any]], str]:
    """The records of the complete lines before the first torn one, and their text."""
    records, kept = [], []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
        kept.append(line)
    return records, "".join(kept)


def _cut_cache(cache: Path, count: int) -> list[Task]:
    """Keep the first `count` task lines of the cache (the ones the checkpoint accounts for)."""
    if not cache.is_file():
        raise RunError(f"the exploration checkpoint of {cache} exists but the cache is missing",
                       where=str(cache), hint="run `beyondagent explore SPEC --force` to explore again")
    lines = cache.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = lines[:count]
    if len(kept) < count or (kept and not kept[-1].endswith("\n")):
        raise RunError(f"the exploration cache {cache} has fewer tasks than its checkpoint records",
                       where=str(cache),
                       hint="the file was edited or truncated; run `beyondagent explore SPEC --force` to explore again")
    if len(lines) != count:
        _write_atomic(cache, "".join(kept))
    try:
        return [Task.from_dict(json.loads(line)) for line in kept]
    except (json.JSONDecodeError, ValueError) as exc:
        raise RunError(f"the exploration cache {cache} holds a record that cannot be read: {exc}",
                       where=str(cache), hint="run `beyondagent explore SPEC --force` to explore again") from None


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _write_atomic(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".tmp")
    with staging.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    staging.replace(path)
