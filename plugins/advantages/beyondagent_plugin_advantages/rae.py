"""`rae`: role-conditioned advantages for games (SPIRAL's RAE, Liu et al. 2025, arXiv 2506.24119).

In self-play the two seats of a game are different roles: the player who opens TicTacToe wins more
often, so one baseline for both would call every first-player win a good move. RAE keeps one running
baseline per role, a role being the game (the task's `metadata["game"]`, else its env) and the seat
(`ScoredEpisode.seat`; None for a one-seat episode), and gives each finished episode

    A = r - b_role,   b_role <- decay * b_role + (1 - decay) * mean(r of the role's episodes this step)

on every model token (no division by a std). A role's baseline starts at its first step's mean.
The baselines are the estimator's state (`state_dict`): the backend keeps them in its checkpoints, so
`--resume` goes on with them. A step's update is folded in once: estimating the same step again (a
retried batch) starts from the baselines before it and gives the same answer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode
from beyondagent_plugin_advantages.config import RaeConfig
from beyondagent_plugin_advantages.grpo import broadcast


def role_of(episode: ScoredEpisode) -> str:
    """The role an episode played: `<game>/seat<k>` (`seat-` for a one-seat episode; the game is the
    task's `metadata["game"]`, else its env, else `-`)."""
    metadata = episode.task.metadata or {}
    game = metadata.get("game") if isinstance(metadata.get("game"), str) else None
    return f"{game or episode.task.env or '-'}/seat{'-' if episode.seat is None else episode.seat}"


class Rae:
    def __init__(self, config: RaeConfig | None = None):
        self.config = config or RaeConfig()
        self.baselines: dict[str, float] = {}
        self.step: int | None = None  # the last step folded into the baselines
        self.before: dict[str, float] = {}  # the baselines before that step

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        if batch.step != self.step:
            self.before, self.step = dict(self.baselines), batch.step
        roles = [role_of(episode) for episode in batch.episodes]
        by_role: dict[Hashable, list[float]] = {}
        for role, episode in zip(roles, batch.episodes):
            by_role.setdefault(role, []).append(episode.outcome)
        decay = self.config.decay
        baselines = dict(self.before)
        for role, outcomes in by_role.items():
            mean = float(np.mean(outcomes))
            baselines[role] = mean if role not in baselines else decay * baselines[role] + (1.0 - decay) * mean
        self.baselines = baselines
        values = np.array([episode.outcome - baselines[role] for role, episode in zip(roles, batch.episodes)])
        result = broadcast(batch, values)
        metrics = {f"baseline/{role}": value for role, value in sorted(baselines.items()) if role in by_role}
        return Advantages(per_token=result.per_token, metrics=metrics)

    def state_dict(self) -> dict[str, Any]:
        return {"baselines": dict(self.baselines), "step": self.step, "before": dict(self.before)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        try:
            self.baselines = {str(k): float(v) for k, v in state["baselines"].items()}
            self.before = {str(k): float(v) for k, v in state["before"].items()}
            self.step = None if state["step"] is None else int(state["step"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"rae's saved state is not its baselines ({exc!r}): {str(state)[:200]}") from exc
