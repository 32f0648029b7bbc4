"""The `feasibility` filter's `llm` solver, class-wide: the `hint` key's template (every `{reference}`
filled), the tasks it leaves without a hint, and which LLM each solver takes from the run.

The eighth audit's follow-up (mutation testing of the LLM roles). The task each solver runs is
read from `_episode` directly (no episode is played); the run is a real `RunContext` built from a
spec whose `llm` points at `ScriptedOpenAIServer` on loopback (the `openai_server` fixture, a
stand-in for a hosted LLM; no request is sent here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_llm.feasibility import LLMFeasibility, LLMFeasibilityConfig
from test_judge_parsing_and_cache import spec_context

from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task

SOLVER = OpenAIChat(LLMConfig(model="solver", base_url="http://127.0.0.1:1/v1"))
TASK = Task(task_id="s/syn-1", env="frozenlake", query="Reach row 0, column 2.", ground_truth=["right", "right"])


def solved_as(task: Task, **config: Any) -> tuple[Task, Any]:
    return LLMFeasibility(LLMFeasibilityConfig(**config), llm=SOLVER)._episode(task, None)


def test_a_custom_hint_fills_every_reference_placeholder() -> None:
    task, llm = solved_as(TASK, hint=" [ref: {reference}] [again: {reference}]")
    assert task.query == "Reach row 0, column 2. [ref: 1. right\n2. right] [again: 1. right\n2. right]"
    assert llm is SOLVER
    assert (task.task_id, task.ground_truth) == (TASK.task_id, TASK.ground_truth)


@pytest.mark.parametrize(("task", "query"), [
    (Task(task_id="a", query="Go.", ground_truth=None), "Go."),       # no reference: nothing to hint
    (Task(task_id="b", query=None, ground_truth=["up"]), None),      # the env's own task: left as it is
    (Task(task_id="c", query="", ground_truth=["up"]), ""),
    (Task(task_id="d", query="Go.", ground_truth="up\nleft"), "Go.\n\nHint: a reference solution is:\n1. up\n2. left"),
    (Task(task_id="e", query="Go.", ground_truth={"cell": [0, 2]}),
     'Go.\n\nHint: a reference solution is:\n{"cell": [0, 2]}'),
])
def test_which_tasks_get_the_default_hint(task: Task, query: str | None) -> None:
    shown, llm = solved_as(task)
    assert shown.query == query and llm is SOLVER


def test_the_replay_solver_asks_no_llm() -> None:
    task, llm = solved_as(TASK, solver="replay")
    assert task.query == TASK.query and llm is not SOLVER and type(llm).__name__ == "ReplayLLM"


@pytest.mark.beyondagent_plugins("llm", "mixers")
def test_only_the_llm_solver_takes_the_runs_llm(tmp_path: Path, plugin_manager: Any,
                                                openai_server: ScriptedOpenAIServer) -> None:
    run = spec_context(tmp_path, plugin_manager, openai_server, {"name": "env"})
    with_llm, replay = LLMFeasibility(LLMFeasibilityConfig()), LLMFeasibility(LLMFeasibilityConfig(solver="replay"))
    with_llm.bind(run)
    replay.bind(run)
    assert with_llm.llm is run.chat_llm() and with_llm.llm.config.model == "spec-model"
    assert replay.llm is None
    assert with_llm.runner is not None and replay.runner is not None


@pytest.mark.beyondagent_plugins("llm", "mixers")
def test_an_llm_given_to_the_filter_is_kept_over_the_runs(tmp_path: Path, plugin_manager: Any,
                                                         openai_server: ScriptedOpenAIServer) -> None:
    """The constructor's `llm` overrides the run's chat LLM, as the class says (bind replaced it)."""
    run = spec_context(tmp_path, plugin_manager, openai_server, {"name": "env"})
    feasibility = LLMFeasibility(LLMFeasibilityConfig(), llm=SOLVER)
    feasibility.bind(run)
    assert feasibility.llm is SOLVER and feasibility.runner is not None
