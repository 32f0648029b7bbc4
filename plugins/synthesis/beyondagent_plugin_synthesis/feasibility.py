"""The `feasibility` filter's machinery: keep a synthetic task only if re-running it succeeds.

Each candidate is run as an ordinary episode (the run's workflow, a fresh env from the seed's
initial state, the task's own judge). `Feasibility` here is the filter without an LLM: its
`replay` solver answers each model turn with the next action of the reference (`ReplayLLM`;
`ground_truth`: a list of actions, or a text with one action per line), so the reference
itself is verified step by step in a fresh env: the offline check for hindsight tasks. The
`llm` solver (the run's chat LLM solves the task with its reference as a hint, AgentEvolver's
check) and the registered `feasibility` component that offers both are in the first-party
plugin `beyondagent-plugin-llm` (`beyondagent_plugin_llm.feasibility`), which subclasses this.
Replaying is the core's (`beyondagent_core.runtime.replay`): the SFT warm-up replays references too.

A task is kept when any of `attempts` runs ends without error and its reward says success.
When not one of a batch's runs gets as far as a reward (an endpoint that refuses, an env that
breaks), the filter stops the exploration with that error instead of dropping every task as
infeasible; some failed runs are a warning with the first error.
With `rewrite_reference` a kept task's `ground_truth` becomes the actions of the successful
run (for `replay`, the prefix of the reference that already succeeded). The run services
come from `bind(run)` (the core calls it after building the filter); tests pass `runner` to
the constructor instead.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from beyondagent_core.errors import RunError
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.replay import ReplayLLM, reference_actions
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_synthesis.config import FeasibilityConfig

if TYPE_CHECKING:
    from beyondagent_core.context import RunContext

log = get_logger("beyondagent.feasibility")

WHERE = "explore.filters (feasibility)"


class EpisodeRunnerLike(Protocol):
    """What the filter needs from the run: `RunContext.episode_runner()`."""

    async def run(self, task: Task, llm: ChatLLM) -> Trajectory: ...


@attrs.define
class _Tally:
    """One `keep` call's re-runs: explorations filter their batches concurrently on one filter, so
    whether a batch's runs all failed is counted per call, never from the shared `stats`."""

    runs: int = 0
    errors: int = 0
    first_error: str | None = None


class Feasibility:
    """The `TaskFilter` protocol; `stats` counts kept, infeasible, failed runs and unusable references.

    A subclass adds a solver by overriding `_episode` (the task as it runs, and the LLM that
    answers), `_check_ready` and `_unrunnable_hint`.
    """

    independent = True  # judges each task alone: slow re-runs happen outside the engine's commit lock

    def __init__(self, config: FeasibilityConfig | None = None, *, runner: EpisodeRunnerLike | None = None):
        self.config = config or FeasibilityConfig()
        self.runner = runner
        self.stats: Counter[str] = Counter()

    def bind(self, run: RunContext) -> None:
        """Take the run's episode runner."""
        self.runner = run.episode_runner()

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        self._check_ready()
        limit = asyncio.Semaphore(self.config.concurrency)
        tally = _Tally()
        checked = await asyncio.gather(*(self._check(task, limit, tally) for task in candidates))
        errors, runs = tally.errors, tally.runs
        if runs and errors == runs:
            # Not one re-run got as far as a reward: the solver cannot work here (offline, no endpoint),
            # which would otherwise drop every synthetic task as "infeasible", quietly.
            raise RunError(f"the feasibility filter could not run any of its {runs} checks; the first error: "
                           f"{tally.first_error}", where=f"{WHERE}, key solver ({self.config.solver})",
                           hint=self._unrunnable_hint())
        if errors:
            log.warning("feasibility.runs_failed", failed=errors, of=runs, first_error=tally.first_error,
                        hint="these tasks were dropped as unverified; see the log for each")
        return [task for task in checked if task is not None]

    def _unrunnable_hint(self) -> str:
        return "check the env and the workflow: every replay failed to run"

    def _check_ready(self) -> None:
        if self.runner is None:
            raise RunError("the feasibility filter has no way to run episodes", where=WHERE,
                           hint="it runs inside `beyondagent run|explore`; in code, pass runner=EpisodeRunner(...)")

    async def _check(self, task: Task, limit: asyncio.Semaphore, tally: _Tally) -> Task | None:
        actions = reference_actions(task.ground_truth)
        if self.config.solver == "replay" and actions is None:
            return self._drop(task, "no_reference", "its ground_truth is not a list of actions to replay")
        for attempt in range(self.config.attempts):
            episode_task, llm = self._episode(task, actions)
            async with limit:
                trajectory = await self.runner.run(episode_task, llm)  # type: ignore[union-attr]
            tally.runs += 1
            if trajectory.error is not None:
                self.stats["run_errors"] += 1
                tally.errors += 1
                tally.first_error = tally.first_error or trajectory.error
                log.info("feasibility.run_failed", task=task.task_id, attempt=attempt, error=trajectory.error)
            elif trajectory.reward is not None and trajectory.reward.success:
                self.stats["kept"] += 1
                if self.config.rewrite_reference:
                    solution = [turn.content for turn in trajectory.turns if turn.role == "assistant"]
                    return attrs.evolve(task, ground_truth=solution)
                return task
        reason = trajectory.reward.reason if trajectory.reward is not None else "no reward"
        return self._drop(task, "infeasible", reason)

    def _episode(self, task: Task, actions: list[str] | None) -> tuple[Task, ChatLLM]:
        """The task as the solver runs it, and the LLM that answers: the reference, replayed."""
        return task, ReplayLLM(actions or [])

    def _drop(self, task: Task, why: str, detail: str) -> None:
        self.stats[why] += 1
        log.info("feasibility.dropped", task=task.task_id, why=why, detail=detail)
        return None
