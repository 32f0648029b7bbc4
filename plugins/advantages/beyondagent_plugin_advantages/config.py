"""The estimators' spec configs (no numpy here: the registry imports this when plugins load)."""

from __future__ import annotations

import attrs

from beyondagent_core.checks import (
    CHARS_WHY,
    COEF_WHY,
    CONCURRENCY_WHY,
    EPS_WHY,
    FRACTION_WHY,
    MAX_CHARS,
    MAX_COEF,
    MAX_CONCURRENCY,
    MAX_EPS,
    MAX_RETRIES,
    MAX_REWARD,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    REWARD_WHY,
    RETRIES_WHY,
    STEPS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    number,
)
from beyondagent_core.llm_config import LLMConfig

EPS = 1e-6
GIGPO_MODES = ("mean_std_norm", "mean_norm")
_eps = number(gt=0, le=MAX_EPS, why=EPS_WHY)


@attrs.define
class GrpoConfig:
    """`norm_by_std`: divide by the group's std (unset: the spec's `algorithm.norm_adv_by_std`)."""

    norm_by_std: bool | None = None
    eps: float = attrs.field(default=EPS, validator=_eps)


@attrs.define
class DrGrpoConfig:
    """Dr. GRPO's advantage has no settings: GRPO's without the std (`algorithm.norm_adv_by_std` is not read)."""


@attrs.define
class RaeConfig:
    """`decay`: how much of a role's baseline a step keeps (SPIRAL's 0.95; 0: the step's own mean)."""

    decay: float = attrs.field(default=0.95, validator=number(ge=0, lt=1, why=FRACTION_WHY))


@attrs.define
class RlooConfig:
    """RLOO has no settings: each episode against the mean of the *other* episodes of its group."""


@attrs.define
class ReinforcePlusPlusConfig:
    """`gamma`: discount per model token of the outcome (verl's `algorithm.gamma`; 1: every token gets it)."""

    gamma: float = attrs.field(default=1.0, validator=number(ge=0, le=1, why=FRACTION_WHY))


@attrs.define
class GaeConfig:
    """`gamma`: discount per model token; `lam`: GAE's lambda, from 0 (one-step TD errors: the critic's
    word) to 1 (Monte-Carlo returns minus the value). verl's `algorithm.gamma` and `algorithm.lam`."""

    gamma: float = attrs.field(default=1.0, validator=number(ge=0, le=1, why=FRACTION_WHY))
    lam: float = attrs.field(default=1.0, validator=number(ge=0, le=1, why=FRACTION_WHY))


@attrs.define
class ReinforcePlusPlusBaselineConfig:
    """REINFORCE++-baseline has no settings: group-mean baseline, then whitened over the batch's tokens."""


@attrs.define
class GigpoConfig:
    """`gamma`: discount of step returns; `step_weight`: weight of the step-level advantage;
    `mode`: `mean_std_norm` | `mean_norm`; `singleton`: `raw` | `zero` (a state seen once)."""

    gamma: float = attrs.field(default=0.95, validator=number(ge=0, le=1, why=FRACTION_WHY))
    step_weight: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    mode: str = attrs.field(default="mean_std_norm", validator=attrs.validators.in_(GIGPO_MODES))
    singleton: str = attrs.field(default="raw", validator=attrs.validators.in_(("raw", "zero")))
    eps: float = attrs.field(default=EPS, validator=_eps)


@attrs.define
class AdcaConfig:
    """ADCA-GRPO's settings, explained in `beyondagent_plugin_advantages.adca`; `llm` unset: the spec's `llm`."""

    llm: LLMConfig | None = None
    step_reward: float = attrs.field(default=0.2, validator=number(gt=0, le=MAX_REWARD, why=REWARD_WHY))
    alpha: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_COEF, why=COEF_WHY))
    decay: str = attrs.field(default="cosine", validator=attrs.validators.in_(("cosine", "none")))
    scale: str = attrs.field(default="none", validator=attrs.validators.in_(("none", "inv_sqrt_k")))
    prm_steps: int = attrs.field(default=50, validator=number(ge=0, le=MAX_STEPS, why=STEPS_WHY))
    max_step_chars: int = attrs.field(default=1000, validator=number(ge=50, le=MAX_CHARS, why=CHARS_WHY))
    concurrency: int = attrs.field(default=8, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
    attempts: int = attrs.field(default=2, validator=number(ge=1, le=MAX_RETRIES, why=RETRIES_WHY))
    temperature: float = attrs.field(default=0.0, validator=number(ge=0, le=MAX_TEMPERATURE, why=TEMPERATURE_WHY))
    max_tokens: int = attrs.field(default=1024, validator=number(ge=16, le=MAX_TOKENS, why=TOKENS_WHY))
    norm_by_std: bool | None = None
    eps: float = attrs.field(default=EPS, validator=_eps)
