"""The `random` explorer in `random_actions` mode on real gymnasium envs, and its registration."""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_gym.config import CliffWalkingConfig, FrozenLakeConfig, TaxiConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.taxi import Taxi
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
from beyondagent_plugin_random_explorer.explorer import RandomExplorer
from beyondagent_plugin_random_explorer.prompt import HIDDEN_QUERY

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.types import Reward, Task, Trajectory

MAP_4X4 = ["SFFF", "FHFH", "FFFH", "HFFG"]
SEED = Task(task_id="frozenlake-train-0", env="frozenlake", query="Reach G quickly.", metadata={"map": MAP_4X4})


def explore(explorer: RandomExplorer, seed: Task = SEED, env=None) -> Trajectory:
    async def run() -> Trajectory:
        async with LocalAsyncEnv(env or FrozenLake(FrozenLakeConfig(max_steps=100))) as aenv:
            return await explorer.explore(seed, aenv, None)

    return asyncio.run(run())


def random_actions(**config) -> RandomExplorer:
    return RandomExplorer(RandomExplorerConfig(mode="random_actions", **config))


def actions_of(trajectory: Trajectory) -> list[str]:
    return [turn.content for turn in trajectory.turns if turn.role == "assistant"]


def test_records_reset_actions_observations_and_what_was_achieved() -> None:
    trajectory = explore(random_actions(max_explore_step=6, seed=1))

    roles = [turn.role for turn in trajectory.turns]
    steps = trajectory.metrics["steps"]
    assert roles == ["system", "user"] + ["assistant", "user"] * steps
    assert 1 <= steps <= 6
    assert all(action in ("left", "down", "right", "up") for action in actions_of(trajectory))
    assert trajectory.task == SEED
    achieved = trajectory.metrics["achieved"]
    assert [entry["step"] for entry in achieved] == list(range(1, steps + 1))
    # describe_achieved is cumulative: each step's goals extend the previous step's.
    for before, after in zip(achieved, achieved[1:], strict=False):
        assert after["goals"][: len(before["goals"])] == before["goals"]
    assert trajectory.metrics["stopped"] in ("max_explore_step", "terminated")
    assert trajectory.terminated == (trajectory.metrics["stopped"] == "terminated")


def test_the_seed_query_is_masked() -> None:
    trajectory = explore(random_actions(max_explore_step=1))
    assert "Reach G quickly." not in trajectory.turns[1].content
    assert trajectory.turns[1].content.startswith(HIDDEN_QUERY)


def test_only_valid_actions_are_taken() -> None:
    # From the top-left corner of a map, "left" and "up" would leave it: never drawn there.
    env = FrozenLake(FrozenLakeConfig(max_steps=100))
    for seed in range(20):
        trajectory = explore(random_actions(max_explore_step=1, seed=seed), env=env)
        assert actions_of(trajectory)[0] in ("down", "right")


def test_explorations_are_reproducible_and_differ_from_each_other() -> None:
    def walks(explorer: RandomExplorer) -> list[list[str]]:
        return [actions_of(explore(explorer)) for _ in range(4)]

    first, again = walks(random_actions(max_explore_step=8, seed=3)), walks(random_actions(max_explore_step=8, seed=3))
    assert first == again
    assert len({tuple(walk) for walk in first}) > 1
    assert walks(random_actions(max_explore_step=8, seed=4)) != first
    explorer = random_actions(max_explore_step=8, seed=3)
    assert [explore(explorer).metrics["exploration"] for _ in range(3)] == [0, 1, 2]


def test_an_index_from_the_caller_fixes_the_draws() -> None:
    """An engine that knows which exploration of a seed this is (Ray actors, a resumed run) says so."""
    async def walk(explorer: RandomExplorer, index: int | None) -> list[str]:
        async with LocalAsyncEnv(FrozenLake(FrozenLakeConfig(max_steps=100))) as env:
            return actions_of(await explorer.explore(SEED, env, None, index=index))

    def walks(*indices: int | None) -> list[list[str]]:
        explorer = random_actions(max_explore_step=8, seed=3)
        return [asyncio.run(walk(explorer, index)) for index in indices]

    counted = walks(None, None, None)
    assert walks(2, 0, 1) == [counted[2], counted[0], counted[1]]
    assert walks(1, None) == [counted[1], counted[2]]  # counting goes on after the highest index seen


def test_stops_when_the_env_ends_the_episode() -> None:
    seed = Task(task_id="t", metadata={"map": ["SH", "HG"]})  # every first move falls into a hole
    trajectory = explore(random_actions(max_explore_step=10), seed=seed)
    assert trajectory.metrics["steps"] == 1 and trajectory.metrics["stopped"] == "terminated"
    assert trajectory.terminated
    assert trajectory.metrics["achieved"] == [{"step": 1, "goals": []}]


def test_taxi_exploration_finds_pickups() -> None:
    """Taxi from a start next to the passenger: random valid actions pick them up sooner or later."""
    seed = Task(task_id="taxi-train-0", env="taxi", metadata={"state": 0})  # taxi at R with the passenger at R
    found = set()
    explorer = random_actions(max_explore_step=15, seed=0)
    for _ in range(5):
        trajectory = explore(explorer, seed=seed, env=Taxi(TaxiConfig(max_steps=100)))
        found |= {goal["goal"]["kind"] for entry in trajectory.metrics["achieved"] for goal in entry["goals"]}
    assert {"reach", "pickup"} <= found


class Corridor:
    """A minimal env with neither valid_actions nor describe_achieved."""

    def reset(self, task: Task) -> EnvReset:
        return EnvReset(messages=[{"role": "user", "content": "a corridor"}])

    def step(self, action: dict) -> EnvStep:
        return EnvStep(observation=[{"role": "user", "content": "still a corridor"}])

    def evaluate(self) -> Reward:
        return Reward(0.0)

    def close(self) -> None:
        pass


def test_random_actions_needs_an_env_that_lists_its_actions() -> None:
    with pytest.raises(RunError, match="needs an env that lists its valid actions") as error:
        explore(random_actions(), env=Corridor())
    assert "mode: llm" in (error.value.hint or "")


def test_llm_mode_without_an_llm_says_what_to_set() -> None:
    with pytest.raises(RunError, match="needs an LLM") as error:
        explore(RandomExplorer(RandomExplorerConfig(mode="llm")))
    assert "random_actions" in (error.value.hint or "")


@pytest.mark.parametrize(("options", "problem"), [
    ({"mode": "walk"}, "mode must be one of llm, random_actions"),
    ({"max_explore_step": 0}, "max_explore_step must be >= 1"),
    ({"max_llm_retries": -1}, "max_llm_retries must be >= 0"),
    ({"top_p": 0.0}, "top_p must be > 0, got 0.0"),
    ({"max_explore_step": 10**23}, r"max_explore_step must be <= 100,000 \(time"),
    ({"top_k": 0}, "top_k must be at least 1"),
])
def test_bad_options_are_value_errors(options, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        RandomExplorer(RandomExplorerConfig(**options))


@pytest.mark.beyondagent_plugins("random_explorer")
def test_registered_as_random_with_the_seed_configs_options(plugin_manager) -> None:
    block = {"name": "random", "mode": "random_actions", "max_explore_step": 3, "max_llm_retries": 2,
             "temperature": 1.2, "top_p": 0.9, "top_k": 20, "task_summary_history_length": 6, "seed": 9}
    explorer = select_component(Registry(plugin_manager), "explorer", block, key_path="explore").create()
    assert isinstance(explorer, RandomExplorer)
    assert explorer.config.max_explore_step == 3 and explorer.config.seed == 9
    assert explorer.sampling == {"temperature": 1.2, "top_p": 0.9, "top_k": 20}
    trajectory = explore(explorer, env=FrozenLake(FrozenLakeConfig()))
    assert trajectory.metrics["steps"] <= 3
    with pytest.raises(SpecError, match="max_explore_step"):
        select_component(Registry(plugin_manager), "explorer", {"name": "random", "max_explore_step": 0},
                         key_path="explore").create()


def test_cliffwalking_exploration_stops_counting_after_the_cliff() -> None:
    from beyondagent_plugin_gym.cliffwalking import CliffWalking

    explorer = random_actions(max_explore_step=30, seed=2)
    for _ in range(3):
        trajectory = explore(explorer, seed=Task(task_id="cliffwalking-train-0"),
                             env=CliffWalking(CliffWalkingConfig(max_steps=100)))
        counts = [len(entry["goals"]) for entry in trajectory.metrics["achieved"]]
        assert counts == sorted(counts)
