"""Envs in Ray actors (`--instances ray`): isolation from the server, scale across a cluster.

AgentEvolver's server starts a fresh actor process for every `/create` and kills it on
`/release`, each actor claiming a whole CPU: ~409 ms per create and ~62 steps/s for 64 clients
on a 2-core machine. Here an actor is a long-lived host of up to `envs_per_actor` envs, asks
for a fraction of a CPU (`num_cpus`), and goes back to the pool when its envs are released, so
an episode never pays a process start once the pool is warm.

An actor whose env call hung (or whose process died) is tainted: it takes no new envs and is
killed once its last env is gone. Ray is imported only when this host is built.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from beyondagent_plugin_envservice.protocol import ServiceError
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import Env

log = get_logger("beyondagent.envservice")


@attrs.define
class RayOptions:
    """`num_cpus` per actor (fractional is fine), envs one actor hosts, the most actors, the cluster address."""

    num_cpus: float = 0.25
    envs_per_actor: int = 4
    max_actors: int = 64
    address: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.num_cpus >= 0:
            raise ValueError(f"ray num_cpus must be 0 or more, got {self.num_cpus}")
        if self.envs_per_actor < 1:
            raise ValueError(f"ray envs_per_actor must be at least 1, got {self.envs_per_actor}")
        if self.max_actors < 1:
            raise ValueError(f"ray max_actors must be at least 1, got {self.max_actors}")


class EnvHostActor:
    """The actor: hosts several envs by key and runs their methods (on its own threads)."""

    def __init__(self, factory: Callable[[], Env]):
        self.factory = factory
        self.envs: dict[str, Env] = {}

    def open(self, key: str) -> None:
        self.envs[key] = self.factory()

    def call(self, key: str, method: str, args: tuple[Any, ...]) -> Any:
        return getattr(self.envs[key], method)(*args)

    def has_method(self, key: str, method: str) -> bool:
        return callable(getattr(self.envs[key], method, None))

    def close(self, key: str) -> None:
        env = self.envs.pop(key, None)
        if env is not None:
            env.close()

    def task_ids(self, split: str) -> list[str] | None:
        env = self.factory()
        try:
            method = getattr(env, "task_ids", None)
            return None if not callable(method) else list(method(split))
        finally:
            env.close()


@attrs.define(eq=False)
class ActorSlot:
    """One actor of the pool and how many envs it hosts."""

    actor: Any
    used: int = 0
    tainted: bool = False


@attrs.define(eq=False)
class RayHandle:
    slot: ActorSlot
    key: str


class RayHost:
    """A pool of env-hosting actors; `open` places a new env on the least busy actor with room."""

    kind = "ray"

    def __init__(self, factory: Callable[[], Env], options: RayOptions):
        import ray

        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
        self.options = options
        self.factory = factory
        self.slots: list[ActorSlot] = []
        self._actor_cls = ray.remote(EnvHostActor).options(
            num_cpus=options.num_cpus, max_concurrency=options.envs_per_actor + 2,
        )
        self._factory_ref = ray.put(factory)

    def _slot(self) -> ActorSlot:
        free = [slot for slot in self.slots if not slot.tainted and slot.used < self.options.envs_per_actor]
        if free:
            return min(free, key=lambda slot: slot.used)
        if len(self.slots) >= self.options.max_actors:
            raise ServiceError(429, "too_many_instances",
                               f"all {len(self.slots)} Ray actors are full (max_actors={self.options.max_actors}, "
                               f"envs_per_actor={self.options.envs_per_actor}); release instances or retry later",
                               retryable=True)
        slot = ActorSlot(self._actor_cls.remote(self._factory_ref))
        self.slots.append(slot)
        log.info("envservice.ray_actor_started", actors=len(self.slots))
        return slot

    async def open(self) -> RayHandle:
        slot = self._slot()
        slot.used += 1
        handle = RayHandle(slot, uuid.uuid4().hex)
        try:
            await self._await(slot.actor.open.remote(handle.key), slot)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                # Timed out (or the client left): the actor may still be building this env, which
                # nobody will close. It takes no new envs and is killed once its others are gone.
                slot.tainted = True
            self._forget(handle)
            raise
        return handle

    async def call(self, handle: RayHandle, method: str, args: tuple[Any, ...]) -> Any:
        return await self._await(handle.slot.actor.call.remote(handle.key, method, args), handle.slot)

    async def has_method(self, handle: RayHandle, method: str) -> bool:
        return await self._await(handle.slot.actor.has_method.remote(handle.key, method), handle.slot)

    async def close(self, handle: RayHandle) -> None:
        try:
            if not handle.slot.tainted:
                await self._await(handle.slot.actor.close.remote(handle.key), handle.slot)
        finally:
            self._forget(handle)

    def abandon(self, handle: RayHandle) -> None:
        handle.slot.tainted = True
        self._forget(handle)

    async def task_ids(self, split: str) -> list[str]:
        slot = self._slot()  # any actor can answer: the env is built, asked and closed there
        ids = await self._await(slot.actor.task_ids.remote(split), slot)
        if ids is None:
            raise ServiceError(404, "unknown_method", "the served env has no task_ids(split): it lists no tasks")
        return ids

    async def shutdown(self) -> None:
        for slot in self.slots:
            self.ray.kill(slot.actor)
        self.slots.clear()

    def _forget(self, handle: RayHandle) -> None:
        slot = handle.slot
        slot.used -= 1
        if slot.tainted and slot.used <= 0 and slot in self.slots:
            self.slots.remove(slot)
            self.ray.kill(slot.actor)
            log.info("envservice.ray_actor_killed", reason="tainted", actors=len(self.slots))

    async def _await(self, ref: Any, slot: ActorSlot) -> Any:
        try:
            return await ref
        except asyncio.CancelledError:
            raise
        except self.ray.exceptions.RayActorError as exc:
            slot.tainted = True  # no new envs there; killed when its last env is released
            raise ActorDied(f"the Ray actor hosting this env died: {_first_line(exc)}") from None
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise


class ActorDied(RuntimeError):
    """The actor process is gone; the pool marks the instance broken (`actor_died`)."""

    actor_died = True


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
