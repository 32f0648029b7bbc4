"""verl's metric names, the run's parquet and verl checkpoints at their edges (metrics.py, data.py,
checkpoint.py; main venv, no verl).

- metrics: the reward mean's fallback name and which wins; validation means read only from
  `val-core|val-aux/<source>/<var>/mean@N` (the nearest other forms ignored); a bool is no number;
  the success rates by origin and by guidance, the gateway's per-episode means and the validation
  experience metrics, each against counts worked out by hand;
- data: mixes written for `total_steps` exactly at a multiple of a mix (no extra mix), steps capped
  by `total_steps`, no mix at all still one, no validation file without validation tasks;
- checkpoints: every path that names a checkpoint, verl's tracker before the highest step, a missing
  HF config named; the merge (verl's model merger stood in for by `MergerStandIn`, which needs verl's
  venv) done once, again when a shard changes, and on a failure or a timeout nothing half-written left.

`training_data()` and `actor_with()` are the neighbouring tests' (test_data_and_metrics.py,
test_audit8_checkpoint_shards.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from beyondagent_plugin_verl import checkpoint
from beyondagent_plugin_verl.data import epochs_needed, write_run_data
from beyondagent_plugin_verl.metrics import episode_metrics, map_step, val_experience_metrics
from test_audit8_checkpoint_shards import actor_with
from test_data_and_metrics import ReversingMixer, training_data

from beyondagent_core.context import TrainingData
from beyondagent_core.errors import DataError, RunError
from beyondagent_core.metric_names import (
    GATEWAY_CALLS_PER_EPISODE,
    GATEWAY_SAMPLES_PER_EPISODE,
    GATEWAY_SPLIT_EPISODES,
    TRAIN_SUCCESS_RATE_GUIDED,
    TRAIN_SUCCESS_RATE_PREFIXED,
    TRAIN_SUCCESS_RATE_UNGUIDED,
)

# -- metrics -------------------------------------------------------------------------------------


def test_the_reward_mean_falls_back_to_verls_rewards_mean_and_the_score_wins() -> None:
    assert map_step({"critic/rewards/mean": 0.4})["train/reward_mean"] == 0.4
    assert map_step({"critic/rewards/mean": 0.4, "critic/score/mean": 0.25})["train/reward_mean"] == 0.25


@pytest.mark.parametrize("name", [
    "val-core/acc/mean@1",  # no data source
    "val/frozenlake/acc/mean@1",  # not verl's validation sections
    "test-core/frozenlake/acc/mean@1",
    "val-core/frozenlake/acc/maj@4/mean",  # a majority vote, not the mean
    "val-core/frozenlake/accuracy/mean@1",  # another variable
])
def test_names_next_to_a_validation_mean_are_not_read_as_one(name: str) -> None:
    out = map_step({name: 0.9, "val-core/frozenlake/acc/mean@4": 0.5})
    assert out["val/pass@1"] == 0.5 and out[f"verl/{name}"] == 0.9


def test_a_bool_or_a_non_finite_value_is_no_metric_and_an_int_is_a_float() -> None:
    out = map_step({"training/epoch": True, "actor/lr": float("inf"), "num_turns/mean": 3})
    assert "epoch" not in out and "verl/training/epoch" not in out and "actor/lr" not in out
    assert out["train/turns"] == 3.0 and isinstance(out["train/turns"], float)


def test_success_rates_by_origin_and_guidance_and_the_gateways_means() -> None:
    episodes = [
        # guided from a stored prefix too: guided
        {"success": True, "origin": "synthetic", "guided": True, "prefixed": True, "gateway_calls": 3,
         "gateway_samples": 1},
        {"success": False, "origin": "synthetic", "prefixed": True, "gateway_calls": 4, "gateway_samples": 2,
         "gateway_splits": 2},
        {"success": True, "origin": "original", "prefixed": True, "gateway_calls": 2, "gateway_samples": 1},
        {"success": False, "origin": "original"},
        {"success": True, "origin": "original", "guided": False},
    ]
    out = episode_metrics(episodes)
    assert out["train/success_rate"] == 3 / 5 and out["train/synthetic_fraction"] == 2 / 5
    assert out["train/success_rate_synthetic"] == 1 / 2 and out["train/success_rate_original"] == 2 / 3
    # guided: 1 of 1; prefixed (not guided): 1 of 2; unguided: 1 of 2
    assert (out[TRAIN_SUCCESS_RATE_GUIDED], out[TRAIN_SUCCESS_RATE_PREFIXED], out[TRAIN_SUCCESS_RATE_UNGUIDED]) == (
        1.0, 0.5, 0.5)
    # the three `agent` episodes only: one split (twice), 4 samples, 9 calls
    assert (out[GATEWAY_SPLIT_EPISODES], out[GATEWAY_SAMPLES_PER_EPISODE], out[GATEWAY_CALLS_PER_EPISODE]) == (
        1 / 3, 4 / 3, 3.0)
    assert episode_metrics([]) == {}
    only_synthetic = episode_metrics([{"success": True, "origin": "synthetic"}])
    assert only_synthetic["train/synthetic_fraction"] == 1.0 and "train/success_rate_original" not in only_synthetic
    assert GATEWAY_CALLS_PER_EPISODE not in episode_metrics([{"success": True}])


def test_validation_experience_metrics_count_only_the_episodes_shown_experiences() -> None:
    val = [{"guided": True, "leaks_blocked": 2}, {"guided": False, "leaks_blocked": 0}, {"guided": True},
           {"guided": True, "leaks_blocked": None}]
    assert val_experience_metrics(val) == {"experience/val_guided_fraction": 2 / 3, "experience/val_leaks_blocked": 2.0}
    assert val_experience_metrics([{"guided": True}]) == {}


# -- data ----------------------------------------------------------------------------------------


def test_total_steps_exactly_filling_whole_mixes_writes_no_extra_mix(tmp_path: Path) -> None:
    written = write_run_data(training_data(), tmp_path, epochs=1, total_steps=4, batch_size=3)  # 12 rows = 3 mixes
    assert (written.epochs, written.rows, written.steps) == (3, 12, 4)


def test_the_steps_are_capped_by_total_steps_and_the_epochs_count_without_it(tmp_path: Path) -> None:
    written = write_run_data(training_data(), tmp_path, epochs=1, total_steps=1, batch_size=2)
    assert (written.epochs, written.rows, written.steps) == (1, 4, 1)
    assert epochs_needed(training_data(), epochs=5, total_steps=None, batch_size=64) == 5


def test_an_empty_first_mix_needs_one_epoch_and_no_validation_tasks_no_val_file(tmp_path: Path) -> None:
    assert epochs_needed(TrainingData([], [], [], ReversingMixer(), seed=0), epochs=3, total_steps=5, batch_size=2) == 1
    data = training_data()
    no_val = TrainingData(data.original, data.synthetic, [], ReversingMixer(), seed=0)
    written = write_run_data(no_val, tmp_path, epochs=1, total_steps=None, batch_size=2)
    assert written.val is None and not (tmp_path / "val.parquet").exists()


# -- checkpoints ---------------------------------------------------------------------------------


def test_every_path_that_names_a_checkpoint_finds_its_actor(tmp_path: Path) -> None:
    actor = actor_with(tmp_path, 1, [0])
    step = actor.parent
    for path in (tmp_path, tmp_path / "checkpoints", step, actor, actor / "huggingface"):
        assert checkpoint.find_actor_dir(path) == actor, path
    assert checkpoint.find_actor_dir(tmp_path / "nothing") is None
    (tmp_path / "empty").mkdir()
    assert checkpoint.find_actor_dir(tmp_path / "empty") is None


def test_verls_tracker_names_the_step_before_the_highest_and_a_broken_tracker_falls_back(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for number in (2, 3):
        actor = root / f"global_step_{number}" / "actor"
        actor.mkdir(parents=True)
        (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x")
    (root / "global_step_9" / "actor").mkdir(parents=True)  # no shards: not a checkpoint
    (root / "global_step_x").mkdir()
    assert checkpoint.find_actor_dir(tmp_path) == root / "global_step_3" / "actor"  # no tracker: the highest
    (root / checkpoint.TRACKER).write_text("2\n")
    assert checkpoint.find_actor_dir(tmp_path) == root / "global_step_2" / "actor"
    (root / checkpoint.TRACKER).write_text("9\n")  # names a step without an actor
    assert checkpoint.find_actor_dir(tmp_path) == root / "global_step_3" / "actor"


def test_a_checkpoint_without_the_hf_config_or_shards_is_a_data_error_naming_it(tmp_path: Path) -> None:
    actor = actor_with(tmp_path, 2, [0, 1])
    (actor / "huggingface" / "config.json").unlink()
    with pytest.raises(DataError, match="huggingface has no config.json"):
        checkpoint.check_actor(actor)
    for shard in actor.glob("model_world_size_*"):
        shard.unlink()
    with pytest.raises(DataError, match="holds no model shards"):
        checkpoint.check_actor(actor)


class MergerStandIn:
    """Stands in for verl's venv running `python -m verl.model_merger` (verl's venv is not in the main
    one): records each call and writes what the merger writes into its target, or fails / times out."""

    python = "/verl-venv/bin/python"

    def __init__(self, *, code: int = 0, timeout: bool = False, config: bool | None = None):
        self.code, self.timeout, self.calls = code, timeout, []
        self.config = code == 0 if config is None else config  # whether it gets as far as the config

    def run(self, args: list[str], *, timeout: float) -> Any:
        self.calls.append(args)
        target = Path(args[args.index("--target_dir") + 1])
        target.mkdir(parents=True)
        (target / "weights.part").write_text("x")
        if self.timeout:
            raise subprocess.TimeoutExpired(args, timeout)
        if self.config:
            (target / "config.json").write_text("{}")
        return SimpleNamespace(returncode=self.code, stdout="loading shards\n",
                               stderr="" if self.code == 0 else "RuntimeError: torn shard\n")


def test_a_checkpoint_is_merged_once_and_again_when_a_shard_changes(tmp_path: Path) -> None:
    actor = actor_with(tmp_path, 2, [0, 1])
    merger, said = MergerStandIn(), []
    target = checkpoint.merged_model(tmp_path, venv=merger, say=said.append)
    assert target == actor.parent / checkpoint.MERGED_DIR and (target / "config.json").is_file()
    assert merger.calls[0][:5] == ["-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    assert merger.calls[0][merger.calls[0].index("--local_dir") + 1] == str(actor)
    record = json.loads((target / checkpoint.RECORD_FILE).read_text())
    assert record["shards"] == checkpoint.fingerprint(actor) and len(record["shards"]) == 3  # 2 shards + fsdp config
    assert checkpoint.merged_model(actor, venv=merger, say=said.append) == target and len(merger.calls) == 1
    assert "using its merged model" in said[-1]
    (actor / "model_world_size_2_rank_1.pt").write_bytes(b"written again")
    assert checkpoint.cached(actor) is None
    checkpoint.merged_model(actor, venv=merger, say=said.append)
    assert len(merger.calls) == 2 and not (actor.parent / ".merged_hf.partial").exists()
    (target / checkpoint.RECORD_FILE).write_text("{torn")
    assert checkpoint.cached(actor) is None


@pytest.mark.parametrize("merger", [MergerStandIn(code=3), MergerStandIn(code=3, config=True),
                                    MergerStandIn(timeout=True)], ids=["fails", "fails_after_the_config", "times_out"])
def test_a_failed_merge_leaves_nothing_half_written_and_says_why(tmp_path: Path, merger: MergerStandIn) -> None:
    actor = actor_with(tmp_path, 1, [0])
    stale = actor.parent / ".merged_hf.partial"
    stale.mkdir()  # an earlier merge killed midway
    with pytest.raises(RunError) as caught:
        checkpoint.merged_model(tmp_path, venv=merger, say=lambda _: None)
    assert not stale.exists() and not (actor.parent / checkpoint.MERGED_DIR).exists()
    if merger.timeout:
        assert f"took over {checkpoint.MERGE_TIMEOUT_S} s" in caught.value.message
    else:
        assert "(exit 3)" in caught.value.message and "RuntimeError: torn shard" in caught.value.message
        assert f"--target_dir {actor.parent / checkpoint.MERGED_DIR}" in caught.value.hint


def test_a_path_that_is_no_checkpoint_is_a_data_error_before_any_merge(tmp_path: Path) -> None:
    merger = MergerStandIn()
    with pytest.raises(DataError, match="is not a verl checkpoint"):
        checkpoint.merged_model(tmp_path, venv=merger, say=lambda _: None)
    assert merger.calls == []
