"""The parquet verl reads (every epoch's mix, in order) and verl's metrics -> our metrics.jsonl names."""

from __future__ import annotations

from pathlib import Path

import pytest
from beyondagent_plugin_verl import metrics as metric_map
from beyondagent_plugin_verl.data import write_run_data

from beyondagent_core.context import TrainingData
from beyondagent_core.sources.parquet import read_parquet
from beyondagent_core.types import Task


class ReversingMixer:
    """Original tasks, then synthetic ones, rotated by the epoch: a different list each epoch."""

    def mix(self, original: list[Task], synthetic: list[Task], *, epoch: int, seed: int) -> list[Task]:
        tasks = [*original, *synthetic]
        shift = epoch % len(tasks) if tasks else 0
        return tasks[shift:] + tasks[:shift]


def training_data() -> TrainingData:
    original = [Task(task_id=f"o{i}", env="frozenlake", query=f"q{i}", metadata={"map": ["SF", "FG"]})
                for i in range(3)]
    synthetic = [Task(task_id="s0", env="frozenlake", query="go right", origin="synthetic", seed_task_id="o0",
                      confidence=0.9)]
    val = [Task(task_id="v0", env="frozenlake", query="v")]
    return TrainingData(original, synthetic, val, ReversingMixer(), seed=0)


def test_every_epochs_mix_is_written_in_order(tmp_path: Path) -> None:
    data = training_data()
    written = write_run_data(data, tmp_path, epochs=3, total_steps=None, batch_size=2)
    tasks = list(read_parquet(written.train))
    assert written.rows == 12 and written.epochs == 3 and written.steps == 6
    expected = [t.task_id for epoch in range(3) for t in data.epoch_tasks(epoch)]
    assert [t.task_id for t in tasks] == expected
    # the whole Task survives (synthetic fields, metadata), as verl's workers will read it
    synthetic = next(t for t in tasks if t.task_id == "s0")
    assert synthetic.origin == "synthetic" and synthetic.seed_task_id == "o0" and synthetic.confidence == 0.9
    assert next(t for t in tasks if t.task_id == "o1").metadata["map"] == ["SF", "FG"]
    import pyarrow.parquet as pq

    rows = pq.read_table(written.train).to_pylist()
    assert [r["extra_info"]["epoch"] for r in rows] == [0] * 4 + [1] * 4 + [2] * 4
    assert {"data_source", "prompt", "ability", "reward_model", "extra_info"} <= set(rows[0])
    assert [t.task_id for t in read_parquet(written.val)] == ["v0"]
    assert [e["synthetic"] for e in written.per_epoch] == [1, 1, 1]


def test_total_steps_writes_as_many_mixes_as_the_steps_need(tmp_path: Path) -> None:
    written = write_run_data(training_data(), tmp_path, epochs=1, total_steps=5, batch_size=3)
    assert written.epochs == 4 and written.rows == 16 and written.steps == 5


def test_an_empty_mix_is_an_error(tmp_path: Path) -> None:
    data = TrainingData([], [], [], ReversingMixer(), seed=0)
    with pytest.raises(ValueError, match="no training tasks"):
        write_run_data(data, tmp_path, epochs=1, total_steps=None, batch_size=2)


def test_verl_step_metrics_map_to_our_names() -> None:
    verl_line = {"critic/score/mean": 0.25, "response_length/mean": 12.0, "num_turns/mean": 3.0,
                 "actor/kl_loss": 0.01, "actor/pg_clipfrac": 0.1, "actor/entropy": 2.5, "actor/grad_norm": 1.5,
                 "actor/pg_loss": -0.2, "actor/lr": 1e-6, "perf/throughput": 900.0, "timing_s/step": 4.0,
                 "training/epoch": 0, "val-core/frozenlake/acc/mean@1": 0.25, "val-aux/frozenlake/reward/mean@1": 0.5,
                 "val-aux/frozenlake/reward/std@1": 0.1, "critic/score/max": float("nan"),
                 "some/text": "x", "perf/max_memory_allocated_gb": 11.5, "perf/max_memory_reserved_gb": 14.0}
    ours = metric_map.map_step(verl_line)
    assert ours["train/reward_mean"] == 0.25 and ours["train/response_length"] == 12.0
    assert ours["train/turns"] == 3.0 and ours["actor/kl"] == 0.01 and ours["actor/clip_fraction"] == 0.1
    assert ours["actor/entropy"] == 2.5 and ours["actor/grad_norm"] == 1.5 and ours["actor/pg_loss"] == -0.2
    assert ours["actor/lr"] == 1e-6 and ours["perf/tokens_per_s"] == 900.0 and ours["perf/step_time_s"] == 4.0
    assert ours["val/reward_mean"] == 0.5 and ours["val/pass@1"] == 0.25 and ours["epoch"] == 0.0
    assert ours["verl/critic/score/mean"] == 0.25 and "verl/critic/score/max" not in ours and "verl/some/text" not in ours
    assert ours["perf/max_memory_allocated_gb"] == 11.5 and ours["perf/max_memory_reserved_gb"] == 14.0


def test_our_trainers_metrics_and_guided_success_keep_the_torch_backends_names() -> None:
    ours = metric_map.map_step({"advantage/anchor_groups": 3, "experience/hit_rate": 0.5})
    assert ours["advantage/anchor_groups"] == 3 and ours["experience/hit_rate"] == 0.5
    episodes = [{"success": True, "guided": True}, {"success": False, "guided": True},
                {"success": False, "guided": False}, {"success": False, "guided": False}]
    rates = metric_map.episode_metrics(episodes)
    assert rates["train/success_rate_guided"] == 0.5 and rates["train/success_rate_unguided"] == 0.0
    assert "train/success_rate_guided" not in metric_map.episode_metrics([{"success": True}])  # no experience


def test_our_names_are_the_torch_backends_names() -> None:
    from beyondagent_core import metric_names as names

    assert set(metric_map.MAPPING) <= set(names.ALL)
    assert {metric_map.VAL_REWARD_MEAN, metric_map.VAL_PASS_AT_1} == {names.VAL_REWARD_MEAN, names.VAL_PASS_AT_1}


def test_a_verl_run_gets_the_same_report(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from beyondagent_plugin_verl.backend import write_run_report

    from beyondagent_core.jsonl import append_jsonl

    for step in (1, 2, 3):  # what the backend writes from verl's step metrics
        verl_line = {"critic/score/mean": 0.1 * step, "response_length/mean": 10.0 + step, "actor/entropy": 2.0,
                     "actor/pg_clipfrac": 0.05, "actor/grad_norm": 1.0, "training/epoch": 0}
        append_jsonl(tmp_path / "metrics.jsonl", [{"step": step, "time": float(step), **metric_map.map_step(verl_line)}])
    from types import SimpleNamespace

    from beyondagent_core.plugins import PluginManager, Switches

    run = SimpleNamespace(run_dir=tmp_path, manager=PluginManager(Switches(allow={"report"})).load())
    page = write_run_report(run).read_text()  # drawn by beyondagent-plugin-report, through the core's hook
    assert "Reward" in page and page.count("data:image/png;base64,") >= 2
