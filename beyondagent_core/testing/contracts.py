"""Contract test suites: subclass one and give it the fixture `implementation`.

    from beyondagent_core.testing.contracts import MixerContract

    @pytest.mark.beyondagent_plugins("mixers")
    class TestRatioMixer(MixerContract):
        @pytest.fixture
        def implementation(self):
            return {"name": "ratio", "synthetic_ratio": 1.0}

`implementation` is the spec block selecting the component (as it would appear in a spec);
the suite builds it through the registry, so the registration, the config class and the
factory are all exercised. Inline plugins can be registered in an autouse fixture with
`register_plugin`. `EnvContract` also needs the fixture `tasks` (a few tasks the env can reset
on); `JudgeContract` the fixture `cases` (`(task, trajectory)` pairs, one rewarded, one not).
Explorers, advantage estimators and experience stores have their suites in `explorer_contract`,
`advantage_contract` and `experience_contract`.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.judging import check_judge
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.registry import Registry
from beyondagent_core.runtime.seats import seat_in, seats_in
from beyondagent_core.spec import select_component
from beyondagent_core.types import Reward, Task, Trajectory, Turn


class _Contract:
    kind = ""

    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `implementation`")

    @pytest.fixture
    def component(self, plugin_manager: Any, implementation: dict[str, Any]) -> Any:
        return _build(plugin_manager, self.kind, implementation)


def _build(plugin_manager: Any, kind: str, implementation: dict[str, Any]) -> Any:
    registry = Registry(plugin_manager)
    return select_component(registry, kind, dict(implementation), key_path="implementation").create()


class TaskSourceContract(_Contract):
    """What every task source must do."""

    kind = "task_source"

    def load(self, component: Any) -> list[Task]:
        return list(component.load(BadRecords("fail")))

    def test_yields_tasks(self, component: Any) -> None:
        tasks = self.load(component)
        assert tasks, "the source yielded no tasks"
        assert all(isinstance(task, Task) for task in tasks)

    def test_task_ids_are_unique(self, component: Any) -> None:
        ids = [task.task_id for task in self.load(component)]
        assert len(ids) == len(set(ids)), "task_id values repeat"

    def test_loading_twice_gives_the_same_tasks(self, component: Any) -> None:
        assert self.load(component) == self.load(component)

    def test_tasks_round_trip_through_json(self, component: Any) -> None:
        for task in self.load(component):
            assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task

    def test_seed_tasks_are_original(self, component: Any) -> None:
        assert {task.origin for task in self.load(component)} == {"original"}


def _tasks(prefix: str, count: int, origin: str, seeds: int = 3) -> list[Task]:
    return [
        Task(task_id=f"{prefix}-{i}", query=f"{prefix} {i}", origin=origin,
             seed_task_id=f"o-{i % seeds}" if origin == "synthetic" else None)
        for i in range(count)
    ]


class MixerContract(_Contract):
    """What every mixer must do."""

    kind = "mixer"

    @pytest.fixture
    def original(self) -> list[Task]:
        return _tasks("o", 10, "original")

    @pytest.fixture
    def synthetic(self) -> list[Task]:
        return _tasks("s", 25, "synthetic")

    def test_returns_tasks_from_its_inputs_without_repeats(self, component, original, synthetic) -> None:
        mixed = component.mix(original, synthetic, epoch=0, seed=0)
        assert isinstance(mixed, list)
        inputs = {task.task_id: task for task in original + synthetic}
        assert all(inputs.get(task.task_id) == task for task in mixed), "a mixed task is not one of the inputs"
        ids = [task.task_id for task in mixed]
        assert len(ids) == len(set(ids)), "a task appears twice in one epoch"

    def test_is_deterministic_for_an_epoch_and_seed(self, component, original, synthetic) -> None:
        first = component.mix(original, synthetic, epoch=3, seed=11)
        assert component.mix(original, synthetic, epoch=3, seed=11) == first

    def test_does_not_modify_its_inputs(self, component, original, synthetic) -> None:
        before = (list(original), list(synthetic))
        component.mix(original, synthetic, epoch=0, seed=0)
        assert (original, synthetic) == before

    def test_accepts_tuples(self, component, original, synthetic) -> None:
        assert component.mix(tuple(original), tuple(synthetic), epoch=0, seed=0) == component.mix(
            original, synthetic, epoch=0, seed=0)

    def test_handles_empty_inputs(self, component, original) -> None:
        assert component.mix([], [], epoch=0, seed=0) == []
        assert all(task.origin == "original" for task in component.mix(original, [], epoch=0, seed=0))


GARBAGE_ACTION: Message = {"role": "assistant", "content": "%%% qwxz 0xDEAD ~~ not an answer ~~ @@@"}
MAX_CONTRACT_STEPS = 200  # garbage moves a multi-seat episode may take before it must have ended


def _assert_messages(messages: Any, what: str) -> None:
    assert isinstance(messages, list) and messages, f"{what} must be a non-empty list of messages"
    for message in messages:
        assert isinstance(message, dict), f"{what}: a message must be a dict, got {type(message).__name__}"
        assert isinstance(message.get("role"), str), f"{what}: a message needs a string role"
        assert isinstance(message.get("content"), str), f"{what}: a message content must be a string"


class EnvContract(_Contract):
    """What every environment must do.

    Besides `implementation`, give the fixture `tasks`: a few tasks the env can reset on.
    Every env the suite builds is closed when the test ends.
    """

    kind = "env"

    @pytest.fixture
    def tasks(self) -> list[Task]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `tasks`")

    @pytest.fixture
    def make_env(self, plugin_manager: Any, implementation: dict[str, Any]) -> Iterator[Callable[[], Any]]:
        made: list[Any] = []

        def make() -> Any:
            made.append(_build(plugin_manager, self.kind, implementation))
            return made[-1]

        yield make
        for env in made:
            env.close()

    def test_reset_returns_messages_with_string_contents(self, make_env, tasks) -> None:
        env = make_env()
        for task in tasks:
            reset = env.reset(task)
            assert isinstance(reset, EnvReset), f"reset() returned {type(reset).__name__}, not EnvReset"
            _assert_messages(reset.messages, f"reset({task.task_id!r}).messages")
            assert isinstance(reset.info, dict)

    def test_a_garbage_action_gets_an_observation_not_an_exception(self, make_env, tasks) -> None:
        env = make_env()
        for task in tasks:
            env.reset(task)
            step = env.step(dict(GARBAGE_ACTION))
            assert isinstance(step, EnvStep), f"step() returned {type(step).__name__}, not EnvStep"
            _assert_messages(step.observation, "step().observation")
            assert isinstance(step.reward, (int, float)) and not isinstance(step.reward, bool)
            assert math.isfinite(step.reward)
            assert isinstance(step.terminated, bool)
            assert isinstance(step.info, dict)

    def test_evaluate_returns_a_reward_with_a_float_score(self, make_env, tasks) -> None:
        env = make_env()
        for task in tasks:
            env.reset(task)
            env.step(dict(GARBAGE_ACTION))
            reward = env.evaluate()
            assert isinstance(reward, Reward), f"evaluate() returned {type(reward).__name__}, not Reward"
            assert isinstance(reward.score, float) and math.isfinite(reward.score)
            assert isinstance(reward.success, bool)

    def test_close_can_be_called_twice(self, make_env, tasks) -> None:
        env = make_env()
        env.reset(tasks[0])
        env.close()
        env.close()

    def test_the_same_task_resets_to_the_same_observation(self, make_env, tasks) -> None:
        env, fresh = make_env(), make_env()
        for task in tasks:
            first = env.reset(task).messages
            env.step(dict(GARBAGE_ACTION))
            assert env.reset(task).messages == first, "resetting to the same task again showed something else"
            assert fresh.reset(task).messages == first, "a second instance reset the task differently"

    def test_a_multi_seat_episode_names_each_next_seat_and_scores_every_seat(self, make_env, tasks) -> None:
        """`beyondagent_core.runtime.seats`: an env whose reset says `seats` > 1 names the seat that moves
        after each step until the episode ends, and then `seat_rewards()` scores each seat; any other env's
        reset info says no seat count, or 1."""
        env = make_env()
        for task in tasks:
            reset = env.reset(task)
            seats = seats_in(reset.info)
            if seats == 1:
                continue
            seat_in(reset.info, seats, "reset()")
            for _ in range(MAX_CONTRACT_STEPS):
                step = env.step(dict(GARBAGE_ACTION))
                if step.terminated:
                    break
                seat_in(step.info, seats, "step()")
            else:
                pytest.fail(f"{task.task_id}: {MAX_CONTRACT_STEPS} garbage moves did not end the episode")
            rewards = env.seat_rewards()
            assert isinstance(rewards, list) and len(rewards) == seats, "seat_rewards() must give one Reward per seat"
            for data in rewards:
                reward = Reward.from_dict(data)  # plain JSON: it crosses the env service
                assert isinstance(reward.score, float) and math.isfinite(reward.score)

    def test_runs_through_local_async_env(self, make_env, tasks) -> None:
        async def episode() -> tuple[EnvReset, EnvStep, Reward]:
            async with LocalAsyncEnv(make_env()) as env:
                reset = await env.reset(tasks[0])
                step = await env.step(dict(GARBAGE_ACTION))
                return reset, step, await env.evaluate()

        reset, step, reward = asyncio.run(episode())
        _assert_messages(reset.messages, "reset().messages")
        _assert_messages(step.observation, "step().observation")
        assert isinstance(reward.score, float)

    def test_says_whether_its_calls_are_quick_with_a_bool(self, make_env) -> None:
        """`inline_calls` (optional) is True or False: anything else would silently keep its calls in threads."""
        env = make_env()
        if hasattr(env, "inline_calls"):
            assert isinstance(env.inline_calls, bool), \
                f"inline_calls is {env.inline_calls!r}; set it to True (calls on the event loop) or False"


class JudgeContract(_Contract):
    """What every judge (a `reward` component) must do.

    Besides `implementation`, give the fixture `cases`: a few `(task, trajectory)` pairs the judge
    should be able to score, at least one it rewards (`success`) and one it does not. Checked: the
    registration builds a judge of the right shape (`async score` -> `Reward`, checked as the core
    checks it when a run builds it), scores are finite floats, success and failure are told apart,
    the same case scores the same twice, an empty or failed trajectory scores without raising.
    """

    kind = "reward"

    @pytest.fixture
    def cases(self) -> list[tuple[Task, Trajectory]]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `cases`: [(task, trajectory), ...]")

    def score(self, judge: Any, task: Task, trajectory: Trajectory) -> Reward:
        reward = asyncio.run(judge.score(task, trajectory))
        assert isinstance(reward, Reward), f"score() returned {type(reward).__name__}, not Reward"
        return reward

    def test_has_the_shape_the_core_checks(self, component: Any) -> None:
        check_judge(component, "the judge under test")

    def test_scores_are_finite_and_tell_success_from_failure(self, component: Any, cases) -> None:
        rewards = [self.score(component, task, trajectory) for task, trajectory in cases]
        assert all(isinstance(r.score, float) and math.isfinite(r.score) for r in rewards)
        assert any(r.success for r in rewards) and not all(r.success for r in rewards), \
            "give `cases` at least one the judge rewards and one it does not"

    def test_the_same_case_scores_the_same(self, component: Any, cases) -> None:
        for task, trajectory in cases:
            assert self.score(component, task, trajectory) == self.score(component, task, trajectory)

    def test_an_empty_or_failed_trajectory_scores_without_raising(self, component: Any, cases) -> None:
        task = cases[0][0]
        for trajectory in (Trajectory(task=task), Trajectory(task=task, turns=[Turn("user", "?")], error="crashed")):
            reward = self.score(component, task, trajectory)
            assert math.isfinite(reward.score) and not reward.success
