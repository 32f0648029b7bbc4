"""Contract test suites: subclass one and give it the fixture `implementation`.

    from beyondagent_core.testing.contracts import MixerContract

    @pytest.mark.beyondagent_plugins("mixers")
    class TestRatioMixer(MixerContract):
        @pytest.fixture
        def implementation(self):
            return {"name": "ratio", "synthetic_ratio": 1.0}

`implementation` is the spec block selecting the component (as it would appear in a spec);
the suite builds it through the registry, so the registration, the config class and the
factory are all exercised. Inline plugins can be registered in an autouse fixture with
`register_plugin`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from beyondagent_core.jsonl import BadRecords
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.types import Task


class _Contract:
    kind = ""

    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `implementation`")

    @pytest.fixture
    def component(self, plugin_manager: Any, implementation: dict[str, Any]) -> Any:
        registry = Registry(plugin_manager)
        return select_component(registry, self.kind, dict(implementation), key_path="implementation").create()


class TaskSourceContract(_Contract):
    """What every task source must do."""

    kind = "task_source"

    def load(self, component: Any) -> list[Task]:
        return list(component.load(BadRecords("fail")))

    def test_yields_tasks(self, component: Any) -> None:
        tasks = self.load(component)
        assert tasks, "the source yielded no tasks"
        assert all(isinstance(task, Task) for task in tasks)

    def test_task_ids_are_unique(self, component: Any) -> None:
        ids = [task.task_id for task in self.load(component)]
        assert len(ids) == len(set(ids)), "task_id values repeat"

    def test_loading_twice_gives_the_same_tasks(self, component: Any) -> None:
        assert self.load(component) == self.load(component)

    def test_tasks_round_trip_through_json(self, component: Any) -> None:
        for task in self.load(component):
            assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task

    def test_seed_tasks_are_original(self, component: Any) -> None:
        assert {task.origin for task in self.load(component)} == {"original"}


def _tasks(prefix: str, count: int, origin: str, seeds: int = 3) -> list[Task]:
    return [
        Task(task_id=f"{prefix}-{i}", query=f"{prefix} {i}", origin=origin,
             seed_task_id=f"o-{i % seeds}" if origin == "synthetic" else None)
        for i in range(count)
    ]


class MixerContract(_Contract):
    """What every mixer must do."""

    kind = "mixer"

    @pytest.fixture
    def original(self) -> list[Task]:
        return _tasks("o", 10, "original")

    @pytest.fixture
    def synthetic(self) -> list[Task]:
        return _tasks("s", 25, "synthetic")

    def test_returns_tasks_from_its_inputs_without_repeats(self, component, original, synthetic) -> None:
        mixed = component.mix(original, synthetic, epoch=0, seed=0)
        assert isinstance(mixed, list)
        inputs = {task.task_id: task for task in original + synthetic}
        assert all(inputs.get(task.task_id) == task for task in mixed), "a mixed task is not one of the inputs"
        ids = [task.task_id for task in mixed]
        assert len(ids) == len(set(ids)), "a task appears twice in one epoch"

    def test_is_deterministic_for_an_epoch_and_seed(self, component, original, synthetic) -> None:
        first = component.mix(original, synthetic, epoch=3, seed=11)
        assert component.mix(original, synthetic, epoch=3, seed=11) == first

    def test_does_not_modify_its_inputs(self, component, original, synthetic) -> None:
        before = (list(original), list(synthetic))
        component.mix(original, synthetic, epoch=0, seed=0)
        assert (original, synthetic) == before

    def test_accepts_tuples(self, component, original, synthetic) -> None:
        assert component.mix(tuple(original), tuple(synthetic), epoch=0, seed=0) == component.mix(
            original, synthetic, epoch=0, seed=0)

    def test_handles_empty_inputs(self, component, original) -> None:
        assert component.mix([], [], epoch=0, seed=0) == []
        assert all(task.origin == "original" for task in component.mix(original, [], epoch=0, seed=0))
