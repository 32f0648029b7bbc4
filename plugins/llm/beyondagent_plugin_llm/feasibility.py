"""`feasibility` filter with its `llm` solver: the run's chat LLM re-solves each task with a hint.

The filter's machinery (re-running tasks as episodes, the `replay` solver, the stats and the
errors) is beyondagent-plugin-synthesis's `beyondagent_plugin_synthesis.feasibility.Feasibility`; this adds the
`llm` solver, AgentEvolver's check: the run's chat LLM (the spec's `llm`) solves the task with
its reference solution appended to the query as a hint. `solver: replay` still replays the
reference with no LLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from beyondagent_core.errors import RunError
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.replay import format_reference
from beyondagent_core.types import Task
from beyondagent_plugin_llm.config import LLMFeasibilityConfig
from beyondagent_plugin_synthesis.feasibility import WHERE, EpisodeRunnerLike, Feasibility

if TYPE_CHECKING:
    from beyondagent_core.context import RunContext

class LLMFeasibility(Feasibility):
    """The core's `Feasibility` plus the `llm` solver; `llm` overrides the run's chat LLM."""

    config: LLMFeasibilityConfig

    def __init__(self, config: LLMFeasibilityConfig | None = None, *, runner: EpisodeRunnerLike | None = None,
                 llm: ChatLLM | None = None):
        super().__init__(config or LLMFeasibilityConfig(), runner=runner)
        self.llm = self._given_llm = llm

    def bind(self, run: RunContext) -> None:
        """Take the run's episode runner, and its chat LLM for the `llm` solver unless one was given."""
        super().bind(run)
        if self.config.solver == "llm":
            self.llm = self._given_llm or run.chat_llm()  # a second run binds its own LLM, not the first's

    def _check_ready(self) -> None:
        super()._check_ready()
        if self.config.solver == "llm" and self.llm is None:
            raise RunError("the feasibility filter with solver: llm needs an LLM, but none is configured",
                           where=f"{WHERE}, key solver",
                           hint="set `llm` in the spec, or use solver: replay to replay each reference without an LLM")

    def _unrunnable_hint(self) -> str:
        if self.config.solver == "llm":
            return ("the llm solver asks the spec's `llm`: check that it is reachable, or use solver: replay "
                    "(replays each reference, no LLM)")
        return super()._unrunnable_hint()

    def _episode(self, task: Task, actions: list[str] | None) -> tuple[Task, ChatLLM]:
        """The task with its reference as a hint, and the run's LLM (or the replayed reference)."""
        if self.config.solver == "replay":
            return super()._episode(task, actions)
        if task.query and task.ground_truth is not None:
            hint = self.config.hint.replace("{reference}", format_reference(task.ground_truth))
            task = attrs.evolve(task, query=task.query + hint)
        return task, self.llm  # type: ignore[return-value]
