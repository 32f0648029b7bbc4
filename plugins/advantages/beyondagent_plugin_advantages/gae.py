"""Generalized Advantage Estimation over a multi-turn episode's model tokens (PPO with a critic).

verl's `compute_gae_advantage_return`, in numpy: walking back from an episode's last token, the TD
error of each model token is `r_t + gamma * V(next model token) - V_t` and its advantage
`delta_t + gamma * lam * A(next model token)`; the tokens the model did not write (observations, tool
output, the padding after the end) carry the next model token's value and advantage through, so a
turn's last token bootstraps from the first token of the next turn. Returns are advantages + values
(the critic's targets); advantages are then whitened over the batch's model tokens (verl's
`masked_whiten`, `reinforce.whiten`). Rewards are per token: an outcome sits on the episode's last
model token, where verl's agent loop puts it.

This is the `gae` estimator's math, checked against verl (tests/verl_estimator_parity.py); the
estimator itself needs per-token values from a critic, which no backend has yet (issue 40), so it is
not registered.
"""

from __future__ import annotations

import numpy as np

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
