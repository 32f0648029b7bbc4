"""The `gym_tasks` source: splits with disjoint seeds, deterministic, self-describing tasks."""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig, GymTasksConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.tasks import GymTasks
from beyondagent_plugin_gym.taxi import Taxi
from structlog.testing import capture_logs

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords


def load(**config) -> list[Task]:
    return list(GymTasks(GymTasksConfig(**config)).load(BadRecords("fail")))


def seeds(tasks: list[Task]) -> set[int]:
    return {task.metadata["seed"] for task in tasks}


@pytest.mark.parametrize("env", ["frozenlake", "taxi", "cliffwalking"])
def test_splits_use_disjoint_seeds_and_ids(env: str) -> None:
    splits = {split: load(env=env, split=split, count=30) for split in ("train", "val", "test")}
    assert [t.task_id for t in splits["val"][:2]] == [f"{env}-val-0", f"{env}-val-1"]
    for split, tasks in splits.items():
        assert len(seeds(tasks)) == 30
        assert all(task.env == env and task.query is None and task.origin == "original" for task in tasks)
        for other, others in splits.items():
            if other != split:
                assert not seeds(tasks) & seeds(others)
                assert not {t.task_id for t in tasks} & {t.task_id for t in others}


def test_loading_is_deterministic_and_start_offsets_the_range() -> None:
    assert load(env="taxi", count=10) == load(env="taxi", count=10)
    assert load(env="frozenlake", split="val", start=5, count=3) == load(env="frozenlake", split="val", count=8)[5:]


def test_frozenlake_tasks_carry_their_map_and_parameters() -> None:
    tasks = load(env="frozenlake", size=3, p=0.7, is_slippery=True, count=5)
    for task in tasks:
        assert set(task.metadata) == {"seed", "size", "p", "is_slippery", "map"}
        assert (task.metadata["size"], task.metadata["p"], task.metadata["is_slippery"]) == (3, 0.7, True)
        assert len(task.metadata["map"]) == 3
    assert len({tuple(task.metadata["map"]) for task in tasks}) > 1


def test_a_task_resets_from_its_metadata_alone_whatever_the_env_config() -> None:
    [task] = load(env="frozenlake", size=3, start=7, count=1)
    from_task = FrozenLake(FrozenLakeConfig(size=5)).reset(task)
    assert from_task.info["metadata"] == task.metadata
    assert from_task.messages[1]["content"].count("\n") == 4  # goal, three rows, position


def test_env_task_ids_name_the_same_tasks_as_the_source() -> None:
    env = FrozenLake(FrozenLakeConfig(size=3, tasks_per_split=4))
    ids = env.task_ids("test")
    tasks = load(env="frozenlake", split="test", size=3, count=4)
    assert ids == [task.task_id for task in tasks]
    for task_id, task in zip(ids, tasks):
        assert env.reset(Task(task_id=task_id)).messages == env.reset(task).messages
    taxi = Taxi(TaxiConfig(tasks_per_split=3))
    assert [taxi.reset(Task(task_id=i)).info["metadata"] for i in taxi.task_ids("val")] == [
        task.metadata for task in load(env="taxi", split="val", count=3)]
    with pytest.raises(ValueError, match="split must be one of train, val, test"):
        env.task_ids("dev")


def test_the_load_reports_how_many_starts_are_distinct() -> None:
    with capture_logs() as logs:
        load(env="cliffwalking", count=5)
        load(env="frozenlake", size=2, count=20)
    events = [entry for entry in logs if entry["event"] == "gym_tasks.loaded"]
    assert [(e["env"], e["tasks"], e["distinct_starts"]) for e in events] == [("cliffwalking", 5, 1), ("frozenlake", 20, 3)]


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"env": "pong"}, "env"),
        ({"split": "dev"}, "split"),
        ({"count": 0}, "count"),
        ({"start": -1}, "start"),
        ({"start": 999_999, "count": 2}, "start \\+ count"),
        ({"size": 1}, "size"),
        ({"p": 0.0}, "p"),
    ],
)
def test_bad_config_raises_value_error_naming_the_key(config, key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key} must be"):
        GymTasks(GymTasksConfig(**config))
