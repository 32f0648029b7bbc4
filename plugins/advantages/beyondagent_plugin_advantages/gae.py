"""Generalized Advantage Estimation over a multi-turn episode's model tokens (PPO with a critic).

verl's `compute_gae_advantage_return`, in numpy: walking back from an episode's last token, the TD
error of each model token is `r_t + gamma * V(next model token) - V_t` and its advantage
`delta_t + gamma * lam * A(next model token)`; the tokens the model did not write (observations, tool
output, the padding after the end) carry the next model token's value and advantage through, so a
turn's last token bootstraps from the first token of the next turn. Returns are advantages + values
(the critic's targets); advantages are then whitened over the batch's model tokens (verl's
`masked_whiten`, `reinforce.whiten`). Rewards are per token: an outcome sits on the episode's last
model token, where verl's agent loop puts it.

The math is checked against verl (tests/verl_estimator_parity.py). The `gae` estimator (`Gae`)
reads the critic's values from each episode (`ScoredEpisode.values`, the value of the state before
each token: the backend's critic computes them, `critic:` in the spec) and answers the whitened
advantages and the returns, which the backend trains the critic on. A group of one is fine: the
critic is the baseline (`algorithm.group_size: 1` is PPO's usual setting).
"""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, AdvantageError, Advantages
from beyondagent_plugin_advantages.config import GaeConfig
from beyondagent_plugin_advantages.reinforce import whiten


def gae(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, *, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages (not whitened) and returns of a batch, float64 [episodes, tokens]; `mask` is 1 on
    the model's tokens. Outside the mask both hold what verl's carry leaves there (the loss reads
    neither)."""
    rewards, values, mask = (np.asarray(x, dtype=np.float64) for x in (rewards, values, mask))
    if not rewards.shape == values.shape == mask.shape or rewards.ndim != 2:
        raise ValueError(f"rewards, values and mask must be [episodes, tokens] of one shape, got "
                         f"{rewards.shape}, {values.shape}, {mask.shape}")
    advantages = np.zeros_like(rewards)
    next_value = np.zeros(rewards.shape[0])
    next_advantage = np.zeros(rewards.shape[0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        model = mask[:, t]
        next_value = values[:, t] * model + (1.0 - model) * next_value
        next_advantage = advantage * model + (1.0 - model) * next_advantage
        advantages[:, t] = next_advantage
    return advantages, advantages + values


def gae_whitened(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, *, gamma: float,
                 lam: float) -> tuple[np.ndarray, np.ndarray]:
    """What the loss trains with: GAE advantages whitened over every model token of the batch (0
    outside the mask), and the returns."""
    advantages, returns = gae(rewards, values, mask, gamma=gamma, lam=lam)
    mask = np.asarray(mask, dtype=np.float64)
    return np.stack(whiten(list(advantages), list(mask))), returns


def padded(rows: list[np.ndarray]) -> np.ndarray:
    """Rows of different lengths as one float64 [rows, longest] array, 0 after each row's end."""
    out = np.zeros((len(rows), max((len(row) for row in rows), default=0)))
    for index, row in enumerate(rows):
        out[index, :len(row)] = row
    return out


class Gae:
    """PPO's advantages from a critic: the outcome on each episode's last model token, GAE over the
    model tokens with `gamma` and `lam`, whitened over the batch; the returns are the critic's targets."""

    uses_values = True

    def __init__(self, config: GaeConfig | None = None):
        self.config = config or GaeConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        episodes = batch.episodes
        if not episodes:
            return Advantages(per_token=[], returns=[])
        missing = [e.task.task_id for e in episodes if e.values is None or len(e.values) != e.length]
        if missing:
            raise AdvantageError(f"gae needs the critic's value of every token, and the backend gave none (or the "
                                 f"wrong number) for {len(missing)} episodes, e.g. {missing[0]}: a backend that "
                                 "runs gae must compute values with its critic (ScoredEpisode.values)")
        masks = [e.token_mask for e in episodes]
        rewards = []
        for episode, mask in zip(episodes, masks):
            reward = np.zeros(episode.length)
            model = np.flatnonzero(mask)
            if len(model):
                reward[model[-1]] = episode.outcome  # where verl's agent loop puts the score
            rewards.append(reward)
        mask, values = padded(masks), padded([e.values for e in episodes])
        advantages, returns = gae_whitened(padded(rewards), values, mask, gamma=self.config.gamma,
                                           lam=self.config.lam)
        tokens = max(float(mask.sum()), 1.0)
        return Advantages(
            per_token=[advantages[i, :e.length].astype(np.float32) for i, e in enumerate(episodes)],
            returns=[(returns[i, :e.length] * masks[i]).astype(np.float32) for i, e in enumerate(episodes)],
            metrics={"returns_mean": float((returns * mask).sum() / tokens),
                     "values_mean": float((values * mask).sum() / tokens)})
