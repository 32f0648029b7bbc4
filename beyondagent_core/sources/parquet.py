"""`parquet` task source: datasets in verl's row schema, read and written.

A verl row is `{data_source, prompt: [chat messages], ability, reward_model: {style,
ground_truth}, extra_info: {...}}`. Reading maps it to a Task (the last user message is the
query; the prompt and the other columns are kept in `metadata`), so files prepared for verl
work unchanged. Writing keeps the same columns and stores the whole Task as JSON in
`extra_info.beyondagent_task`, so our own files round-trip exactly.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core import checks
from beyondagent_core.checks import MISSING, names
from beyondagent_core.errors import DataError
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.types import Task

TASK_COLUMN = "beyondagent_task"


@attrs.define
class ParquetSourceConfig:
    """`path`: a parquet file in verl's row schema; `env`/`judge`: set on every task read."""

    path: str = MISSING
    limit: int | None = attrs.field(default=None, validator=checks.number(
        ge=0, le=checks.MAX_TASKS, why=checks.TASKS_WHY))
    env: str | None = None
    judge: str | None = attrs.field(default=None, metadata=names("reward"))


class ParquetTaskSource:
    def __init__(self, config: ParquetSourceConfig):
        if config.limit is not None and config.limit < 0:
            raise ValueError(f"limit must be >= 0, got {config.limit}")
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        tasks = read_parquet(self.config.path, bad, env=self.config.env, judge=self.config.judge)
        return itertools.islice(tasks, self.config.limit)


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("reading or writing parquet needs pyarrow, which is not installed",
                        hint="pip install 'beyondagent[parquet]'") from None
    return pq


def read_parquet(path: str | Path, bad: BadRecords | None = None, *,
                 env: str | None = None, judge: str | None = None) -> Iterator[Task]:
    """Yield a Task per row; a row that does not fit the schema goes to `bad`."""
    pq = _pyarrow_parquet()
    path = Path(path)
    bad = bad if bad is not None else BadRecords()
    if not path.is_file():
        raise DataError(f"file not found: {path}", hint="check the path in the spec")
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a corrupt file
        raise DataError(f"cannot read parquet file: {type(exc).__name__}: {exc}", where=str(path),
                        hint="check that the file is parquet (verl's row schema)") from None
    for number, row in enumerate(rows):
        try:
            task = row_to_task(row, number)
        except (ValueError, TypeError, KeyError) as exc:
            bad.report(f"{path} row {number}", str(exc),
                       hint="each row needs data_source, prompt (a list of chat messages) and "
                            "reward_model.ground_truth; or pass --on-bad-record=skip")
            continue
        if env is not None or judge is not None:
            task = attrs.evolve(task, env=env if env is not None else task.env,
                                judge=judge if judge is not None else task.judge)
        yield task


def row_to_task(row: dict[str, Any], number: int) -> Task:
    """One verl row -> Task; raises ValueError naming the column that is wrong."""
    extra = row.get("extra_info") or {}
    if not isinstance(extra, dict):
        raise ValueError(f"extra_info must be a mapping, got {type(extra).__name__}")
    if extra.get(TASK_COLUMN):
        return Task.from_dict(json.loads(extra[TASK_COLUMN]))
    for column in ("data_source", "prompt"):
        if row.get(column) is None:
            raise ValueError(f"missing column {column!r}")
    prompt = row["prompt"]
    if not isinstance(prompt, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt
    ):
        raise ValueError("prompt must be a list of chat messages {role, content}")
    user_turns = [m["content"] for m in prompt if m["role"] == "user"]
    reward_model = row.get("reward_model") or {}
    if not isinstance(reward_model, dict):
        raise ValueError(f"reward_model must be a mapping, got {type(reward_model).__name__}")
    index = extra.get("index", number)
    return Task(
        task_id=str(extra.get("task_id") or f"{row['data_source']}-{index}"),
        query=user_turns[-1] if user_turns else None,
        ground_truth=reward_model.get("ground_truth"),
        metadata={
            "data_source": row["data_source"],
            "ability": row.get("ability"),
            "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
            "reward_style": reward_model.get("style"),
            "extra_info": extra,
        },
    )


def task_to_row(task: Task, index: int, split: str) -> dict[str, Any]:
    """Task -> one verl row (plus the Task itself in `extra_info`, for exact round trips)."""
    prompt = task.metadata.get("prompt") or [{"role": "user", "content": task.query or ""}]
    ground_truth = task.ground_truth
    return {
        "data_source": task.metadata.get("data_source") or task.env or "beyondagent",
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "ability": task.metadata.get("ability") or "agent",
        "reward_model": {
            "style": task.metadata.get("reward_style") or "rule",
            "ground_truth": ground_truth if isinstance(ground_truth, str) or ground_truth is None
            else json.dumps(ground_truth, ensure_ascii=False),
        },
        "extra_info": {
            # Keep what a verl dataset had here (reward functions read it), then ours.
            **(task.metadata.get("extra_info") or {}),
            "index": index,
            "split": split,
            "task_id": task.task_id,
            TASK_COLUMN: json.dumps(task.to_dict(), ensure_ascii=False, default=str),
        },
    }


def write_parquet(path: str | Path, tasks: Iterable[Task], *, split: str = "train") -> int:
    """Write tasks as verl rows; returns the number written. The file is replaced atomically."""
    pq = _pyarrow_parquet()
    import pyarrow as pa

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [task_to_row(task, index, split) for index, task in enumerate(tasks)]
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
    return len(rows)
