"""BeyondAgent's first-party explorer `random`: map an environment from a seed task's start.

In `llm` mode a high-temperature LLM agent is told to map the environment (its actions,
entities and their attributes) rather than solve the seed task; in `random_actions` mode,
for envs that list their valid actions, no LLM is needed: each step is drawn uniformly from
them. The factory is a `"module:attr"` string, so the explorer module is imported only when
a spec selects it.
"""

from __future__ import annotations

from beyondagent_core import ExplorerSpec, hookimpl
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig

__all__ = ["RandomExplorerConfig", "beyondagent_explorers"]


@hookimpl
def beyondagent_explorers() -> list[ExplorerSpec]:
    return [
        ExplorerSpec(name="random", factory="beyondagent_plugin_random_explorer.explorer:RandomExplorer",
                     config_cls=RandomExplorerConfig,
                     summary="Map the env from the seed's start: a high-temperature LLM, or random valid actions."),
    ]
