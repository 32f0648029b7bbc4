"""`explore.executor: ray`: explorations on Ray actors (a local `ray.init(num_cpus=2)`).

Real components end to end: gymnasium FrozenLake (gym plugin), the `random` explorer in its
`random_actions` mode (random_explorer plugin), the `hindsight` summarizer and the `dedup`
filter. The actors rebuild them from the spec in their own processes.
"""

from __future__ import annotations

import json
import os

import pytest

from beyondagent_core.jsonl import read_tasks

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def ray_spec(executor: str) -> dict:
    return {
        "run": {"name": f"explore-{executor}"},
        "tasks": {"train": {"name": "gym_tasks", "env": "frozenlake", "count": 4, "size": 3}},
        "env": {"name": "frozenlake", "max_steps": 8},
        "explore": {"name": "random", "mode": "random_actions", "max_explore_step": 5, "n": 2, "workers": 4,
                    "executor": executor, "ray_actors": 2, "ray_num_cpus": 0.25,
                    "summarizer": {"name": "hindsight", "max_tasks": 2}},
        "mixture": {"name": "ratio", "synthetic_ratio": 1.0},
        "backend": {"name": "export", "epochs": 1},
    }


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "synthesis")
def test_ray_executor_explores_on_actors(local_ray, run_spec) -> None:
    result = run_spec(ray_spec("ray"))
    synthetic = read_tasks(result.run_dir / "synthetic_tasks.jsonl")
    assert synthetic, "the Ray actors found no tasks"
    assert {task.seed_task_id for task in synthetic} <= {f"frozenlake-train-{k}" for k in range(4)}
    assert all(task.origin == "synthetic" and task.judge == "env" and "goal" in task.metadata for task in synthetic)
    ids = [task.task_id for task in synthetic]
    assert len(set(ids)) == len(ids)
    # The explorations ran in two actor processes, not here.
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    actors = next(event["actors"] for event in events if event["event"] == "explore.ray_actors")
    assert len(actors) == 2 and os.getpid() not in {actor["pid"] for actor in actors}
    assert result.metrics["synthetic"] > 0
