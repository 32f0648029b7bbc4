"""BeyondAgent's first-party advantage estimators: `grpo` (the default), `dr_grpo`, `rloo`,
`reinforce_plus_plus`, `reinforce_plus_plus_baseline`, `gigpo`, `adca`, `rae` (games: a running baseline per role), and `gae`
(PPO: a critic's values, `uses_values`).

An estimator turns a training batch of finished episodes into one advantage per response token
(`beyondagent_core.advantages`); a spec picks one with `backend.advantage: {name: ...}`. They use
numpy only, so every backend runs the same code. Factories are `"module:attr"` strings: a
module is imported only when a spec selects its estimator.
"""

from __future__ import annotations

from beyondagent_core import AdvantageSpec, hookimpl
from beyondagent_plugin_advantages.config import (
    AdcaConfig,
    DrGrpoConfig,
    GaeConfig,
    GigpoConfig,
    GrpoConfig,
    RaeConfig,
    ReinforcePlusPlusBaselineConfig,
    ReinforcePlusPlusConfig,
    RlooConfig,
)

__all__ = ["AdcaConfig", "DrGrpoConfig", "GaeConfig", "GigpoConfig", "GrpoConfig", "RaeConfig",
           "ReinforcePlusPlusBaselineConfig", "ReinforcePlusPlusConfig", "RlooConfig", "beyondagent_advantages"]

_PACKAGE = "beyondagent_plugin_advantages"


@hookimpl
def beyondagent_advantages() -> list[AdvantageSpec]:
    return [
        AdvantageSpec(name="grpo", factory=f"{_PACKAGE}.grpo:Grpo", config_cls=GrpoConfig,
                      summary="GRPO: each episode's outcome against its group, on all its tokens."),
        AdvantageSpec(name="dr_grpo", factory=f"{_PACKAGE}.grpo:DrGrpo", config_cls=DrGrpoConfig,
                      summary="Dr. GRPO: GRPO's advantage without dividing by the group's std."),
        AdvantageSpec(name="rloo", factory=f"{_PACKAGE}.rloo:Rloo", config_cls=RlooConfig,
                      summary="RLOO: each episode's outcome against the mean of the rest of its group."),
        AdvantageSpec(name="reinforce_plus_plus", factory=f"{_PACKAGE}.reinforce:ReinforcePlusPlus",
                      config_cls=ReinforcePlusPlusConfig,
                      summary="REINFORCE++: the outcome's discounted return, whitened over the batch's tokens."),
        AdvantageSpec(name="reinforce_plus_plus_baseline", factory=f"{_PACKAGE}.reinforce:ReinforcePlusPlusBaseline",
                      config_cls=ReinforcePlusPlusBaselineConfig,
                      summary="REINFORCE++-baseline: outcome minus its group's mean, whitened over the batch's tokens."),
        AdvantageSpec(name="gigpo", factory=f"{_PACKAGE}.gigpo:Gigpo", config_cls=GigpoConfig,
                      summary="GiGPO: GRPO plus step advantages from groups of identical states."),
        AdvantageSpec(name="adca", factory=f"{_PACKAGE}.adca:Adca", config_cls=AdcaConfig,
                      summary="ADCA-GRPO: an LLM labels each step GOOD/BAD; step-wise suffix-sum advantages."),
        AdvantageSpec(name="rae", factory=f"{_PACKAGE}.rae:Rae", config_cls=RaeConfig,
                      summary="RAE (SPIRAL): each episode's outcome against a running baseline of its game and seat."),
        AdvantageSpec(name="gae", factory=f"{_PACKAGE}.gae:Gae", config_cls=GaeConfig, uses_values=True,
                      summary="GAE (PPO): a critic's values, TD errors over the model tokens, whitened."),
    ]
