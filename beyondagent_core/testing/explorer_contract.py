"""The contract suite of explorers: subclass `ExplorerContract`, give it `implementation`, `env`, `seeds`.

    from beyondagent_core.testing.explorer_contract import ExplorerContract

    @pytest.mark.beyondagent_plugins("random_explorer", "gym")
    class TestRandomActions(ExplorerContract):
        @pytest.fixture
        def implementation(self):
            return {"name": "random", "mode": "random_actions", "max_explore_step": 4}

        @pytest.fixture
        def env(self):
            return {"name": "frozenlake"}

        @pytest.fixture
        def seeds(self):
            return [Task(task_id="lake-0", env="frozenlake", metadata={"map": ["SF", "FG"]})]

`implementation` is the spec's `explore` block and `env` its `env` block (an env the explorer can
act in); `seeds` a few seed tasks that env can reset on. An explorer that needs an LLM gets one
from the fixture `llm` (default None), e.g. an `OpenAIChat` on the `openai_server` fixture.

Checked, as the exploration stage relies on it (`beyondagent_core.returns.check_exploration` is
the same check a run applies): `explore` is async and returns a `Trajectory` of the seed with
`Turn`s, at least one action (an assistant turn), and, when it records `metrics["achieved"]`,
entries `{"step": i, "goals": [...]}` with `i` counting the actions from 1, in step order; the
seed is not modified; an explorer that takes `index` explores the same way for the same index;
and the explorer runs in the real stage (`explore_seeds` with the `hindsight` summarizer)
without a failed exploration.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from beyondagent_core.envs.local import LocalAsyncEnv, as_opener
from beyondagent_core.registry import Registry
from beyondagent_core.returns import check_exploration
from beyondagent_core.spec import Component, select_component
from beyondagent_core.types import Task, Trajectory


class NoTasks:
    """A summarizer that writes no task: the stage test checks the explorations, not what becomes of them."""

    async def summarize(self, seed: Task, trajectory: Trajectory, known: Any, llm: Any = None) -> list[Task]:
        return []


def actions_of(trajectory: Trajectory) -> list[str]:
    return [turn.content for turn in trajectory.turns if turn.role == "assistant"]


class ExplorerContract:
    """What every explorer must do."""

    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `implementation` (the explore block)")

    @pytest.fixture
    def env(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `env` (the env block)")

    @pytest.fixture
    def seeds(self) -> list[Task]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `seeds`: tasks the env resets on")

    @pytest.fixture
    def llm(self) -> Any:
        return None

    @pytest.fixture
    def selected(self, plugin_manager: Any, implementation: dict[str, Any]) -> Component:
        return select_component(Registry(plugin_manager), "explorer", dict(implementation), key_path="explore")

    @pytest.fixture
    def make_env(self, plugin_manager: Any, env: dict[str, Any]) -> Callable[[], Any]:
        component = select_component(Registry(plugin_manager), "env", dict(env), key_path="env")
        return component.create

    def explore(self, explorer: Any, seed: Task, make_env: Callable[[], Any], llm: Any, **extra: Any) -> Trajectory:
        async def run() -> Any:
            async with LocalAsyncEnv(make_env()) as env:
                return await explorer.explore(seed, env, llm, **extra)

        return asyncio.run(run())

    def checked(self, selected: Component, trajectory: Any) -> Trajectory:
        return check_exploration(trajectory, who=selected.described)

    def test_explore_is_async(self, selected: Component) -> None:
        explore = getattr(selected.create(), "explore", None)
        assert callable(explore), f"{selected.described} has no explore() method"
        assert inspect.iscoroutinefunction(explore), \
            f"{selected.described}: define `async def explore(self, seed, env, llm) -> Trajectory`"

    def test_returns_a_trajectory_of_the_seed_with_actions(self, selected, seeds, make_env, llm) -> None:
        explorer = selected.create()
        for seed in seeds:
            trajectory = self.checked(selected, self.explore(explorer, seed, make_env, llm))
            assert trajectory.task == seed, "the trajectory's task must be the seed it explored from"
            assert actions_of(trajectory), f"exploring {seed.task_id!r} took no action (no assistant turn)"

    def test_achieved_steps_count_actions_from_one_in_order(self, selected, seeds, make_env, llm) -> None:
        explorer = selected.create()
        for seed in seeds:
            trajectory = self.checked(selected, self.explore(explorer, seed, make_env, llm))
            steps = [entry["step"] for entry in trajectory.metrics.get("achieved") or []]
            assert steps == sorted(steps), f"metrics['achieved'] must be in step order, got steps {steps}"

    def test_the_seed_is_not_modified(self, selected, seeds, make_env, llm) -> None:
        explorer = selected.create()
        for seed in seeds:
            before = copy.deepcopy(seed.to_dict())
            self.explore(explorer, seed, make_env, llm)
            assert seed.to_dict() == before, "explore() changed the seed task (its metadata replays the start)"

    def test_the_same_index_explores_the_same_way(self, selected, seeds, make_env, llm) -> None:
        if "index" not in inspect.signature(selected.create().explore).parameters:
            pytest.skip("the explorer takes no `index`: the stage cannot ask it to repeat an exploration")
        for index in (0, 3):
            walks = [actions_of(self.explore(selected.create(), seeds[0], make_env, llm, index=index))
                     for _ in range(2)]
            assert walks[0] == walks[1], f"two explorations with index={index} took different actions"

    def test_runs_in_the_exploration_stage(self, selected, seeds, make_env, llm, tmp_path: Path) -> None:
        from beyondagent_core.exploration.engine import run_exploration
        from beyondagent_core.exploration.executor import LocalExecutor

        executor = LocalExecutor(selected.create(), NoTasks(), as_opener(make_env), llm,
                                 describe=lambda obj: selected.described)
        result = run_exploration(seeds, n=2, workers=2, filters=[], cache_path=tmp_path / "synthetic.jsonl",
                                 executor=executor)
        assert result.failures == 0, f"explorations failed: {result.errors}"
        assert result.completed == 2 * len(seeds)
