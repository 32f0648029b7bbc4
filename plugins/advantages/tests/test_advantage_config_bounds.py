"""The estimators' `eps` must be above 0: an all-equal group's std is 0, and eps is what keeps its
z-score 0/(0+eps) = 0 instead of 0/0 = NaN (a mutation audit found `gt` relaxed to `ge` unnoticed)."""

from __future__ import annotations

import pytest
from beyondagent_plugin_advantages.config import AdcaConfig, GigpoConfig, GrpoConfig

from beyondagent_core.checks import FieldRangeError


@pytest.mark.parametrize("config", [GrpoConfig, GigpoConfig, AdcaConfig])
def test_eps_must_be_above_zero(config) -> None:
    with pytest.raises(FieldRangeError, match="eps"):
        config(eps=0.0)
    assert config(eps=1e-12).eps == 1e-12


def test_grpos_eps_reaches_the_z_score() -> None:
    """(r - mean) / (std + eps): outcomes 0, 1, 2 have mean 1 and std 1 (ddof 1)."""
    import numpy as np
    from beyondagent_plugin_advantages.grpo import Grpo

    from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step
    from beyondagent_core.types import Task

    episodes = tuple(ScoredEpisode(group="g", task=Task(task_id="g"), outcome=float(r), success=r > 1, length=2,
                                   steps=(Step(start=0, end=2, observation="", action=""),)) for r in (0, 1, 2))
    batch = AdvantageBatch(episodes=episodes)
    values = [float(a[0]) for a in Grpo(GrpoConfig(eps=0.5)).estimate(batch).per_token]
    assert values == [np.float32(-1 / 1.5), 0.0, np.float32(1 / 1.5)]
