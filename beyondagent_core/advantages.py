"""The advantage-estimator contract: what an estimator receives and what it returns.

An estimator turns one training batch of finished episodes into one advantage per response
token. It sees, per episode, its GRPO group, the outcome reward, the token span of each model
turn (a *step*: the observation before it and the action it wrote, as text) and optional step
rewards, and returns a float32 array per episode, aligned with the episode's token sequence
(0 outside model tokens). It imports numpy only (no torch, no backend), so the same estimator
runs inside any backend's process, verl's trainer included.

A backend builds the batch with `scored_episode(...)` from its rollout records and calls
`estimate_finished(estimator, batch, who=...)`, which leaves failed episodes out (below), calls
`estimator.estimate` on the rest and checks the answer with `check_advantages` (a wrong shape or a
NaN names the estimator instead of surfacing as a broken loss).

Failed episodes never reach an estimator. An episode has *failed* (`ScoredEpisode.failure`, see
`failure_of`) when its trajectory has an `error` (the workflow, agent, env or judge raised, an agent
ran past `workflow.timeout`, an env call timed out, verl could not train a split gateway episode)
or when it has nothing to train (no model token). Its reward 0 is the infrastructure's, not the
policy's: kept in its group's mean and std it would raise every sibling's advantage (a crash in
a group that all scored 1.0 would give the others +0.5). So `estimate_finished` drops it from the
batch before estimating, and gives it advantage 0; a group left with fewer than two finished
episodes by those failures has no baseline and is skipped too (all its members 0). A group that
was one episode to begin with is not a skipped group: it lost nothing (the estimator decides). The
metrics `dropped_episodes` (by reason: `dropped_error`, `dropped_timeout`, `dropped_split`,
`dropped_untrainable`) and `dropped_groups` say what was left out (logged under `advantage/`).

An estimator that keeps state from step to step (`rae`'s running baselines) has `state_dict()` (plain
JSON values) and `load_state_dict(state)`: the backend saves the state with its checkpoints and gives it
back on `--resume` (`estimator_state`, `restore_estimator`). Estimating one step twice (a retried batch)
must give the same answer: the state folds in a step once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from beyondagent_core.types import Task, Trajectory, Turn

# Why a failed episode was left out of its group (`ScoredEpisode.failure`), in the order metrics list them.
FAILURE_REASONS = ("error", "timeout", "split", "untrainable")


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
    length of the advantage array to return; `steps` its model turns in order. `failure` is None for
    a finished episode, else why it failed (one of `FAILURE_REASONS`, see `failure_of`): such an
    episode is left out of the batch an estimator sees (`estimate_finished`). `values` (float32,
    `length`) is the critic's value of the state before each token, for an estimator that uses
    values (`AdvantageSpec.uses_values`); None otherwise. `seat` is the player the episode was in a
    multi-seat episode (a game the policy plays against itself: its `group` is then that seat's games of
    the task; `beyondagent_core.runtime.seats`); None in a one-seat episode.
    """

    group: Hashable
    task: Task
    outcome: float
    success: bool
    length: int
    steps: tuple[Step, ...]
    failure: str | None = None
    values: np.ndarray | None = attrs.field(default=None, eq=False)
    seat: int | None = None

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

    Metric names are relative (`flat_groups`); the backend logs them under `advantage/`. An estimator
    that uses values also answers `returns`, the critic's per-token targets (one array per episode,
    like `per_token`).
    """

    per_token: list[np.ndarray]
    metrics: dict[str, float] = attrs.field(factory=dict)
    # Optional, for people to read (`beyondagent view`): one value per step (model turn) of each
    # episode — ADCA's step rewards, GiGPO's step-level advantages; None for an episode without.
    per_step: list[np.ndarray | None] | None = None
    returns: list[np.ndarray] | None = None


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
    if result.returns is not None:
        if len(result.returns) != len(batch.episodes):
            raise AdvantageError(f"{who} returned returns for {len(result.returns)} of {len(batch.episodes)} episodes")
        for index, (values, episode) in enumerate(zip(result.returns, batch.episodes)):
            if getattr(values, "shape", None) != (episode.length,) or not np.all(np.isfinite(values)):
                raise AdvantageError(f"{who}: episode {index} ({episode.task.task_id}) has {episode.length} tokens; "
                                     f"its returns must be as many finite numbers, got shape "
                                     f"{getattr(values, 'shape', None)}")
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
             step_rewards: Sequence[float | None] | None = None, *, replayed: int = 0) -> tuple[Step, ...]:
    """Pair each model turn of `turns` (those with `token_ids`) with its token span.

    The observation of a step is the content of the non-model turns since the previous model
    turn, joined by blank lines. The first `replayed` assistant turns without token ids (turns
    replayed from a stored prefix, `experience.prefix_ratio`; the trajectory's `prefix_turns`
    metric) are actions but not steps: the policy did not sample them, so they get no span, and
    the step after them observes only what followed the last one, as it would have after the
    policy's own action. `spans` come from the backend's token sequence, one per model
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
        elif turn.role == "assistant" and replayed > 0:  # replayed: the state after it starts here
            replayed -= 1
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


def prefix_turns(trajectory: Trajectory) -> int:
    """The turns of `trajectory` replayed from a stored prefix before the policy acted (0: none)."""
    try:
        return max(0, int(trajectory.metrics.get("prefix_turns", 0) or 0))
    except (TypeError, ValueError):
        return 0


def scored_episode(group: Hashable, trajectory: Trajectory, spans: Sequence[tuple[int, int]], length: int,
                   step_rewards: Sequence[float | None] | None = None, *,
                   trainable: bool | None = None, values: np.ndarray | None = None) -> ScoredEpisode:
    """A backend's episode as an estimator sees it: its turns paired with their token spans.

    `trainable` is the backend's word on whether the episode has tokens to train; by default, whether
    any span holds a token. An episode with an error or nothing to train gets a `failure`. `values`:
    the critic's, for an estimator that uses them.
    """
    reward = trajectory.reward
    if trainable is None:
        trainable = any(int(end) > int(start) for start, end in spans)
    return ScoredEpisode(group=group, task=trajectory.task, outcome=0.0 if reward is None else float(reward.score),
                         success=bool(reward is not None and reward.success), length=int(length),
                         steps=steps_of(trajectory.turns, spans, step_rewards, replayed=prefix_turns(trajectory)),
                         failure=failure_of(trajectory, trainable=trainable), values=values, seat=trajectory.seat)


def estimator_state(estimator: Any) -> dict[str, Any] | None:
    """What a backend keeps in a checkpoint of `estimator`'s state across steps (None: it keeps none)."""
    save = getattr(estimator, "state_dict", None)
    return None if save is None else save()


def restore_estimator(estimator: Any, state: dict[str, Any] | None, *, who: str) -> None:
    """Give `estimator` the state a checkpoint kept (`estimator_state`); a ValueError naming `who` when
    the checkpoint kept state the estimator cannot take, or none where it keeps some."""
    load = getattr(estimator, "load_state_dict", None)
    if state is None and load is None:
        return
    if load is None or state is None:
        raise ValueError(f"{who}: the checkpoint {'holds no' if state is None else 'holds'} estimator state, and the "
                         f"estimator {'keeps some' if state is None else 'keeps none'}: resume with the estimator it "
                         "was saved with")
    load(state)


ESTIMATOR_FILE = "estimator.json"  # in a checkpoint's step directory: the estimator's state (rae's baselines)


def save_estimator(estimator: Any, directory: Path) -> bool:
    """Write `estimator`'s state into a checkpoint's step `directory` (`ESTIMATOR_FILE`); whether it keeps any."""
    state = estimator_state(estimator)
    if state is None:
        return False
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ESTIMATOR_FILE).write_text(json.dumps(state, indent=1) + "\n")
    return True


def load_estimator(estimator: Any, directory: Path, *, who: str) -> None:
    """Restore `estimator` from a checkpoint's step `directory`: a ValueError naming `who` and the file when
    the file does not fit the estimator (`restore_estimator`) or is not JSON."""
    saved = directory / ESTIMATOR_FILE
    try:
        restore_estimator(estimator, json.loads(saved.read_text()) if saved.exists() else None, who=who)
    except ValueError as exc:  # a bad JSON file too
        raise ValueError(f"{exc} ({saved})") from exc


def uses_critic(spec: Any) -> bool:
    """Whether the spec's estimator (`backend.advantage`) reads a critic's values: the backend then
    trains one (`AdvantageSpec.uses_values`; the spec's `critic:` section, its defaults when unset)."""
    find = getattr(spec, "component", None)  # (a bare stand-in of a spec has no components)
    component = None if find is None else find("backend.advantage")
    registration = None if component is None else component.registration
    return bool(registration is not None and getattr(registration.spec, "uses_values", False))


# An error's text is "TypeName: message" (`EpisodeRunner`); these say it ran out of time: a type named
# like a timeout (TimeoutError, EnvCallTimeout, httpx's ReadTimeout), an agent past `workflow.timeout`,
# an env service that did not answer within its client timeout.
_TIMEOUT = re.compile(r"^\w*Timeout\w*:|\(workflow\.timeout\)|did not answer within|did not finish within")
_SPLIT = re.compile(r"^GatewaySplit:")


def failure_of(trajectory: Trajectory, *, trainable: bool = True) -> str | None:
    """Why `trajectory` failed, or None for a finished episode: `timeout`, `split` (a gateway episode
    whose calls became several samples on a backend that trains one), `error` (any other error), or,
    without an error, `untrainable` when `trainable` is false (no model token to train)."""
    error = trajectory.error
    if error is not None:
        text = str(error)
        if _TIMEOUT.search(text):
            return "timeout"
        if _SPLIT.search(text):
            return "split"
        return "error"
    return None if trainable else "untrainable"


# The metrics `estimate_finished` adds, relative like an estimator's (the backend logs them under
# `advantage/`; `metric_names.ADVANTAGE_DROPPED_*` are the full names).
DROPPED_EPISODES = "dropped_episodes"
DROPPED_GROUPS = "dropped_groups"


def dropped_metric(reason: str) -> str:
    """The (relative) metric counting the episodes dropped for `reason`: `dropped_<reason>`."""
    return f"dropped_{reason}"


def skips_group(finished: int, size: int) -> bool:
    """Whether a group of `size` episodes, `finished` of which finished, is skipped: failures left it
    fewer than two finished episodes, so there is no baseline to compare against (a group that was
    one episode to begin with is the estimator's to handle)."""
    return finished < size and finished < 2


def finished_part(batch: AdvantageBatch) -> tuple[list[int], dict[str, float]]:
    """The indices of `batch`'s episodes an estimator sees, and the dropped-episode metrics.

    Failed episodes are dropped; so are the finished episodes of a group that failures left with
    fewer than two finished ones (the group is skipped: no baseline to compare against).
    """
    kept: list[int] = []
    skipped = 0
    for indices in batch.groups().values():
        finished = [i for i in indices if batch.episodes[i].failure is None]
        if skips_group(len(finished), len(indices)):
            skipped += 1
        else:
            kept += finished
    return sorted(kept), dropped_counts((episode.failure for episode in batch.episodes), skipped)


def dropped_counts(failures: Iterable[str | None], skipped_groups: int) -> dict[str, float]:
    """The dropped-episode metrics (relative names) of episodes with these `failures` (None: finished;
    an unknown reason counts as `error`) and `skipped_groups` groups left without a baseline."""
    reasons = dict.fromkeys(FAILURE_REASONS, 0)
    for failure in failures:
        if failure is not None:
            reasons[failure if failure in reasons else "error"] += 1
    return {DROPPED_EPISODES: float(sum(reasons.values())), DROPPED_GROUPS: float(skipped_groups),
            **{dropped_metric(reason): float(count) for reason, count in reasons.items()}}


def estimate_finished(estimator: Any, batch: AdvantageBatch, *, who: str) -> Advantages:
    """`estimator`'s checked answer for the finished episodes of `batch`, and 0 for the rest.

    Every backend calls this, never `estimator.estimate` directly: failed episodes (and the groups
    they leave with fewer than two finished episodes, `finished_part`) are taken out of the batch
    before the estimator sees it, so they move no group's mean or std, whatever the estimator. The
    answer covers the whole batch: the estimator's arrays where it ran, zeros (and no step values)
    elsewhere; its metrics plus `dropped_episodes`, `dropped_<reason>` and `dropped_groups`.
    """
    kept, dropped = finished_part(batch)
    if len(kept) == len(batch.episodes):
        result = check_advantages(estimator.estimate(batch), batch, who=who)
        return attrs.evolve(result, metrics={**result.metrics, **dropped})
    part = attrs.evolve(batch, episodes=tuple(batch.episodes[i] for i in kept))
    result = check_advantages(estimator.estimate(part), part, who=who) if part.episodes else Advantages([])
    per_token = [np.zeros(episode.length, dtype=np.float32) for episode in batch.episodes]
    per_step: list[np.ndarray | None] | None = None if result.per_step is None else [None] * len(batch.episodes)
    # a dropped episode trains neither the policy nor the critic: its returns are never read
    returns = None if result.returns is None else [np.zeros(e.length, dtype=np.float32) for e in batch.episodes]
    for position, index in enumerate(kept):
        per_token[index] = result.per_token[position]
        if per_step is not None:
            per_step[index] = result.per_step[position]
        if returns is not None:
            returns[index] = result.returns[position]
    return Advantages(per_token=per_token, metrics={**result.metrics, **dropped}, per_step=per_step,
                      returns=returns)
