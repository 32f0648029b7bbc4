"""Envs in worker processes (`--instances process`): one process per live env, no Ray.

For envs that must own their process: AppWorld allows one open world per process, freezes the
process clock while a world is open and times code out with signals (main thread only). Each
env here lives in its own spawned worker, whose main thread runs the env's calls one at a time
from a pipe. The server talks to a worker from a small thread pool, so the pool's per-call
timeout works as for thread envs; a worker whose call hung is killed (`abandon`), one that
crashed fails its call with `actor_died` (the pool marks the instance broken), and either way
the next `/create` gets a fresh worker.

`warm` workers are started ahead, their env already built, so an episode's start costs a
reset, not a process start. An env may define `preload()`: each worker calls it once before
it takes episodes (to import heavy modules ahead). A worker whose env was closed normally
builds a fresh env and goes back to the idle workers (`reuse`, the default: one env at a time
per process, one after the other); a worker that hung or died is never reused. A worker exits
when the server goes away (its pipe closes).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

import attrs

from beyondagent_plugin_envservice.protocol import ServiceError
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import Env

log = get_logger("beyondagent.envservice")


@attrs.define
class ProcessOptions:
    """`warm`: workers kept started ahead (env built, waiting for a task); `max_workers`: the cap;
    `reuse`: a worker whose env was closed builds a new one and waits for the next episode."""

    warm: int = 1
    max_workers: int = 64
    reuse: bool = True
    start_timeout: float = 300.0
    memory_mb: int | None = None  # each worker's address-space limit (RLIMIT_AS); None: unlimited

    def __attrs_post_init__(self) -> None:
        if self.memory_mb is not None and self.memory_mb < 64:
            raise ValueError(f"process memory_mb must be at least 64 (MiB), got {self.memory_mb}")
        if self.warm < 0:
            raise ValueError(f"process warm must be 0 or more, got {self.warm}")
        if self.max_workers < 1:
            raise ValueError(f"process max_workers must be at least 1, got {self.max_workers}")


class WorkerDied(RuntimeError):
    """The worker process is gone (crashed or killed); the pool marks the instance broken."""

    actor_died = True


class RemoteEnvError(RuntimeError):
    """An env call raised in the worker; carries the worker's traceback for the server's log."""

    def __init__(self, message: str, remote_traceback: str = ""):
        super().__init__(message)
        self.remote_traceback = remote_traceback


def _worker_main(conn: Connection, factory: Callable[[], Env], memory_mb: int | None = None) -> None:
    """The worker: build the env, then answer requests until `__exit__` or EOF.

    `(method, args)` runs an env method; `__close__` closes the env and `__open__` builds a
    fresh one (a reused worker); `__has_method__` asks whether the env has a method. With
    `memory_mb` the worker's address space is capped first: an env that asks for more gets a
    MemoryError in its own process (an error reply), and the host's memory is left alone.
    """
    env: Any = None
    if memory_mb is not None:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        env = factory()
        preload = getattr(env, "preload", None)
        if callable(preload):
            preload()
    except BaseException as exc:  # noqa: BLE001 - report any failure to build, then exit
        conn.send(("error", _portable(exc), traceback.format_exc()))
        return
    conn.send(("ready", os.getpid(), ""))
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):  # the server is gone
            method, args = "__exit__", ()
        if method == "__exit__":
            if env is not None:
                env.close()
            return
        try:
            if method == "__close__":
                current, env = env, None
                result: Any = current.close() if current is not None else None
            elif method == "__open__":
                env = env if env is not None else factory()
                result = None
            elif method == "__has_method__":
                result = callable(getattr(env, args[0], None))
            else:
                result = getattr(env, method)(*args)
            conn.send(("ok", result, ""))
        except BaseException as exc:  # noqa: BLE001 - the env's failure goes back to the caller
            conn.send(("error", _portable(exc), traceback.format_exc()))


def _finished_ok(future: asyncio.Future) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it pickles (ValueError stays ValueError for a 400), else a RuntimeError with its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - anything unpicklable becomes plain text
        return RuntimeError(f"{type(exc).__name__}: {exc}")


@attrs.define(eq=False)
class Worker:
    """One worker process and the server's end of its pipe."""

    process: Any
    conn: Connection
    pid: int = 0
    dead: bool = False

    def request(self, method: str, args: tuple[Any, ...]) -> Any:
        """Send one call and wait for its answer (blocking: run on a thread)."""
        try:
            self.conn.send((method, args))
            status, value, remote = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.dead = True
            self.process.join(timeout=2)  # the pipe closes a moment before the exit code is there
            code = self.process.exitcode
            raise WorkerDied(f"the worker process {self.pid} hosting this env exited"
                             + (f" with code {code}" if code is not None else "")) from None
        if status == "error":
            if isinstance(value, BaseException) and not isinstance(value, (KeyboardInterrupt, SystemExit)):
                if remote:
                    log.debug("envservice.worker_traceback", pid=self.pid, traceback=remote)
                raise value
            raise RemoteEnvError(str(value), remote)
        return value

    def kill(self) -> None:
        self.dead = True
        if self.process is None:
            return
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=10)
        self.conn.close()


class ProcessHost:
    """Each env in its own spawned worker process; `warm` of them started ahead."""

    kind = "process"

    def __init__(self, factory: Callable[[], Env], options: ProcessOptions | None = None):
        self.factory = factory
        self.options = options or ProcessOptions()
        self.context = multiprocessing.get_context("spawn")  # no fork of a threaded server
        self.executor = ThreadPoolExecutor(max_workers=self.options.max_workers + 4,
                                           thread_name_prefix="envservice-process")
        self.live: set[Worker] = set()
        self.warm: list[asyncio.Future[Worker]] = []  # workers starting, or started and idle
        self.started = 0
        self.reused = 0

    async def start(self) -> None:
        """Start the warm workers (called by the server as it starts)."""
        self._prestart()

    def _spawn_blocking(self) -> Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker_main, args=(child, self.factory, self.options.memory_mb),
                                       daemon=True,
                                       name="beyondagent-env-worker")
        process.start()
        child.close()
        worker = Worker(process, parent)
        if not parent.poll(self.options.start_timeout):
            worker.kill()
            raise RuntimeError(f"the env worker did not start within {self.options.start_timeout:g}s")
        try:
            status, value, remote = parent.recv()
        except (EOFError, OSError):
            worker.kill()
            raise WorkerDied(f"the env worker exited while building its env (code {process.exitcode})") from None
        if status != "ready":
            worker.kill()
            log.error("envservice.worker_start_failed", traceback=remote)
            raise value if isinstance(value, BaseException) else RuntimeError(str(value))
        worker.pid = value
        self.started += 1
        return worker

    def _prestart(self) -> None:
        loop = asyncio.get_running_loop()
        while len(self.warm) < self.options.warm and len(self.live) + len(self.warm) < self.options.max_workers:
            self.warm.append(loop.run_in_executor(self.executor, self._spawn_blocking))

    def _idle(self, worker: Worker) -> None:
        """Put a started worker back among the idle ones."""
        future: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
        future.set_result(worker)
        self.warm.insert(0, future)  # ready ones first

    async def open(self) -> Worker:
        if len(self.live) >= self.options.max_workers:
            raise ServiceError(429, "too_many_instances",
                               f"all {len(self.live)} env worker processes are busy "
                               f"(max_workers={self.options.max_workers}); release instances or retry later",
                               retryable=True)
        loop = asyncio.get_running_loop()
        pending: asyncio.Future[Worker] | None = None
        while self.warm and pending is None:
            pending = self.warm.pop(0)
            if _finished_ok(pending) and not pending.result().process.is_alive():  # died while idle
                pending.result().kill()
                pending = None
        if pending is None:
            pending = loop.run_in_executor(self.executor, self._spawn_blocking)
        self.live.add(placeholder := Worker(None, None))  # type: ignore[arg-type] - holds the slot
        try:
            worker = await asyncio.shield(pending)
        except BaseException:
            self.live.discard(placeholder)
            if _finished_ok(pending):
                self._kill(pending.result())
            elif not pending.done():
                pending.add_done_callback(lambda f: _finished_ok(f) and self._kill(f.result()))
            raise
        finally:
            self._prestart()
        self.live.discard(placeholder)
        self.live.add(worker)
        return worker

    async def call(self, handle: Worker, method: str, args: tuple[Any, ...]) -> Any:
        if handle.dead:
            raise WorkerDied(f"the worker process {handle.pid} hosting this env is gone")
        return await asyncio.get_running_loop().run_in_executor(self.executor, handle.request, method, args)

    async def has_method(self, handle: Worker, method: str) -> bool:
        return bool(await self.call(handle, "__has_method__", (method,)))

    async def close(self, handle: Worker) -> None:
        reusable = False
        try:
            if not handle.dead:
                await self.call(handle, "__close__", ())
                if self.options.reuse:
                    await self.call(handle, "__open__", ())
                    reusable = True
        finally:
            if reusable and not handle.dead:
                self.live.discard(handle)
                self.reused += 1
                self._idle(handle)
            else:
                self._kill(handle)

    def abandon(self, handle: Worker) -> None:
        """A hung call: kill the worker (its thread then gets EOF and returns)."""
        log.warning("envservice.worker_killed", pid=handle.pid, reason="hung call")
        self._kill(handle)

    def _kill(self, worker: Worker) -> None:
        self.live.discard(worker)
        worker.kill()

    async def task_ids(self, split: str) -> list[str]:
        worker = await self.open()
        try:
            if not await self.has_method(worker, "task_ids"):
                raise ServiceError(404, "unknown_method", "the served env has no task_ids(split): it lists no tasks")
            return await self.call(worker, "task_ids", (split,))
        finally:
            await self.close(worker)

    async def shutdown(self) -> None:
        for pending in self.warm:
            if _finished_ok(pending):
                pending.result().kill()
            else:
                pending.add_done_callback(lambda f: _finished_ok(f) and f.result().kill())
        self.warm.clear()
        for worker in list(self.live):
            if worker.process is not None:
                self._kill(worker)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def stats(self) -> dict[str, Any]:
        return {"workers_live": len(self.live), "workers_warm": len(self.warm), "workers_started": self.started,
                "workers_reused": self.reused,
                "worker_pids": sorted(worker.pid for worker in self.live if worker.pid)}
