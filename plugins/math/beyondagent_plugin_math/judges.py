"""The math judges: `math_answer` (rule-based) and `math_format` (a format reward).

Both grade the episode's **last assistant turn** (the final answer of a multi-turn tool
episode; the only turn of a CoT one) against `task.ground_truth`. Grading runs in a worker
thread, so a slow math-verify call never blocks the event loop the episodes share; it never
raises (see `grading.py`).
"""

from __future__ import annotations

import asyncio

from beyondagent_core.types import Reward, Task, Trajectory
from beyondagent_plugin_math.answers import extract_answer, last_boxed
from beyondagent_plugin_math.config import MathAnswerConfig, MathFormatConfig
from beyondagent_plugin_math.grading import grade
from beyondagent_plugin_math.verify_worker import shared_worker


def final_answer_text(trajectory: Trajectory) -> str:
    """The content of the last assistant turn ('' when the model never answered)."""
    for turn in reversed(trajectory.turns):
        if turn.role == "assistant":
            return turn.content or ""
    return ""


class MathAnswerJudge:
    def __init__(self, config: MathAnswerConfig | None = None):
        self.config = config or MathAnswerConfig()
        self.worker = shared_worker(self.config.verify_timeout)

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        return await asyncio.to_thread(self.grade, final_answer_text(trajectory), task.ground_truth)

    def grade(self, solution: str, ground_truth: object) -> Reward:
        return grade(solution, ground_truth, last_number=self.config.last_number,
                     format_score=self.config.format_score, correct_score=self.config.correct_score,
                     worker=self.worker)


class MathFormatJudge:
    def __init__(self, config: MathFormatConfig | None = None):
        self.config = config or MathFormatConfig()

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        text = final_answer_text(trajectory)
        if self.config.require_boxed:
            answer = last_boxed(text)
            found = bool(answer)
        else:
            extracted = extract_answer(text)
            answer, found = (extracted.answer if extracted else None), extracted is not None
        if not found:
            return Reward(0.0, reason="no final answer in the expected format", details={"answer": None})
        return Reward(float(self.config.score), success=True, reason="the final answer is in the expected format",
                      details={"answer": answer})
