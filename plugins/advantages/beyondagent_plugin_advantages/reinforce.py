"""`reinforce_plus_plus` and `reinforce_plus_plus_baseline` (Hu et al., REINFORCE++, arXiv 2501.03262).

Both end with the batch-level whitening that REINFORCE++ puts in place of a critic: the values
on every model token of the step's batch are centred on their mean and divided by their
unbiased std (token-weighted: a long episode counts once per token, as in verl's
`masked_whiten`), A = (v - mean) / sqrt(var + 1e-8).

- `reinforce_plus_plus`: v_t is the outcome's return at model token t: the outcome sits on the
  episode's last model token and is discounted by `gamma` per model token before it (context
  tokens between turns are skipped, as in verl), v_t = gamma^(model tokens after t) * r. With
  gamma 1 (the default) every model token of an episode gets r. No group baseline: the
  whitening over the batch is the only baseline.
- `reinforce_plus_plus_baseline`: v = r_i - mean_g (the group's mean; a group of one keeps its
  raw outcome) on every model token, then whitened: GRPO's group baseline with the batch's std
  instead of the group's. A group whose rollouts all score the same is 0 before whitening and
  -mean/std after it (the token-weighted mean is not 0 when episode lengths differ).

These are verl's `compute_reinforce_plus_plus_outcome_advantage` and
`compute_reinforce_plus_plus_baseline_outcome_advantage` (`algorithm.adv_estimator:
reinforce_plus_plus` / `reinforce_plus_plus_baseline`, `algorithm.gamma`), checked against them
in tests/verl_estimator_parity.py, epsilons included: verl's masked mean divides by (N + 1e-8)
for N tokens, so a batch whose values are all equal (every episode scored r) gets about
1e-4 * r / N on each token rather than exactly 0 (1e-8 for a batch of 10,000 tokens).
Only the outcome is a reward here (verl's agent loop puts the score on the last response token
and nothing else); step rewards are `gigpo`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode
from beyondagent_plugin_advantages.config import ReinforcePlusPlusBaselineConfig, ReinforcePlusPlusConfig
from beyondagent_plugin_advantages.groups import normalize

WHITEN_EPS = 1e-8  # verl's masked_whiten: rsqrt(var + 1e-8)
MEAN_EPS = 1e-8  # verl's masked_mean: sum / (N + 1e-8)


def token_returns(episode: ScoredEpisode, gamma: float) -> np.ndarray:
    """The outcome's discounted return on each model token of `episode`, 0 elsewhere (float64)."""
    mask = episode.token_mask.astype(np.float64)
    after = np.cumsum(mask[::-1])[::-1] - mask  # model tokens after each position
    return np.where(mask > 0, episode.outcome * np.power(gamma, after), 0.0)


def whiten(values: Sequence[np.ndarray], masks: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`values` centred on their mean over every masked-in token of all rows together and divided by
    sqrt(unbiased variance + 1e-8), verl's `masked_whiten`; 0 outside the masks, and everywhere when
    fewer than 2 tokens count (verl raises there: its Bessel correction would divide by zero)."""
    masks = [np.asarray(mask, dtype=np.float64) for mask in masks]
    count = float(sum(mask.sum() for mask in masks))
    if count < 2:
        return [np.zeros_like(mask) for mask in masks]
    mean = sum(float((value * mask).sum()) for value, mask in zip(values, masks)) / (count + MEAN_EPS)
    squares = sum(float((((value - mean) ** 2) * mask).sum()) for value, mask in zip(values, masks))
    variance = squares / (count + MEAN_EPS) * (count / (count - 1))
    scale = 1.0 / np.sqrt(variance + WHITEN_EPS)
    return [(value - mean) * scale * mask for value, mask in zip(values, masks)]


def reinforce_plus_plus(batch: AdvantageBatch, gamma: float) -> list[np.ndarray]:
    """Per-token REINFORCE++ advantages of each episode (float64)."""
    episodes = batch.episodes
    return whiten([token_returns(e, gamma) for e in episodes], [e.token_mask for e in episodes])


def reinforce_plus_plus_baseline(batch: AdvantageBatch) -> list[np.ndarray]:
    """Per-token REINFORCE++-baseline advantages of each episode (float64)."""
    episodes = batch.episodes
    centred = normalize([e.outcome for e in episodes], [e.group for e in episodes], by_std=False)
    masks = [e.token_mask for e in episodes]
    return whiten([mask * value for mask, value in zip(masks, centred)], masks)


class ReinforcePlusPlus:
    def __init__(self, config: ReinforcePlusPlusConfig | None = None):
        self.config = config or ReinforcePlusPlusConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        return Advantages(per_token=[v.astype(np.float32) for v in reinforce_plus_plus(batch, self.config.gamma)])


class ReinforcePlusPlusBaseline:
    def __init__(self, config: ReinforcePlusPlusBaselineConfig | None = None):
        self.config = config or ReinforcePlusPlusBaselineConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        return Advantages(per_token=[v.astype(np.float32) for v in reinforce_plus_plus_baseline(batch)])
