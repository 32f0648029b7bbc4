"""BeyondAgent's task synthesis without an LLM: the `hindsight` summarizer, the `dedup` and `min_confidence`
filters, and the `feasibility` filter's machinery with its `replay` solver (`feasibility.py`; the
registered `feasibility` filter, which adds the `llm` solver, is beyondagent-plugin-llm's).

Components of the kinds exploration already has (summarizer, task_filter), registered through the
`beyondagent` entry point like any third party's. Factories are `"module:attr"` strings: listing
plugins imports only the config classes.
"""

from __future__ import annotations

from beyondagent_core import SummarizerSpec, TaskFilterSpec, hookimpl
from beyondagent_plugin_synthesis.filters import DedupConfig, MinConfidenceConfig
from beyondagent_plugin_synthesis.hindsight import HindsightConfig

__all__ = ["beyondagent_summarizers", "beyondagent_task_filters"]

_PACKAGE = "beyondagent_plugin_synthesis"


@hookimpl
def beyondagent_summarizers() -> list[SummarizerSpec]:
    return [SummarizerSpec(
        name="hindsight", factory=f"{_PACKAGE}.hindsight:HindsightSummarizer", config_cls=HindsightConfig,
        summary="No LLM: each goal the env says the exploration achieved, as an env-checked task.")]


@hookimpl
def beyondagent_task_filters() -> list[TaskFilterSpec]:
    return [
        TaskFilterSpec(name="dedup", factory=f"{_PACKAGE}.filters:Dedup", config_cls=DedupConfig,
                       summary="Drop near-duplicate queries: character n-gram similarity (any script), or embeddings."),
        TaskFilterSpec(name="min_confidence", factory=f"{_PACKAGE}.filters:MinConfidence",
                       config_cls=MinConfidenceConfig,
                       summary="Drop tasks whose summarizer confidence is below a threshold."),
    ]
