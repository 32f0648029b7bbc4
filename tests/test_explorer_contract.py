"""The explorer contract suite catches the mistakes a third-party explorer makes.

The suite runs (real pytest, in a subprocess) on inline explorers over a number-line env: a
correct one passes every check, and each broken one — steps counted from 0, a sync `explore`,
no action taken, the seed's metadata changed, random draws that ignore `index` — fails the
check meant for it, with a message that says what to fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

SUITE = '''
import random

import pytest

from beyondagent_core import EnvSpec, ExplorerSpec, hookimpl
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.testing.explorer_contract import ExplorerContract
from beyondagent_core.types import Reward, Task, Trajectory, Turn


class Line:
    def reset(self, task):
        self.position = task.metadata["start"]
        return EnvReset(messages=[{"role": "user", "content": f"at {self.position}"}])

    def step(self, action):
        self.position += 1 if action["content"] == "right" else -1
        return EnvStep(observation=[{"role": "user", "content": f"at {self.position}"}])

    def evaluate(self):
        return Reward(0.0)

    def close(self):
        pass

    def valid_actions(self):
        return ["left", "right"]

    def describe_achieved(self):
        return [{"query": f"Reach {self.position}.", "goal": {"position": self.position}}]


class Good:
    first_step = 1

    def __init__(self, config=None):
        pass

    def moves(self, seed, index):
        return random.Random(f"{seed.task_id}/{index}").choices(["left", "right"], k=3)

    async def explore(self, seed, env, llm, *, index=0):
        turns = [Turn("user", (await env.reset(seed)).messages[0]["content"])]
        achieved = []
        for number, move in enumerate(self.moves(seed, index)):
            step = await env.step({"role": "assistant", "content": move})
            turns += [Turn("assistant", move), Turn("user", step.observation[0]["content"])]
            achieved.append({"step": number + self.first_step, "goals": await env.call("describe_achieved")})
        return Trajectory(task=seed, turns=turns, metrics={"achieved": achieved})


class FromZero(Good):
    first_step = 0


class Sync(Good):
    def explore(self, seed, env, llm):
        return Trajectory(task=seed)


class Idle(Good):
    async def explore(self, seed, env, llm):
        await env.reset(seed)
        return Trajectory(task=seed, turns=[Turn("user", "looked around")])


class Mutator(Good):
    async def explore(self, seed, env, llm, *, index=0):
        seed.metadata["visited"] = True
        return await super().explore(seed, env, llm, index=index)


class Forgetful(Good):
    def moves(self, seed, index):
        return random.choices(["left", "right"], k=8)


class Parts:
    @hookimpl
    def beyondagent_envs(self):
        return [EnvSpec(name="line", factory=lambda config: Line())]

    @hookimpl
    def beyondagent_explorers(self):
        return [ExplorerSpec(name=cls.__name__.lower(), factory=cls)
                for cls in (Good, FromZero, Sync, Idle, Mutator, Forgetful)]


@pytest.fixture(autouse=True)
def parts(register_plugin):
    register_plugin(Parts(), "parts", distribution="beyondagent-plugin-parts", version="1.0")


class TestGood(ExplorerContract):
    name = "good"

    @pytest.fixture
    def implementation(self):
        return {"name": self.name}

    @pytest.fixture
    def env(self):
        return {"name": "line"}

    @pytest.fixture
    def seeds(self):
        return [Task(task_id=f"line-{start}", metadata={"start": start}) for start in (0, 10)]


class TestFromZero(TestGood):
    name = "fromzero"


class TestSync(TestGood):
    name = "sync"


class TestIdle(TestGood):
    name = "idle"


class TestMutator(TestGood):
    name = "mutator"


class TestForgetful(TestGood):
    name = "forgetful"
'''


def outcomes(tmp_path: Path) -> dict[str, str]:
    """test id (`Class::test`) -> `passed`, `skipped` or the failure's message (from pytest's JUnit XML)."""
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "beyondagent_core.testing", "-p", "no:cacheprovider",
                             "-q", "-o", "addopts=", "--junitxml=report.xml", "test_suite.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (tmp_path / "report.xml").is_file(), result.stdout + result.stderr
    found = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        test = f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            found[test] = problem.get("message") or "failed"
        else:
            found[test] = "skipped" if case.find("skipped") is not None else "passed"
    return found


def test_the_suite_passes_a_correct_explorer_and_fails_each_broken_one(tmp_path: Path) -> None:
    found = outcomes(tmp_path)
    good = {test: outcome for test, outcome in found.items() if test.startswith("TestGood::")}
    assert len(good) == 6 and set(good.values()) == {"passed"}, good

    def failed(cls: str, test: str, *words: str) -> None:
        outcome = found[f"{cls}::{test}"]
        assert outcome not in ("passed", "skipped"), f"{cls}::{test} did not fail"
        assert all(word in outcome for word in words), outcome

    failed("TestFromZero", "test_returns_a_trajectory_of_the_seed_with_actions",
           "explore (explorer 'fromzero' from beyondagent-plugin-parts 1.0 (parts))", "with step 0", "from 1")
    failed("TestFromZero", "test_runs_in_the_exploration_stage", "explorations failed")
    failed("TestSync", "test_explore_is_async", "async def explore")
    failed("TestSync", "test_runs_in_the_exploration_stage", "explorer 'sync'", "returned Trajectory instead of a "
           "coroutine; define it as `async def explore(...)`")
    failed("TestIdle", "test_returns_a_trajectory_of_the_seed_with_actions", "took no action")
    failed("TestMutator", "test_the_seed_is_not_modified", "changed the seed task")
    failed("TestForgetful", "test_the_same_index_explores_the_same_way", "index=0 took different actions")
    assert found["TestIdle::test_the_same_index_explores_the_same_way"] == "skipped"  # it takes no index
    assert found["TestMutator::test_returns_a_trajectory_of_the_seed_with_actions"] == "passed"
