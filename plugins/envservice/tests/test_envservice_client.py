"""The async client and `RemoteEnv`: same behaviour as a local env, retries, timeouts, cancellation.

Real server on loopback (in a thread), the real client, the gym plugin's FrozenLake and the
fault-injecting toy env of `envservice_testkit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from envservice_testkit import running_server, wait_until

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_plugin_envservice.client import ClientOptions, EnvServiceClient, EnvServiceError
from beyondagent_plugin_envservice.command import env_factory
from beyondagent_core.errors import EnvMethodMissing
from beyondagent_core.types import Reward, Task

pytestmark = pytest.mark.beyondagent_plugins("gym")
MOVES = ["Action: right", "Action: down", "nonsense", "Action: down", "Action: right", "Action: down"]


async def play(env, task: Task) -> list:
    seen = [await env.reset(task)]
    for move in MOVES:
        step = await env.step({"role": "assistant", "content": move})
        seen.append(step)
        if step.terminated:
            break
    seen.append(await env.evaluate())
    seen.append(await env.call("valid_actions"))
    return seen


def test_remote_frozenlake_behaves_exactly_like_the_local_one(plugin_manager) -> None:
    name, factory = env_factory("frozenlake", {"size": 4}, manager=plugin_manager)
    task = Task(task_id="frozenlake-train-3", env="frozenlake")
    local_env = LocalAsyncEnv(factory())
    local = asyncio.run(play(local_env, task))
    asyncio.run(local_env.close())
    with running_server(factory, env_name=name) as served:
        client = EnvServiceClient(served.url)

        async def remote_episode() -> list:
            async with client.env("frozenlake") as env:
                return await play(env, task)

        remote = asyncio.run(remote_episode())
        assert served.pool.stats()["live"] == 0  # released on `async with` exit
    assert len(remote) == len(local) > 3
    assert remote[0].messages == local[0].messages
    assert {k: v for k, v in remote[0].info.items() if k != "instance_id"} == local[0].info
    assert remote[1:-2] == local[1:-2]  # every EnvStep, equal field by field
    assert isinstance(remote[-2], Reward) and remote[-2] == local[-2]
    assert remote[-1] == local[-1]


def test_optional_methods_and_missing_ones() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url)

        async def main() -> None:
            async with client.env("toy") as env:
                await env.reset(Task("t"))
                assert await env.call("valid_actions") == ["a", "b"]
                with pytest.raises(EnvMethodMissing, match="has no method 'describe_achieved'"):
                    await env.call("describe_achieved")
                with pytest.raises(AttributeError):  # EnvMethodMissing is an AttributeError
                    await env.call("close")
            with pytest.raises(RuntimeError, match="after close"):
                await env.step({"role": "assistant", "content": "x"})

        asyncio.run(main())


def test_one_client_across_several_event_loops() -> None:
    """Backends call asyncio.run once per step: each loop gets its own pool, closed with it."""
    with running_server() as served:
        client = EnvServiceClient(served.url)

        async def episode(i: int) -> float:
            async with client.env("toy") as env:
                await env.reset(Task(f"t{i}"))
                await env.step({"role": "assistant", "content": "x"})
                return (await env.evaluate()).score

        async def step(i: int) -> list[float]:
            return await asyncio.gather(*(episode(i * 10 + j) for j in range(4)))

        for i in range(3):
            assert asyncio.run(step(i)) == [1.0] * 4
            assert client._clients == {}  # the loop's pool was closed when its loop ended
        assert served.pool.stats()["released"] == 12


def test_cancelling_an_episode_releases_its_instance() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url)

        async def main() -> None:
            async def episode() -> None:
                async with client.env("toy") as env:
                    await env.reset(Task("slow", metadata={"slow": 0.3}))
                    while True:
                        await env.step({"role": "assistant", "content": "x"})

            task = asyncio.create_task(episode())
            await asyncio.sleep(0.05)
            while served.pool.stats()["live"] == 0:  # wait until the create has landed
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        wait_until(lambda: served.pool.stats()["live"] == 0)
        assert served.pool.stats()["released"] == 1 and served.pool.stats()["reaped"] == 0


def test_cancelled_create_is_still_released() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url)

        async def main() -> None:
            env = client.env("toy")
            task = asyncio.create_task(env.reset(Task("slow", metadata={"slow": 0.5})))
            while not served.pool.stats()["creating"]:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await env.close()  # knows the instance id it chose, though create never answered

        asyncio.run(main())
        wait_until(lambda: served.pool.stats()["created"] == 1 and served.pool.stats()["live"] == 0)


def test_idempotent_calls_are_retried_on_retryable_errors() -> None:
    """A full service (429, retryable) is waited out; the create lands once a slot frees."""
    with running_server(max_instances=1) as served:
        client = EnvServiceClient(served.url, options=ClientOptions(retries=8, backoff=0.05))

        async def main() -> None:
            first = client.env("toy")
            await first.reset(Task("first"))
            second = client.env("toy")
            waiting = asyncio.create_task(second.reset(Task("second")))
            while not served.pool.counts["rejected_full"]:
                await asyncio.sleep(0.01)
            await first.close()
            reset = await waiting
            assert reset.messages[0]["content"] == "hello second"
            await second.close()

        asyncio.run(main())


def test_steps_are_not_retried_and_errors_name_the_problem() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url, options=ClientOptions(retries=3, backoff=0.01))

        async def main() -> None:
            async with client.env("toy") as env:
                await env.reset(Task("bad", metadata={"fail": True}))
                with pytest.raises(EnvServiceError, match="answered 500: step.. failed in the toy env") as info:
                    await env.step({"role": "assistant", "content": "x"})
                assert info.value.status == 500 and info.value.code == "env_error"

        asyncio.run(main())
        assert served.app.state.service.calls["step"] == 1


@contextlib.contextmanager
def answering(status: int, answer: dict, calls: list[str]) -> Iterator[str]:
    """A loopback server answering every POST with `status` and `answer` (JSON), recording each path
    in `calls`; yields its URL."""

    class Canned(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(self.path)
            body = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_step_is_not_resent_even_when_the_service_says_retry() -> None:
    """A step is not idempotent: a 503 marked retryable (a busy service) is an error, sent once, not retried."""
    steps: list[str] = []
    with answering(503, {"success": False, "error": "busy", "retryable": True}, steps) as url:
        client = EnvServiceClient(url, options=ClientOptions(retries=3, backoff=0.01))
        env = client.env("toy")
        env.instance_id = "ba-held"  # as after a reset: the step goes to this instance

        async def main() -> None:
            with pytest.raises(EnvServiceError, match="503"):
                await env.step({"role": "assistant", "content": "x"})

        asyncio.run(main())
    assert steps == ["/step"]


def test_an_idempotent_call_is_not_resent_when_the_server_says_not_retryable() -> None:
    """A server's `"retryable": false` is the last word, even on a 5xx: the client sends an idempotent
    call once and raises, rather than waiting out retries on an error that cannot go away (a proxy's
    5xx without the flag is retried, above)."""
    calls: list[str] = []
    answer = {"success": False, "error": "the env cannot list tasks", "code": "env_error", "retryable": False}
    with answering(500, answer, calls) as url:
        client = EnvServiceClient(url, options=ClientOptions(retries=3, backoff=0.01))

        async def main() -> None:
            with pytest.raises(EnvServiceError, match="500: the env cannot list tasks"):
                await client.task_ids("toy")
            await client.aclose()

        asyncio.run(main())
    assert calls == ["/get_env_profile"]


def test_client_timeout_and_unreachable_service() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url, options=ClientOptions(timeout=0.2, retries=0))

        async def main() -> None:
            env = client.env("toy")
            await env.reset(Task("fast"))
            slow = client.env("toy")
            with pytest.raises(EnvServiceError, match="did not answer within 0.2s"):
                await slow.reset(Task("slow2", metadata={"slow": 1.0}))
            await env.close()
            await slow.close()

        asyncio.run(main())

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = EnvServiceClient(f"http://127.0.0.1:{port}", options=ClientOptions(retries=2, backoff=0.01))
    with pytest.raises(EnvServiceError, match="cannot reach the environment service") as info:
        asyncio.run(client.env("toy").reset(Task("t")))
    assert "beyondagent env serve" in info.value.hint


def test_bad_urls_are_rejected() -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        EnvServiceClient("localhost:8000")
