"""Run directories for the viewer's tests, written with the real record writer (`episode_records`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from beyondagent_core.episode_records import EPISODES_FILE, episode_record, token_view
from beyondagent_core.jsonl import append_jsonl
from beyondagent_core.types import Reward, Task, Trajectory, Turn

GROUP_SIZE = 4


def record(step: int, index: int, *, split: str = "train", answer: str = "right", success: bool = False,
           error: str | None = None, origin: str = "original", guided: bool = False) -> dict[str, Any]:
    """One episode: a 6-token prompt, a 3-token answer (trained), a 2-token observation, a 2-token answer."""
    group = index // GROUP_SIZE
    task = Task(task_id=f"lake-{step}-{group}", env="frozenlake", origin=origin,
                seed_task_id="lake-0" if origin == "synthetic" else None)
    trajectory = Trajectory(task=task, turns=[Turn("system", "Play <FrozenLake>."), Turn("user", "Reach G."),
                                              Turn("assistant", f"Action: {answer}"), Turn("user", "You slipped."),
                                              Turn("assistant", "Action: up")],
                            reward=Reward(score=1.0 if success else -0.5, success=success,
                                          reason="reached G" if success else "fell", details={"holes": 1}),
                            terminated=True, error=error)
    pieces = ["<s>", "Play", " <Frozen", "Lake>", "\n", "Reach G", "Action", ":", f" {answer}", "\n", "slipped",
              "Action", " up"]
    mask = [0] * 6 + [1, 1, 1] + [0, 0] + [1, 1]
    logprobs = [0.0] * 6 + [-0.1, -2.5, -0.01234] + [0.0, 0.0] + [-1.0, -0.5]
    advantage = (0.75 if success else -0.25) if split == "train" else None
    advantages = None if advantage is None else [advantage * bit for bit in mask]
    ids = [10 + i for i in range(len(pieces))]
    tokens = token_view(ids, mask, logprobs, advantages, pieces, [(6, 9), (11, 13)], prompt_length=6)
    step_values = None if advantage is None else [advantage + 0.05, advantage - 0.05]
    return episode_record(step=step, split=split, index=index, group=group, trajectory=trajectory, tokens=tokens,
                          guided=guided, step_values=step_values)


def write_step(run_dir: Path, step: int, *, groups: int = 2, successes: tuple[int, ...] = (0,)) -> None:
    """A training step's records: `groups` groups of GROUP_SIZE episodes; `successes` are the winning indices."""
    answers = ("right", "down", "left", "up")
    append_jsonl(run_dir / EPISODES_FILE, [
        record(step, index, answer=answers[index % 4], success=index in successes)
        for index in range(groups * GROUP_SIZE)])


def make_run(run_dir: Path, steps: int = 3) -> Path:
    """A run directory with `steps` steps of records, metrics and a spec."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for step in range(1, steps + 1):
        write_step(run_dir, step, successes=(0, step))
    with (run_dir / "metrics.jsonl").open("w") as handle:
        for step in range(1, steps + 1):
            handle.write(json.dumps({"step": step, "time": 1.0 + step, "train/reward_mean": -0.5 + 0.2 * step,
                                     "train/success_rate": 0.1 * step}) + "\n")
    (run_dir / "spec.resolved.yaml").write_text("run:\n  name: viewtest\nmodel:\n  path: tiny\n")
    return run_dir
