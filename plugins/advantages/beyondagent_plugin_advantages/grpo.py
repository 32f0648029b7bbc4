"""`grpo` and `dr_grpo`: one advantage per episode, its outcome against its group's (verl's GRPO).

`grpo`: A_i = (r_i - mean_g) / (std_g + eps), broadcast to every model token of episode i; with
`norm_by_std: false` A_i = r_i - mean_g. `dr_grpo` is always the latter: Dr. GRPO (Liu et al.,
*Understanding R1-Zero-Like Training*, arXiv 2503.20783) drops the std, which favours groups
whose rewards barely differ. (Its other half, summing each sequence's token losses instead of
averaging them, is the loss's, not the estimator's: `algorithm.loss_agg_mode:
seq-mean-token-sum-norm`.) Both are checked against verl's `compute_grpo_outcome_advantage`
(tests/verl_estimator_parity.py, and the torch backend's parity test).
"""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages
from beyondagent_plugin_advantages.config import EPS, DrGrpoConfig, GrpoConfig
from beyondagent_plugin_advantages.groups import normalize


def episode_advantages(batch: AdvantageBatch, *, norm_by_std: bool, eps: float = EPS) -> np.ndarray:
    """One GRPO advantage per episode of `batch`."""
    outcomes = [episode.outcome for episode in batch.episodes]
    return normalize(outcomes, [episode.group for episode in batch.episodes], by_std=norm_by_std, eps=eps)


def broadcast(batch: AdvantageBatch, values: np.ndarray) -> Advantages:
    """One value per episode on each of its model tokens, float32."""
    return Advantages(per_token=[(episode.token_mask * np.float32(value)).astype(np.float32)
                                 for episode, value in zip(batch.episodes, values)])


class Grpo:
    def __init__(self, config: GrpoConfig | None = None):
        self.config = config or GrpoConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        by_std = batch.norm_by_std if self.config.norm_by_std is None else self.config.norm_by_std
        return broadcast(batch, episode_advantages(batch, norm_by_std=by_std, eps=self.config.eps))


class DrGrpo:
    def __init__(self, config: DrGrpoConfig | None = None):
        self.config = config or DrGrpoConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        return broadcast(batch, episode_advantages(batch, norm_by_std=False))
