"""A resumed run's TensorBoard scalars (eighth mutation audit).

`MetricsLog(..., purge_step=N)` (what a run resumed from step N-1's checkpoint opens) hands N to the
SummaryWriter: TensorBoard hides what the killed process logged at step N and after, so a replayed
step shows once, with its new value; the steps before N keep theirs.
"""

from __future__ import annotations

from pathlib import Path

from beyondagent_plugin_torch.metrics_log import MetricsLog


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def test_a_resumed_log_hides_the_killed_runs_steps_from_the_purge_step_on(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=True) as first:  # killed after logging step 3, checkpoint at 2
        for step in (1, 2, 3):
            first.write(step, {"train/reward_mean": float(step)})
    with MetricsLog(tmp_path, tensorboard=True, purge_step=3) as resumed:
        resumed.write(3, {"train/reward_mean": 30.0})
        resumed.write(4, {"train/reward_mean": 40.0})
    assert scalars(tmp_path, "train/reward_mean") == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]
