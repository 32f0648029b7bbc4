"""BeyondAgent's LLM-based synthesis and judging: the `llm` summarizer, `feasibility`, `llm_judge`.

Each asks an OpenAI-compatible endpoint through the core's client (`beyondagent_core.llm`):
the spec's `llm`, or a component's own `llm` block. Factories are `"module:attr"` strings: a
module is imported only when a spec selects its component.
"""

from __future__ import annotations

from beyondagent_core import RewardSpec, SummarizerSpec, TaskFilterSpec, hookimpl
from beyondagent_plugin_llm.config import LLMFeasibilityConfig, LLMJudgeConfig, LLMSummarizerConfig

__all__ = ["beyondagent_rewards", "beyondagent_summarizers", "beyondagent_task_filters"]

_PACKAGE = "beyondagent_plugin_llm"


@hookimpl
def beyondagent_summarizers() -> list[SummarizerSpec]:
    return [SummarizerSpec(
        name="llm", factory=f"{_PACKAGE}.summarizer:LLMSummarizer", config_cls=LLMSummarizerConfig,
        summary="An LLM turns an exploration into <task> blocks: query, confidence, action sequence.")]


@hookimpl
def beyondagent_task_filters() -> list[TaskFilterSpec]:
    return [TaskFilterSpec(
        name="feasibility", factory=f"{_PACKAGE}.feasibility:LLMFeasibility", config_cls=LLMFeasibilityConfig,
        summary="Keep a task only if re-running it with its reference succeeds (LLM with a hint, or replay).")]


@hookimpl
def beyondagent_rewards() -> list[RewardSpec]:
    return [RewardSpec(
        name="llm_judge", factory=f"{_PACKAGE}.judge:LLMJudge", config_cls=LLMJudgeConfig,
        summary="An LLM grades the trajectory against the task and its reference (yes/no or 0-1, k votes).")]
