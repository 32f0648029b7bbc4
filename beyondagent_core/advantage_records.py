"""One episode's record for an advantage estimator running in another framework's trainer.

A backend whose trainer is not ours (verl, Trinity-RFT) carries each episode's record with its
sample: the rollout side writes `advantage_record(...)` (verl: into the agent loop's
`extra_fields`; Trinity-RFT: into the Experience's `info`), the trainer side reads it back with
`scored_from_record` and cuts the estimator's per-token answer to the sample's response with
`response_advantages`. Plain lists and numbers only, so it survives any serialization.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from beyondagent_core.advantages import ScoredEpisode, Step, failure_of, prefix_turns, steps_of
from beyondagent_core.sources.parquet import row_to_task, task_to_row
from beyondagent_core.types import Trajectory


def advantage_record(trajectory: Trajectory, spans: Sequence[tuple[int, int]], *, prompt_length: int,
                     response_length: int) -> dict[str, Any]:
    """The task, outcome, token count and each model turn (its span in prompt + response, the
    observation before it, the action it wrote) of one episode; spans past the response are cut.
    `failure` says why the episode failed (None when it finished: `advantages.failure_of`)."""
    length = prompt_length + response_length
    kept = [(start, min(end, length)) for start, end in spans if start < length]
    reward = trajectory.reward
    steps = steps_of(trajectory.turns, kept, replayed=prefix_turns(trajectory))
    return {"task": task_to_row(trajectory.task, 0, "train"), "length": length, "prompt_length": prompt_length,
            "outcome": float(reward.score) if reward is not None else 0.0,
            "success": bool(reward is not None and reward.success),
            "failure": failure_of(trajectory, trainable=any(end > start for start, end in kept)),
            "steps": [[s.start, s.end, s.observation, s.action, s.reward] for s in steps],
            **({} if trajectory.seat is None else {"seat": trajectory.seat})}


def scored_from_record(record: dict[str, Any], group: Hashable) -> ScoredEpisode:
    """The estimator's view of one sample, from its record. `group` is the sample's group in the other
    framework (verl's uid: a task's rollouts); a seat of a multi-seat episode is measured against the same
    seat's games of the task, `(group, seat)`, as the torch backend does."""
    steps = tuple(Step(start=int(s[0]), end=int(s[1]), observation=str(s[2]), action=str(s[3]),
                       reward=None if s[4] is None else float(s[4])) for s in record["steps"])
    failure = record.get("failure")  # absent from records written before failures left the groups
    seat = record.get("seat")
    return ScoredEpisode(group=group if seat is None else (group, int(seat)), task=row_to_task(record["task"], 0),
                         outcome=float(record["outcome"]), success=bool(record["success"]),
                         length=int(record["length"]), steps=steps, failure=None if failure is None else str(failure),
                         seat=None if seat is None else int(seat))


def response_advantages(per_token: Sequence[np.ndarray], records: Sequence[dict[str, Any]],
                        response_lengths: Sequence[int]) -> list[np.ndarray]:
    """Each sample's advantages over its response tokens: the sequence's advantages after the prompt."""
    out = []
    for values, record, length in zip(per_token, records, response_lengths, strict=True):
        start = int(record["prompt_length"])
        piece = np.asarray(values[start:start + int(length)], dtype=np.float32)
        if piece.shape[0] != int(length):
            raise ValueError(f"a sample has {length} response tokens but its record covers {piece.shape[0]}")
        out.append(piece)
    return out
