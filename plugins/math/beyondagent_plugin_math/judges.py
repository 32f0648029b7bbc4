"""The math judges: `math_answer` (rule-based) and `math_format` (a format reward).

Both grade the episode's **last assistant turn** (the final answer of a multi-turn tool
episode; the only turn of a CoT one) against `task.ground_truth`. Grading runs in a worker
thread, so a slow math-verify call never blocks the event loop the episodes share; it never
raises (see `grading.py`).

A reply cut off by the token limit is not a finished answer ("The answer is 3, but to" was
graded as the answer "3, but to"): `math_answer` scores it `truncated_score` (default 0,
`details.status` `truncated`, the reason says which limit) without reading it. A turn is cut
off when its `Turn.finish_reason` is `"length"` (the torch and verl backends and OpenAI
endpoints set it); an episode is when its `metrics["truncated"]` is set (its token budget ran
out before the model answered). With `truncated_score: null` such replies are graded as they are.
"""

from __future__ import annotations

import asyncio

from beyondagent_core.types import Reward, Task, Trajectory, Turn
from beyondagent_plugin_math.answers import extract_answer, last_boxed, prose
from beyondagent_plugin_math.config import MathAnswerConfig, MathFormatConfig
from beyondagent_plugin_math.grading import grade
from beyondagent_plugin_math.verify_worker import shared_worker


def final_answer_turn(trajectory: Trajectory) -> Turn | None:
    """The last assistant turn (None when the model never answered)."""
    return next((turn for turn in reversed(trajectory.turns) if turn.role == "assistant"), None)


def final_answer_text(trajectory: Trajectory) -> str:
    """The content of the last assistant turn ('' when the model never answered)."""
    turn = final_answer_turn(trajectory)
    return (turn.content or "") if turn is not None else ""


def cut_off(trajectory: Trajectory) -> str | None:
    """Why the final answer is unfinished (a token limit cut it), or None when it is not."""
    turn = final_answer_turn(trajectory)
    if turn is not None and turn.finish_reason == "length":
        return "the reply was cut off by the token limit (max_tokens) before it finished"
    if trajectory.metrics.get("truncated"):
        return "the episode's token budget (max_episode_tokens) ran out before the model finished"
    return None


class MathAnswerJudge:
    def __init__(self, config: MathAnswerConfig | None = None):
        self.config = config or MathAnswerConfig()
        self.worker = shared_worker(self.config.verify_timeout)

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        why = cut_off(trajectory)
        if why is not None and self.config.truncated_score is not None:
            turn = final_answer_turn(trajectory)
            return Reward(float(self.config.truncated_score),
                          reason=f"{why}: truncated_score={self.config.truncated_score} "
                                 "(truncated_score: null grades cut-off replies as they are)",
                          details={"status": "truncated", "finish_reason": turn.finish_reason if turn else None})
        return await asyncio.to_thread(self.grade, final_answer_text(trajectory), task.ground_truth)

    def grade(self, solution: str, ground_truth: object) -> Reward:
        config = self.config
        return grade(solution, ground_truth, last_number=config.last_number, allow_expressions=config.allow_expressions,
                     format_score=config.format_score, correct_score=config.correct_score, worker=self.worker)


class MathFormatJudge:
    def __init__(self, config: MathFormatConfig | None = None):
        self.config = config or MathFormatConfig()

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        text = final_answer_text(trajectory)
        if self.config.require_boxed:
            answer = last_boxed(prose(text))  # a box inside code is not the answer
            found = bool(answer)
        else:
            extracted = extract_answer(text)
            answer, found = (extracted.answer if extracted else None), extracted is not None
        if not found:
            return Reward(0.0, reason="no final answer in the expected format", details={"answer": None})
        return Reward(float(self.config.score), success=True, reason="the final answer is in the expected format",
                      details={"answer": answer})
