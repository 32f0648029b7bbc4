"""The in-process `AsyncEnv` (`env.service: local`): a sync `Env` run in worker threads.

`LocalEnvOpener` makes one per episode (the run's `EnvOpener` for `service: local`).

Each call runs the env's own method in a worker thread (`asyncio.to_thread`), so many
episodes share one event loop while a slow `step` blocks nobody. Calls to one env are
serialized by a lock, so `close()` after a cancelled `step` waits for that step to end
instead of racing it. Return types are checked, so a broken env fails where it broke.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from beyondagent_core.errors import EnvMethodMissing
from beyondagent_core.protocols import OPTIONAL_ENV_METHODS, Env, EnvReset, EnvStep, Message
from beyondagent_core.types import Reward, Task

R = TypeVar("R")


class LocalAsyncEnv:
    """Adapts a sync `Env` to the `AsyncEnv` protocol; `async with` closes it on exit."""

    def __init__(self, env: Env):
        self.env = env
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def reset(self, task: Task) -> EnvReset:
        return await self._call("reset", EnvReset, task)

    async def step(self, action: Message) -> EnvStep:
        return await self._call("step", EnvStep, action)

    async def evaluate(self) -> Reward:
        return await self._call("evaluate", Reward)

    async def call(self, method: str, *args: Any) -> Any:
        """Run one of the env's optional methods (`OPTIONAL_ENV_METHODS`) in the worker thread."""
        function = getattr(self.env, method, None) if method in OPTIONAL_ENV_METHODS else None
        if not callable(function):
            raise EnvMethodMissing(type(self.env).__name__, method)
        if self._closed:
            raise RuntimeError(f"{type(self.env).__name__}.{method}() called after close()")
        return await asyncio.to_thread(self._locked, function, *args)

    async def close(self) -> None:
        """Close the env once; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._locked, self.env.close)

    async def __aenter__(self) -> LocalAsyncEnv:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(self, method: str, expected: type[R], *args: Any) -> R:
        if self._closed:
            raise RuntimeError(f"{type(self.env).__name__}.{method}() called after close()")
        result = await asyncio.to_thread(self._locked, getattr(self.env, method), *args)
        if not isinstance(result, expected):
            raise TypeError(
                f"{type(self.env).__name__}.{method}() must return {expected.__name__}, "
                f"got {type(result).__name__}: {_short(result)}"
            )
        return result

    def _locked(self, fn: Callable[..., R], *args: Any) -> R:
        with self._lock:
            return fn(*args)


class LocalEnvOpener:
    """The `EnvOpener` of `env.service: local`: each episode gets a fresh env from `create`.

    `create` (the env's factory with its config) runs in a worker thread, since building an
    env may load files.
    """

    def __init__(self, create: Callable[[], Env]):
        self.create = create

    async def open(self) -> LocalAsyncEnv:
        return LocalAsyncEnv(await asyncio.to_thread(self.create))

    async def aclose(self) -> None:
        """Nothing is shared between local episodes."""


def as_opener(envs: Any) -> Any:
    """An `EnvOpener` from an opener, a plain function returning a sync `Env`, or None (no env)."""
    if envs is None or hasattr(envs, "open"):
        return envs
    if callable(envs):
        return LocalEnvOpener(envs)
    raise TypeError(f"expected an EnvOpener or a function returning an Env, got {type(envs).__name__}")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
