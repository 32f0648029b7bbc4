"""DAPO's sampling options and the asynchronous rollout's machinery at their limits, without a training run:

- dynamic sampling (`Trainer.sample_batch`) stopping exactly when the informative groups reach `batch_size`,
  `max_gen_batches: 1` (one batch, topped up), the overlong metrics over every generated episode (dropped
  groups included); `generate`'s jobs (each task `group_size` times, groups numbered on) and seeds (the first
  batch keeps the step's, an extra batch gets its own); `extra_tasks` at and past the epoch's size;
- overlong shaping with its own `max_len` (not `backend.max_new_tokens`), a length exactly on the unpunished
  limit and one past, and the fraction counting only the punished;
- the flat-group count with a critic, per seat, and with one finished rollout; `algorithm.norm_adv_by_std`
  reaching the estimator (`Trainer.estimate_advantages`);
- `RolloutPipeline`'s error paths (a batch's error raised at `take`, the thread stopping after it, a closed
  pipeline's missing step, `wait_for_generation` not waiting on a failed rollout) and its wait exactly up
  to the current version's batches; `DeviceTurns`; `Trainer.rollout_pipeline` on its last step and past it.

The trainers here are bare (`object.__new__`, as in test_dapo.py) with only what the code under test reads.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from beyondagent_plugin_torch.async_rollout import DeviceTurns, RolloutPipeline, rollout_lag
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.trainer import Trainer
from test_dapo import bare_trainer, scripted, sequence_of

from beyondagent_core import metric_names
from beyondagent_core.spec import AlgorithmSection, OverlongShaping
from beyondagent_core.types import Reward, Task, Trajectory
from beyondagent_plugin_advantages.grpo import Grpo

pytestmark = pytest.mark.beyondagent_plugins("torch", "advantages")


def episode(group, score: float, generated: int = 2, *, seat: int | None = None, error: str | None = None) -> Episode:
    return Episode(group=group, trajectory=Trajectory(task=Task(f"t{group}"), reward=Reward(score), error=error),
                   sequence=sequence_of(generated), seat=seat)


# ------------------------------------------------------------------------------------- dynamic sampling


def test_dynamic_sampling_stops_as_soon_as_the_informative_groups_reach_the_batch() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=2, dynamic_sampling=True, max_gen_batches=5), batch_size=2)
    calls = scripted(trainer, [[[0, 1], [1, 0]], [[0, 1], [0, 1]]])  # batch 1: exactly 2 informative groups
    _, trained, metrics = trainer.sample_batch(1, 0, [Task("a"), Task("b")])
    assert [batch for batch, _ in calls] == [1] and len(trained) == 4
    assert metrics == {metric_names.TRAIN_GEN_BATCHES: 1.0, metric_names.TRAIN_DROPPED_GROUPS: 0.0}


def test_max_gen_batches_one_generates_once_and_tops_up() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=2, dynamic_sampling=True, max_gen_batches=1), batch_size=2)
    calls = scripted(trainer, [[[0, 0], [1, 1]], [[0, 1], [0, 1]]])  # batch 1 all flat
    _, trained, metrics = trainer.sample_batch(1, 0, [Task("a"), Task("b")])
    assert [batch for batch, _ in calls] == [1]
    assert [e.group for e in trained] == [0, 0, 1, 1]  # both flat groups, topped up
    assert metrics == {metric_names.TRAIN_GEN_BATCHES: 1.0, metric_names.TRAIN_DROPPED_GROUPS: 0.0}


def test_the_overlong_metrics_cover_every_generated_episode_dropped_groups_included() -> None:
    # buffer 2 of max_new_tokens 4: 3 tokens cost 0.5, 4 cost 1; batch 1's flat group is dropped
    trainer = bare_trainer(AlgorithmSection(group_size=2, dynamic_sampling=True, max_gen_batches=3,
                                            overlong=OverlongShaping(buffer_len=2)), max_new_tokens=4, batch_size=1)
    lengths = {1: [4, 4], 2: [2, 3]}

    def generate(step, tasks, batch, *, first_group):
        episodes = [episode(first_group, float(i % 2 if batch == 2 else 0), n) for i, n in enumerate(lengths[batch])]
        trainer.shape_overlong(episodes)
        return episodes

    trainer.generate = generate
    trainer.extra_tasks = lambda step, epoch, batch: [Task("x")]
    generated, trained, metrics = trainer.sample_batch(1, 0, [Task("a")])
    assert len(generated) == 4 and len(trained) == 2
    assert metrics[metric_names.TRAIN_OVERLONG_PENALTY] == pytest.approx((-1 - 1 + 0 - 0.5) / 4)
    assert metrics[metric_names.TRAIN_OVERLONG_FRACTION] == 0.75


def test_generate_runs_each_task_group_size_times_with_the_batchs_seeds() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=3, overlong=OverlongShaping(buffer_len=1, penalty_factor=2.0)),
                           max_new_tokens=3, temperature=0.5, top_p=0.8)
    trainer.run = SimpleNamespace(info=SimpleNamespace(seed=11))
    trainer.guidance = trainer.pool = None
    seen = []

    def rollout(jobs, sampling, *, seed, guides, opponents):
        seen.append((jobs, sampling, seed))
        return [episode(group, 1.0, 3) for group, _ in jobs]  # 3 tokens: one past max_new_tokens - buffer_len

    trainer.rollout = rollout
    tasks = [Task("a"), Task("b")]
    first = trainer.generate(4, tasks, 1, first_group=0)
    extra = trainer.generate(4, tasks, 2, first_group=2)
    assert [(group, task.task_id) for group, task in seen[0][0]] == [(0, "a")] * 3 + [(1, "b")] * 3
    assert [group for group, _ in seen[1][0]] == [2, 2, 2, 3, 3, 3]
    assert seen[0][2] == (11, "train", 4) and seen[1][2] == (11, "train", 4, 2)
    assert (seen[0][1].temperature, seen[0][1].top_p, seen[0][1].max_tokens) == (0.5, 0.8, 3)
    assert [e.score for e in first + extra] == [-1.0] * 12  # shaped: 1 - 2 * (3 - 2) / 1


@pytest.mark.parametrize(("epoch_size", "drawn"), [(4, 4), (3, 3), (5, 4)])
def test_extra_tasks_draw_batch_size_tasks_or_the_whole_epoch(epoch_size: int, drawn: int) -> None:
    trainer = bare_trainer(AlgorithmSection(), batch_size=4)
    trainer.run = SimpleNamespace(info=SimpleNamespace(seed=3))
    tasks = [Task(f"t{i}") for i in range(epoch_size)]
    trainer._epoch_cache = {}
    trainer.data = SimpleNamespace(epoch_tasks=lambda epoch: tasks if epoch == 2 else [])  # not in the cache
    picked = trainer.extra_tasks(1, 2, 2)
    assert len(picked) == drawn and len({t.task_id for t in picked}) == drawn


# -------------------------------------------------------------------------------------- overlong shaping


def test_overlong_max_len_is_its_own_limit_on_and_past_the_unpunished_length() -> None:
    # max_len 20 (not max_new_tokens 6), buffer 5: up to 15 tokens unpunished, 16 costs 1/5 of the factor
    trainer = bare_trainer(AlgorithmSection(overlong=OverlongShaping(buffer_len=5, max_len=20, penalty_factor=1.0)),
                           max_new_tokens=6)
    on, past = episode(0, 1.0, 15), episode(0, 1.0, 16)
    reward = on.trajectory.reward
    trainer.shape_overlong([on, past])
    assert on.trajectory.reward is reward and on.trajectory.metrics["overlong_penalty"] == 0.0  # untouched
    assert past.score == pytest.approx(0.8) and past.trajectory.reward.details == {"overlong_penalty": -0.2}
    metrics = trainer.overlong_metrics([on, past])
    assert metrics == {metric_names.TRAIN_OVERLONG_PENALTY: pytest.approx(-0.1),
                       metric_names.TRAIN_OVERLONG_FRACTION: 0.5}  # only the punished one counts


# ---------------------------------------------------------------------------------- flat groups, advantages


def test_flat_groups_with_a_critic_per_seat_and_with_one_finished_rollout() -> None:
    trainer = bare_trainer(AlgorithmSection())
    trainer.critic, trainer._warned_flat_groups = None, True
    # group 0: seats 0 and 1 each scored alike within the seat (flat twice); group 1: one finished, one crashed
    # (flat); group 2: differs
    episodes = [episode(0, 1.0, seat=0), episode(0, 1.0, seat=0), episode(0, 0.0, seat=1), episode(0, 0.0, seat=1),
                episode(1, 1.0), episode(1, 0.0, error="boom"), episode(2, 1.0), episode(2, 0.0)]
    assert trainer.count_flat_groups(1, episodes) == pytest.approx(3 / 4)
    trainer.critic = object()  # the critic is the baseline: no group is flat
    assert trainer.count_flat_groups(1, episodes) == 0.0


def test_norm_adv_by_std_false_reaches_the_estimator() -> None:
    episodes = [episode(0, 1.0), episode(0, 0.0)]

    def advantage(norm: bool) -> float:
        trainer = bare_trainer(AlgorithmSection(norm_adv_by_std=norm))
        trainer.estimator, trainer.estimator_name, trainer.total_steps, trainer.critic = Grpo(), "grpo", 3, None
        per_token, _, _, _ = trainer.estimate_advantages(1, episodes)
        return float(max(per_token[0]))

    assert advantage(True) == pytest.approx(2 ** -0.5, rel=1e-5)  # 0.5 / std(1, 0)
    assert advantage(False) == pytest.approx(0.5)


# ------------------------------------------------------------------------------------ the rollout thread


def test_a_batchs_error_is_raised_at_take_and_ends_the_thread() -> None:
    produced = []

    def produce(step: int, version: int) -> int:
        produced.append(step)
        if step == 2:
            raise ValueError("env crashed")
        return step

    pipeline = RolloutPipeline(produce, start_step=0, total_steps=4, version_of=lambda step: 0)
    try:
        assert pipeline.take(1)[0] == 1
        with pytest.raises(ValueError, match="env crashed"):
            pipeline.take(2)
        pipeline._thread.join()
        assert produced == [1, 2]  # nothing after the failed batch
        with pytest.raises(RuntimeError, match="ended before step 3's batch"):
            pipeline.take(3)
    finally:
        pipeline.close()


def test_wait_for_generation_does_not_wait_on_a_failed_rollout() -> None:
    def produce(step: int, version: int) -> int:
        raise RuntimeError("boom")

    # the thread failed on step 1 and ended; the current version's steps 1 and 2 will never be generated
    pipeline = RolloutPipeline(produce, start_step=0, total_steps=3, version_of=lambda step: max(step - 2, 0))
    pipeline._thread.join()
    assert pipeline.wait_for_generation() >= 0.0
    pipeline.close()


def test_wait_for_generation_does_not_wait_on_a_closed_pipeline() -> None:
    # sync schedule: step 2 is version 1's. Closed after step 1, the thread ends without it; after the update
    # the trainer's wait for version 1's batches must end on the thread's end, not on step 2
    pipeline = RolloutPipeline(lambda step, version: step, start_step=0, total_steps=3, version_of=lambda s: s - 1)
    assert pipeline.take(1)[0] == 1
    pipeline.close()
    pipeline.advance()
    waiter = threading.Thread(target=pipeline.wait_for_generation, daemon=True)
    waiter.start()
    waiter.join(timeout=60)  # a guard only: it returns at once (without the thread's end it would never return)
    assert not waiter.is_alive() and pipeline._generated == 1


def test_wait_for_generation_waits_for_exactly_the_current_versions_batches() -> None:
    # one step off: steps 1 and 2 are version 0's, step 3 version 1's. Before the first update the trainer
    # waits for steps 1 and 2 (step 2 held back until the trainer has started waiting) and not for step 3,
    # which cannot start before that update (were it waited for, the wait would never end).
    release, started = threading.Event(), threading.Event()

    def produce(step: int, version: int) -> int:
        if step == 2:
            started.set()
            release.wait()
        return step

    pipeline = RolloutPipeline(produce, start_step=0, total_steps=3, version_of=lambda step: max(step - 2, 0))
    condition = pipeline._changed
    wait_for = condition.wait_for
    ready_at_first: list[bool] = []

    def waiting(predicate, timeout=None):
        if threading.current_thread() is threading.main_thread() and not ready_at_first:
            ready_at_first.append(predicate())  # step 2 is still generating: the wait must not be over yet
            release.set()
        return wait_for(predicate, timeout)

    try:
        started.wait()
        condition.wait_for = waiting
        pipeline.wait_for_generation()
        assert ready_at_first == [False] and pipeline._generated == 2 and 3 not in pipeline._results
        assert pipeline.take(2)[0] == 2
    finally:
        release.set()
        pipeline.advance()
        pipeline.close()


def test_device_turns_put_the_model_in_train_mode_for_an_update_only() -> None:
    turns = DeviceTurns()
    model = SimpleNamespace(training=False)
    model.train = lambda: setattr(model, "training", True)
    model.eval = lambda: setattr(model, "training", False)
    with pytest.raises(KeyError):
        with turns.update(model):
            assert model.training and turns._lock.locked()
            raise KeyError("a failing micro-batch")
    assert not model.training and not turns._lock.locked()  # back in eval mode, the turn released
    with turns.generation():
        assert turns._lock.locked() and not model.training
    assert rollout_lag("async", 4) == 4 and rollout_lag("one_step_off", 4) == 1


@pytest.mark.parametrize(("start", "total", "mode", "runs"), [(3, 3, "one_step_off", False), (2, 3, "one_step_off", True),
                                                              (0, 3, "sync", False)])
def test_the_rollout_thread_runs_only_when_steps_remain(start: int, total: int, mode: str, runs: bool) -> None:
    trainer = object.__new__(Trainer)
    trainer.config = TorchConfig(rollout_mode=mode)
    trainer.start_step, trainer.total_steps = start, total
    versions = []
    trainer.produce_batch = lambda step, version: versions.append((step, version)) or step
    trainer.is_save_step = lambda step: False
    pipeline = trainer.rollout_pipeline()
    assert (pipeline is not None) == runs
    if pipeline is not None:
        assert pipeline.take(3)[0] == 3 and versions == [(3, 2)]  # the last step, from the version it starts at
        pipeline.close()
