"""Every size a gym task or config can ask for is bounded, with a ValueError naming the key, the limit and the value.

FrozenLake: `size`/`max_size` in the config and `gym_tasks` (at most 128 a side), `metadata.size`
and `metadata.map` (at most the env's `max_size`), and the map search (a `p` too low for the
size used to make gymnasium draw maps forever). Through the env service such an error is a 400
`bad_input`. Taxi and CliffWalking take no sizes: their maps are fixed, a task's `size` or `map`
is ignored, and their only counts (`tasks_per_split`) are bounded.
"""

from __future__ import annotations

import asyncio

import attrs
import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import (
    MAP_SIDE_LIMIT,
    CliffWalkingConfig,
    FrozenLakeConfig,
    GymTasksConfig,
    TaxiConfig,
)
from beyondagent_plugin_gym.frozenlake import MAX_MAP_TRIES, FrozenLake, random_map
from beyondagent_plugin_gym.tasks import GymTasks
from beyondagent_plugin_gym.taxi import Taxi
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from beyondagent_core import Task
from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost
from beyondagent_plugin_envservice.protocol import ServiceError
from beyondagent_core.jsonl import BadRecords


def load(**config) -> list[Task]:
    return list(GymTasks(GymTasksConfig(**config)).load(BadRecords()))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_size": 1000}, "max_size must be <= 128 (time: gymnasium builds a table as large as the map, and every observation shows the whole map), got 1000"),
        ({"size": 1000, "max_size": 1000}, "size must be <= 128 (time: gymnasium builds a table as large as the map, and every observation shows the whole map), got 1000"),
        ({"size": 8, "max_size": 4}, "max_size must be an integer in [size (8), 128], got 4"),
        ({"max_size": 64.5}, "max_size must be an integer in [size (4), 128], got 64.5"),
    ],
)
def test_frozenlake_config_sizes_are_bounded(config, message: str) -> None:
    with pytest.raises(ValueError) as info:
        FrozenLake(FrozenLakeConfig(**config))
    assert str(info.value) == message


def test_the_largest_allowed_map_is_built() -> None:
    env = FrozenLake(FrozenLakeConfig(size=MAP_SIDE_LIMIT, max_size=MAP_SIDE_LIMIT))
    rows = env.reset(Task(task_id="t", metadata={"seed": 1})).info["metadata"]["map"]
    assert len(rows) == len(rows[0]) == MAP_SIDE_LIMIT
    env.close()


def test_gym_tasks_size_is_bounded_and_larger_maps_need_an_env_that_allows_them() -> None:
    with pytest.raises(ValueError, match=r"^size must be <= 128 \(time: gymnasium builds .*\), got 100000$"):
        GymTasks(GymTasksConfig(size=100_000))
    [task] = load(env="frozenlake", size=80, count=1)  # past the env's default max_size (64)
    assert task.metadata["size"] == 80
    too_big = r"metadata.map must be at most 64 tiles a side \(the env's max_size\), got '80x80'$"
    with pytest.raises(ValueError, match=too_big):
        FrozenLake(FrozenLakeConfig()).reset(task)
    assert len(FrozenLake(FrozenLakeConfig(max_size=80)).reset(task).info["metadata"]["map"]) == 80


def test_a_served_frozenlake_answers_oversized_tasks_with_400_bad_input() -> None:
    huge_map = ["S" + "F" * 99] + ["F" * 100] * 98 + ["F" * 99 + "G"]
    cases = [({"size": 100_000}, "metadata.size must be an integer in [2, 64], got 100000"),
             ({"map": huge_map}, "metadata.map must be at most 64 tiles a side (the env's max_size), got '100x100'")]

    async def scenario() -> list[ServiceError]:
        pool = InstancePool(ThreadHost(lambda: FrozenLake(FrozenLakeConfig()), threads=2), PoolLimits(),
                            env_name="frozenlake")
        errors = []
        try:
            for metadata, _ in cases:
                with pytest.raises(ServiceError) as info:
                    await pool.create(Task(task_id="big", metadata=metadata), None)
                errors.append(info.value)
            await pool.create(Task(task_id="fine", metadata={"size": 64}), "ok")  # the limit itself is fine
        finally:
            await pool.close_all()
        return errors

    for error, (_, message) in zip(asyncio.run(scenario()), cases):
        assert (error.status, error.code) == (400, "bad_input")
        assert error.message.endswith(message)


@pytest.mark.parametrize(
    ("config", "metadata", "where"),
    [({}, {"size": 64, "p": 0.05}, "metadata.p"), ({"size": 64, "p": 0.05}, {}, "the env's p")],
)
def test_a_p_too_low_for_the_size_is_a_value_error_not_an_endless_search(config, metadata, where: str) -> None:
    env = FrozenLake(FrozenLakeConfig(**config))
    with pytest.raises(ValueError) as info:
        env.reset(Task(task_id="t", metadata={"seed": 3, **metadata}))
    assert str(info.value) == (f"task 't': no 64x64 map with a path from S to G in {MAX_MAP_TRIES} random maps "
                               f"at p=0.05 ({where}): use a larger p or a smaller size")


@pytest.mark.parametrize(("size", "p"), [(2, 0.8), (4, 0.8), (8, 0.6), (16, 0.7), (64, 0.8)])
def test_the_bounded_search_makes_gymnasiums_maps(size: int, p: float) -> None:
    for seed in (0, 1, 17, 3_000_123):
        assert random_map(size, p, seed) == generate_random_map(size=size, p=p, seed=seed)


@pytest.mark.parametrize(("env_cls", "config_cls"), [(Taxi, TaxiConfig), (CliffWalking, CliffWalkingConfig)])
def test_taxi_and_cliffwalking_take_no_sizes(env_cls, config_cls) -> None:
    keys = {field.name for field in attrs.fields(config_cls)}
    assert keys <= {"max_steps", "invalid_action_reward", "turn_prompt", "tasks_per_split", "is_slippery",
                    "step_latency_ms"}
    env = env_cls(config_cls())
    plain = env.reset(Task(task_id="t", metadata={"seed": 5})).messages
    asked = env.reset(Task(task_id="t", metadata={"seed": 5, "size": 100_000, "map": ["S" + "F" * 999]}))
    assert asked.messages == plain  # a fixed map: the keys are not read
    assert set(asked.info["metadata"]) <= {"seed", "state", "is_slippery"}
    env.close()
    with pytest.raises(ValueError, match=r"^tasks_per_split must be <= 1,000,000 \(meaning: a split has 1,000,000 "
                                         r"seeds\), got 2000000$"):
        env_cls(config_cls(tasks_per_split=2_000_000))
