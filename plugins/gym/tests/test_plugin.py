"""The gym plugin as the core sees it: registration, lazy imports, spec errors, async envs, a run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from importlib.metadata import entry_points

import attrs
import beyondagent_plugin_gym
import pytest
from gym_helpers import frozenlake_path

from beyondagent_core import EnvSpec, Task, TaskSourceSpec, Turn
from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.errors import SpecError
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.registry import Registry
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.spec import select_component

pytestmark = pytest.mark.beyondagent_plugins("gym")


def test_hooks_register_three_envs_and_a_task_source_with_lazy_factories() -> None:
    envs = beyondagent_plugin_gym.beyondagent_envs()
    assert [spec.name for spec in envs] == ["frozenlake", "taxi", "cliffwalking"]
    [source] = beyondagent_plugin_gym.beyondagent_task_sources()
    assert isinstance(source, TaskSourceSpec) and source.name == "gym_tasks"
    for spec in [*envs, source]:
        assert isinstance(spec, (EnvSpec, TaskSourceSpec))
        assert isinstance(spec.factory, str) and spec.factory.startswith("beyondagent_plugin_gym.")
        assert attrs.has(spec.config_cls) and spec.summary
        spec.load_factory()  # the "module:attr" string resolves


def test_entry_point_is_declared() -> None:
    points = {ep.name: ep.value for ep in entry_points(group="beyondagent")}
    assert points.get("gym") == "beyondagent_plugin_gym"


def test_listing_the_plugin_does_not_import_gymnasium() -> None:
    code = ("import sys, beyondagent_plugin_gym as p; p.beyondagent_envs(); p.beyondagent_task_sources(); "
            "print('gymnasium' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_registry_builds_each_env_from_a_spec_block(plugin_manager) -> None:
    registry = Registry(plugin_manager)
    for name in ("frozenlake", "taxi", "cliffwalking"):
        env = select_component(registry, "env", {"name": name, "max_steps": 7}).create()
        assert env.config.max_steps == 7
        assert env.reset(Task(task_id=f"{name}-train-0")).messages[0]["role"] == "system"
        env.close()


@pytest.mark.parametrize(
    ("kind", "block", "message"),
    [
        ("env", {"name": "frozenlake", "size": 1}, "component.size must be >= 2, got 1"),
        ("env", {"name": "frozenlake", "size": 129}, "component.size must be <= 128 (time: gymnasium builds"),
        ("env", {"name": "taxi", "max_steps": 0}, "component.max_steps must be >= 1, got 0"),
        ("env", {"name": "frozenlake", "slippery": True}, "unknown key component.slippery"),
        ("task_source", {"name": "gym_tasks", "env": "pong"}, "invalid component: env must be one of"),
    ],
)
def test_bad_spec_blocks_are_spec_errors(plugin_manager, kind: str, block, message: str) -> None:
    with pytest.raises(SpecError) as info:
        select_component(Registry(plugin_manager), kind, block).create()
    assert info.value.message.startswith(message)


def test_an_episode_runs_through_local_async_env(plugin_manager) -> None:
    env = select_component(Registry(plugin_manager), "env", {"name": "frozenlake", "size": 3}).create()
    [task] = select_component(Registry(plugin_manager), "task_source",
                              {"name": "gym_tasks", "env": "frozenlake", "size": 3, "start": 11, "count": 1}
                              ).create().load(BadRecords("fail"))

    async def episode() -> tuple[list[bool], float, bool]:
        async with LocalAsyncEnv(env) as aenv:
            await aenv.reset(task)
            done = []
            for action in frozenlake_path(task.metadata["map"]):
                step = await aenv.step({"role": "assistant", "content": f"<answer>{action}</answer>"})
                done.append(step.terminated)
            reward = await aenv.evaluate()
            return done, reward.score, reward.success

    done, score, success = asyncio.run(episode())
    assert done[-1] and not any(done[:-1])
    assert (score, success) == (1.0, True)
    assert env.gym_env is None  # LocalAsyncEnv closed it


class ScriptedLLM:
    """Stands in for a model (none runs in these tests): answers with the given texts in turn."""

    def __init__(self, answers: list[str]):
        self.answers = list(answers)
        self.seen: list[list[dict]] = []

    async def chat(self, messages, **sampling) -> Turn:
        self.seen.append([dict(m) for m in messages])
        return Turn(role="assistant", content=self.answers.pop(0))


def test_the_react_workflow_plays_an_episode(plugin_manager) -> None:
    registry = Registry(plugin_manager)
    workflow = select_component(registry, "workflow", {"name": "react", "max_turns": 10}).create()
    env_block = select_component(registry, "env", {"name": "frozenlake", "size": 3, "invalid_action_reward": -0.5})
    task = Task(task_id="frozenlake-train-11")
    path = frozenlake_path(env_block.create().reset(task).info["metadata"]["map"])
    llm = ScriptedLLM(["Hmm, let me think.", *(f"I go {action}. Action: {action}" for action in path)])

    trajectory = asyncio.run(EpisodeRunner(workflow, env_block.create).run(task, llm))
    assert trajectory.error is None and trajectory.terminated
    assert trajectory.reward.success and trajectory.reward.score == 0.5
    assert trajectory.metrics["turns"] == len(path) + 1
    assert [m["role"] for m in llm.seen[0]] == ["system", "user"]
    assert llm.seen[1][-1]["content"].startswith("Invalid action 'Hmm, let me think.' (no action found).")
    assert trajectory.turns[-1].content.endswith("You reached the goal!")


@pytest.mark.beyondagent_plugins("mixers")  # every run needs a mixer
def test_a_spec_run_exports_gym_tasks(run_spec, plugin_manager) -> None:
    spec = {
        "run": {"name": "gym", "seed": 0},
        "tasks": {"train": {"name": "gym_tasks", "env": "taxi", "count": 4},
                  "val": {"name": "gym_tasks", "env": "taxi", "split": "val", "count": 2}},
        "env": {"name": "taxi"},
        "mixture": {"name": "original", "shuffle": False},
        "backend": {"name": "export", "format": "jsonl"},
    }
    result = run_spec(spec)
    assert result.metrics == {"tasks": 4, "original": 4, "synthetic": 0, "val_tasks": 2}
    exported = [json.loads(line) for line in (result.run_dir / "data" / "train.epoch0.jsonl").read_text().splitlines()]
    assert [row["task_id"] for row in exported] == [f"taxi-train-{i}" for i in range(4)]
    assert all(set(row["metadata"]) == {"seed", "state"} for row in exported)
