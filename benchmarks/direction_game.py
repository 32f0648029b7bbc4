"""The task both benchmarks use: "answer with a direction word", its prompts, reward and env.

The reward is defined once here and used by every side of a comparison: our torch backend
reaches it through `DirectionGame` (an ordinary `Env`, registered by `DirectionGamePlugin`),
TRL calls `direction_reward` as its reward function. A random tiny model names a direction
in roughly a third of its 16-token replies, so GRPO has signal from the first step.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from beyondagent_core import EnvReset, EnvSpec, EnvStep, Reward, Task, hookimpl

TARGET_WORDS = ("left", "right", "up", "down")
SYSTEM_PROMPT = "Answer with one direction word."
FOLLOW_UP = "Again: which way?"


def direction_reward(text: str) -> float:
    """1.0 when `text` contains one of TARGET_WORDS (case-insensitive, as a substring), else 0.0."""
    lowered = text.lower()
    return float(any(word in lowered for word in TARGET_WORDS))


def question(index: int) -> str:
    return f"Which way? ({index})"


def prompt_messages(index: int) -> list[dict[str, str]]:
    """The chat prompt of task `index`: what the env's reset() returns and what TRL's dataset holds."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question(index)}]


def tasks(count: int) -> list[Task]:
    return [Task(task_id=f"q{index}", query=question(index)) for index in range(count)]


@attrs.define
class DirectionGameConfig:
    turns: int = 1


class DirectionGame:
    """`turns` model turns; the score is the mean `direction_reward` of the replies."""

    inline_calls = True  # pure Python, microseconds a call: no worker thread (beyondagent_core/envs/local.py)

    def __init__(self, config: DirectionGameConfig):
        self.turns = config.turns
        self.rewards: list[float] = []

    def reset(self, task: Task) -> EnvReset:
        self.rewards = []
        return EnvReset(messages=[{"role": "system", "content": SYSTEM_PROMPT},
                                  {"role": "user", "content": task.query or question(0)}])

    def step(self, action: dict[str, Any]) -> EnvStep:
        reward = direction_reward(action["content"])
        self.rewards.append(reward)
        done = len(self.rewards) >= self.turns
        return EnvStep(observation=[] if done else [{"role": "user", "content": FOLLOW_UP}], reward=reward,
                       terminated=done)

    def evaluate(self) -> Reward:
        score = sum(self.rewards) / max(len(self.rewards), 1)
        return Reward(score=score, success=score == 1.0)

    def close(self) -> None:
        pass


class DirectionGamePlugin:
    """Registers `direction_game` (register it on a PluginManager before `pipeline.prepare`)."""

    @hookimpl
    def beyondagent_envs(self) -> list[EnvSpec]:
        return [EnvSpec(name="direction_game", factory=DirectionGame, config_cls=DirectionGameConfig)]


def rss_kib() -> int:
    """This process's resident set size now (VmRSS, KiB); 0 where /proc is not there."""
    return _proc_status_kib("VmRSS")


def peak_rss_kib() -> int:
    """This process's peak resident set size so far (VmHWM, KiB); 0 where /proc is not there."""
    return _proc_status_kib("VmHWM")


def _proc_status_kib(field: str) -> int:
    path = f"/proc/{os.getpid()}/status"
    if not os.path.exists(path):
        return 0
    with open(path, encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0
