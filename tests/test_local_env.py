"""LocalAsyncEnv: sync envs run in worker threads, return types checked, close once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from beyondagent_core.envs.local import LocalAsyncEnv, LocalEnvOpener
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.types import Reward, Task

TASK = Task(task_id="walk-1", query="Reach position 2.", ground_truth=2)


class Walker:
    """A number line: "right"/"left" move by one; success when the target is reached."""

    def __init__(self, step_seconds: float = 0.0):
        self.step_seconds = step_seconds
        self.position = 0
        self.target = 0
        self.events: list[str] = []
        self.threads: set[int] = set()
        self.close_calls = 0

    def reset(self, task: Task) -> EnvReset:
        self.threads.add(threading.get_ident())
        self.position, self.target = 0, int(task.ground_truth)
        return EnvReset(messages=[{"role": "user", "content": f"{task.query} You are at 0."}])

    def step(self, action: dict) -> EnvStep:
        self.threads.add(threading.get_ident())
        self.events.append("step-start")
        time.sleep(self.step_seconds)
        self.position += {"right": 1, "left": -1}.get(action["content"], 0)
        self.events.append("step-end")
        done = self.position == self.target
        return EnvStep(observation=[{"role": "user", "content": f"position {self.position}"}], terminated=done)

    def evaluate(self) -> Reward:
        ok = self.position == self.target
        return Reward(score=float(ok), success=ok)

    def close(self) -> None:
        self.events.append("close")
        self.close_calls += 1


class WrongTypes(Walker):
    """Returns plain dicts instead of our records."""

    def reset(self, task: Task):
        return {"messages": []}

    def step(self, action: dict):
        return {"observation": []}

    def evaluate(self):
        return 1.0


def test_calls_delegate_in_worker_threads() -> None:
    env = Walker()

    async def episode() -> tuple[EnvReset, EnvStep, Reward]:
        async with LocalAsyncEnv(env) as aenv:
            first = await aenv.reset(TASK)
            await aenv.step({"role": "assistant", "content": "right"})
            last = await aenv.step({"role": "assistant", "content": "right"})
            return first, last, await aenv.evaluate()

    first, last, reward = asyncio.run(episode())
    assert "Reach position 2" in first.messages[0]["content"]
    assert last.terminated and last.observation[0]["content"] == "position 2"
    assert reward.success and reward.score == 1.0
    assert threading.get_ident() not in env.threads
    assert env.close_calls == 1


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("reset", lambda aenv: aenv.reset(TASK)),
        ("step", lambda aenv: aenv.step({"role": "assistant", "content": "right"})),
        ("evaluate", lambda aenv: aenv.evaluate()),
    ],
)
def test_wrong_return_type_names_env_and_method(method, call) -> None:
    async def go() -> None:
        async with LocalAsyncEnv(WrongTypes()) as aenv:
            await call(aenv)

    with pytest.raises(TypeError, match=rf"WrongTypes\.{method}\(\) must return \w+, got"):
        asyncio.run(go())


def test_close_is_idempotent_and_calls_after_close_fail() -> None:
    env = Walker()

    async def go() -> None:
        aenv = LocalAsyncEnv(env)
        await aenv.close()
        await aenv.close()
        assert aenv.closed
        with pytest.raises(RuntimeError, match=r"Walker\.reset\(\) called after close"):
            await aenv.reset(TASK)

    asyncio.run(go())
    assert env.close_calls == 1


def test_async_with_closes_when_body_raises() -> None:
    env = Walker()

    async def go() -> None:
        async with LocalAsyncEnv(env) as aenv:
            await aenv.reset(TASK)
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        asyncio.run(go())
    assert env.close_calls == 1


def test_cancelled_episode_closes_after_the_running_step() -> None:
    env = Walker(step_seconds=0.3)

    async def episode() -> None:
        async with LocalAsyncEnv(env) as aenv:
            await aenv.reset(TASK)
            await aenv.step({"role": "assistant", "content": "right"})

    async def go() -> None:
        task = asyncio.create_task(episode())
        while "step-start" not in env.events:  # the step is now sleeping in its thread
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert env.events == ["step-start", "step-end", "close"]
    assert env.close_calls == 1


class MeetingWalker(Walker):
    """A walker whose step waits for the other envs' steps to be running too (a barrier): steps that
    ran one after another would never meet, and the barrier's timeout would fail the test."""

    def __init__(self, barrier: threading.Barrier):
        super().__init__()
        self.barrier = barrier

    def step(self, action: dict) -> EnvStep:
        self.barrier.wait(timeout=30)
        return super().step(action)


def test_blocking_steps_of_many_envs_overlap() -> None:
    barrier = threading.Barrier(4)
    envs = [MeetingWalker(barrier) for _ in range(4)]

    async def one(env: Walker) -> None:
        async with LocalAsyncEnv(env) as aenv:
            await aenv.reset(TASK)
            await aenv.step({"role": "assistant", "content": "right"})

    async def go() -> None:
        await asyncio.gather(*(one(env) for env in envs))

    asyncio.run(go())  # all four steps were in their threads at once: the barrier let them through
    assert not barrier.broken and all(env.events == ["step-start", "step-end", "close"] for env in envs)


def test_a_call_past_the_timeout_fails_its_episode_and_closes_the_env_when_it_returns() -> None:
    from beyondagent_core.envs.local import EnvCallTimeout, LocalEnvOpener
    from beyondagent_core.runtime.episodes import EpisodeRunner
    from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
    from beyondagent_core.types import Turn

    envs: list[Walker] = []
    release = threading.Event()  # the hung step returns only when the test says so: no race with the clock

    class SlowOnHang(Walker):
        hangs = False

        def reset(self, task: Task) -> EnvReset:
            self.hangs = task.task_id == "hang"
            return super().reset(task)

        def step(self, action: dict) -> EnvStep:
            if self.hangs:
                self.events.append("step-start")
                release.wait(timeout=60)
                self.events.append("step-end")
                return EnvStep(observation=[], terminated=False)
            return super().step(action)

    def make_env() -> Walker:
        envs.append(SlowOnHang())
        return envs[-1]

    class Right:
        async def chat(self, messages, **sampling):
            return Turn(role="assistant", content="right")

    async def main():
        runner = EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=4)),
                               make_env=LocalEnvOpener(make_env, call_timeout=0.3))
        tasks = [Task(task_id="hang", query=TASK.query, ground_truth=2), TASK, TASK]
        hung, *others = await asyncio.gather(*(runner.run(task, Right()) for task in tasks))
        slow = next(env for env in envs if env.hangs)
        assert slow.close_calls == 0  # still stepping: closed by its own thread when the step returns
        return hung, others, slow

    try:
        hung, others, slow = asyncio.run(main())  # returns while the hung step still blocks: nobody waited for it
        assert hung.error is not None and "env.call_timeout=0.3" in hung.error and EnvCallTimeout.__name__ in hung.error
        assert all(t.error is None and t.reward.success for t in others)
        assert slow.events[-1] == "step-start" and slow.close_calls == 0
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while slow.close_calls == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slow.events[-2:] == ["step-end", "close"] and slow.close_calls == 1


def test_a_timed_out_env_refuses_further_calls() -> None:
    from beyondagent_core.envs.local import EnvCallTimeout

    async def main():
        env = LocalAsyncEnv(Walker(step_seconds=0.5), call_timeout=0.1)
        await env.reset(TASK)
        with pytest.raises(EnvCallTimeout, match="took longer than env.call_timeout=0.1 s"):
            await env.step({"role": "assistant", "content": "right"})
        with pytest.raises(EnvCallTimeout, match="an earlier call timed out"):
            await env.evaluate()
        await env.close()

    asyncio.run(main())


class QuickWalker(Walker):
    """A Walker that says its calls are quick: they run on the event loop; `close` records its thread too."""

    inline_calls = True
    built_in: list[int] = []

    def __init__(self) -> None:
        super().__init__()
        QuickWalker.built_in.append(threading.get_ident())

    def close(self) -> None:
        self.threads.add(threading.get_ident())
        super().close()


def play_episodes(opener: LocalEnvOpener, episodes: int) -> tuple[int, list[LocalAsyncEnv]]:
    """Open `episodes` envs one after another and play each to the target; the loop's thread and the envs."""

    async def run() -> tuple[int, list[LocalAsyncEnv]]:
        opened = []
        for _ in range(episodes):
            async with await opener.open() as env:
                await env.reset(TASK)
                await env.step({"role": "assistant", "content": "right"})
                await env.step({"role": "assistant", "content": "right"})
                assert (await env.evaluate()).success
                opened.append(env)
        return threading.get_ident(), opened

    return asyncio.run(run())


def test_an_env_whose_calls_are_quick_runs_them_on_the_event_loop() -> None:
    """`inline_calls = True`: every call (close too) on the loop's thread, and the opener builds every env
    after the first there as well; the same env in worker threads when `call_timeout` must bound its calls,
    and a Walker without the attribute (or with a truthy non-bool) in worker threads."""
    QuickWalker.built_in = []
    loop_thread, envs = play_episodes(LocalEnvOpener(QuickWalker), 3)
    assert all(env.inline and env.env.threads == {loop_thread} for env in envs)
    assert QuickWalker.built_in[0] != loop_thread and QuickWalker.built_in[1:] == [loop_thread] * 2

    QuickWalker.built_in = []
    loop_thread, envs = play_episodes(LocalEnvOpener(QuickWalker, call_timeout=5.0), 2)
    assert not any(env.inline for env in envs)
    assert all(loop_thread not in env.env.threads for env in envs) and loop_thread not in QuickWalker.built_in

    class Truthy(Walker):
        inline_calls = "yes"

    for plain in (Walker, Truthy):
        loop_thread, envs = play_episodes(LocalEnvOpener(plain), 2)
        assert not any(env.inline for env in envs)
        assert all(loop_thread not in env.env.threads for env in envs)
