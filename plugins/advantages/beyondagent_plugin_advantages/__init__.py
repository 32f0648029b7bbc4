"""BeyondAgent's first-party advantage estimators: `grpo` (the default), `gigpo`, `adca`.

An estimator turns a training batch of finished episodes into one advantage per response token
(`beyondagent_core.advantages`); a spec picks one with `backend.advantage: {name: ...}`. They use
numpy only, so every backend runs the same code. Factories are `"module:attr"` strings: a
module is imported only when a spec selects its estimator.
"""

from __future__ import annotations

from beyondagent_core import AdvantageSpec, hookimpl
from beyondagent_plugin_advantages.config import AdcaConfig, GigpoConfig, GrpoConfig

__all__ = ["AdcaConfig", "GigpoConfig", "GrpoConfig", "beyondagent_advantages"]


@hookimpl
def beyondagent_advantages() -> list[AdvantageSpec]:
    return [
        AdvantageSpec(name="grpo", factory="beyondagent_plugin_advantages.grpo:Grpo", config_cls=GrpoConfig,
                      summary="GRPO: each episode's outcome against its group, on all its tokens."),
        AdvantageSpec(name="gigpo", factory="beyondagent_plugin_advantages.gigpo:Gigpo", config_cls=GigpoConfig,
                      summary="GiGPO: GRPO plus step advantages from groups of identical states."),
        AdvantageSpec(name="adca", factory="beyondagent_plugin_advantages.adca:Adca", config_cls=AdcaConfig,
                      summary="ADCA-GRPO: an LLM labels each step GOOD/BAD; step-wise suffix-sum advantages."),
    ]
