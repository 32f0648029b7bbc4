"""The core's env and task-source contract suites, run against each gym env and the source.

Needs the core's pytest plugin (`-p beyondagent_core.testing`).
"""

from __future__ import annotations

from typing import Any

import pytest

from beyondagent_core import Task
from beyondagent_core.testing.contracts import EnvContract, TaskSourceContract

pytestmark = pytest.mark.beyondagent_plugins("gym")


class TestFrozenLake(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "frozenlake", "size": 3, "max_steps": 5}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id="frozenlake-train-0"), Task(task_id="lake-2", metadata={"seed": 2, "size": 5}),
                Task(task_id="custom", query="Reach G.", metadata={"map": ["SFF", "FHF", "FFG"]})]


class TestFrozenLakeSlippery(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "frozenlake", "is_slippery": True, "invalid_action_reward": -0.5}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=f"frozenlake-val-{i}") for i in range(3)]


class TestTaxi(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "taxi", "max_steps": 1}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id="taxi-train-0"), Task(task_id="t", metadata={"seed": 9, "state": 123})]


class TestCliffWalking(EnvContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "cliffwalking", "is_slippery": True}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id="cliffwalking-test-0"), Task(task_id="c", metadata={"seed": 4})]


class TestGymTasksFrozenLake(TaskSourceContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gym_tasks", "env": "frozenlake", "split": "val", "count": 12, "size": 3}


class TestGymTasksTaxi(TaskSourceContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gym_tasks", "env": "taxi", "count": 8, "start": 100}


class TestGymTasksCliffWalking(TaskSourceContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "gym_tasks", "env": "cliffwalking", "split": "test", "count": 3, "is_slippery": True}
