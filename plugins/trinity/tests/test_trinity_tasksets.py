"""The tasksets trinity reads: every epoch's mix back to back (`backend.epochs`), or as many mixes as
`backend.total_steps` needs, and the val tasks in the `test` split; each row the whole Task."""

from __future__ import annotations

import json
from pathlib import Path

from beyondagent_plugin_trinity.data import TRAIN_FILE, VAL_FILE, write_tasksets

from beyondagent_core.context import TrainingData
from beyondagent_core.types import Task


class RotatingMixer:
    """Original then synthetic tasks, rotated by the epoch: a different order each epoch."""

    def mix(self, original: list[Task], synthetic: list[Task], *, epoch: int, seed: int) -> list[Task]:
        tasks = [*original, *synthetic]
        return tasks[epoch % len(tasks):] + tasks[:epoch % len(tasks)]


def training_data() -> TrainingData:
    original = [Task(task_id=f"o{i}", env="frozenlake", query=f"q{i}") for i in range(3)]
    synthetic = [Task(task_id="s0", env="frozenlake", query="go right", origin="synthetic", seed_task_id="o0")]
    return TrainingData(original, synthetic, [Task(task_id="v0", env="frozenlake", query="v")], RotatingMixer(), seed=0)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_epochs_write_each_epochs_mix_in_order(tmp_path: Path) -> None:
    data = training_data()
    written = write_tasksets(data, tmp_path, epochs=3, total_steps=None, batch_size=2)
    train = rows(written.train_dir / TRAIN_FILE)
    assert (written.rows, written.epochs, written.steps) == (12, 3, 6)
    assert [row["task_id"] for row in train] == [t.task_id for epoch in range(3) for t in data.epoch_tasks(epoch)]
    assert [row["epoch"] for row in train] == [0] * 4 + [1] * 4 + [2] * 4
    assert [row["index"] for row in train] == list(range(12))
    assert Task.from_dict(json.loads(train[0]["task"])).task_id == train[0]["task_id"]
    assert [row["task_id"] for row in rows(written.val_dir / VAL_FILE)] == ["v0"]


def test_total_steps_writes_as_many_mixes_as_the_steps_need(tmp_path: Path) -> None:
    written = write_tasksets(training_data(), tmp_path, epochs=1, total_steps=5, batch_size=3)
    assert (written.epochs, written.rows, written.steps) == (4, 16, 5)  # ceil(5 x 3 / 4) mixes of 4 tasks
