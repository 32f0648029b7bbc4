"""`gigpo`: Group-in-Group Policy Optimization (Feng et al., arXiv 2505.10978).

Two levels of credit, both critic-free:

- **episode level**: GRPO's advantage of the episode's outcome within its group (the rollouts
  of one task), A^E;
- **step level**: every step of every trajectory in a group is keyed by its *anchor state* —
  the observation it acted on (whitespace-normalized text). Steps of the group that acted on
  the same state form a step group; each step's discounted return
  R_t = sum_{k >= t} gamma^(k - t) r_k is compared within its step group, A^S.

A step's tokens get A = A^E + `step_weight` * A^S (the paper's combination, weight 1). Rewards
r_k are the env's step rewards where the backend recorded them, plus the outcome on the last
step; with a sparse outcome only, R_t = gamma^(T - t) * outcome, so of two steps from the same
state the one closer to success scores higher. `mode`: `mean_std_norm` divides both levels by
their group's std (the paper's default), `mean_norm` only centres them (verl-agent's option for
rewards of very different scales). A step group of one has no baseline and (verl's convention
for groups of one) keeps its raw return; `singleton: zero` gives it 0 instead.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode
from beyondagent_plugin_advantages.config import GigpoConfig
from beyondagent_plugin_advantages.groups import normalize


def anchor(observation: str) -> str:
    """The state key of a step: its observation with runs of whitespace collapsed."""
    return " ".join(observation.split())


def discounted_returns(episode: ScoredEpisode, gamma: float) -> np.ndarray:
    """R_t for each step: step rewards (0 where none) plus the outcome on the last step, discounted."""
    rewards = np.array([step.reward or 0.0 for step in episode.steps], dtype=np.float64)
    if len(rewards):
        rewards[-1] += episode.outcome
    returns = np.zeros_like(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


class Gigpo:
    def __init__(self, config: GigpoConfig | None = None):
        self.config = config or GigpoConfig()

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        config = self.config
        by_std = config.mode == "mean_std_norm"
        episodes = batch.episodes
        groups = [episode.group for episode in episodes]
        episode_level = normalize([e.outcome for e in episodes], groups, by_std=by_std, eps=config.eps)

        # Every step of the batch, keyed by (its episode's group, its anchor state).
        owners: list[tuple[int, int]] = []
        keys: list[tuple[Hashable, str]] = []
        returns: list[float] = []
        for index, episode in enumerate(episodes):
            for t, value in enumerate(discounted_returns(episode, config.gamma)):
                owners.append((index, t))
                keys.append((episode.group, anchor(episode.steps[t].observation)))
                returns.append(float(value))
        step_level = normalize(returns, keys, by_std=by_std, eps=config.eps) if returns else np.zeros(0)
        sizes: dict[tuple[Hashable, str], int] = {}
        for key in keys:
            sizes[key] = sizes.get(key, 0) + 1
        if config.singleton == "zero":
            step_level = np.where([sizes[key] == 1 for key in keys], 0.0, step_level)

        per_token = [(episode.token_mask * episode_level[i]).astype(np.float32) for i, episode in enumerate(episodes)]
        per_step = [np.zeros(len(episode.steps), dtype=np.float32) for episode in episodes]  # for the viewer
        for (index, t), value in zip(owners, step_level):
            step = episodes[index].steps[t]
            per_token[index][step.start:step.end] += np.float32(config.step_weight * value)
            per_step[index][t] = value
        grouped = [sizes[key] for key in keys if sizes[key] > 1]
        # anchor groups holding a step other than a first one: states the rollouts came back to
        later = {key for (index, t), key in zip(owners, keys) if t > 0 and sizes[key] > 1}
        return Advantages(per_token=per_token, per_step=per_step, metrics={
            "anchor_groups": float(sum(1 for size in sizes.values() if size > 1)),
            "later_anchor_groups": float(len(later)),
            "steps_in_anchor_groups": len(grouped) / len(keys) if keys else 0.0,
            "mean_anchor_group_size": float(np.mean(grouped)) if grouped else 0.0,
        })
