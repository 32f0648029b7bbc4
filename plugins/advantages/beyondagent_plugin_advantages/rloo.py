"""`rloo`: REINFORCE Leave-One-Out (Ahmadian et al., *Back to Basics*, arXiv 2402.14740).

Each episode's outcome against the mean of the *other* episodes of its group, on all its model
tokens: A_i = r_i - (1/(n-1)) sum_{j != i} r_j = n/(n-1) (r_i - mean_g). Unlike GRPO's group mean
the baseline never includes the episode itself, so it is unbiased; there is no std. A group of
one has no other episode and keeps its raw outcome (verl's convention, as for GRPO). This is
verl's `compute_rloo_outcome_advantage` (`algorithm.adv_estimator: rloo`), checked against it in
tests/verl_estimator_parity.py.
"""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages
from beyondagent_plugin_advantages.config import RlooConfig
from beyondagent_plugin_advantages.grpo import broadcast
from beyondagent_plugin_advantages.groups import leave_one_out


def episode_advantages(batch: AdvantageBatch) -> np.ndarray:
    """One RLOO advantage per episode of `batch` (float64)."""
    return leave_one_out([e.outcome for e in batch.episodes], [e.group for e in batch.episodes])


class Rloo:
    def __init__(self, config: RlooConfig | None = None):
        self.config = config or RlooConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        return broadcast(batch, episode_advantages(batch))
