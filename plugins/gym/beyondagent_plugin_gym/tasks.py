"""The `gym_tasks` source: seed tasks of a gym env, from one split's seed range.

Task `i` is `{env}-{split}-{i}` with seed `base(split) + i` (splits use disjoint seed ranges,
see `seeds.py`). Its metadata is what the env itself reports when it resets to that task
(`info["metadata"]`: the seed, and FrozenLake's map, Taxi's start state...), so a task
rebuilds its exact start from the task alone, and the env and the source cannot disagree.

Seeds are distinct, starts need not be: small FrozenLake maps have few layouts, Taxi has 300
starts and CliffWalking one. The `gym_tasks.loaded` event reports how many distinct starts a
load produced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.logs import get_logger
from beyondagent_plugin_gym.base import TextGymEnv
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import (
    CliffWalkingConfig,
    FrozenLakeConfig,
    GymTasksConfig,
    TaxiConfig,
    check_tasks_config,
)
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.seeds import split_task_id
from beyondagent_plugin_gym.taxi import Taxi

log = get_logger(__name__)


class GymTasks:
    """Yields `count` tasks of `env` in `split`, from index `start` on."""

    def __init__(self, config: GymTasksConfig):
        check_tasks_config(config)
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        config = self.config
        env = _env_for(config)
        starts: set[str] = set()
        try:
            for index in range(config.start, config.start + config.count):
                task_id = split_task_id(config.env, config.split, index)
                metadata = env.reset(Task(task_id=task_id, env=config.env)).info["metadata"]
                starts.add(json.dumps({k: v for k, v in metadata.items() if k != "seed"}, sort_keys=True))
                yield Task(task_id=task_id, env=config.env, metadata=metadata)
        finally:
            env.close()
        log.info("gym_tasks.loaded", env=config.env, split=config.split, tasks=config.count,
                 distinct_starts=len(starts))


def _env_for(config: GymTasksConfig) -> TextGymEnv:
    """The env that makes this source's tasks, with the source's game parameters."""
    if config.env == "frozenlake":
        # Room for the source's own size: an env that serves these tasks needs max_size >= size too.
        max_size = max(config.size, FrozenLakeConfig().max_size)
        return FrozenLake(FrozenLakeConfig(size=config.size, max_size=max_size, p=config.p,
                                           is_slippery=config.is_slippery))
    if config.env == "taxi":
        return Taxi(TaxiConfig())
    return CliffWalking(CliffWalkingConfig(is_slippery=config.is_slippery))
