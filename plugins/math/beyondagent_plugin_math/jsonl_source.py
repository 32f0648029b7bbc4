"""`math_jsonl`: math problems from a JSON-lines file (GSM8K, MATH, or your own fields).

Each line is an object with a question and an answer field (names configurable). The answer is
kept whole as the task's `ground_truth` (a GSM8K solution ending in `#### 42`, a MATH solution
with `\\boxed{}`, or a plain answer); the judges find the final answer in it. A line that is not
JSON, has no question or no answer, or an answer with no final answer in it, is a bad record
named by file and line (failed or skipped by `--on-bad-record`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from beyondagent_core.errors import DataError
from beyondagent_core.jsonl import BadRecords, json_lines
from beyondagent_core.types import Task
from beyondagent_plugin_math.answers import reference_answers
from beyondagent_plugin_math.config import MathJsonlConfig


class MathJsonlSource:
    def __init__(self, config: MathJsonlConfig):
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        return itertools.islice(self._read(bad), self.config.limit)

    def _read(self, bad: BadRecords) -> Iterator[Task]:
        config = self.config
        path = Path(config.path)
        if not path.is_file():
            raise DataError(f"math_jsonl file not found: {path}",
                            hint="check the path in the spec (relative paths start at the current directory)")
        prefix = config.id_prefix or path.stem
        hint = (f"each line needs {config.question_field!r} and {config.answer_field!r}; set question_field/"
                "answer_field to your file's names, or pass --on-bad-record=skip")
        for where, number, record in json_lines(path, bad, hint=hint):
            try:
                yield self._task(record, number, prefix)
            except ValueError as exc:
                bad.report(where, str(exc), hint=hint)

    def _task(self, record: Any, number: int, prefix: str) -> Task:
        config = self.config
        if not isinstance(record, dict):
            raise ValueError(f"a line must be a JSON object, got {type(record).__name__}")
        question = record.get(config.question_field)
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"missing or empty question field {config.question_field!r} "
                             f"(the line has: {', '.join(sorted(record)) or 'no fields'})")
        if config.answer_field not in record or record[config.answer_field] is None:
            raise ValueError(f"missing answer field {config.answer_field!r} "
                             f"(the line has: {', '.join(sorted(record)) or 'no fields'})")
        answer = record[config.answer_field]
        if not reference_answers(answer):
            raise ValueError(f"the answer field {config.answer_field!r} holds no answer: {str(answer)[:60]!r}")
        task_id = f"{prefix}-{number}"
        if config.id_field:
            if record.get(config.id_field) in (None, ""):
                raise ValueError(f"missing id field {config.id_field!r}")
            task_id = str(record[config.id_field])
        metadata = {key: value for key, value in record.items()
                    if key not in (config.question_field, config.answer_field)}
        metadata["line"] = number
        return Task(task_id=task_id, query=question.strip(), ground_truth=answer, judge=config.judge,
                    metadata=metadata)
