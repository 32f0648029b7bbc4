"""`math_cot`: one model turn; the model reasons and puts its final answer in `\\boxed{}`.

Needs no environment (it is called with `env=None`, and ignores any env it is given). The
reward comes from the spec's `reward` judge (`math_answer`, `math_answer_or_llm`).
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Task, Trajectory, Turn
from beyondagent_plugin_math.config import MathCotConfig
from beyondagent_plugin_math.prompts import opening_messages, sampling_of


class MathCotWorkflow:
    def __init__(self, config: MathCotConfig | None = None):
        self.config = config or MathCotConfig()
        self.sampling = sampling_of(self.config)

    async def run(self, task: Task, env: Any, llm: ChatLLM) -> Trajectory:
        messages = opening_messages(task, self.config.system_prompt, use_task_prompt=self.config.use_task_prompt)
        turns = [Turn(role=m["role"], content=m["content"]) for m in messages]
        truncated = False
        try:
            turns.append(await llm.chat(messages, **self.sampling))
        except ContextLengthExceeded:
            truncated = True
        return Trajectory(task=task, turns=turns, terminated=not truncated,
                          metrics={"turns": 0 if truncated else 1, "truncated": truncated})
