"""`--instances ray`: envs live in pooled Ray actors (fractional CPUs, several envs each, reused).

One local Ray (`ray.init(num_cpus=2)`) for the module, shut down after. The envs are the gym
plugin's FrozenLake and the test kit's toy env (its module is put on the workers' PYTHONPATH).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from envservice_testkit import ToyEnv, running_server

from beyondagent_plugin_envservice.client import EnvServiceClient, EnvServiceError
from beyondagent_plugin_envservice.command import env_factory
from beyondagent_plugin_envservice.ray_instances import RayHost, RayOptions
from beyondagent_core.types import Task

ray = pytest.importorskip("ray")
TESTS = str(Path(__file__).resolve().parent)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS, saved]))  # workers import envservice_testkit
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


async def episode(client: EnvServiceClient, task_id: str) -> float:
    async with client.env("frozenlake") as env:
        await env.reset(Task(task_id=task_id, env="frozenlake"))
        await env.step({"role": "assistant", "content": "Action: right"})
        assert isinstance(await env.call("valid_actions"), list)
        return (await env.evaluate()).score


@pytest.mark.beyondagent_plugins("gym")
def test_frozenlake_in_pooled_actors(plugin_manager) -> None:
    name, factory = env_factory("frozenlake", {}, manager=plugin_manager)
    host = RayHost(factory, RayOptions(num_cpus=0.25, envs_per_actor=3, max_actors=4))
    with running_server(env_name=name, host=host) as served:
        client = EnvServiceClient(served.url)

        async def run(task_ids: list[str]) -> list[float]:
            return await asyncio.gather(*(episode(client, task_id) for task_id in task_ids))

        scores = asyncio.run(run([f"frozenlake-train-{i}" for i in range(6)]))  # 6 at once: 2 actors of 3
        assert len(scores) == 6 and len(host.slots) == 2
        actors = [slot.actor for slot in host.slots]
        for round_ in range(3):  # later episodes reuse the same actors: no process start per episode
            asyncio.run(run([f"frozenlake-val-{round_ * 3 + i}" for i in range(3)]))
        assert [slot.actor for slot in host.slots] == actors
        assert all(slot.used == 0 for slot in host.slots)
        profile = httpx.post(f"{served.url}/get_env_profile", json={"env_type": "frozenlake"}).json()["data"]
        assert profile[0] == "frozenlake-train-0"
        stats = served.pool.stats()
        assert stats["instances"] == "ray" and stats["created"] == 15 and stats["live"] == 0
    assert host.slots == []  # shutdown killed the actors


class RayHangs(ToyEnv):
    def step(self, action: dict):
        if self.task.metadata.get("hang"):
            threading.Event().wait(20)
        return super().step(action)


def test_errors_timeouts_and_tainted_actors() -> None:
    host = RayHost(RayHangs, RayOptions(num_cpus=0.1, envs_per_actor=2, max_actors=2))
    with running_server(env_name="toy", host=host, call_timeout=3.0) as served:
        client = EnvServiceClient(served.url)

        async def main() -> None:
            async with client.env("toy") as bad:
                await bad.reset(Task("bad", metadata={"fail": True}))
                with pytest.raises(EnvServiceError, match="RuntimeError: the toy env fails on purpose"):
                    await bad.step({"role": "assistant", "content": "x"})
            hung = client.env("toy")
            await hung.reset(Task("hung", metadata={"hang": True}))
            hung_slot = host.slots[0]
            with pytest.raises(EnvServiceError, match="504") as info:
                await hung.step({"role": "assistant", "content": "x"})
            assert info.value.code == "env_timeout" and hung_slot.tainted
            async with client.env("toy") as fine:  # placed on another actor, not the tainted one
                await fine.reset(Task("fine"))
                assert (await fine.step({"role": "assistant", "content": "x"})).reward == 1.0
                assert host.slots[-1] is not hung_slot
            await hung.close()  # the tainted actor's last env: it is killed
            assert hung_slot not in host.slots

        asyncio.run(main())
        assert served.pool.stats()["live"] == 0


class SlowFirstBuild(ToyEnv):
    """The first env ever built (a flag file, shared by the actor processes) takes 60 s to build."""

    def __init__(self, flag: str) -> None:
        super().__init__()
        if not os.path.exists(flag):
            open(flag, "w").close()
            time.sleep(60)


def test_a_create_that_times_out_kills_the_actor_building_it(tmp_path) -> None:
    factory = functools.partial(SlowFirstBuild, str(tmp_path / "built-once"))
    host = RayHost(factory, RayOptions(num_cpus=0.1, envs_per_actor=2, max_actors=2))
    # open_timeout leaves a new actor's start time to spare on a loaded machine; the first build
    # takes far longer than it
    with running_server(env_name="toy", host=host, call_timeout=1.0, open_timeout=20.0) as served:
        client = EnvServiceClient(served.url)

        async def main() -> None:
            slow = client.env("toy")
            with pytest.raises(EnvServiceError, match="504"):
                await slow.reset(Task("slow"))
            # The actor still building the abandoned env took no other env and is gone: nothing leaks.
            assert host.slots == []
            async with client.env("toy") as fine:
                await fine.reset(Task("fine"))
                assert (await fine.step({"role": "assistant", "content": "x"})).reward == 1.0
            await slow.close()

        asyncio.run(main())
        assert served.pool.stats()["live"] == 0
