"""The `feasibility` filter's core machinery on a real gym env: replaying references, rewriting.

The `llm` solver and the registered `feasibility` component are beyondagent-plugin-llm's
(`plugins/llm/tests/test_llm_feasibility.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
from beyondagent_plugin_random_explorer.explorer import RandomExplorer

from beyondagent_core.errors import RunError
from beyondagent_core.exploration.engine import explore_seeds
from beyondagent_core.judging import EnvJudge, JudgeSelector
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.replay import ReplayLLM, reference_actions
from beyondagent_plugin_synthesis.feasibility import Feasibility, FeasibilityConfig
from beyondagent_plugin_synthesis.filters import Dedup, DedupConfig
from beyondagent_plugin_synthesis.hindsight import HindsightSummarizer
from beyondagent_core.types import Task

# the synthesis components come from this plugin (the plugin_manager fixture loads only what it names)
pytestmark = pytest.mark.beyondagent_plugins("synthesis")

MAP = ["SFF", "FHF", "FFG"]
SEED = Task(task_id="frozenlake-train-0", env="frozenlake", metadata={"seed": 0, "map": MAP})


def runner(max_turns: int = 12) -> EpisodeRunner:
    """The run's episode runner: the react workflow, a fresh FrozenLake per episode, the `env` judge."""
    return EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=max_turns)),
                         make_env=lambda: FrozenLake(FrozenLakeConfig(max_steps=max_turns)),
                         judge=JudgeSelector(configured={"env": EnvJudge()}))


def goal_task(name: str, row: int, col: int, reference) -> Task:
    return Task(task_id=f"{SEED.task_id}/{name}", env="frozenlake", query=f"Reach row {row}, column {col}.",
                ground_truth=reference, judge="env", origin="synthetic", seed_task_id=SEED.task_id,
                metadata={**SEED.metadata, "goal": {"kind": "reach", "row": row, "col": col}}, confidence=1.0)


def keep(flt: Feasibility, candidates: list[Task]) -> list[Task]:
    return asyncio.run(flt.keep(candidates, []))


def test_replay_keeps_working_references_and_drops_the_rest() -> None:
    flt = Feasibility(FeasibilityConfig(solver="replay"), runner=runner())
    good = goal_task("good", 0, 2, ["right", "right"])
    as_text = goal_task("text", 2, 0, "down\ndown\n")
    into_hole = goal_task("hole", 1, 2, ["right", "down", "right"])
    too_short = goal_task("short", 2, 2, ["right", "right", "down"])
    no_reference = goal_task("none", 0, 1, None)
    kept = keep(flt, [good, as_text, into_hole, too_short, no_reference])
    assert kept == [good, as_text]  # unchanged, in order
    assert dict(flt.stats) == {"kept": 2, "infeasible": 2, "no_reference": 1}


def test_rewrite_keeps_the_prefix_that_succeeded() -> None:
    flt = Feasibility(FeasibilityConfig(solver="replay", rewrite_reference=True), runner=runner())
    detour = goal_task("detour", 0, 2, ["right", "right", "down", "left"])  # the goal is reached after two
    [kept] = keep(flt, [detour])
    assert kept.ground_truth == ["right", "right"]
    assert kept.query == detour.query and kept.metadata == detour.metadata


def test_a_reference_longer_than_the_workflow_allows_is_infeasible() -> None:
    flt = Feasibility(FeasibilityConfig(solver="replay"), runner=runner(max_turns=3))
    assert keep(flt, [goal_task("far", 2, 2, ["down", "down", "right", "right"])]) == []


def test_replay_llm_replays_then_says_no_more() -> None:
    llm = ReplayLLM(["a", "b"])

    async def chat() -> list[str]:
        return [(await llm.chat([])).content for _ in range(2)]

    assert asyncio.run(chat()) == ["a", "b"]
    with pytest.raises(Exception, match="no more actions"):
        asyncio.run(llm.chat([]))
    assert reference_actions(["x"]) == ["x"] and reference_actions("x\n\ny") == ["x", "y"]
    assert reference_actions([1, 2]) is None and reference_actions("") is None and reference_actions(None) is None


def test_missing_run_services_are_clear_errors() -> None:
    task = goal_task("good", 0, 2, ["right", "right"])
    with pytest.raises(RunError, match="no way to run episodes"):
        keep(Feasibility(FeasibilityConfig(solver="replay")), [task])


@pytest.mark.parametrize("options", [{"solver": "oracle"}, {"solver": "llm"}, {"attempts": 0}, {"concurrency": 0}])
def test_bad_options_are_value_errors(options) -> None:
    with pytest.raises(ValueError):
        FeasibilityConfig(**options)


def test_hindsight_tasks_from_an_exploration_all_pass_replay(tmp_path: Path) -> None:
    """The offline pipeline: random valid actions -> hindsight -> dedup -> feasibility (replay)."""
    seeds = [Task(task_id=f"frozenlake-train-{i}", env="frozenlake", metadata={"seed": i, "size": 4}) for i in range(3)]
    feasibility = Feasibility(FeasibilityConfig(solver="replay"), runner=EpisodeRunner(
        workflow=ReactWorkflow(ReactConfig(max_turns=20)), make_env=lambda: FrozenLake(FrozenLakeConfig()),
        judge=JudgeSelector(configured={"env": EnvJudge()})))
    result = asyncio.run(explore_seeds(
        seeds, n=2, workers=2,
        explorer=RandomExplorer(RandomExplorerConfig(mode="random_actions", max_explore_step=12)),
        summarizer=HindsightSummarizer(),
        filters=[("dedup", Dedup(DedupConfig(scope="seed"))), ("feasibility", feasibility)],
        make_env=lambda: FrozenLake(FrozenLakeConfig(max_steps=50)),
        cache_path=tmp_path / "synthetic.jsonl",
    ))
    assert result.failures == 0 and len(result.tasks) >= 3
    assert result.dropped_by_filter["feasibility"] == 0
    assert feasibility.stats["kept"] == len(result.tasks)
