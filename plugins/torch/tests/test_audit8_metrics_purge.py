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


def backdate_event_files(log_dir: Path) -> None:
    """Name the killed run's event files a second earlier, as a process that ran before would have.

    TensorBoard reads a directory's event files in name order: `events.out.tfevents.<time>.<host>.<pid>.<n>`.
    Both logs here open in one process within one second, where only the counter `<n>` orders them, as
    text: 9 sorts after 10, and the resumed file was read first (a CI failure once other tests had
    opened writers). A real resumed run is a later process, so its file's `<time>` orders it.
    """
    for path in log_dir.glob("events.out.tfevents.*"):
        head = "events.out.tfevents."
        seconds = path.name[len(head):].split(".", 1)[0]
        tail = path.name[len(head) + len(seconds):]
        path.rename(path.with_name(f"{head}{int(seconds) - 1:010d}{tail}"))


def test_a_resumed_log_hides_the_killed_runs_steps_from_the_purge_step_on(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=True) as first:  # killed after logging step 3, checkpoint at 2
        for step in (1, 2, 3):
            first.write(step, {"train/reward_mean": float(step)})
    backdate_event_files(tmp_path / "tensorboard")
    with MetricsLog(tmp_path, tensorboard=True, purge_step=3) as resumed:
        resumed.write(3, {"train/reward_mean": 30.0})
        resumed.write(4, {"train/reward_mean": 40.0})
    assert scalars(tmp_path, "train/reward_mean") == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]
