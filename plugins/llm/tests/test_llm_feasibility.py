"""The `feasibility` filter's `llm` solver on a real gym env: the reference as a hint, attempts, errors.

The solver talks to `openai_server`, a local OpenAI-compatible server replaying scripted
completions: it stands in for a hosted LLM, which tests cannot reach. The filter's machinery
and its `replay` solver are the core's (`tests/test_feasibility_filter.py`).
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_llm.feasibility import LLMFeasibility, LLMFeasibilityConfig

from beyondagent_core.errors import RunError
from beyondagent_core.judging import EnvJudge, JudgeSelector
from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.registry import Registry
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.spec import structured
from beyondagent_core.types import Task

MAP = ["SFF", "FHF", "FFG"]
SEED = Task(task_id="frozenlake-train-0", env="frozenlake", metadata={"seed": 0, "map": MAP})
Feasibility, FeasibilityConfig = LLMFeasibility, LLMFeasibilityConfig


def runner(max_turns: int = 12) -> EpisodeRunner:
    """The run's episode runner: the react workflow, a fresh FrozenLake per episode, the `env` judge."""
    return EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=max_turns)),
                         make_env=lambda: FrozenLake(FrozenLakeConfig(max_steps=max_turns)),
                         judge=JudgeSelector(configured={"env": EnvJudge()}))


def goal_task(name: str, row: int, col: int, reference) -> Task:
    return Task(task_id=f"{SEED.task_id}/{name}", env="frozenlake", query=f"Reach row {row}, column {col}.",
                ground_truth=reference, judge="env", origin="synthetic", seed_task_id=SEED.task_id,
                metadata={**SEED.metadata, "goal": {"kind": "reach", "row": row, "col": col}}, confidence=1.0)


def keep(flt: LLMFeasibility, candidates: list[Task]) -> list[Task]:
    return asyncio.run(flt.keep(candidates, []))


def client(server) -> OpenAIChat:
    return OpenAIChat(LLMConfig(model="stand-in", base_url=server.base_url, max_llm_retries=0))


def test_llm_solver_sees_the_reference_as_a_hint(openai_server) -> None:
    task = goal_task("good", 0, 2, ["right", "right"])
    openai_server.push("Action: right", "Action: right")
    flt = Feasibility(FeasibilityConfig(solver="llm", concurrency=1), runner=runner(), llm=client(openai_server))
    assert keep(flt, [task]) == [task]  # the kept task keeps its own query, without the hint
    shown = openai_server.requests[0]["messages"][1]["content"]
    assert shown.startswith("Reach row 0, column 2.\n\nHint: a reference solution is:\n1. right\n2. right\n")


def test_llm_solver_drops_what_it_cannot_solve_and_retries_attempts(openai_server) -> None:
    task = goal_task("good", 0, 2, ["right", "right"])
    openai_server.push("Action: down", "Action: right")  # attempt 1: into the hole at (1, 1)
    flt = Feasibility(FeasibilityConfig(solver="llm", concurrency=1), runner=runner(), llm=client(openai_server))
    assert keep(flt, [task]) == [] and flt.stats["infeasible"] == 1

    openai_server.push("Action: down", "Action: right", "Action: right", "Action: right")
    flt = Feasibility(FeasibilityConfig(solver="llm", attempts=2, concurrency=1, rewrite_reference=True),
                      runner=runner(), llm=client(openai_server))
    [kept] = keep(flt, [task])
    assert kept.ground_truth == ["Action: right", "Action: right"]  # what the successful run did


def test_missing_llm_is_a_clear_error() -> None:
    task = goal_task("good", 0, 2, ["right", "right"])
    with pytest.raises(RunError, match="solver: llm needs an LLM") as error:
        keep(Feasibility(FeasibilityConfig(solver="llm"), runner=runner()), [task])
    assert "solver: replay" in error.value.hint


@pytest.mark.parametrize("options", [{"solver": "oracle"}, {"attempts": 0}, {"hint": "no placeholder"}])
def test_bad_options_are_value_errors(options) -> None:
    with pytest.raises(ValueError):
        FeasibilityConfig(**options)


@pytest.mark.beyondagent_plugins("llm")
def test_registered_with_the_llm_solver_by_default_and_replay_still_works(registry: Registry) -> None:
    registration = registry.resolve("task_filter", "feasibility", key_path="explore.filters[0]")
    assert registration.plugin.distribution == "beyondagent-plugin-llm"
    config = structured(registration.spec.config_cls, {}, "explore.filters[0]", "spec.yaml")
    assert config.solver == "llm" and "{reference}" in config.hint
    replay = registration.spec.load_factory()(
        structured(registration.spec.config_cls, {"solver": "replay"}, "explore.filters[0]", "spec.yaml"))
    replay.runner = runner()
    good, bad = goal_task("good", 0, 2, ["right", "right"]), goal_task("hole", 1, 2, ["right", "down"])
    assert keep(replay, [good, bad]) == [good] and replay.llm is None


def test_an_unreachable_llm_stops_the_filter_instead_of_dropping_everything(openai_server) -> None:
    # Offline, the llm solver's every run fails before a reward: that is one clear error (what
    # happened, what to do), not every synthetic task dropped as "infeasible".
    tasks = [goal_task("a", 0, 2, ["right", "right"]), goal_task("b", 2, 2, ["down", "down"])]
    dead = OpenAIChat(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", timeout=2.0, max_llm_retries=0))
    flt = Feasibility(FeasibilityConfig(solver="llm"), runner=runner(), llm=dead)
    with pytest.raises(RunError, match="could not run any of its 2 checks") as error:
        keep(flt, tasks)
    assert "solver: replay" in error.value.hint and "solver (llm)" in error.value.where


def test_some_failed_runs_only_drop_their_tasks(openai_server) -> None:
    from beyondagent_core.testing.openai_server import Reply

    task, other = goal_task("good", 0, 2, ["right", "right"]), goal_task("b", 2, 2, ["down", "down"])
    openai_server.responder = lambda body: (Reply.fault(400) if "row 2" in body["messages"][1]["content"]
                                            else "Action: right")
    flt = Feasibility(FeasibilityConfig(solver="llm", concurrency=1), runner=runner(), llm=client(openai_server))
    assert keep(flt, [task, other]) == [task] and flt.stats["run_errors"] == 1
