"""The mixed tasks as Trinity-RFT tasksets: JSON lines our Workflow reads back (`task` column).

Trinity-RFT reads a file taskset with Hugging Face `datasets` and hands each row to the workflow
as `raw_task`. One row per task: the serialized `Task` (`task`), its id, its epoch and its place.
The train file holds every epoch's mix back to back, in the mixer's order (trinity reads it
sequentially: `total_epochs: 1`); the val tasks go to `val/test.jsonl` (the `test` split).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import attrs

from beyondagent_core.context import TrainingData

TRAIN_FILE = "train.jsonl"
VAL_FILE = "test.jsonl"


@attrs.frozen
class WrittenTasksets:
    train_dir: Path
    val_dir: Path | None
    rows: int
    epochs: int
    steps: int  # the steps trinity will take (full batches)


def write_tasksets(data: TrainingData, out_dir: Path, *, epochs: int, total_steps: int | None,
                   batch_size: int) -> WrittenTasksets:
    train_dir, val_dir = out_dir / "train", out_dir / "val"
    first = len(data.epoch_tasks(0))
    count = epochs if total_steps is None or not first else max(1, math.ceil(total_steps * batch_size / first))
    rows = []
    for epoch in range(count):
        for task in data.epoch_tasks(epoch):
            rows.append(task_row(task, len(rows), epoch, "train"))
    if not rows:
        raise ValueError("no training tasks: the mixer returned an empty list")
    _write(train_dir / TRAIN_FILE, rows)
    if data.val:
        _write(val_dir / VAL_FILE, [task_row(task, i, 0, "val") for i, task in enumerate(data.val)])
    steps = len(rows) // batch_size
    if total_steps is not None:
        steps = min(steps, total_steps)
    return WrittenTasksets(train_dir=train_dir, val_dir=val_dir if data.val else None, rows=len(rows), epochs=count,
                           steps=steps)


def task_row(task, index: int, epoch: int, split: str) -> dict:
    """One taskset row: the serialized Task (our Workflow reads `task`) and where it sits."""
    return {"task": json.dumps(task.to_dict(), ensure_ascii=False, default=str), "task_id": task.task_id,
            "index": index, "epoch": epoch, "split": split}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    tmp.replace(path)
