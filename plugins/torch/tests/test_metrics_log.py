"""MetricsLog: metrics.jsonl lines, TensorBoard scalars, NaN handling, killed runs, samples.jsonl."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.metrics_log import MetricsLog, read_metrics, read_samples

from beyondagent_core import metric_names as m
from beyondagent_core.errors import BeyondAgentError
from beyondagent_core.types import Reward, Task, Trajectory, Turn


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the run's TensorBoard event files, read back by TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def test_write_appends_one_line_per_step(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as metrics:
        metrics.write(0, {m.TRAIN_REWARD_MEAN: 0.25, m.EPOCH: 0})
        metrics.write(1, {m.TRAIN_REWARD_MEAN: 0.5, m.EPOCH: 0, m.VAL_PASS_AT_1: 0.4})

    first, second = lines_of(tmp_path / "metrics.jsonl")
    assert first[m.STEP] == 0 and first[m.TRAIN_REWARD_MEAN] == 0.25 and first[m.EPOCH] == 0
    assert second[m.STEP] == 1 and second[m.VAL_PASS_AT_1] == 0.4
    assert list(first)[:2] == ["step", "time"]
    assert first["time"] <= second["time"] and abs(first["time"] - time.time()) < 60
    assert not (tmp_path / "tensorboard").exists()
    assert read_metrics(tmp_path) == [first, second]


def test_nan_and_inf_become_null_and_tensors_plain_numbers(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as metrics:
        metrics.write(3, {m.ACTOR_KL: float("nan"), m.ACTOR_GRAD_NORM: float("inf"),
                          m.ACTOR_ENTROPY: torch.tensor(1.5), m.ACTOR_LR: torch.tensor(2e-5, dtype=torch.float64),
                          "note": "warmup", "train/count": torch.tensor(7)})

    text = (tmp_path / "metrics.jsonl").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    (record,) = lines_of(tmp_path / "metrics.jsonl")  # strict JSON parses it
    assert record[m.ACTOR_KL] is None and record[m.ACTOR_GRAD_NORM] is None
    assert record[m.ACTOR_ENTROPY] == 1.5 and record[m.ACTOR_LR] == 2e-5
    assert record["note"] == "warmup" and record["train/count"] == 7


def test_reserved_names_are_refused(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as metrics, pytest.raises(ValueError, match="reserved"):
        metrics.write(0, {"step": 1})


def test_tensorboard_gets_the_finite_scalars(tmp_path: Path) -> None:
    import tensorboard  # noqa: F401 - the plugin's `test` extra installs it: missing is a failure, not a skip
    with MetricsLog(tmp_path, tensorboard=True) as metrics:
        assert metrics.tensorboard
        metrics.write(0, {m.TRAIN_REWARD_MEAN: 0.25, m.ACTOR_KL: float("nan"), "note": "warmup"})
        metrics.write(1, {m.TRAIN_REWARD_MEAN: 0.5, m.ACTOR_KL: 0.01, m.ACTOR_ENTROPY: torch.tensor(1.25)})
        metrics.write(2, {m.TRAIN_REWARD_MEAN: 0.75, m.ACTOR_KL: float("-inf"), m.VAL_PASS_AT_1: 0.5})

    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    found = scalars(tmp_path)
    assert set(found) == {m.TRAIN_REWARD_MEAN, m.ACTOR_KL, m.ACTOR_ENTROPY, m.VAL_PASS_AT_1}
    assert found[m.VAL_PASS_AT_1] == [(2, 0.5)]
    assert found[m.TRAIN_REWARD_MEAN] == [(0, 0.25), (1, 0.5), (2, 0.75)]
    assert found[m.ACTOR_KL] == [(1, pytest.approx(0.01))]  # the NaN and -inf steps are left out
    assert found[m.ACTOR_ENTROPY] == [(1, 1.25)]


def test_tensorboard_is_on_by_default_when_installed(tmp_path: Path) -> None:
    import tensorboard  # noqa: F401 - as above
    with MetricsLog(tmp_path) as metrics:
        metrics.write(0, {m.TRAIN_REWARD_MEAN: 1.0})
    assert scalars(tmp_path) == {m.TRAIN_REWARD_MEAN: [(0, 1.0)]}


def test_tensorboard_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # makes the package unimportable
    with MetricsLog(tmp_path / "default") as metrics:
        assert not metrics.tensorboard
        metrics.write(0, {m.TRAIN_REWARD_MEAN: 1.0})
    assert not (tmp_path / "default" / "tensorboard").exists()

    with pytest.raises(BeyondAgentError, match="tensorboard") as caught:
        MetricsLog(tmp_path / "required", tensorboard=True)
    assert "pip install" in str(caught.value)


def test_truncated_last_line_is_dropped(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as metrics:
        for step in range(3):
            metrics.write(step, {m.TRAIN_REWARD_MEAN: step / 2})
    with (tmp_path / "metrics.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"step": 3, "time": 17000, "train/rew')  # the process was killed mid-line

    records = read_metrics(tmp_path)
    assert [record[m.STEP] for record in records] == [0, 1, 2]
    assert [record[m.TRAIN_REWARD_MEAN] for record in records] == [0.0, 0.5, 1.0]


def test_read_metrics_without_a_file(tmp_path: Path) -> None:
    assert read_metrics(tmp_path) == []
    assert read_metrics(tmp_path / "no-such-run") == []
    (tmp_path / "metrics.jsonl").write_text("", encoding="utf-8")
    assert read_metrics(tmp_path) == []


def test_read_metrics_skips_a_bad_middle_line(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "x": 1}\nnot json\n[1, 2]\n{"x": 2}\n{"step": 1, "x": 3}\n',
                                            encoding="utf-8")
    assert read_metrics(tmp_path) == [{"step": 0, "x": 1}, {"step": 1, "x": 3}]


def make_trajectory(task_id: str, content: str, score: float, *, error: str | None = None) -> Trajectory:
    return Trajectory(
        task=Task(task_id=task_id, env="frozenlake"),
        turns=[Turn("user", "Reach the goal."), Turn("assistant", content, token_ids=[1, 2], logprobs=[-0.1, -0.2])],
        reward=Reward(score=score, success=score > 0.5, reason="reached the goal" if score > 0.5 else "fell in"),
        terminated=True,
        metrics={"turns": 2},
        error=error,
    )


def test_write_samples(tmp_path: Path) -> None:
    first = [make_trajectory("t1", "right", 1.0), make_trajectory("t2", "down", 0.0, error="timeout")]
    later = [make_trajectory("t3", "left", 1.0)]
    with MetricsLog(tmp_path, tensorboard=False) as metrics:
        metrics.write_samples(0, "train", first)
        metrics.write_samples(5, "val", later)
        metrics.write_samples(6, "train", [])

    lines = lines_of(tmp_path / "samples.jsonl")
    assert [(line["step"], line["split"]) for line in lines] == [(0, "train"), (0, "train"), (5, "val")]
    assert [Trajectory.from_dict(line["trajectory"]) for line in lines] == [*first, *later]
    assert read_samples(tmp_path) == lines


def test_samples_with_nan_stay_strict_json(tmp_path: Path) -> None:
    trajectory = make_trajectory("t1", "right", 1.0)
    trajectory.metrics["ratio"] = math.nan
    with MetricsLog(tmp_path, tensorboard=False) as metrics:
        metrics.write_samples(0, "train", [trajectory])
    (line,) = [json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
               for text in (tmp_path / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    assert line["trajectory"]["metrics"]["ratio"] is None


def test_close_is_idempotent(tmp_path: Path) -> None:
    metrics = MetricsLog(tmp_path, tensorboard=False)
    metrics.close()
    metrics.close()
