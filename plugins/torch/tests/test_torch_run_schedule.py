"""The torch run's schedule and its resume, piece by piece, on real Trainers built by the pipeline.

`fit` validates before the first step, after every multiple of `eval_every` and after the last step;
it checkpoints after every multiple of `save_every` and after the last step (0: only the last), keeps
`keep_checkpoints` of them, writes TensorBoard files and the report unless told not to. Here each
step's training and validation are replaced on the Trainer by recorders (a real step takes seconds on
this CPU; what is checked is the loop around them: the checkpoints are real). A `--resume` Trainer
starts after the newest checkpoint with its model weights, AdamW moments, LR schedule (the warm-up
factor included) and the run's records cut to its step; a checkpoint written before a backend key
existed resumes while that key is at its default; it goes on from the next step without validating
again before it, and TensorBoard hides what the killed process logged from that step on.
`check_resumable` lets exactly the backend's RESUMABLE_KEYS change and names every other changed key,
the first 12 of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from beyondagent_plugin_torch.checkpoint import Checkpoint, check_resumable, checkpoints
from beyondagent_plugin_torch.config import RESUMABLE_KEYS, TorchConfig
from beyondagent_plugin_torch.metrics_log import EPISODES_FILE, MetricsLog, read_metrics, read_samples
from beyondagent_plugin_torch.trainer import read_episode_records
from test_audit8_metrics_purge import scalars
from test_metrics_log import make_trajectory
from test_torch_keys_reach import trainers

from beyondagent_core.errors import RunError


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with trainers(tmp_path_factory.mktemp("schedule")) as builder:
        yield builder


def fit_recorded(trainer: Any) -> list[int]:
    """Run `trainer.fit()` with each step's training and validation recorded instead of run; the
    steps it validated after (0: before the first)."""
    validated: list[int] = []
    trainer.train_step = lambda step, metrics_log, pipeline=None: {"train/reward_mean": 0.0, "train/success_rate": 0.0}
    trainer.validate = lambda step, metrics_log: validated.append(step) or {"val/pass@1": 0.0}
    trainer.fit()
    return validated


def test_validation_and_checkpoints_fall_on_their_multiples_and_the_last_step(build: Any) -> None:
    trainer = build("every", "backend.total_steps=6", "backend.eval_every=5", "backend.save_every=4",
                    "backend.keep_checkpoints=3", "backend.tensorboard=false", "backend.report=false")
    assert fit_recorded(trainer) == [0, 5, 6]  # not after 4 or 1 (4 + 1 / 5 - 4 are no multiples)
    run_dir = trainer.run.run_dir
    assert [checkpoint.step for checkpoint in checkpoints(run_dir)] == [6, 4]
    assert [record["step"] for record in read_metrics(run_dir)] == [0, 1, 2, 3, 4, 5, 6]
    assert not (run_dir / "tensorboard").exists() and not (run_dir / "report.html").exists()


def test_every_zero_validates_and_saves_only_around_the_run(build: Any) -> None:
    trainer = build("ends", "backend.total_steps=3", "backend.report=false")  # eval_every, save_every: 0
    assert fit_recorded(trainer) == [0, 3]
    assert [checkpoint.step for checkpoint in checkpoints(trainer.run.run_dir)] == [3]
    assert list((trainer.run.run_dir / "tensorboard").glob("events.out.tfevents.*"))  # tensorboard: null, installed


def test_without_val_tasks_nothing_validates(build: Any) -> None:
    trainer = build("noval", "backend.total_steps=2", "backend.eval_every=1", "tasks.val=null", "backend.report=false",
                    "backend.tensorboard=false")
    assert fit_recorded(trainer) == []


def trained_once(trainer: Any) -> None:
    """One real AdamW step and one scheduler step on the trainer's policy."""
    trainer.model(input_ids=torch.tensor([[5, 17, 42, 7]])).logits.float().logsumexp(-1).sum().backward()
    trainer.optimizer.step()
    trainer.optimizer.zero_grad()
    trainer.lr_schedule.step()


def test_a_resumed_trainer_starts_after_the_newest_checkpoint_with_all_it_saved(build: Any) -> None:
    settings = ("backend.total_steps=4", "backend.warmup_steps=3", "backend.keep_checkpoints=3", "backend.report=false")
    first = build("resumed", *settings)
    run_dir = first.run.run_dir
    for step in (1, 2):
        trained_once(first)
        first.save(step)
    # the killed process had logged step 3 too
    with MetricsLog(run_dir, tensorboard=True) as log:
        for step in (0, 1, 2, 3):
            log.write(step, {"train/reward_mean": float(step)})
            log.write_samples(step, "train", [make_trajectory(f"t{step}", "left", 1.0)])
        log.write_episodes([{"step": step, "index": 0} for step in (1, 2, 3)])
    # a checkpoint written before backend.tis_cap existed: at its default it is no difference
    state = run_dir / "checkpoints" / "step_000002" / "state.json"
    state.write_text(state.read_text().replace('"tis_cap": 2.0,', ""))
    assert '"tis_cap"' not in state.read_text()

    resumed = build("resumed", *settings, "backend.save_every=1", resume=True)  # how often to save may change
    assert resumed.start_step == 2 and resumed.resumed_from.name == "step_000002"
    assert [record["step"] for record in read_metrics(run_dir)] == [0, 1, 2]
    assert [record["step"] for record in read_samples(run_dir)] == [0, 1, 2]
    assert (run_dir / EPISODES_FILE).is_file()
    assert [record["step"] for record in read_episode_records(run_dir)] == [1, 2]
    for (name, saved), (_, loaded) in zip(first.model.named_parameters(), resumed.model.named_parameters()):
        assert torch.equal(saved, loaded), name
    trained = list(resumed.model.parameters())
    assert [p for group in resumed.optimizer.param_groups for p in group["params"]] == trained  # its own weights
    for saved, loaded in zip(first.model.parameters(), trained):
        assert torch.equal(first.optimizer.state[saved]["exp_avg"], resumed.optimizer.state[loaded]["exp_avg"])
        assert float(resumed.optimizer.state[loaded]["step"]) == 2.0
    # the schedule two steps into its 3-step warm-up, and the same warm-up ahead
    assert resumed.lr_schedule.last_epoch == 2
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.005 * 0.75)
    assert resumed.lr_schedule.lr_lambdas[0](3) == 1.0 and resumed.lr_schedule.lr_lambdas[0](1) == pytest.approx(0.5)
    assert resumed.optimizer.param_groups[0]["weight_decay"] == TorchConfig().weight_decay

    # it goes on with step 3 (no validation before it: the run already had step 0's), saving every step
    assert fit_recorded(resumed) == [4]
    assert [record["step"] for record in read_metrics(run_dir)] == [0, 1, 2, 3, 4]
    assert [checkpoint.step for checkpoint in checkpoints(run_dir)] == [4, 3, 2]
    # TensorBoard hides the killed process's step 3 (purge_step 3): each step once, step 3 with its new value
    assert scalars(run_dir, "train/reward_mean") == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 0.0), (4, 0.0)]


def test_what_may_change_on_resume_is_how_long_how_often_and_how_it_is_logged_or_decoded() -> None:
    assert set(RESUMABLE_KEYS) == {"epochs", "total_steps", "save_every", "eval_every", "keep_checkpoints",
                                   "samples_per_step", "tensorboard", "report", "max_failed_fraction",
                                   "kv_cache_tokens", "batching", "kv_layout", "compile_decode"}


def changed(value: Any) -> Any:
    """A value of the same kind that differs from `value`."""
    if isinstance(value, bool):
        return not value
    if value is None:
        return 7
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 0.5
    return f"{value}-changed"


BACKEND_KEYS = [field.name for field in attrs.fields(TorchConfig)]


@pytest.mark.parametrize("key", BACKEND_KEYS)
def test_only_the_resumable_backend_keys_may_change_on_resume(key: str, tmp_path: Path) -> None:
    saved = {"backend": {"name": "torch", **attrs.asdict(TorchConfig())}}
    new = {"backend": {**saved["backend"], key: changed(saved["backend"][key])}}
    checkpoint = Checkpoint(tmp_path, 2, saved)
    if key in RESUMABLE_KEYS:
        check_resumable(checkpoint, new, backend_volatile=RESUMABLE_KEYS, spec_path="spec.yaml")
    else:
        with pytest.raises(RunError) as caught:
            check_resumable(checkpoint, new, backend_volatile=RESUMABLE_KEYS, spec_path="spec.yaml")
        assert caught.value.message.endswith(f"differs from the checkpoint's in backend.{key}")


def test_a_resume_refusal_names_twelve_keys_then_says_there_are_more(tmp_path: Path) -> None:
    keys = [f"k{i:02d}" for i in range(13)]
    saved = {"algorithm": {key: 1 for key in keys}}

    def refusal(count: int) -> str:
        new = {"algorithm": {key: 2 if i < count else 1 for i, key in enumerate(keys)}}
        with pytest.raises(RunError) as caught:
            check_resumable(Checkpoint(tmp_path, 1, saved), new, backend_volatile=(), spec_path="spec.yaml")
        return caught.value.message

    assert refusal(12).endswith("algorithm.k10, algorithm.k11")
    assert refusal(13).endswith("algorithm.k10, algorithm.k11 ...") and "k12" not in refusal(13)


def test_a_key_newer_than_the_checkpoint_resumes_only_at_its_default(tmp_path: Path) -> None:
    defaults = attrs.asdict(TorchConfig())
    old = {"backend": {"lr": 0.01}}
    check_resumable(Checkpoint(tmp_path, 1, old), {"backend": {"lr": 0.01, "batching": "lockstep"}},
                    backend_volatile=(), spec_path="spec.yaml", backend_defaults=defaults)
    with pytest.raises(RunError, match="backend.batching"):
        check_resumable(Checkpoint(tmp_path, 1, old), {"backend": {"lr": 0.01, "batching": "continuous"}},
                        backend_volatile=(), spec_path="spec.yaml", backend_defaults=defaults)
    with pytest.raises(RunError, match="backend.batching"):  # without the defaults only null/false are no change
        check_resumable(Checkpoint(tmp_path, 1, old), {"backend": {"lr": 0.01, "batching": "lockstep"}},
                        backend_volatile=(), spec_path="spec.yaml")
