"""`grpo`: one advantage per episode, its outcome against its group's (verl's GRPO outcome advantage).

A_i = (r_i - mean_g) / (std_g + eps), broadcast to every model token of episode i; with
`norm_by_std: false` (Dr. GRPO) A_i = r_i - mean_g. Tested against verl's
`compute_grpo_outcome_advantage` through the torch backend's parity test.
"""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages
from beyondagent_plugin_advantages.config import EPS, GrpoConfig
from beyondagent_plugin_advantages.groups import normalize


def episode_advantages(batch: AdvantageBatch, *, norm_by_std: bool, eps: float = EPS) -> np.ndarray:
    """One GRPO advantage per episode of `batch`."""
    outcomes = [episode.outcome for episode in batch.episodes]
    return normalize(outcomes, [episode.group for episode in batch.episodes], by_std=norm_by_std, eps=eps)


class Grpo:
    def __init__(self, config: GrpoConfig | None = None):
        self.config = config or GrpoConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        by_std = batch.norm_by_std if self.config.norm_by_std is None else self.config.norm_by_std
        advantages = episode_advantages(batch, norm_by_std=by_std, eps=self.config.eps)
        per_token = [(episode.token_mask * value).astype(np.float32)
                     for episode, value in zip(batch.episodes, advantages)]
        return Advantages(per_token=per_token)
