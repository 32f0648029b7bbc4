"""The `hindsight` summarizer: tasks from real gym random explorations are solvable and checkable.

Explorations are real (the `random` explorer in `random_actions` mode on gymnasium envs); each
task's reference is replayed in a fresh env from the seed's start and `evaluate()` must say
success, while a wrong action sequence must not.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
from beyondagent_plugin_random_explorer.explorer import RandomExplorer

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_plugin_synthesis.hindsight import HindsightConfig, HindsightSummarizer
from beyondagent_core.types import Task, Trajectory, Turn

# the synthesis components come from this plugin (the plugin_manager fixture loads only what it names)
pytestmark = pytest.mark.beyondagent_plugins("synthesis")

GAMES = {
    "frozenlake": lambda: FrozenLake(FrozenLakeConfig(size=5, max_steps=60)),
    "taxi": lambda: Taxi(TaxiConfig(max_steps=60)),
    "cliffwalking": lambda: CliffWalking(CliffWalkingConfig(is_slippery=True, max_steps=60)),
}


def explore(make_env, seed: Task, explorer: RandomExplorer) -> Trajectory:
    async def run() -> Trajectory:
        async with LocalAsyncEnv(make_env()) as env:
            return await explorer.explore(seed, env, None)

    return asyncio.run(run())


def summarize(summarizer: HindsightSummarizer, seed: Task, trajectory: Trajectory, known=()) -> list[Task]:
    return asyncio.run(summarizer.summarize(seed, trajectory, list(known), None))


def replay(make_env, task: Task, actions: list[str]):
    env = make_env()
    try:
        env.reset(task)
        for action in actions:
            if env.step({"role": "assistant", "content": action}).terminated:
                break
        return env.evaluate()
    finally:
        env.close()


@pytest.mark.parametrize("game", GAMES)
def test_tasks_from_random_explorations_are_solvable_and_checkable(game: str) -> None:
    make_env = GAMES[game]
    explorer = RandomExplorer(RandomExplorerConfig(mode="random_actions", max_explore_step=25, seed=1))
    summarizer = HindsightSummarizer(HindsightConfig(max_tasks=50))
    tasks: list[Task] = []
    for index in range(3):
        seed = Task(task_id=f"{game}-train-{index}", env=game)
        seed = Task(task_id=seed.task_id, env=game, metadata=make_env().reset(seed).info["metadata"])
        tasks += summarize(summarizer, seed, explore(make_env, seed, explorer))
    assert len(tasks) >= 3

    for task in tasks:
        reward = replay(make_env, task, task.ground_truth)
        assert reward.success, (task.query, task.ground_truth, reward.reason)
        # Checkable: one step short of the reference, the goal is not achieved yet.
        assert not replay(make_env, task, task.ground_truth[:-1]).success
        # ... and the goal is the task's, not the game's: answering nonsense achieves nothing.
        assert not replay(make_env, task, ["think"] * len(task.ground_truth)).success


def trajectory(seed: Task, actions: list[str], achieved: list[dict]) -> Trajectory:
    turns = [Turn(role="user", content="start")]
    for action in actions:
        turns += [Turn(role="assistant", content=action), Turn(role="user", content="...")]
    return Trajectory(task=seed, turns=turns, metrics={"achieved": achieved})


def goal(row: int, col: int) -> dict:
    return {"query": f"Reach row {row}, column {col}.", "goal": {"kind": "reach", "row": row, "col": col}}


SEED = Task(task_id="seed-1", env="frozenlake", query="Reach G.", metadata={"seed": 4, "map": ["SF", "FG"]})
WALK = trajectory(SEED, ["right", "down", "left"], [
    {"step": 1, "goals": [goal(0, 1)]},
    {"step": 2, "goals": [goal(0, 1), goal(1, 1)]},
    {"step": 3, "goals": [goal(0, 1), goal(1, 1), goal(1, 0)]},
])


def test_one_task_per_distinct_goal_with_the_prefix_that_achieved_it() -> None:
    tasks = summarize(HindsightSummarizer(), SEED, WALK)
    assert [(t.query, t.ground_truth) for t in tasks] == [
        ("Reach row 1, column 0.", ["right", "down", "left"]),
        ("Reach row 1, column 1.", ["right", "down"]),
        ("Reach row 0, column 1.", ["right"]),
    ]
    task = tasks[0]
    assert task.metadata == {"seed": 4, "map": ["SF", "FG"], "goal": {"kind": "reach", "row": 1, "col": 0}}
    assert (task.env, task.judge, task.confidence, task.origin, task.seed_task_id) == (
        "frozenlake", "env", 1.0, "synthetic", "seed-1")
    assert task.task_id.startswith("seed-1/goal-") and len({t.task_id for t in tasks}) == 3
    assert summarize(HindsightSummarizer(), SEED, WALK)[0].task_id == task.task_id  # stable ids


def test_known_goals_are_not_repeated() -> None:
    summarizer = HindsightSummarizer()
    first = summarize(summarizer, SEED, WALK)
    assert summarize(summarizer, SEED, WALK, known=first) == []
    assert summarize(summarizer, SEED, WALK, known=first[:1])[0].query == "Reach row 1, column 1."
    assert summarizer.stats["known"] == 3 + 1


@pytest.mark.parametrize(("config", "queries"), [
    ({"max_tasks": 1}, ["Reach row 1, column 0."]),
    ({"max_tasks": 2, "prefer": "earlier"}, ["Reach row 0, column 1.", "Reach row 1, column 1."]),
    ({"min_steps": 2, "max_steps": 2}, ["Reach row 1, column 1."]),
])
def test_options_choose_which_goals_become_tasks(config, queries) -> None:
    assert [t.query for t in summarize(HindsightSummarizer(HindsightConfig(**config)), SEED, WALK)] == queries


def test_malformed_entries_are_counted_and_skipped() -> None:
    bad = trajectory(SEED, ["right"], [
        {"step": 1, "goals": [goal(0, 1), {"query": "", "goal": {}}, {"goal": {"kind": "x"}}, "reach"]},
        {"step": 5, "goals": [goal(1, 1)]},  # more steps than actions taken
        {"goals": [goal(1, 0)]},
        "garbage",
    ])
    summarizer = HindsightSummarizer()
    assert [t.query for t in summarize(summarizer, SEED, bad)] == ["Reach row 0, column 1."]
    assert summarizer.stats["malformed"] == 6
    no_metrics = Trajectory(task=SEED, turns=[Turn(role="assistant", content="right")])
    assert summarize(summarizer, SEED, no_metrics) == []


@pytest.mark.parametrize("options", [{"max_tasks": 0}, {"prefer": "harder"}, {"min_steps": 3, "max_steps": 2}])
def test_bad_options_are_value_errors(options) -> None:
    with pytest.raises(ValueError):
        HindsightConfig(**options)
