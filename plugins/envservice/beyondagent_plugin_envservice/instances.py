"""The served env instances: a cap, idle reaping, a per-call timeout, broken marking, stats.

`InstancePool` keeps the bookkeeping of every live instance; an `EnvHost` decides where the
env objects live and run: `ThreadHost` (here) keeps them in the server process and runs their
calls on a small dedicated thread pool, `RayHost` (`ray_instances.py`) puts them in Ray
actors. Rules the pool enforces:

- at most `max_instances` live (and being created) at once, else 429;
- an instance idle for `ttl` seconds is closed and forgotten (the reaper; a client that died
  mid-episode leaks nothing); one with a call in flight or waiting is never idle, however long
  the call takes;
- an env call that takes longer than `call_timeout` gets 504 and marks the instance broken:
  later calls get 409 until the client releases it (a thread cannot be killed, so the hung
  call keeps its worker; `stats()["hung_calls"]` counts them; the host closes its env once
  it returns, `abandoned_closed`);
- calls to one instance run one at a time, in order;
- `create` with a client-chosen `instance_id` is idempotent: the same request again (a client
  retry after a lost reply) returns the same reset reply instead of a second env.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import attrs

from beyondagent_plugin_envservice.protocol import (
    ServiceError,
    format_traceback,
    one_line,
    reset_reply,
)
from beyondagent_plugin_envservice.thread_calls import CallTracker, Opening
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import Env, EnvReset, EnvStep
from beyondagent_core.types import Reward, Task

log = get_logger("beyondagent.envservice")

EXPECTED: dict[str, type] = {"reset": EnvReset, "step": EnvStep, "evaluate": Reward}


class EnvHost(Protocol):
    """Where served envs live. A handle is whatever the host needs to find one env again."""

    kind: str

    async def open(self) -> Any: ...

    async def call(self, handle: Any, method: str, args: tuple[Any, ...]) -> Any: ...

    async def has_method(self, handle: Any, method: str) -> bool: ...

    async def close(self, handle: Any) -> None: ...

    def abandon(self, handle: Any) -> None:
        """Give up on an env whose call hung: never use it again; the host disposes of it (closes
        it once the call returns, or kills its worker)."""

    async def task_ids(self, split: str) -> list[str]: ...

    async def shutdown(self) -> None: ...


class ThreadHost:
    """Envs in the server process; their calls run on a dedicated thread pool.

    A dedicated pool (not asyncio's default one) keeps a few hung env calls from starving
    everything else that uses threads, and sizes the hop for cheap envs: a thread hop costs
    tens of microseconds, and it is what lets a hung call time out while the server serves on.
    The env of a call that timed out is closed once that call returns (`thread_calls.py`).
    """

    kind = "thread"

    def __init__(self, factory: Callable[[], Env], *, threads: int = 16, inline: bool = False):
        self.factory = factory
        self.inline = inline
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="envservice")
        self.tracker = CallTracker(self._close_soon)
        self._profile_env: Env | None = None

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.inline:
            # `--inline-calls`: on the event loop, no thread hop (the hop and its GIL hand-off
            # cost more than a trivial env's call). The price: a hung call stalls the server.
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def open(self) -> Env:
        if self.inline:
            return self.factory()
        opening = Opening()
        try:
            return await self._run(self.tracker.build, opening, self.factory)
        except asyncio.CancelledError:  # timed out (or the client went away): the late env is closed
            self.tracker.abandon_open(opening)
            raise

    async def call(self, handle: Env, method: str, args: tuple[Any, ...]) -> Any:
        if self.inline:
            return getattr(handle, method)(*args)
        return await self._run(self.tracker.run, handle, getattr(handle, method), args)

    async def has_method(self, handle: Env, method: str) -> bool:
        return callable(getattr(handle, method, None))

    async def close(self, handle: Env) -> None:
        await self._run(handle.close)

    def abandon(self, handle: Env) -> None:
        self.tracker.abandon(handle)  # the hung thread cannot be stopped; its env is closed when it returns

    async def task_ids(self, split: str) -> list[str]:
        if self._profile_env is None:  # one env, kept, answers every profile request
            self._profile_env = await self.open()
        method = getattr(self._profile_env, "task_ids", None)
        if not callable(method):
            raise ServiceError(404, "unknown_method",
                               f"env {type(self._profile_env).__name__} has no task_ids(split): it lists no tasks")
        return await self._run(method, split)

    async def shutdown(self) -> None:
        if self._profile_env is not None:
            env, self._profile_env = self._profile_env, None
            await self._run(env.close)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def stats(self) -> dict[str, int]:
        return self.tracker.stats()

    def _close_soon(self, close: Callable[[], None]) -> None:
        try:
            self.executor.submit(close)
        except RuntimeError:  # the executor is shut down (the server is stopping): a thread of its own
            threading.Thread(target=close, name="envservice-close", daemon=True).start()


@attrs.define(eq=False)
class Instance:
    """One live env instance and what the pool tracks about it."""

    instance_id: str
    task_id: str
    handle: Any
    created: float
    last_used: float
    reset_data: dict[str, Any]
    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    calls: int = 0
    busy: int = 0
    broken: str | None = None
    finished: bool = False  # a step ended the episode: another step is the client's mistake

    def info(self, now: float) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "task_id": self.task_id, "calls": self.calls,
                "age_s": round(now - self.created, 3), "idle_s": round(now - self.last_used, 3),
                "broken": self.broken}


@attrs.define
class PoolLimits:
    """`ttl`: idle seconds before an instance is reaped; `max_instances`: the cap; `call_timeout`: seconds.

    `open_timeout` bounds building an env (at least `call_timeout`): a Ray actor's first start
    takes seconds on a busy machine, and is not a hung env.
    """

    ttl: float = 600.0
    max_instances: int = 256
    call_timeout: float = 60.0
    open_timeout: float = 120.0

    def __attrs_post_init__(self) -> None:
        if not self.ttl > 0:
            raise ValueError(f"ttl must be more than 0 seconds, got {self.ttl}")
        if self.max_instances < 1:
            raise ValueError(f"max_instances must be at least 1, got {self.max_instances}")
        if not self.call_timeout > 0:
            raise ValueError(f"call_timeout must be more than 0 seconds, got {self.call_timeout}")


class InstancePool:
    """Every live instance of the served env, by id."""

    def __init__(self, host: EnvHost, limits: PoolLimits, *, env_name: str,
                 clock: Callable[[], float] = time.monotonic):
        self.host = host
        self.limits = limits
        self.env_name = env_name
        self.clock = clock
        self.instances: dict[str, Instance] = {}
        self._creating: set[str] = set()
        self._release_when_created: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.peak_live = 0
        self.closed = False

    # --- lifecycle of one instance ---------------------------------------------------------

    async def create(self, task: Task, instance_id: str | None) -> dict[str, Any]:
        """Build an env, reset it into `task`, and return `/create`'s data."""
        self._check_open()
        if instance_id is not None:
            existing = self.instances.get(instance_id)
            if existing is not None:
                if existing.task_id == task.task_id and existing.calls == 0:
                    existing.last_used = self.clock()
                    return existing.reset_data  # a retried create: same answer, no second env
                raise ServiceError(409, "instance_exists",
                                   f"instance {instance_id!r} already exists; release it or use a new instance_id")
            if instance_id in self._creating:
                raise ServiceError(409, "instance_exists",
                                   f"instance {instance_id!r} is being created by another request")
        live = len(self.instances) + len(self._creating)
        if live >= self.limits.max_instances:
            self.counts["rejected_full"] += 1
            raise ServiceError(
                429, "too_many_instances",
                f"the service is full: {live} live instances (max_instances={self.limits.max_instances}); "
                "release instances or retry later", retryable=True)
        instance_id = instance_id or f"inst_{uuid.uuid4().hex}"
        self._creating.add(instance_id)
        try:
            handle = await self._guarded(self.host.open(), "create", instance_id, None,
                                         timeout=max(self.limits.call_timeout, self.limits.open_timeout))
            try:
                reset = await self._guarded(self.host.call(handle, "reset", (task,)), "reset", instance_id, handle)
                _check_type("reset", reset)
            except BaseException as exc:
                if not (isinstance(exc, ServiceError) and exc.status == 504):  # a hung env is abandoned, not closed
                    await self._close_quietly(handle, instance_id)
                raise
            now = self.clock()
            data = reset_reply(reset, instance_id=instance_id, task_id=task.task_id)
            self.instances[instance_id] = Instance(instance_id, task.task_id, handle, now, now, data)
        except BaseException:
            self._release_when_created.discard(instance_id)
            raise
        finally:
            self._creating.discard(instance_id)
        self.counts["created"] += 1
        if instance_id in self._release_when_created:
            self._release_when_created.discard(instance_id)
            await self.release(instance_id)
        self.peak_live = max(self.peak_live, len(self.instances))
        return data

    async def call(self, instance_id: str | None, method: str, *args: Any) -> Any:
        """Run `method(*args)` on an instance's env: one call at a time, under the timeout."""
        instance = self._get(instance_id)
        instance.busy += 1
        try:
            async with instance.lock:
                if instance.broken:
                    raise ServiceError(409, "instance_broken",
                                       f"instance {instance.instance_id!r} is broken ({instance.broken}); "
                                       "release it and create a new one")
                if instance.instance_id not in self.instances:
                    raise _unknown(instance.instance_id)  # released while this call waited
                if method == "step" and instance.finished:
                    raise ServiceError(409, "episode_finished",
                                       f"instance {instance.instance_id!r}: the episode has ended (a step returned "
                                       "terminated); evaluate or release it, or create a new instance")
                if method not in EXPECTED and not await self.host.has_method(instance.handle, method):
                    raise ServiceError(404, "unknown_method",
                                       f"the {self.env_name} env has no method {method!r}")
                instance.calls += 1
                result = await self._guarded(self.host.call(instance.handle, method, args), method,
                                             instance.instance_id, instance.handle, instance)
                if method in EXPECTED:
                    _check_type(method, result)
                if method == "step" and getattr(result, "terminated", False):
                    instance.finished = True
                return result
        finally:
            instance.busy -= 1
            instance.last_used = self.clock()

    async def release(self, instance_id: str | None) -> bool:
        """Close and forget an instance; False when there was none (release is idempotent)."""
        if not instance_id:
            raise ServiceError(400, "bad_request", "instance_id is required")
        instance = self.instances.pop(instance_id, None)
        if instance is None:
            if instance_id in self._creating:
                # A client that gave up on its create (cancelled) releases what it will create.
                self._release_when_created.add(instance_id)
                return True
            return False
        self.counts["released"] += 1
        await self._dispose(instance)
        return True

    def info(self, instance_id: str | None) -> dict[str, Any]:
        instance = self._get(instance_id)
        return {**instance.info(self.clock()), "env": self.env_name}

    async def task_ids(self, split: str) -> list[str]:
        self._check_open()
        try:
            ids = await asyncio.wait_for(self.host.task_ids(split), self.limits.call_timeout)
        except ServiceError:
            raise
        except TimeoutError:
            raise ServiceError(504, "env_timeout",
                               f"task_ids({split!r}) took longer than {self.limits.call_timeout:g}s") from None
        except Exception as exc:  # noqa: BLE001 - the env's bug: one line to the client, traceback in our log
            self.counts["env_errors"] += 1
            log.error("envservice.env_error", method="task_ids", error=one_line(exc), traceback=format_traceback(exc))
            status = 400 if isinstance(exc, ValueError) else 500
            raise ServiceError(status, "env_error", f"task_ids({split!r}) failed: {one_line(exc)}") from None
        if not isinstance(ids, (list, tuple)):
            raise ServiceError(500, "env_error", f"task_ids() must return a list, got {type(ids).__name__}")
        return [str(task_id) for task_id in ids]

    # --- the whole pool ----------------------------------------------------------------------

    async def reap_idle(self) -> int:
        """Close every instance idle for longer than the TTL; returns how many.

        Each one is checked again just before it goes, with no await between the check and its
        removal: closing the one before awaits, and a call may have begun on it meanwhile (its
        `busy` count keeps it).
        """
        reaped = 0
        for instance in list(self.instances.values()):
            if self.instances.get(instance.instance_id) is not instance or not self._expired(instance):
                continue
            del self.instances[instance.instance_id]
            reaped += 1
            self.counts["reaped"] += 1
            log.info("envservice.reaped", instance=instance.instance_id, task=instance.task_id,
                     idle_s=round(self.clock() - instance.last_used, 1))
            await self._dispose(instance)
        return reaped

    def _expired(self, instance: Instance) -> bool:
        """No call in flight or waiting, and none for longer than the TTL."""
        return instance.busy == 0 and instance.last_used <= self.clock() - self.limits.ttl

    async def reaper(self) -> None:
        """Reap idle instances until cancelled (a task of the server's lifespan)."""
        interval = min(max(self.limits.ttl / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap_idle()
            except Exception:  # noqa: BLE001 - the reaper must outlive one bad close
                log.exception("envservice.reaper_failed")

    async def close_all(self) -> int:
        """Close every instance (graceful shutdown); later creates get 503."""
        self.closed = True
        instances = list(self.instances.values())
        self.instances.clear()
        await asyncio.gather(*(self._dispose(instance) for instance in instances))
        self.counts["closed_at_shutdown"] += len(instances)
        await self.host.shutdown()
        return len(instances)

    def stats(self) -> dict[str, Any]:
        return {
            "env": self.env_name,
            "instances": self.host.kind,
            "live": len(self.instances),
            "creating": len(self._creating),
            "peak_live": self.peak_live,
            "max_instances": self.limits.max_instances,
            "ttl_s": self.limits.ttl,
            "call_timeout_s": self.limits.call_timeout,
            "broken": sum(1 for inst in self.instances.values() if inst.broken),
            **{key: self.counts[key] for key in ("created", "released", "reaped", "timeouts", "hung_calls",
                                                 "env_errors", "bad_input", "rejected_full", "closed_at_shutdown")},
            **(self.host.stats() if callable(getattr(self.host, "stats", None)) else {}),
        }

    # --- helpers -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ServiceError(503, "shutting_down", "the service is shutting down", retryable=True)

    def _get(self, instance_id: str | None) -> Instance:
        if not instance_id:
            raise ServiceError(400, "bad_request", "instance_id is required")
        instance = self.instances.get(instance_id)
        if instance is None:
            raise _unknown(instance_id)
        return instance

    async def _guarded(self, awaitable: Any, method: str, instance_id: str, handle: Any,
                       instance: Instance | None = None, timeout: float | None = None) -> Any:
        """Await an env call under the timeout; map its failures to error replies."""
        timeout = timeout or self.limits.call_timeout
        try:
            async with asyncio.timeout(timeout):  # a timer, not a task per call as wait_for makes
                return await awaitable
        except TimeoutError:
            self.counts["timeouts"] += 1
            self.counts["hung_calls"] += 1
            reason = f"{method}() took longer than {timeout:g}s (call_timeout)"
            if instance is not None:
                instance.broken = reason
            if handle is not None:
                self.host.abandon(handle)
            log.warning("envservice.call_timeout", instance=instance_id, method=method, seconds=timeout)
            raise ServiceError(504, "env_timeout", f"instance {instance_id!r}: {reason}; the instance is broken, "
                               "release it") from None
        except ServiceError:
            raise
        except asyncio.CancelledError:
            raise
        except ValueError as exc:
            # The env's verdict on what the client sent (task metadata it cannot build, an action it
            # cannot take): a 400 naming it, not a 500 of ours. The instance stays usable.
            self.counts["bad_input"] += 1
            log.info("envservice.bad_input", instance=instance_id, method=method, error=one_line(exc))
            raise ServiceError(400, "bad_input", f"{method}() rejected its input in the {self.env_name} env: "
                               f"{one_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - the env's bug: one line to the client, traceback in our log
            self.counts["env_errors"] += 1
            if getattr(exc, "actor_died", False):
                if instance is not None:
                    instance.broken = "its Ray actor died"
                if handle is not None:
                    self.host.abandon(handle)
            log.error("envservice.env_error", instance=instance_id, method=method, error=one_line(exc),
                      traceback=format_traceback(exc))
            raise ServiceError(500, "env_error", f"{method}() failed in the {self.env_name} env: {one_line(exc)}") \
                from None

    async def _dispose(self, instance: Instance) -> None:
        if instance.broken:
            return  # its worker may still be stuck in the hung call; closing would queue behind it
        async with instance.lock:  # let a call in flight finish first
            await self._close_quietly(instance.handle, instance.instance_id)

    async def _close_quietly(self, handle: Any, instance_id: str) -> None:
        try:
            await asyncio.wait_for(self.host.close(handle), self.limits.call_timeout)
        except Exception as exc:  # noqa: BLE001 - a failing close must not keep the instance alive
            self.counts["env_errors"] += 1
            log.warning("envservice.close_failed", instance=instance_id, error=one_line(exc))


def _unknown(instance_id: str) -> ServiceError:
    return ServiceError(404, "unknown_instance",
                        f"unknown instance {instance_id!r}: it was released, reaped after the idle TTL, "
                        "or never created")


def _check_type(method: str, result: Any) -> None:
    expected = EXPECTED[method]
    if not isinstance(result, expected):
        raise ServiceError(500, "env_error",
                           f"{method}() must return {expected.__name__}, got {type(result).__name__}")
