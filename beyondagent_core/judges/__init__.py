"""Judges the core ships: components that score a finished trajectory as a `Reward`.

`llm_judge` (an LLM grades the trajectory against the task and its reference solution) lives
here; environment checkers come with their environment plugins.
"""

from beyondagent_core.judges.llm_judge import LLMJudge, LLMJudgeConfig

__all__ = ["LLMJudge", "LLMJudgeConfig"]
