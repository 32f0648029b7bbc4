"""The environment service server: every status code, the cap, the TTL, the timeout, stats.

A real server (Starlette + uvicorn) on loopback in a thread, plain httpx requests, and the
fault-injecting toy env of `envservice_testkit` (its tasks choose to hang, raise or be slow).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from envservice_testkit import CLOSED, ToyEnv, running_server, wait_until

from beyondagent_core.types import Task

ACTION = {"role": "assistant", "content": "go"}


def post(url: str, endpoint: str, **body: Any) -> httpx.Response:
    full = {"env_type": None, "task_id": None, "instance_id": None, "messages": {}, "params": {}}
    full.update(body)
    return httpx.post(f"{url}/{endpoint}", json=full, timeout=30)


def create(url: str, task_id: str = "t1", **params: Any) -> str:
    reply = post(url, "create", env_type="toy", task_id=task_id, params=params)
    assert reply.status_code == 200, reply.text
    return reply.json()["data"]["info"]["instance_id"]


def error(reply: httpx.Response, status: int) -> str:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["success"] is False and body["detail"] == body["error"]
    assert "Traceback" not in reply.text and "\n" not in body["error"]
    return body["error"]


def test_episode_and_stats() -> None:
    with running_server() as served:
        reply = post(served.url, "create", env_type="toy", task_id="t1")
        data = reply.json()["data"]
        assert data["state"] == [{"role": "user", "content": "hello t1"}]
        assert data["reward"] == 0 and data["is_terminated"] is False
        instance = data["info"]["instance_id"]
        step = post(served.url, "step", instance_id=instance, messages=ACTION).json()
        assert step == {"success": True, "data": {"state": [{"role": "user", "content": "echo go"}], "reward": 1.0,
                                                  "is_terminated": False, "info": {"steps": 1}}}
        assert post(served.url, "evaluate", instance_id=instance).json() == {"success": True, "data": 1.0}
        full = post(served.url, "evaluate", instance_id=instance, params={"reward": "full"}).json()["data"]
        assert full == {"score": 1.0, "success": False, "reason": "1 steps", "details": {"steps": 1}}
        info = post(served.url, "get_info", instance_id=instance).json()["data"]
        assert info["task_id"] == "t1" and info["env"] == "toy" and info["calls"] == 3
        assert post(served.url, "get_info", instance_id=instance,
                    params={"method": "valid_actions"}).json()["data"] == ["a", "b"]
        assert post(served.url, "release", instance_id=instance).json() == {"success": True, "data": None}
        # Release is idempotent, as in AgentEvolver: a second one says false, not an error.
        assert post(served.url, "release", instance_id=instance).json() == {"success": False, "data": None}
        stats = httpx.get(f"{served.url}/stats").json()["data"]
        assert stats["live"] == 0 and stats["created"] == 1 and stats["released"] == 1
        assert stats["calls"]["step"] == 1 and stats["calls"]["release"] == 2
        assert httpx.get(f"{served.url}/healthz").text == "OK"


def test_create_uses_the_full_task_and_the_client_instance_id() -> None:
    task = Task(task_id="t9", query="a synthetic question", metadata={"k": [1, 2]}, origin="synthetic",
                seed_task_id="t1", confidence=0.5)
    with running_server() as served:
        reply = post(served.url, "create", env_type="toy", task_id="t9", instance_id="mine-1",
                     params={"task": task.to_dict()})
        data = reply.json()["data"]
        assert data["info"]["instance_id"] == "mine-1"
        assert data["state"][0]["content"] == "a synthetic question"
        assert data["info"]["metadata"] == {"k": [1, 2]}
        # The same create again (a retry after a lost reply) gets the same answer, no second env.
        again = post(served.url, "create", env_type="toy", task_id="t9", instance_id="mine-1",
                     params={"task": task.to_dict()})
        assert again.json() == reply.json()
        assert served.pool.stats()["created"] == 1
        post(served.url, "step", instance_id="mine-1", messages=ACTION)
        assert "already exists" in error(post(served.url, "create", env_type="toy", task_id="t9",
                                              instance_id="mine-1"), 409)


@pytest.mark.parametrize(("endpoint", "body", "expected"), [
    ("create", {"task_id": "t1"}, "env_type is required"),
    ("create", {"env_type": "toy"}, "task_id is required"),
    ("create", {"env_type": "toy", "task_id": ["x"]}, "task_id must be a string"),
    ("create", {"env_type": "toy", "task_id": "t1", "params": []}, "params must be a JSON object"),
    ("create", {"env_type": "toy", "task_id": "t1", "params": {"task": {"task_id": "t1", "bogus": 1}}},
     "params.task is not a valid Task record"),
    ("step", {"messages": ACTION}, "instance_id is required"),
    ("release", {}, "instance_id is required"),
    ("get_env_profile", {}, "env_type is required"),
])
def test_missing_or_wrong_fields_are_400_naming_the_field(endpoint: str, body: dict, expected: str) -> None:
    with running_server() as served:
        assert expected in error(post(served.url, endpoint, **body), 400)


def test_malformed_json_is_400() -> None:
    with running_server() as served:
        reply = httpx.post(f"{served.url}/create", content=b'{"env_type": "toy", ', timeout=10)
        assert "not valid JSON" in error(reply, 400)
        reply = httpx.post(f"{served.url}/create", content=b'[1, 2]', timeout=10)
        assert "must be a JSON object, got an array" in error(reply, 400)
        instance = create(served.url)
        reply = post(served.url, "step", instance_id=instance, messages=[ACTION])
        assert "messages must be the assistant message" in error(reply, 400)


def test_unknown_instance_endpoint_method_env_are_404_and_wrong_verb_405() -> None:
    with running_server() as served:
        assert "unknown instance 'nope'" in error(post(served.url, "step", instance_id="nope", messages=ACTION), 404)
        assert "unknown instance" in error(post(served.url, "evaluate", instance_id="nope"), 404)
        assert "no endpoint /reset" in error(httpx.post(f"{served.url}/reset", json={}), 404)
        assert "GET is not allowed" in error(httpx.get(f"{served.url}/step"), 405)
        assert "hosts the env 'toy', not 'appworld'" in error(
            post(served.url, "create", env_type="appworld", task_id="t1"), 404)
        instance = create(served.url)
        reply = post(served.url, "get_info", instance_id=instance, params={"method": "describe_achieved"})
        assert error(reply, 404) == "the toy env has no method 'describe_achieved'"
        assert reply.json()["code"] == "unknown_method"
        reply = post(served.url, "get_info", instance_id=instance, params={"method": "close"})
        assert "cannot be called through /get_info" in error(reply, 404)


def test_bearer_token_is_required_when_set() -> None:
    with running_server(token="s3cret") as served:
        assert "bearer token" in error(post(served.url, "create", env_type="toy", task_id="t1"), 401)
        wrong = httpx.post(f"{served.url}/create", json={"env_type": "toy", "task_id": "t1"},
                           headers={"authorization": "Bearer nope"})
        error(wrong, 401)
        error(httpx.get(f"{served.url}/stats"), 401)
        assert httpx.get(f"{served.url}/healthz").status_code == 200  # health checks need no token
        right = httpx.post(f"{served.url}/create", json={"env_type": "toy", "task_id": "t1"},
                           headers={"authorization": "Bearer s3cret"})
        assert right.status_code == 200


def test_body_size_limit_is_413() -> None:
    with running_server(max_body_bytes=2048) as served:
        big = {"env_type": "toy", "task_id": "t1", "params": {"pad": "x" * 5000}}
        assert "larger than the limit of 2048 bytes" in error(httpx.post(f"{served.url}/create", json=big), 413)

        def chunks():  # no content-length: the limit holds while reading the stream
            for _ in range(10):
                yield b"x" * 1000

        error(httpx.post(f"{served.url}/create", content=chunks()), 413)


def test_cap_is_429_until_an_instance_is_released() -> None:
    with running_server(max_instances=2) as served:
        first, _second = create(served.url, "a"), create(served.url, "b")
        reply = post(served.url, "create", env_type="toy", task_id="c")
        assert "the service is full: 2 live instances (max_instances=2)" in error(reply, 429)
        assert reply.json()["retryable"] is True
        post(served.url, "release", instance_id=first)
        create(served.url, "c")
        assert served.pool.stats()["rejected_full"] == 1


def test_env_exception_is_500_with_one_line_and_the_server_goes_on() -> None:
    with running_server() as served:
        instance = create(served.url, "bad", task=Task("bad", metadata={"fail": True}).to_dict())
        message = error(post(served.url, "step", instance_id=instance, messages=ACTION), 500)
        assert message == "step() failed in the toy env: RuntimeError: the toy env fails on purpose"
        reply = post(served.url, "create", env_type="toy", task_id="r",
                     params={"task": Task("r", metadata={"fail_reset": True}).to_dict()})
        assert error(reply, 500) == "reset() failed in the toy env: RuntimeError: reset exploded"
        assert served.pool.stats()["live"] == 1  # the failed create left nothing behind
        assert post(served.url, "evaluate", instance_id=create(served.url)).status_code == 200


def test_hanging_call_is_504_and_marks_the_instance_broken() -> None:
    release = threading.Event()

    class Hangs(ToyEnv):
        def step(self, action: dict) -> Any:
            if self.task.metadata.get("hang"):
                release.wait(30)
            return super().step(action)

    with running_server(Hangs, call_timeout=0.5) as served:
        instance = create(served.url, "h", task=Task("h", metadata={"hang": True}).to_dict())
        message = error(post(served.url, "step", instance_id=instance, messages=ACTION), 504)
        assert "step() took longer than 0.5s (call_timeout)" in message
        assert "is broken" in error(post(served.url, "evaluate", instance_id=instance), 409)
        # The server keeps serving other instances while that call still hangs.
        other = create(served.url, "ok")
        assert post(served.url, "step", instance_id=other, messages=ACTION).status_code == 200
        stats = served.pool.stats()
        assert stats["timeouts"] == 1 and stats["broken"] == 1
        assert post(served.url, "release", instance_id=instance).json()["success"] is True
        release.set()
        wait_until(lambda: served.pool.stats()["abandoned_closed"] == 1)  # closed once the hung step returned


def test_idle_instances_are_reaped_after_the_ttl() -> None:
    with running_server(ttl=0.3) as served:
        instance = create(served.url, "idle")
        wait_until(lambda: served.pool.stats()["live"] == 0)
        assert served.pool.stats()["reaped"] == 1
        assert "idle TTL" in error(post(served.url, "step", instance_id=instance, messages=ACTION), 404)
        assert "idle" in CLOSED


def test_a_slow_call_under_a_short_ttl_is_not_reaped() -> None:
    # Only the call itself is timed against the TTL: a second call after it would race the reaper
    # over the client's own gap between calls, which a loaded machine can stretch past any TTL.
    with running_server(ttl=0.5) as served:
        instance = create(served.url, "slow", slow=2.0)  # the call takes 2 s, four TTLs
        assert post(served.url, "step", instance_id=instance, messages=ACTION).status_code == 200
        assert served.pool.stats()["reaped"] == 0


def test_an_instance_is_never_reaped_in_the_middle_of_a_call() -> None:
    """The reaper awaits each close; a call that begins on another idle instance meanwhile keeps it."""
    import asyncio

    from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost

    closing, let_close = threading.Event(), threading.Event()

    class SlowToClose(ToyEnv):
        def close(self) -> None:
            if self.task is not None and self.task.metadata.get("slow_close"):
                closing.set()
                let_close.wait(10)
            super().close()

    now = [0.0]
    pool = InstancePool(ThreadHost(SlowToClose), PoolLimits(ttl=1.0), env_name="toy", clock=lambda: now[0])

    async def main() -> tuple[int, Any]:
        await pool.create(Task("idle", metadata={"slow_close": True}), "idle")
        await pool.create(Task("busy", metadata={"slow": 0.3}), "busy")  # its calls take 0.3 s
        now[0] = 5.0  # both idle past the TTL
        reaping = asyncio.create_task(pool.reap_idle())
        await asyncio.to_thread(closing.wait, 10)  # the reaper is closing "idle"...
        stepping = asyncio.create_task(pool.call("busy", "step", ACTION))  # ...when a step on "busy" begins
        await asyncio.sleep(0.05)
        let_close.set()
        return await reaping, await stepping

    reaped, step = asyncio.run(main())
    assert reaped == 1 and step.reward == 1.0
    assert list(pool.instances) == ["busy"] and pool.counts["reaped"] == 1  # "busy" was reaped as its step ended


def test_shutdown_closes_every_instance() -> None:
    CLOSED.clear()
    with running_server() as served:
        for name in ("s1", "s2", "s3"):
            create(served.url, name)
        pool = served.pool
    assert sorted(CLOSED) == ["s1", "s2", "s3"]
    assert pool.stats()["live"] == 0 and pool.counts["closed_at_shutdown"] == 3
    assert pool.closed


def test_env_profile_lists_the_task_ids_of_a_split() -> None:
    with running_server() as served:
        reply = post(served.url, "get_env_profile", env_type="toy", params={"split": "val"})
        assert reply.json() == {"success": True, "data": ["toy-val-0", "toy-val-1", "toy-val-2"]}
        assert post(served.url, "get_env_profile", env_type="toy").json()["data"][0] == "toy-train-0"
        assert "unknown split 'test'" in error(post(served.url, "get_env_profile", env_type="toy",
                                                    params={"split": "test"}), 400)


def test_a_closed_pool_refuses_new_instances_with_503() -> None:
    import asyncio

    from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost
    from beyondagent_plugin_envservice.protocol import ServiceError

    pool = InstancePool(ThreadHost(ToyEnv), PoolLimits(), env_name="toy")

    async def main() -> None:
        await pool.create(Task("a"), None)
        assert await pool.close_all() == 1
        with pytest.raises(ServiceError) as info:
            await pool.create(Task("b"), None)
        assert info.value.status == 503 and info.value.retryable

    asyncio.run(main())


def test_hostile_bodies_are_400_without_a_trace_in_the_log() -> None:
    import socket

    with running_server() as served:
        deep = b'{"env_type": "toy", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert "nested too deeply" in error(httpx.post(f"{served.url}/create", content=deep, timeout=30), 400)
        assert "instance_id is 1000000 characters; at most 256" in error(
            post(served.url, "step", instance_id="x" * 1_000_000, messages=ACTION), 400)
        assert "task_id must not contain control characters" in error(
            post(served.url, "create", env_type="toy", task_id="t\x00\n1"), 400)
        assert "env_type must be an env name or plugin/name" in error(
            post(served.url, "create", env_type="evil/../toy", task_id="t1"), 400)
        # a client that goes away in the middle of its body is not a server error
        host, port = served.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(b"POST /create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 1000\r\n\r\n{\"env_type\": ")
        def stats() -> dict:
            return httpx.get(f"{served.url}/stats").json()["data"]

        wait_until(lambda: stats()["calls"].get("create") == 4)  # the cut-off request was handled
        assert "500" not in stats()["errors"], stats()
