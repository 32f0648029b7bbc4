"""Audit 10's tests for the advantage estimators: each guards a mutant that survived the existing tests.

- `test_grpos_eps_reaches_the_std_division` (E2): the `grpo` estimator's own `eps` setting is the one its
  z-scores divide by (std + eps), not the module's default, with the std on and off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.config import GrpoConfig
from beyondagent_plugin_advantages.grpo import Grpo

pytestmark = pytest.mark.beyondagent_plugins("advantages")


def scored(group: str, outcome: float) -> ScoredEpisode:
    """A prompt of 3 tokens, then one step of 2 model tokens."""
    return ScoredEpisode(group=group, task=Task(task_id=group), outcome=outcome, success=outcome > 0, length=5,
                         steps=(Step(start=3, end=5, observation="o", action="a"),))


def test_grpos_eps_reaches_the_std_division() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 1.0), scored("g", 0.0), scored("h", 2.0)))
    std = 1 / math.sqrt(2)  # the group's unbiased std of (1, 0)
    answer = Grpo(GrpoConfig(eps=0.5)).estimate(batch)
    # g: +-0.5 / (std + 0.5); h, a group of one: its raw outcome over (1 + 0.5)
    expected = [0.5 / (std + 0.5), -0.5 / (std + 0.5), 2.0 / 1.5]
    assert [float(a[3]) for a in answer.per_token] == pytest.approx(expected, rel=1e-6)
    assert all(np.all(a[:3] == 0) for a in answer.per_token)  # prompt tokens get nothing
    # Without the std the eps has nothing to act on.
    centred = Grpo(GrpoConfig(norm_by_std=False, eps=0.5)).estimate(batch)
    assert [float(a[3]) for a in centred.per_token] == pytest.approx([0.5, -0.5, 2.0], rel=1e-6)
