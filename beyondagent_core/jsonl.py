"""JSON-lines reading and writing for our records, with a policy for bad lines.

A malformed line is reported with its file and line number. With `on_bad_record="fail"`
(the default) the first one raises `DataError`; with `"skip"` it is counted, logged as a
`data.bad_record` event and left out, and the reader's `BadRecords` tally says how many.
Nothing is dropped silently.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from beyondagent_core.errors import DataError
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Task

log = get_logger(__name__)

T = TypeVar("T")
OnBadRecord = Literal["fail", "skip"]
BAD_RECORD_POLICIES: tuple[str, ...] = ("fail", "skip")


@attrs.define
class BadRecords:
    """Counts (and keeps the first few) records skipped under `on_bad_record="skip"`."""

    policy: OnBadRecord = "fail"
    count: int = 0
    examples: list[str] = attrs.field(factory=list)

    def report(self, where: str, reason: str, *, hint: str | None = None) -> None:
        """Fail or record one bad record at `where` (e.g. `tasks.jsonl:12`)."""
        if self.policy == "fail":
            raise DataError(
                f"malformed record: {reason}",
                where=where,
                hint=hint or "fix or remove the record, or pass --on-bad-record=skip to skip bad records",
            )
        self.count += 1
        if len(self.examples) < 5:
            self.examples.append(f"{where}: {reason}")
        log.warning("data.bad_record", where=where, reason=reason, skipped_so_far=self.count)


def check_policy(policy: str) -> OnBadRecord:
    if policy not in BAD_RECORD_POLICIES:
        raise DataError(
            f"unknown bad-record policy {policy!r}",
            hint=f"use one of: {', '.join(BAD_RECORD_POLICIES)}",
        )
    return policy  # type: ignore[return-value]


def read_jsonl(
    path: str | Path, parse: Callable[[Any], T], bad: BadRecords | None = None
) -> Iterator[T]:
    """Yield `parse(obj)` for each non-blank line of `path`.

    A line that is not JSON, or that `parse` rejects with ValueError/TypeError/KeyError, goes
    to `bad` (fail by default) with its file and line number.
    """
    bad = bad if bad is not None else BadRecords()
    for where, _, obj in json_lines(path, bad):
        try:
            yield parse(obj)
        except (ValueError, TypeError, KeyError) as exc:
            bad.report(where, str(exc))


def loads_line(line: str | bytes) -> Any:
    """`json.loads` of one line of a file someone else may have written: anything that cannot be
    read (malformed, nested too deeply for the parser's recursion, an integer past Python's digit
    limit) is a ValueError saying why, never a RecursionError escaping to the user as a bug."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("not readable JSON (nested too deeply)") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise ValueError(f"not readable JSON ({exc})") from None


def json_lines(path: str | Path, bad: BadRecords, *, hint: str | None = None) -> Iterator[tuple[str, int, Any]]:
    """Yield `(where, line number, obj)` for each non-blank JSON line of `path` ("file:line" as `where`).

    A line that is not JSON goes to `bad` (with `hint`); a missing file is a DataError.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"file not found: {path}", hint="check the path in the spec (relative paths start at the current directory)")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            try:  # line by line, so one bad byte costs one record, with its line number
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                bad.report(where, f"not UTF-8 text (byte {exc.start + 1} of the line is {raw[exc.start]:#04x})",
                           hint=hint)
                continue
            if not line.strip():
                continue
            try:
                obj = loads_line(line)
            except ValueError as exc:
                bad.report(where, str(exc), hint=hint)
                continue
            yield where, number, obj


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    """Write records (with `to_dict()` or plain dicts) atomically: temp file, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(dumps(record) + "\n")
                count += 1
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


def cut_torn_tail(path: str | Path) -> int:
    """Cut an unterminated last line (a write killed mid-line) off an append-only JSONL file, so
    the next append starts on a line of its own; returns the number of bytes cut."""
    path = Path(path)
    if not path.is_file():
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        keep, position = 0, size
        while position > 0 and not keep:
            start = max(0, position - 65536)
            handle.seek(start)
            block = handle.read(position - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
            position = start
        handle.truncate(keep)
        return size - keep


def append_jsonl(path: str | Path, records: Iterable[Any]) -> None:
    """Append records and fsync, so a killed process loses at most the line being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def dumps(record: Any) -> str:
    data = record.to_dict() if hasattr(record, "to_dict") else record
    return json.dumps(data, ensure_ascii=False, default=str)


def read_tasks(path: str | Path, bad: BadRecords | None = None) -> list[Task]:
    """Read Task records from a JSON-lines file (see `read_jsonl` for bad lines)."""
    return list(read_jsonl(path, Task.from_dict, bad))


def write_tasks(path: str | Path, tasks: Iterable[Task]) -> int:
    return write_jsonl(path, tasks)
