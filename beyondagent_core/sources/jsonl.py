"""`jsonl` task source: Task records, one per line (what `beyondagent` itself writes)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs

from beyondagent_core import checks
from beyondagent_core.checks import MISSING
from beyondagent_core.jsonl import BadRecords, json_lines
from beyondagent_core.types import Task


@attrs.define
class JsonlSourceConfig:
    """`path`: a JSONL file of Task records; `limit`: read at most this many tasks."""

    path: str = MISSING
    limit: int | None = attrs.field(default=None, validator=checks.number(
        ge=0, le=checks.MAX_TASKS, why=checks.TASKS_WHY))


class JsonlTaskSource:
    def __init__(self, config: JsonlSourceConfig):
        if config.limit is not None and config.limit < 0:
            raise ValueError(f"limit must be >= 0, got {config.limit}")
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        return itertools.islice(self._tasks(bad), self.config.limit)

    def _tasks(self, bad: BadRecords) -> Iterator[Task]:
        first_line: dict[str, int] = {}  # a duplicate is reported here, where its line is known
        for where, number, obj in json_lines(self.config.path, bad):
            try:
                task = Task.from_dict(obj)
            except (ValueError, TypeError, KeyError) as exc:
                bad.report(where, str(exc))
                continue
            if task.task_id in first_line:
                bad.report(where, f"duplicate task_id {task.task_id!r} (first at line {first_line[task.task_id]})")
                continue
            first_line[task.task_id] = number
            yield task
