"""The synthesis plugin's keys with non-default values, and its tallies, from the eighth audit's class-wide pass.

- `hindsight`: `judge` names the reward of every task it makes; `stats` count each goal once
  (`goals`), the ones already known (`known`), those outside `[min_steps, max_steps]`
  (`out_of_range`) and those beyond `max_tasks` (`over_limit`, 0 when exactly `max_tasks` remain);
- `dedup`: `n` (the character n-gram length) changes what counts as alike;
- `feasibility`: `attempts` runs per task (the error of a batch whose runs all failed counts them
  all); a batch where some runs fail and one task succeeds keeps that task with a warning.

Hindsight reads the `WALK` trajectory of test_hindsight_summarizer; feasibility re-runs tasks with
the real episode runner, react workflow and FrozenLake of test_feasibility_filter, behind
`BreaksOn`, which stands in for an env that breaks on some tasks (as in
test_feasibility_concurrent_batches: a real env's failure renders a traceback per run, seconds here).
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_synthesis.feasibility import Feasibility, FeasibilityConfig
from beyondagent_plugin_synthesis.filters import Dedup, DedupConfig
from beyondagent_plugin_synthesis.hindsight import HindsightConfig, HindsightSummarizer
from test_feasibility_filter import goal_task, runner
from test_hindsight_summarizer import SEED, WALK, summarize
from test_task_filters import keep, task

from beyondagent_core.errors import RunError
from beyondagent_core.types import Task, Trajectory

pytestmark = pytest.mark.beyondagent_plugins("synthesis")


# --- hindsight ---------------------------------------------------------------------------------


def test_the_judge_key_names_the_reward_of_every_task_made() -> None:
    assert HindsightConfig().judge == "env"
    tasks = summarize(HindsightSummarizer(HindsightConfig(judge="math_answer")), SEED, WALK)
    assert [t.judge for t in tasks] == ["math_answer"] * 3


@pytest.mark.parametrize(("config", "known", "counts"), [
    ({}, 0, {"goals": 3, "known": 0, "out_of_range": 0, "over_limit": 0, "tasks": 3}),
    ({"max_tasks": 3}, 0, {"goals": 3, "known": 0, "out_of_range": 0, "over_limit": 0, "tasks": 3}),
    ({"max_tasks": 2}, 0, {"goals": 3, "known": 0, "out_of_range": 0, "over_limit": 1, "tasks": 2}),
    ({"min_steps": 2}, 0, {"goals": 3, "known": 0, "out_of_range": 1, "over_limit": 0, "tasks": 2}),
    ({"max_steps": 1}, 0, {"goals": 3, "known": 0, "out_of_range": 2, "over_limit": 0, "tasks": 1}),
    ({"max_tasks": 1}, 1, {"goals": 3, "known": 1, "out_of_range": 0, "over_limit": 1, "tasks": 1}),
])
def test_the_stats_count_why_each_goal_was_or_was_not_made_a_task(config, known: int, counts: dict) -> None:
    earlier = summarize(HindsightSummarizer(HindsightConfig(max_tasks=known, prefer="earlier")), SEED, WALK) \
        if known else []
    elsewhere = Task(task_id="seed-1/goal-far", metadata={**SEED.metadata, "goal": {"kind": "reach", "row": 5,
                                                                                  "col": 5}})
    earlier += [elsewhere, Task(task_id="seed-1/no-goal")]  # known, but not achieved on this walk: not counted
    summarizer = HindsightSummarizer(HindsightConfig(**config))
    made = summarize(summarizer, SEED, WALK, known=earlier)
    assert len(made) == counts["tasks"]
    assert {key: summarizer.stats[key] for key in counts} == counts


# --- dedup's n ---------------------------------------------------------------------------------


def test_the_ngram_length_decides_what_is_alike() -> None:
    a, b = "listen to the radio", "silent to the radio"  # the same letters, other words
    assert Dedup(DedupConfig(n=1)).similarity(a, b) == 1.0
    assert Dedup().similarity(a, b) < 0.8 and DedupConfig().n == 3
    assert keep(Dedup(DedupConfig(n=1)), [task(a), task(b)]) == [a]
    assert keep(Dedup(DedupConfig(n=3)), [task(a), task(b)]) == [a, b]


# --- feasibility's attempts ----------------------------------------------------------------------


class BreaksOn:
    """The run's episode runner, but a task named `broken-*` ends in an env error; counts the runs."""

    def __init__(self) -> None:
        self.real, self.runs = runner(), 0

    async def run(self, task: Task, llm: object) -> Trajectory:
        self.runs += 1
        if task.task_id.rsplit("/", 1)[-1].startswith("broken"):
            return Trajectory(task=task, error="EnvError: the env broke")
        return await self.real.run(task, llm)


@pytest.mark.parametrize(("attempts", "tasks", "runs"), [(1, 1, 1), (3, 1, 3), (2, 2, 4)])
def test_every_attempt_runs_and_a_batch_whose_runs_all_failed_names_their_count(attempts: int, tasks: int,
                                                                                 runs: int) -> None:
    broken = [goal_task(f"broken-{i}", 0, 2, ["right", "right"]) for i in range(tasks)]
    flt = Feasibility(FeasibilityConfig(solver="replay", attempts=attempts), runner=BreaksOn())
    with pytest.raises(RunError, match=f"could not run any of its {runs} checks; the first error: EnvError"):
        asyncio.run(flt.keep(broken, []))
    assert flt.stats["run_errors"] == flt.runner.runs == runs


def test_a_batch_with_one_feasible_task_keeps_it_and_only_warns_of_the_failed_runs() -> None:
    good, broken = goal_task("good", 0, 2, ["right", "right"]), goal_task("broken", 0, 2, ["right", "right"])
    flt = Feasibility(FeasibilityConfig(solver="replay", attempts=2), runner=BreaksOn())
    assert asyncio.run(flt.keep([broken, good], [])) == [good]
    assert (flt.stats["run_errors"], flt.stats["kept"], flt.stats["infeasible"]) == (2, 1, 1)
    assert flt.runner.runs == 3  # the feasible task's first attempt succeeded: no second
