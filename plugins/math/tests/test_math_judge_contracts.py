"""The math judges pass the core's judge contract suite (`beyondagent_core.testing.contracts.JudgeContract`)."""

from __future__ import annotations

from typing import Any

import pytest

from beyondagent_core.testing.contracts import JudgeContract
from beyondagent_core.types import Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("math")


def answered(task: Task, text: str) -> Trajectory:
    return Trajectory(task=task, turns=[Turn("user", task.query or ""), Turn("assistant", text, token_ids=[1])])


def math_cases() -> list[tuple[Task, Trajectory]]:
    task = Task(task_id="add", query="What is 17 + 25?", ground_truth="42")
    return [(task, answered(task, "17 + 25 = 42, so the answer is \\boxed{42}.")),
            (task, answered(task, "I think it is \\boxed{41}.")),
            (task, answered(task, "No idea."))]


class TestMathAnswer(JudgeContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "math_answer"}

    @pytest.fixture
    def cases(self) -> list[tuple[Task, Trajectory]]:
        return math_cases()


class TestMathFormat(JudgeContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "math_format"}

    @pytest.fixture
    def cases(self) -> list[tuple[Task, Trajectory]]:
        return math_cases()
