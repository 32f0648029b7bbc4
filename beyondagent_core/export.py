"""`export` backend: write the mixed dataset to the run directory instead of training.

For preparing data for another trainer (verl reads the parquet files as they are) and for
looking at what a mixture produces. Each epoch's mix is written, since mixers re-mix per epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.checks import EPOCHS_WHY, MAX_EPOCHS, number
from beyondagent_core.jsonl import write_tasks
from beyondagent_core.sources.parquet import write_parquet
from beyondagent_core.types import count_by_origin

if TYPE_CHECKING:
    from beyondagent_core.context import RunContext, TrainingData

FORMATS = ("jsonl", "parquet")


@attrs.define
class ExportConfig:
    """`format`: jsonl (Task records) or parquet (verl rows); `epochs`: how many mixes to write."""

    format: str = "jsonl"
    epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_EPOCHS, why=EPOCHS_WHY))
    dir: str = "data"


class ExportBackend:
    # Writes tasks; never scores an episode, so the judges tasks name need not be installed here.
    judges_tasks = False

    def __init__(self, config: ExportConfig):
        if config.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {config.format!r}")
        if config.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {config.epochs}")
        self.config = config

    def _write(self, path: Any, tasks: list, split: str) -> int:
        if self.config.format == "parquet":
            return write_parquet(path, tasks, split=split)
        return write_tasks(path, tasks)

    def train(self, data: TrainingData, run: RunContext) -> dict[str, Any]:
        out = run.run_dir / self.config.dir
        ext = self.config.format
        metrics: dict[str, Any] = {}
        for epoch in range(self.config.epochs):
            tasks = data.epoch_tasks(epoch)
            self._write(out / f"train.epoch{epoch}.{ext}", tasks, "train")
            counts = count_by_origin(tasks)
            metrics = {"tasks": len(tasks), "original": counts["original"], "synthetic": counts["synthetic"]}
            run.step_finished(epoch, metrics)
        if data.val:
            self._write(out / f"val.{ext}", data.val, "val")
        metrics["val_tasks"] = len(data.val)
        return metrics
