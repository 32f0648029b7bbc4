"""`jsonl` task source: Task records, one per line (what `beyondagent` itself writes)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs
from omegaconf import MISSING

from beyondagent_core.jsonl import BadRecords, read_jsonl
from beyondagent_core.types import Task


@attrs.define
class JsonlSourceConfig:
    """`path`: a JSONL file of Task records; `limit`: read at most this many tasks."""

    path: str = MISSING
    limit: int | None = None


class JsonlTaskSource:
    def __init__(self, config: JsonlSourceConfig):
        if config.limit is not None and config.limit < 0:
            raise ValueError(f"limit must be >= 0, got {config.limit}")
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        return itertools.islice(read_jsonl(self.config.path, Task.from_dict, bad), self.config.limit)
