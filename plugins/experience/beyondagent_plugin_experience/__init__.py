"""BeyondAgent's first-party experience store, `experience` (see README.md and docs/self-evolve.md).

The factory is a `"module:attr"` string: sqlite, bm25s, openai and sqlite-vec are imported only when a spec selects it.
"""

from __future__ import annotations

from beyondagent_core import ExperienceStoreSpec, hookimpl
from beyondagent_plugin_experience.config import ExperienceStoreConfig

__all__ = ["ExperienceStoreConfig", "beyondagent_experience_stores"]


@hookimpl
def beyondagent_experience_stores() -> list[ExperienceStoreSpec]:
    return [ExperienceStoreSpec(
        name="experience", factory="beyondagent_plugin_experience.store:SqliteExperienceStore",
        config_cls=ExperienceStoreConfig,
        summary="Lessons from finished episodes in sqlite, BM25 or embedding retrieval; hindsight or LLM summaries.")]
