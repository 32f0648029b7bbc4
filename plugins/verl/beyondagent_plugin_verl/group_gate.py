"""Failed episodes out of verl's own group baselines, in verl's V1 trainers (asynchronous rollout).

A synchronous run writes every estimator's advantages in our trainer (`sync_trainer.py`), which
drops failed episodes before the estimator sees them (`beyondagent_core.advantages.estimate_finished`).
verl's V1 trainers (`backend.rollout_mode: one_step_off | async`, i.e. `trainer.v1.trainer_mode:
colocate_async`, or a native V1 trainer mode) compute advantages with verl's own estimators over the
sessions of a prompt that reached its replay buffer; a session whose agent loop returns no output
is not there (verl's `compute_advantage_for_multi_trajectories`; its sampler keeps the group). So
the same rule is applied before verl sees the group:

- a failed episode (error, timeout, gateway split, no model token: `advantages.failure_of`) returns
  no output, so it moves no sibling's mean or standard deviation;
- when failures leave a group fewer than two finished episodes (`advantages.skips_group`), the
  finished ones return with response mask 0: they reach verl, but no token of theirs trains.

Deciding that needs every sibling's outcome. verl runs a prompt's `rollout.n` sessions as tasks
of one `AgentLoopWorker`'s event loop (`_run_prompt`), so the gate is a rendezvous by the prompt's
`uid` in that process: each session reports its failure (or None) and waits for the rest. verl's
sampler waits for the whole group anyway, so the wait costs no rollout time. No verl import here.
"""

from __future__ import annotations

import asyncio
from enum import Enum

from beyondagent_core.advantages import skips_group


class Verdict(str, Enum):
    TRAIN = "train"  # finished, in a group with a baseline: verl's estimator sees it
    DROP = "drop"  # failed: no output, so not in its group's statistics
    SKIP = "skip"  # finished, but failures left its group without a baseline: mask 0


def verdicts(failures: list[str | None]) -> list[Verdict]:
    """Each session's verdict from its group's failures (None: finished)."""
    skipped = skips_group(sum(failure is None for failure in failures), len(failures))
    return [Verdict.DROP if failure is not None else Verdict.SKIP if skipped else Verdict.TRAIN
            for failure in failures]


class _Group:
    def __init__(self, size: int):
        self.size = size
        self.failures: dict[int, str | None] = {}
        self.settled = asyncio.Event()
        self.waiting = size


class GroupGate:
    """A rendezvous of a prompt's sessions in one worker process (one per process, `GATE`)."""

    def __init__(self) -> None:
        self._groups: dict[str, _Group] = {}

    def report(self, uid: str, size: int, session: int, failure: str | None, *, waits: bool = True) -> None:
        """Session `session` of `uid`'s `size` ended: `failure` is why it failed, or None. Call it
        exactly once per session, also when the episode raised (as a failure, `waits=False`: it asks
        no verdict), or the rest wait."""
        group = self._groups.setdefault(uid, _Group(size))
        group.failures[session] = failure
        if len(group.failures) >= group.size:
            group.settled.set()
        if not waits:
            self._read(uid, group)

    def _read(self, uid: str, group: _Group) -> None:
        group.waiting -= 1
        if group.waiting <= 0:
            self._groups.pop(uid, None)

    async def verdict(self, uid: str, session: int) -> tuple[Verdict, bool]:
        """This session's verdict, once every session of `uid` reported, and whether its group was
        skipped (failures left it fewer than two finished episodes)."""
        group = self._groups[uid]
        try:
            await group.settled.wait()
            ordered = sorted(group.failures)
            failures = [group.failures[s] for s in ordered]
            skipped = skips_group(sum(failure is None for failure in failures), len(failures))
            return verdicts(failures)[ordered.index(session)], skipped
        finally:
            self._read(uid, group)

    def pending(self) -> int:
        """Groups not yet settled and read by all their sessions (a test's check for leaks)."""
        return len(self._groups)


GATE = GroupGate()
