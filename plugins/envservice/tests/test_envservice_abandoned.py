"""Env calls that timed out in thread mode: their env is closed once the call returns (envservice/thread_calls.py).

A real server on loopback with `--call-timeout` 0.5 s and envs that take longer: a reset (the
`slow` metadata of the toy env), a constructor, a step that waits on an event. The 504 comes
first; when the slow call returns, its env's `close()` runs exactly once, on the worker
thread, whether or not the client released the instance, and the server serves on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
from envservice_testkit import ToyEnv, running_server, wait_until

from beyondagent_plugin_envservice.instances import ThreadHost
from beyondagent_core.types import Task

ACTION = {"role": "assistant", "content": "go"}


class Recorded(ToyEnv):
    """A toy env that remembers every instance built and the threads that closed it."""

    built: list[Recorded] = []

    def __init__(self, build_seconds: float = 0.0):
        time.sleep(build_seconds)
        super().__init__()
        self.closed_on: list[str] = []
        Recorded.built.append(self)

    def close(self) -> None:
        self.closed_on.append(threading.current_thread().name)
        super().close()


def recorded_factory(*build_seconds: float) -> Any:
    """Builds `Recorded` envs; the first ones take `build_seconds` each."""
    Recorded.built = []
    delays = list(build_seconds)
    return lambda: Recorded(delays.pop(0) if delays else 0.0)


def post(url: str, endpoint: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/{endpoint}", json={"env_type": "toy", **body}, timeout=30)


def create(url: str, task: Task) -> httpx.Response:
    return post(url, "create", task_id=task.task_id, params={"task": task.to_dict()})


def still_serves(url: str) -> None:
    reply = create(url, Task("fine"))
    assert reply.status_code == 200, reply.text
    instance = reply.json()["data"]["info"]["instance_id"]
    assert post(url, "step", instance_id=instance, messages=ACTION).status_code == 200
    assert post(url, "release", instance_id=instance).json()["success"] is True


def closed_once_after_settling(env: Recorded) -> bool:
    wait_until(lambda: env.close_calls >= 1)
    time.sleep(0.3)  # a second close would come right after the first
    return env.close_calls == 1


def test_a_reset_that_times_out_has_its_env_closed_when_it_returns() -> None:
    with running_server(recorded_factory(), call_timeout=0.5) as served:
        reply = create(served.url, Task("slow", metadata={"slow": 1.5}))
        assert reply.status_code == 504 and "reset() took longer than 0.5s" in reply.json()["error"]
        (env,) = Recorded.built
        assert env.close_calls == 0  # its reset still sleeps
        assert served.pool.stats()["abandoned_waiting"] == 1
        assert closed_once_after_settling(env)
        assert env.closed_on[0].startswith("envservice")  # the worker thread, not the event loop
        stats = httpx.get(f"{served.url}/stats").json()["data"]
        assert stats["abandoned_closed"] == 1 and stats["abandoned_waiting"] == 0 and stats["live"] == 0
        still_serves(served.url)
    assert env.close_calls == 1  # shutdown does not close it again


def test_an_env_built_after_its_create_timed_out_is_closed() -> None:
    with running_server(recorded_factory(1.5), call_timeout=0.5, open_timeout=0.5) as served:
        reply = create(served.url, Task("big"))
        assert reply.status_code == 504 and "create() took longer than 0.5s" in reply.json()["error"]
        assert Recorded.built == []  # still being built
        wait_until(lambda: len(Recorded.built) == 1)
        (late,) = Recorded.built
        assert closed_once_after_settling(late)
        assert late.closed_on[0].startswith("envservice")
        assert served.pool.stats()["abandoned_closed"] == 1
        still_serves(served.url)
        assert served.pool.stats()["live"] == 0
    assert late.close_calls == 1


def test_a_hung_step_closes_its_env_once_released_or_not() -> None:
    go_on = threading.Event()

    class Hangs(Recorded):
        def step(self, action: dict) -> Any:
            go_on.wait(30)
            return super().step(action)

    Recorded.built = []
    with running_server(Hangs, call_timeout=0.5) as served:
        ids = [create(served.url, Task(name)).json()["data"]["info"]["instance_id"] for name in ("a", "b")]
        for instance in ids:
            assert post(served.url, "step", instance_id=instance, messages=ACTION).status_code == 504
        assert post(served.url, "release", instance_id=ids[0]).json()["success"] is True  # released while hung
        assert [env.close_calls for env in Recorded.built] == [0, 0]
        assert served.pool.stats()["abandoned_waiting"] == 2
        go_on.set()
        assert all(closed_once_after_settling(env) for env in Recorded.built)
        assert post(served.url, "release", instance_id=ids[1]).json()["success"] is True  # released after
        stats = served.pool.stats()
        assert stats["abandoned_closed"] == 2 and stats["abandoned_waiting"] == 0 and stats["hung_calls"] == 2
        still_serves(served.url)
    assert [env.close_calls for env in Recorded.built[:2]] == [1, 1]


def test_an_env_abandoned_while_idle_is_closed_at_once_on_a_worker() -> None:
    async def scenario() -> Recorded:
        host = ThreadHost(recorded_factory(), threads=2)
        env = await host.open()
        await host.call(env, "reset", (Task("idle"),))
        host.abandon(env)  # e.g. the hung call returned just before the pool gave up on it
        # Counted right after the close returns (on the worker thread): wait for the count, not the close.
        await asyncio.to_thread(wait_until, lambda: host.stats()["abandoned_closed"] == 1)
        assert host.stats() == {"abandoned_waiting": 0, "abandoned_closed": 1} and env.close_calls == 1
        await host.shutdown()
        return env

    env = asyncio.run(scenario())
    assert env.close_calls == 1 and env.closed_on[0].startswith("envservice")
