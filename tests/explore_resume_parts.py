"""An exploration setup shared by the resume test and the child process it kills.

A number-line env, an explorer that walks a seeded number of steps (slowly, so the child is
killed mid-run), and a summarizer that proposes two distinct tasks per exploration.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from beyondagent_core.exploration.engine import run_exploration
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.types import Reward, Task, Trajectory, Turn

SEEDS = [Task(task_id=f"seed-{k}", metadata={"start": 10 * k}) for k in range(8)]
N = 5


class Line:
    def __init__(self) -> None:
        self.position = 0

    def reset(self, task: Task) -> EnvReset:
        self.position = task.metadata["start"]
        return EnvReset(messages=[{"role": "user", "content": str(self.position)}])

    def step(self, action: dict) -> EnvStep:
        self.position += 1
        return EnvStep(observation=[{"role": "user", "content": str(self.position)}])

    def evaluate(self) -> Reward:
        return Reward(0.0)

    def close(self) -> None:
        pass


class Walker:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def explore(self, seed: Task, env, llm) -> Trajectory:
        await env.reset(seed)
        await asyncio.sleep(self.delay)
        turns = []
        for _ in range(3):
            step = await env.step({"role": "assistant", "content": "right"})
            turns += [Turn("assistant", "right"), Turn("user", step.observation[0]["content"])]
        return Trajectory(task=seed, turns=turns)


class TwoGoals:
    """Two tasks per exploration, unique per (seed, how many were known before)."""

    async def summarize(self, seed, trajectory, known, llm) -> list[Task]:
        k = len(known)
        return [Task(task_id=f"{seed.task_id}/a{k}", query=f"{seed.task_id} goal {k}"),
                Task(task_id=f"{seed.task_id}/b{k}", query=f"{seed.task_id} goal {k + 1}")]


def explore(cache: Path, delay: float):
    return run_exploration(SEEDS, n=N, workers=2, explorer=Walker(delay), summarizer=TwoGoals(), filters=[],
                           make_env=Line, cache_path=cache, settings={"test": "resume"})


if __name__ == "__main__":
    explore(Path(sys.argv[1]), delay=float(sys.argv[2]))
