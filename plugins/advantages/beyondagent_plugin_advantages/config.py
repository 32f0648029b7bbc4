"""The estimators' spec configs (no numpy here: the registry imports this when plugins load)."""

from __future__ import annotations

import attrs

from beyondagent_core.checks import number
from beyondagent_core.llm import LLMConfig

EPS = 1e-6
GIGPO_MODES = ("mean_std_norm", "mean_norm")


@attrs.define
class GrpoConfig:
    """`norm_by_std`: divide by the group's std (unset: the spec's `algorithm.norm_adv_by_std`)."""

    norm_by_std: bool | None = None
    eps: float = attrs.field(default=EPS, validator=number(gt=0))


@attrs.define
class DrGrpoConfig:
    """Dr. GRPO's advantage has no settings: GRPO's without the std (`algorithm.norm_adv_by_std` is not read)."""


@attrs.define
class RlooConfig:
    """RLOO has no settings: each episode against the mean of the *other* episodes of its group."""


@attrs.define
class ReinforcePlusPlusConfig:
    """`gamma`: discount per model token of the outcome (verl's `algorithm.gamma`; 1: every token gets it)."""

    gamma: float = attrs.field(default=1.0, validator=number(ge=0, le=1))


@attrs.define
class ReinforcePlusPlusBaselineConfig:
    """REINFORCE++-baseline has no settings: group-mean baseline, then whitened over the batch's tokens."""


@attrs.define
class GigpoConfig:
    """`gamma`: discount of step returns; `step_weight`: weight of the step-level advantage;
    `mode`: `mean_std_norm` | `mean_norm`; `singleton`: `raw` | `zero` (a state seen once)."""

    gamma: float = attrs.field(default=0.95, validator=number(ge=0, le=1))
    step_weight: float = attrs.field(default=1.0, validator=number(ge=0))
    mode: str = attrs.field(default="mean_std_norm", validator=attrs.validators.in_(GIGPO_MODES))
    singleton: str = attrs.field(default="raw", validator=attrs.validators.in_(("raw", "zero")))
    eps: float = attrs.field(default=EPS, validator=number(gt=0))


@attrs.define
class AdcaConfig:
    """ADCA-GRPO's settings, explained in `beyondagent_plugin_advantages.adca`; `llm` unset: the spec's `llm`."""

    llm: LLMConfig | None = None
    step_reward: float = attrs.field(default=0.2, validator=number(gt=0))
    alpha: float = attrs.field(default=1.0, validator=number(ge=0))
    decay: str = attrs.field(default="cosine", validator=attrs.validators.in_(("cosine", "none")))
    scale: str = attrs.field(default="none", validator=attrs.validators.in_(("none", "inv_sqrt_k")))
    prm_steps: int = attrs.field(default=50, validator=number(ge=0))
    max_step_chars: int = attrs.field(default=1000, validator=number(ge=50))
    concurrency: int = attrs.field(default=8, validator=number(ge=1))
    attempts: int = attrs.field(default=2, validator=number(ge=1))
    temperature: float = attrs.field(default=0.0, validator=number(ge=0))
    max_tokens: int = attrs.field(default=1024, validator=number(ge=16))
    norm_by_std: bool | None = None
    eps: float = attrs.field(default=EPS, validator=number(gt=0))
