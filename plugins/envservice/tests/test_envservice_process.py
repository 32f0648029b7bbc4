"""`--instances process`: each live env in its own spawned worker process (for envs like AppWorld
that must own their process). Real servers on loopback, real worker processes."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from envservice_testkit import ToyConfig, ToyEnv, running_server

from beyondagent_plugin_envservice.client import EnvServiceClient, EnvServiceError
from beyondagent_plugin_envservice.process_instances import ProcessHost, ProcessOptions
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.types import Task


class PidEnv(ToyEnv):
    """The toy env, telling its pid, preloading once per worker, and able to crash its worker."""

    preloaded = 0

    def preload(self) -> None:
        PidEnv.preloaded += 1

    def reset(self, task: Task) -> EnvReset:
        reset = super().reset(task)
        return EnvReset(messages=reset.messages, info={**reset.info, "pid": os.getpid(),
                                                       "preloaded": PidEnv.preloaded})

    def step(self, action: dict[str, Any]) -> EnvStep:
        if self.task is not None and self.task.metadata.get("crash"):
            os._exit(3)
        return super().step(action)


def make_pid_env() -> PidEnv:
    return PidEnv(ToyConfig(max_steps=2))


def serve(warm: int = 1, reuse: bool = True, call_timeout: float = 10.0) -> Any:
    host = ProcessHost(make_pid_env, ProcessOptions(warm=warm, max_workers=8, reuse=reuse))
    return running_server(make_pid_env, env_name="toy", call_timeout=call_timeout, host=host)


async def reset_pid(client: EnvServiceClient, env: Any, task: Task) -> int:
    return (await env.reset(task)).info["pid"]


def test_live_envs_run_in_separate_worker_processes_that_are_reused() -> None:
    async def scenario(url: str) -> tuple[list[int], int, dict[str, Any]]:
        client = EnvServiceClient(url)
        try:
            envs = [client.env("toy") for _ in range(3)]
            pids = list(await asyncio.gather(*(env.reset(Task(task_id=f"t{i}")) for i, env in enumerate(envs))))
            pids = [reset.info["pid"] for reset in pids]
            for env in envs:
                await env.step({"role": "assistant", "content": "x"})
                assert (await env.evaluate()).score == 1.0
                await env.close()
            async with client.env("toy") as env:
                again = (await env.reset(Task(task_id="again"))).info
            return pids, again["pid"], {**await client.stats(), "preloaded": again["preloaded"]}
        finally:
            await client.aclose()

    with serve(warm=1) as served:
        pids, again, stats = asyncio.run(scenario(served.url))
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert again in pids, "a closed env's worker should take the next episode"
    assert stats["instances"] == "process" and stats["workers_reused"] >= 3
    assert stats["preloaded"] == 1, "preload() runs once per worker, not per episode"


def test_a_hung_call_kills_its_worker_and_the_next_episode_works() -> None:
    async def scenario(url: str) -> tuple[EnvServiceError, int, int, dict[str, Any]]:
        client = EnvServiceClient(url)
        try:
            env = client.env("toy")
            hung_pid = (await env.reset(Task(task_id="hang", metadata={"hang": 60}))).info["pid"]
            with pytest.raises(EnvServiceError) as hung:
                await env.step({"role": "assistant", "content": "x"})
            with pytest.raises(EnvServiceError) as broken:
                await env.evaluate()
            assert broken.value.code == "instance_broken"
            await env.close()
            async with client.env("toy") as fresh:
                pid = (await fresh.reset(Task(task_id="fine"))).info["pid"]
                await fresh.step({"role": "assistant", "content": "x"})
            return hung.value, hung_pid, pid, await client.stats()
        finally:
            await client.aclose()

    with serve(call_timeout=2.0) as served:
        error, hung_pid, pid, stats = asyncio.run(scenario(served.url))
    assert error.code == "env_timeout"
    assert pid != hung_pid and not _alive(hung_pid), "the hung worker should have been killed"
    assert stats["hung_calls"] == 1 and hung_pid not in stats["worker_pids"]


def test_a_crashed_worker_costs_its_episode_only() -> None:
    async def scenario(url: str) -> tuple[EnvServiceError, EnvServiceError, float]:
        client = EnvServiceClient(url)
        try:
            env = client.env("toy")
            await env.reset(Task(task_id="crash", metadata={"crash": True}))
            with pytest.raises(EnvServiceError) as crashed:
                await env.step({"role": "assistant", "content": "x"})
            with pytest.raises(EnvServiceError) as broken:
                await env.step({"role": "assistant", "content": "x"})
            await env.close()
            async with client.env("toy") as fresh:
                await fresh.reset(Task(task_id="fine"))
                await fresh.step({"role": "assistant", "content": "x"})
                score = (await fresh.evaluate()).score
            return crashed.value, broken.value, score
        finally:
            await client.aclose()

    with serve() as served:
        crashed, broken, score = asyncio.run(scenario(served.url))
    assert crashed.status == 500 and "exited with code 3" in crashed.message
    assert broken.code == "instance_broken" and score == 1.0


def test_env_errors_come_back_and_leave_the_worker_usable() -> None:
    async def scenario(url: str) -> tuple[EnvServiceError, list[str], float]:
        client = EnvServiceClient(url)
        try:
            async with client.env("toy") as env:
                await env.reset(Task(task_id="fail", metadata={"fail": True}))
                with pytest.raises(EnvServiceError) as failed:
                    await env.step({"role": "assistant", "content": "x"})
                score = (await env.evaluate()).score
            return failed.value, await client.task_ids("toy", "val"), score
        finally:
            await client.aclose()

    with serve(warm=0, reuse=False) as served:
        failed, ids, score = asyncio.run(scenario(served.url))
        assert httpx.get(f"{served.url}/healthz").status_code == 200
    assert failed.status == 500 and "fails on purpose" in failed.message
    assert ids == ["toy-val-0", "toy-val-1", "toy-val-2"] and score == 0.0


def test_process_options_are_checked() -> None:
    with pytest.raises(ValueError, match="warm"):
        ProcessOptions(warm=-1)
    with pytest.raises(ValueError, match="max_workers"):
        ProcessOptions(max_workers=0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


class GreedyEnv(ToyEnv):
    """Allocates what its task asks for in reset (an env a request can make build a huge state)."""

    def reset(self, task: Task) -> EnvReset:
        self.state = bytearray(int(task.metadata.get("megabytes", 1)) * 1024 * 1024)
        return super().reset(task)


def make_greedy_env() -> GreedyEnv:
    return GreedyEnv(ToyConfig(max_steps=2))


def test_a_worker_memory_cap_fails_the_greedy_episode_only() -> None:
    async def scenario(url: str) -> tuple[EnvServiceError, float]:
        client = EnvServiceClient(url)
        try:
            with pytest.raises(EnvServiceError) as greedy:
                async with client.env("toy") as env:
                    await env.reset(Task(task_id="big", metadata={"megabytes": 4096}))
            async with client.env("toy") as env:
                await env.reset(Task(task_id="small", metadata={"megabytes": 8}))
                await env.step({"role": "assistant", "content": "x"})
                score = (await env.evaluate()).score
            return greedy.value, score
        finally:
            await client.aclose()

    host = ProcessHost(make_greedy_env, ProcessOptions(warm=0, max_workers=4, memory_mb=512))
    with running_server(make_greedy_env, env_name="toy", host=host) as served:
        greedy, score = asyncio.run(scenario(served.url))
    assert "MemoryError" in greedy.message and score == 1.0
    with pytest.raises(ValueError, match="memory_mb"):
        ProcessOptions(memory_mb=1)
