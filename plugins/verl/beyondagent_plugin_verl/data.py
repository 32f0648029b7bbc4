"""The run's tasks as verl parquet rows: every epoch's mix, back to back, in one file.

verl reads `data.train_files` once per epoch and would show every epoch the same rows; our mixer
re-mixes each epoch (new synthetic tasks, a new order). So the launcher writes epoch 0's mix,
then epoch 1's, ... into `data/train.parquet` (rows in the core's verl schema, the whole Task in
`extra_info.beyondagent_task`, plus `extra_info.epoch`) and runs verl for one "epoch" over that
file with `data.shuffle: false`: verl's step k sees exactly the mixer's rows, in order, and its
checkpointed dataloader position makes `--resume` continue at the same row.

With `backend.total_steps`, as many epochs are written as the steps need (a mix may be shorter
than the last batch: verl drops an incomplete last batch).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.context import TrainingData
from beyondagent_core.sources.parquet import task_to_row, write_parquet
from beyondagent_core.types import count_by_origin


@attrs.frozen
class WrittenData:
    train: Path
    val: Path | None
    rows: int
    epochs: int
    steps: int  # the optimizer steps verl will take (full batches)
    per_epoch: tuple[dict[str, int], ...]


def epochs_needed(data: TrainingData, *, epochs: int, total_steps: int | None, batch_size: int) -> int:
    """How many mixes to write: `epochs`, or enough for `total_steps` batches."""
    if total_steps is None:
        return epochs
    first = len(data.epoch_tasks(0))
    if first == 0:
        return 1
    return max(1, math.ceil(total_steps * batch_size / first))


def write_run_data(data: TrainingData, out_dir: Path, *, epochs: int, total_steps: int | None,
                   batch_size: int) -> WrittenData:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    per_epoch = []
    count = epochs_needed(data, epochs=epochs, total_steps=total_steps, batch_size=batch_size)
    for epoch in range(count):
        tasks = data.epoch_tasks(epoch)
        for task in tasks:
            row = task_to_row(task, len(rows), "train")
            row["extra_info"]["epoch"] = epoch
            rows.append(row)
        per_epoch.append({"epoch": epoch, "tasks": len(tasks), **count_by_origin(tasks)})
    if not rows:
        raise ValueError("no training tasks: the mixer returned an empty list")
    train = out_dir / "train.parquet"
    tmp = train.with_name(f".{train.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(train)
    val = None
    if data.val:
        val = out_dir / "val.parquet"
        write_parquet(val, data.val, split="val")
    steps = len(rows) // batch_size
    if total_steps is not None:
        steps = min(steps, total_steps)
    return WrittenData(train=train, val=val, rows=len(rows), epochs=count, steps=steps, per_epoch=tuple(per_epoch))
