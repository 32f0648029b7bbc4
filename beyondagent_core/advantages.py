"""The advantage-estimator contract: what an estimator receives and what it returns.

An estimator turns one training batch of finished episodes into one advantage per response
token. It sees, per episode, its GRPO group, the outcome reward, the token span of each model
turn (a *step*: the observation before it and the action it wrote, as text) and optional step
rewards, and returns a float32 array per episode, aligned with the episode's token sequence
(0 outside model tokens). It imports numpy only (no torch, no backend), so the same estimator
runs inside any backend's process, verl's trainer included.

A backend builds the batch with `scored_episode(...)` from its rollout records, calls
`estimator.estimate(batch)` and checks the answer with `check_advantages` (a wrong shape or a
NaN names the estimator instead of surfacing as a broken loss).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import numpy as np

from beyondagent_core.types import Task, Trajectory, Turn


@attrs.frozen
class Step:
    """One model turn of an episode: tokens `[start, end)` of the episode's sequence.

    `observation` is the text the model saw since its previous turn (for the first step, the
    whole prompt: system and user messages); `action` is the text it wrote. `reward` is the
    step's own reward where the environment gave one (None otherwise).
    """

    start: int
    end: int
    observation: str
    action: str
    reward: float | None = None


@attrs.frozen
class ScoredEpisode:
    """One finished episode as an estimator sees it.

    `group` identifies its GRPO group (the rollouts of one task in this batch); `outcome` is the
    judge's score; `length` the number of tokens in its sequence (prompt included), which is the
    length of the advantage array to return; `steps` its model turns in order.
    """

    group: Hashable
    task: Task
    outcome: float
    success: bool
    length: int
    steps: tuple[Step, ...]

    @property
    def token_mask(self) -> np.ndarray:
        """1.0 on the tokens of the model's turns, 0.0 elsewhere (length `length`)."""
        mask = np.zeros(self.length, dtype=np.float32)
        for step in self.steps:
            mask[step.start:step.end] = 1.0
        return mask


@attrs.frozen
class AdvantageBatch:
    """A training step's finished episodes, with where the run is.

    `norm_by_std` is the spec's `algorithm.norm_adv_by_std` (estimators that normalize use it
    unless their own config says otherwise); `step` counts from 1 up to `total_steps`.
    """

    episodes: tuple[ScoredEpisode, ...]
    step: int = 1
    total_steps: int = 1
    norm_by_std: bool = True

    def groups(self) -> dict[Hashable, list[int]]:
        """group -> the indices of its episodes, in batch order."""
        found: dict[Hashable, list[int]] = {}
        for index, episode in enumerate(self.episodes):
            found.setdefault(episode.group, []).append(index)
        return found


@attrs.frozen
class Advantages:
    """An estimator's answer: one float32 array per episode (its `length`), and metrics.

    Metric names are relative (`flat_groups`); the backend logs them under `advantage/`.
    """

    per_token: list[np.ndarray]
    metrics: dict[str, float] = attrs.field(factory=dict)
    # Optional, for people to read (`beyondagent view`): one value per step (model turn) of each
    # episode — ADCA's step rewards, GiGPO's step-level advantages; None for an episode without.
    per_step: list[np.ndarray | None] | None = None


class AdvantageError(ValueError):
    """An estimator answered with the wrong shape or non-finite values."""


def check_advantages(result: Any, batch: AdvantageBatch, *, who: str) -> Advantages:
    """`result` if it is a well-formed answer to `batch`, else an `AdvantageError` naming `who`."""
    if not isinstance(result, Advantages):
        raise AdvantageError(f"{who} returned {type(result).__name__}; estimate(batch) must return Advantages")
    if len(result.per_token) != len(batch.episodes):
        raise AdvantageError(f"{who} returned {len(result.per_token)} advantage arrays for "
                             f"{len(batch.episodes)} episodes")
    for index, (values, episode) in enumerate(zip(result.per_token, batch.episodes)):
        shape = getattr(values, "shape", None)
        if shape != (episode.length,):
            raise AdvantageError(f"{who}: episode {index} ({episode.task.task_id}) has {episode.length} tokens, "
                                 f"its advantages have shape {shape}")
        if not np.all(np.isfinite(values)):
            raise AdvantageError(f"{who}: episode {index} ({episode.task.task_id}) got a NaN or infinite advantage")
    if result.per_step is not None:
        if len(result.per_step) != len(batch.episodes):
            raise AdvantageError(f"{who} returned step values for {len(result.per_step)} of "
                                 f"{len(batch.episodes)} episodes")
        for index, (values, episode) in enumerate(zip(result.per_step, batch.episodes)):
            if values is None:
                continue
            if getattr(values, "shape", None) != (len(episode.steps),) or not np.all(np.isfinite(values)):
                raise AdvantageError(f"{who}: episode {index} ({episode.task.task_id}) has {len(episode.steps)} "
                                     f"steps; its step values must be as many finite numbers, got {values!r}")
    for name, value in result.metrics.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise AdvantageError(f"{who}: metric {name!r} is {value!r}, not a finite number")
    return result


def steps_of(turns: Sequence[Turn], spans: Sequence[tuple[int, int]],
             step_rewards: Sequence[float | None] | None = None) -> tuple[Step, ...]:
    """Pair each model turn of `turns` (those with `token_ids`) with its token span.

    The observation of a step is the content of the non-model turns since the previous model
    turn, joined by blank lines. `spans` come from the backend's token sequence, one per model
    turn in order; a trajectory with fewer recorded model turns than spans (an episode that
    failed mid-turn) pairs what it has and keeps the rest of the spans with empty text.
    """
    observations: list[str] = []
    pending: list[str] = []
    actions: list[str] = []
    for turn in turns:
        if turn.token_ids is not None:
            observations.append("\n\n".join(pending))
            actions.append(turn.content)
            pending = []
        else:
            pending.append(turn.content)
    steps = []
    for index, (start, end) in enumerate(spans):
        reward = step_rewards[index] if step_rewards is not None and index < len(step_rewards) else None
        steps.append(Step(start=int(start), end=int(end),
                          observation=observations[index] if index < len(observations) else "",
                          action=actions[index] if index < len(actions) else "",
                          reward=None if reward is None else float(reward)))
    return tuple(steps)


def scored_episode(group: Hashable, trajectory: Trajectory, spans: Sequence[tuple[int, int]], length: int,
                   step_rewards: Sequence[float | None] | None = None) -> ScoredEpisode:
    """A backend's finished episode as an estimator sees it: its turns paired with their token spans."""
    reward = trajectory.reward
    return ScoredEpisode(group=group, task=trajectory.task, outcome=0.0 if reward is None else float(reward.score),
                         success=bool(reward is not None and reward.success), length=int(length),
                         steps=steps_of(trajectory.turns, spans, step_rewards))
