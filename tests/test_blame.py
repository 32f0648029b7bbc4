"""A component the backend calls that fails is named, not the backend that called it.

The inline backend does what the torch backend does with the run's components: it learns into
the experience store through `Guidance` (the core's, shared by backends), estimates advantages
with the run's estimator, and runs episodes with the run's episode runner. Each component here
fails in its own way; the run's error must name that component, its key and its plugin.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs
import pytest

from beyondagent_core import (
    AdvantageSpec,
    BackendSpec,
    ExperienceStoreSpec,
    WorkflowSpec,
    hookimpl,
)
from beyondagent_core.advantages import AdvantageBatch
from beyondagent_core.errors import RunError
from beyondagent_core.jsonl import write_tasks
from beyondagent_core.runtime.guidance import Guidance
from beyondagent_core.types import Reward, Task, Trajectory

PROVIDER = "beyondagent-plugin-parts 1.2 (parts)"
pytestmark = pytest.mark.beyondagent_plugins("mixers")


@attrs.define
class LearnerConfig:
    calls: str = "store"  # store | estimator | workflow | itself


class LeakyStore:
    """An experience store whose disk is full: `add` raises, through a helper of its own."""

    def __init__(self, config):
        pass

    def add(self, experiences):
        return self._write(experiences)

    def _write(self, experiences):
        raise OSError("no space left on device")

    def retrieve(self, task, k):
        return []

    async def summarize(self, trajectories, *, step):
        return []

    def stats(self):
        return {}

    def close(self):
        pass


class NanEstimator:
    def __init__(self, config):
        pass

    def estimate(self, batch):
        raise ValueError("the baseline is NaN")


class DictTurns:
    """A workflow that returns its messages as dicts instead of `Turn`s."""

    def __init__(self, config):
        pass

    async def run(self, task, env, llm):
        return Trajectory(task=task, turns=[{"role": "user", "content": "hi"}], reward=Reward(1.0))


class SyncRun:
    """A workflow whose `run` is not async."""

    def __init__(self, config):
        pass

    def run(self, task, env, llm):
        return Trajectory(task=task, reward=Reward(1.0))


class Learner:
    def __init__(self, config: LearnerConfig):
        self.config = config

    def train(self, data, run):
        if self.config.calls == "store":
            guidance = Guidance(run.spec.component("experience").block, run.build("experience"))
            asyncio.run(guidance.learn([Trajectory(task=Task(task_id="t"))], 1))
        elif self.config.calls == "estimator":
            run.advantage_estimator().estimate(AdvantageBatch(episodes=()))
        elif self.config.calls == "workflow":
            trajectory = asyncio.run(run.episode_runner().run(Task(task_id="t"), llm=None))
            return {"error": trajectory.error}
        else:
            raise RuntimeError("the learner itself broke")
        return {}


class Parts:
    @hookimpl
    def beyondagent_backends(self):
        return [BackendSpec(name="learner", factory=Learner, config_cls=LearnerConfig)]

    @hookimpl
    def beyondagent_experience_stores(self):
        return [ExperienceStoreSpec(name="leaky", factory=LeakyStore)]

    @hookimpl
    def beyondagent_advantages(self):
        return [AdvantageSpec(name="nan", factory=NanEstimator)]

    @hookimpl
    def beyondagent_workflows(self):
        return [WorkflowSpec(name="dict_turns", factory=DictTurns), WorkflowSpec(name="sync_run", factory=SyncRun)]


@pytest.fixture
def spec(register_plugin, tmp_path: Path) -> dict:
    register_plugin(Parts(), "parts", distribution="beyondagent-plugin-parts", version="1.2")
    write_tasks(tmp_path / "train.jsonl", [Task(task_id="t", query="q")])
    return {"tasks": {"train": {"name": "jsonl", "path": str(tmp_path / "train.jsonl")}},
            "backend": {"name": "learner", "advantage": {"name": "nan"}},
            "experience": {"name": "leaky"}, "workflow": {"name": "dict_turns"}}


def test_a_store_that_raises_is_named_not_the_backend(run_spec, spec) -> None:
    with pytest.raises(RunError) as info:
        run_spec(spec)
    error = info.value
    assert error.message == "training failed: experience store 'leaky' raised OSError: no space left on device"
    assert error.where == (f"experience (experience store 'leaky' from {PROVIDER}), "
                           f"called by backend (backend 'learner' from {PROVIDER})")
    assert "beyondagent-plugin-parts" in error.hint
    assert isinstance(error.__cause__, OSError)


def test_an_estimator_that_raises_is_named(run_spec, spec) -> None:
    with pytest.raises(RunError) as info:
        run_spec(spec, "backend.calls=estimator")
    assert info.value.message == "training failed: advantage estimator 'nan' raised ValueError: the baseline is NaN"
    assert info.value.where.startswith(f"backend.advantage (advantage estimator 'nan' from {PROVIDER}), called by")


def test_the_backend_failing_by_itself_is_still_the_backends(run_spec, spec) -> None:
    with pytest.raises(RunError) as info:
        run_spec(spec, "backend.calls=itself")
    assert info.value.message == "training failed: RuntimeError: the learner itself broke"
    assert info.value.where == f"backend (backend 'learner' from {PROVIDER})"


def test_a_workflow_returning_message_dicts_names_itself_and_the_expected_type(run_spec, spec) -> None:
    metrics = run_spec(spec, "backend.calls=workflow").metrics
    assert metrics["error"].startswith(f"ReturnError: workflow (workflow 'dict_turns' from {PROVIDER}): run() "
                                       "returned turns[0] = {'role': 'user', 'content': 'hi'} (dict); expected a Turn")


def test_a_sync_workflow_is_named_and_told_to_be_async(run_spec, spec) -> None:
    metrics = run_spec(spec, "backend.calls=workflow", "workflow.name=sync_run").metrics
    assert metrics["error"] == (f"ReturnError: workflow (workflow 'sync_run' from {PROVIDER}): run() returned "
                                "Trajectory instead of a coroutine; define it as `async def run(...)`")
