"""Envs the service builds are closed when nobody will use them: a create whose reset fails, and
an episode cancelled twice while it releases its instance.

From the eighth audit (mutation testing). A real server on loopback (`envservice_testkit`), the
real client, and envs that record every instance built and every close:

- a `/create` whose `reset` raises (an env bug, 500; the env's verdict on its input, 400) closes
  the env it built before answering: nothing is live, nothing leaks, and each env built is closed
  exactly once;
- `RemoteEnv.close()` shields its release: an episode task cancelled once (it leaves `async with`
  and starts the release) and then again while that release is in flight (as `asyncio.run`'s
  teardown or an outer `wait_for` does) still releases its instance on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest
from envservice_testkit import ToyEnv, running_server

from beyondagent_plugin_envservice.client import EnvServiceClient
from beyondagent_core.types import Task


class Recorded(ToyEnv):
    """A toy env that remembers every instance built; `reject_reset` makes reset raise ValueError."""

    built: list[Recorded] = []

    def __init__(self) -> None:
        super().__init__()
        Recorded.built.append(self)

    def reset(self, task: Task) -> Any:
        if task.metadata.get("reject_reset"):
            raise ValueError("metadata.size must be at most 8, got 9")
        return super().reset(task)


def create(url: str, task: Task) -> httpx.Response:
    body = {"env_type": "toy", "task_id": task.task_id, "instance_id": None, "messages": {},
            "params": {"task": task.to_dict()}}
    return httpx.post(f"{url}/create", json=body, timeout=30)


@pytest.mark.parametrize(("metadata", "status", "code"), [
    ({"fail_reset": True}, 500, "env_error"),
    ({"reject_reset": True}, 400, "bad_input"),
], ids=["env-bug", "bad-input"])
def test_a_create_whose_reset_fails_closes_the_env_it_built(metadata: dict, status: int, code: str) -> None:
    Recorded.built.clear()
    with running_server(Recorded) as served:
        reply = create(served.url, Task("doomed", metadata=metadata))
        assert reply.status_code == status and reply.json()["code"] == code, reply.text
        # The close ran before the reply: the pool awaits it on the failure path.
        assert len(Recorded.built) == 1
        assert Recorded.built[0].close_calls == 1
        stats = served.pool.stats()
        assert (stats["live"], stats["creating"], stats["created"]) == (0, 0, 0)
        # A good create afterwards is served, and its env stays open until released.
        ok = create(served.url, Task("fine"))
        assert ok.status_code == 200, ok.text
        assert len(Recorded.built) == 2 and Recorded.built[1].close_calls == 0
    assert [env.close_calls for env in Recorded.built] == [1, 1]  # shutdown closed the live one, once


def test_an_episode_cancelled_again_while_releasing_still_releases_its_instance() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url)
        holder: dict[str, Any] = {}

        async def main() -> None:
            async def episode() -> None:
                async with client.env("toy") as env:
                    holder["env"] = env
                    await env.reset(Task("cancelled-twice"))
                    holder["ready"].set()
                    await asyncio.Event().wait()  # the model "thinks" until cancelled

            holder["ready"] = asyncio.Event()
            task = asyncio.create_task(episode())
            await holder["ready"].wait()
            assert served.pool.stats()["live"] == 1
            task.cancel()  # first cancel: `async with` exits, close() starts the release
            env = holder["env"]
            while env._releasing is None:
                await asyncio.sleep(0)
            task.cancel()  # second cancel, while the release is in flight
            with pytest.raises(asyncio.CancelledError):
                await task
            with contextlib.suppress(asyncio.CancelledError):
                await env._releasing  # the shielded release runs on to its reply
            stats = served.pool.stats()  # the server answered the release: its counts are final
            assert (stats["live"], stats["released"], stats["reaped"]) == (0, 1, 0)
            assert not env._releasing.cancelled()
            await client.aclose()

        asyncio.run(main())
