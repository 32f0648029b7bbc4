"""Typed reads of a task's `metadata`, where a gym task records how to rebuild its start.

A missing key falls back to a default (the env's config, or a seed derived from the task id);
a present but bad value raises ValueError with one line naming the task and the key.
Keys the env does not know are left alone: other components may annotate tasks too.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core import Task
from beyondagent_plugin_gym.seeds import seed_for_task_id


class TaskMetadata:
    """Reads `task.metadata` for the env `game`."""

    def __init__(self, task: Task, game: str):
        if not isinstance(task.metadata, dict):
            raise ValueError(f"task {task.task_id!r}: metadata must be a mapping, got {type(task.metadata).__name__}")
        self.task = task
        self.game = game
        self.values = task.metadata

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def seed(self) -> int:
        """`metadata.seed`, else derived from the task id (a synthetic task's: its seed task's id)."""
        default = seed_for_task_id(self.game, self.task.seed_task_id or self.task.task_id)
        return self.integer("seed", default)

    def integer(self, key: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
        value = self.values.get(key, default)
        in_range = (isinstance(value, int) and not isinstance(value, bool)
                    and value >= minimum and (maximum is None or value <= maximum))
        if not in_range:
            expected = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
            raise self.error(key, expected, value)
        return value

    def number(self, key: str, default: float) -> float:
        value = self.values.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, "a number", value)
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.values.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def rows(self, key: str) -> list[str] | None:
        """A grid given as a list of equally long strings, or None when the key is absent."""
        if key not in self.values:
            return None
        value = self.values[key]
        if (not isinstance(value, (list, tuple)) or not value or not all(isinstance(row, str) and row for row in value)
                or len({len(row) for row in value}) != 1):
            raise self.error(key, "a non-empty list of equally long strings", value)
        return list(value)

    def error(self, key: str, expected: str, value: Any) -> ValueError:
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return ValueError(f"task {self.task.task_id!r}: metadata.{key} must be {expected}, got {shown}")
