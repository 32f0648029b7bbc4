"""The workflow runtime without a model: the react loop and the episode runner.

`ScriptedLLM` is a test double standing in for a model (the core has no torch); the torch
plugin's tests run the same loop against a real, locally built model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Reward, Task, Trajectory, Turn


class Countdown:
    """Say numbers; the episode ends when the model says 'stop' or after `steps` steps."""

    def __init__(self, steps: int = 3, observation: Any = "ok"):
        self.steps, self.observation, self.taken, self.closed = steps, observation, 0, False

    def reset(self, task: Task) -> EnvReset:
        self.taken = 0
        return EnvReset(messages=[{"role": "system", "content": "Count."}, {"role": "user", "content": "Go."}])

    def step(self, action: dict[str, Any]) -> EnvStep:
        self.taken += 1
        done = action["content"] == "stop" or self.taken >= self.steps
        return EnvStep(observation=[{"role": "user", "content": self.observation}], reward=1.0, terminated=done)

    def evaluate(self) -> Reward:
        return Reward(score=float(self.taken), success=self.taken >= self.steps)

    def close(self) -> None:
        self.closed = True


class ScriptedLLM:
    def __init__(self, replies: list[str], *, budget: int | None = None):
        self.replies, self.budget, self.seen = list(replies), budget, []

    async def chat(self, messages, **sampling) -> Turn:
        self.seen.append((list(messages), sampling))
        if self.budget is not None and len(self.seen) > self.budget:
            raise ContextLengthExceeded("budget spent")
        return Turn(role="assistant", content=self.replies.pop(0) if self.replies else "next")


def run(runner: EpisodeRunner, llm: ScriptedLLM, task: Task | None = None) -> Trajectory:
    return asyncio.run(runner.run(task or Task("t1"), llm))


def test_react_acts_and_observes_until_the_env_ends_the_episode() -> None:
    envs: list[Countdown] = []
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=10, temperature=0.5)),
                           make_env=lambda: envs.append(Countdown(steps=3)) or envs[-1])
    llm = ScriptedLLM(["one", "two", "three", "four"])
    trajectory = run(runner, llm)
    assert [t.role for t in trajectory.turns] == ["system", "user"] + ["assistant", "user"] * 3
    assert trajectory.terminated and trajectory.reward == Reward(score=3.0, success=True)
    assert trajectory.metrics["turns"] == 3 and trajectory.metrics["env_reward"] == 3.0
    # The model sees the whole conversation each turn, with the workflow's sampling options.
    messages, sampling = llm.seen[-1]
    assert [m["content"] for m in messages] == ["Count.", "Go.", "one", "ok", "two", "ok"]
    assert sampling == {"temperature": 0.5}
    assert envs[0].closed


def test_react_stops_at_max_turns_and_when_the_token_budget_is_spent() -> None:
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=2)), make_env=lambda: Countdown(steps=9))
    trajectory = run(runner, ScriptedLLM([]))
    assert trajectory.metrics["turns"] == 2 and not trajectory.terminated

    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=9)), make_env=lambda: Countdown(steps=9))
    trajectory = run(runner, ScriptedLLM([], budget=1))
    assert trajectory.metrics == {**trajectory.metrics, "turns": 1, "truncated": True}
    assert trajectory.error is None


def test_a_non_string_observation_is_an_error_record() -> None:
    runner = EpisodeRunner(ReactWorkflow(), make_env=lambda: Countdown(observation=42))
    trajectory = run(runner, ScriptedLLM([]))
    assert trajectory.error.startswith("TypeError: env step() returned a non-string observation")
    assert trajectory.reward.score == 0.0
    # the record keeps the conversation up to the failure: what a user needs to see why
    assert [(t.role, t.content) for t in trajectory.turns] == [("system", "Count."), ("user", "Go."),
                                                             ("assistant", "next")]


def test_a_failing_workflow_or_env_becomes_an_error_record() -> None:
    class Broken(ReactWorkflow):
        async def run(self, task, env, llm):
            raise KeyError("oops")

    trajectory = run(EpisodeRunner(Broken(), make_env=Countdown), ScriptedLLM([]))
    assert trajectory.error == "KeyError: 'oops'" and trajectory.reward.score == 0.0

    def no_env():
        raise OSError("env server down")

    trajectory = run(EpisodeRunner(ReactWorkflow(), make_env=no_env), ScriptedLLM([]))
    assert trajectory.error == "OSError: env server down"


def test_the_judge_scores_the_episode_when_configured() -> None:
    class Judge:
        async def score(self, task: Task, trajectory: Trajectory) -> Reward:
            return Reward(score=0.25, reason=f"judged {len(trajectory.turns)} turns")

    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=1)), make_env=Countdown, judge=Judge())
    assert run(runner, ScriptedLLM([])).reward == Reward(score=0.25, reason="judged 4 turns")


def test_max_turns_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        ReactWorkflow(ReactConfig(max_turns=0))
