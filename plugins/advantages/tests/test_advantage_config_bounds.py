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
