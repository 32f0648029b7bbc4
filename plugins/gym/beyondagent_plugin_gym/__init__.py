"""BeyondAgent environments from gymnasium's text-renderable games: FrozenLake, Taxi, CliffWalking.

Registers the envs `frozenlake`, `taxi` and `cliffwalking` and the task source `gym_tasks`.
The factories are `"module:attr"` strings, so gymnasium is imported only when a spec selects
one of them.
"""

from __future__ import annotations

from beyondagent_core import EnvSpec, TaskSourceSpec, hookimpl
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, GymTasksConfig, TaxiConfig

__all__ = [
    "CliffWalkingConfig", "FrozenLakeConfig", "GymTasksConfig", "TaxiConfig",
    "beyondagent_envs", "beyondagent_task_sources",
]

_PACKAGE = "beyondagent_plugin_gym"


@hookimpl
def beyondagent_envs() -> list[EnvSpec]:
    return [
        EnvSpec(name="frozenlake", factory=f"{_PACKAGE}.frozenlake:FrozenLake", config_cls=FrozenLakeConfig,
                summary="gymnasium FrozenLake as text: reach G on a seeded random map without falling in a hole."),
        EnvSpec(name="taxi", factory=f"{_PACKAGE}.taxi:Taxi", config_cls=TaxiConfig,
                summary="gymnasium Taxi as text: pick up the passenger and drop them at the destination."),
        EnvSpec(name="cliffwalking", factory=f"{_PACKAGE}.cliffwalking:CliffWalking", config_cls=CliffWalkingConfig,
                summary="gymnasium CliffWalking as text: walk from S to G along a cliff."),
    ]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [
        TaskSourceSpec(name="gym_tasks", factory=f"{_PACKAGE}.tasks:GymTasks", config_cls=GymTasksConfig,
                       summary="Seeded tasks of a gym env (frozenlake, taxi, cliffwalking) from a split's seed range."),
    ]
