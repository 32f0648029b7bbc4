"""The in-process `AsyncEnv` (`env.service: local`): a sync `Env` run in worker threads.

`LocalEnvOpener` makes one per episode (the run's `EnvOpener` for `service: local`).

Each call runs the env's own method in a worker thread (`asyncio.to_thread`), so many
episodes share one event loop while a slow `step` blocks nobody. Calls to one env are
serialized by a lock, so `close()` after a cancelled `step` waits for that step to end
instead of racing it. Return types are checked, so a broken env fails where it broke.

An env whose calls are quick and never block (pure Python: no I/O, no subprocess, no event loop
of its own) may say so with `inline_calls = True` (read at each call, so it may depend on the
episode): its calls then run on the event loop, and the opener builds the envs after the first
there too. A hop costs ~0.1 ms of thread hand-offs and loop wake-ups; in a lockstep rollout every
episode waits for the slowest, so for 64 single-turn episodes (5 calls each) the hops were a sixth
of the rollout (`benchmarks/grpo_vs_trl.py`: 0.108 -> 0.090 s a step). In a multi-turn rollout
they overlap the other episodes' decoding (FrozenLake, 32 episodes: 0.549 vs 0.546 s). With
`call_timeout` every call runs in a thread whatever the env says: a call on the loop cannot be
bounded.

`call_timeout` (`env.call_timeout` in the spec) bounds each call: a call that takes longer
fails its episode with `EnvCallTimeout` (an episode error; the other episodes go on). Such
calls run in daemon threads of their own, since a thread cannot be killed: a hung call keeps
its thread (and the process exits without waiting for it); the env is closed in a thread once
the call returns, and the episode does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from beyondagent_core.errors import EnvMethodMissing
from beyondagent_core.protocols import OPTIONAL_ENV_METHODS, Env, EnvReset, EnvStep, Message
from beyondagent_core.types import Reward, Task

R = TypeVar("R")


class EnvCallTimeout(TimeoutError):
    """An env call took longer than `env.call_timeout`."""


class LocalAsyncEnv:
    """Adapts a sync `Env` to the `AsyncEnv` protocol; `async with` closes it on exit."""

    def __init__(self, env: Env, *, call_timeout: float | None = None):
        self.env = env
        self.call_timeout = call_timeout
        self._lock = threading.Lock()
        self._closed = False
        self._hung = False  # a call timed out and may still be running in its thread

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
        return await self._in_thread(method, function, *args)

    async def close(self) -> None:
        """Close the env once; later calls do nothing. After a timed-out call, the close waits
        for that call in its own thread instead of here."""
        if self._closed:
            return
        self._closed = True
        if self._hung:
            threading.Thread(target=self._locked, args=(self.env.close,), daemon=True,
                             name="env-close-after-timeout").start()
            return
        if self.inline:
            self._locked(self.env.close)
            return
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
        result = await self._in_thread(method, getattr(self.env, method), *args)
        if not isinstance(result, expected):
            raise TypeError(
                f"{type(self.env).__name__}.{method}() must return {expected.__name__}, "
                f"got {type(result).__name__}: {_short(result)}"
            )
        return result

    @property
    def inline(self) -> bool:
        """Whether calls run on the event loop: the env says they are quick (`inline_calls`) and no
        `call_timeout` must bound them."""
        return self.call_timeout is None and getattr(self.env, "inline_calls", False) is True

    async def _in_thread(self, method: str, fn: Callable[..., R], *args: Any) -> R:
        if self._hung:
            raise EnvCallTimeout(f"{type(self.env).__name__}.{method}() not run: an earlier call timed out")
        if self.inline:
            return self._locked(fn, *args)
        if self.call_timeout is None:
            return await asyncio.to_thread(self._locked, fn, *args)
        try:
            return await asyncio.wait_for(in_daemon_thread(self._locked, fn, *args), self.call_timeout)
        except TimeoutError:
            self._hung = True
            raise EnvCallTimeout(f"{type(self.env).__name__}.{method}() took longer than env.call_timeout="
                                 f"{self.call_timeout:g} s") from None

    def _locked(self, fn: Callable[..., R], *args: Any) -> R:
        with self._lock:
            return fn(*args)


async def in_daemon_thread(fn: Callable[..., R], *args: Any) -> R:
    """`fn(*args)` in a daemon thread of its own: unlike the loop's default executor, which
    `asyncio.run` waits for at exit, a call that never returns cannot hold up the caller's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def deliver(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            outcome: tuple[Callable[[Any], None], Any] = (future.set_exception, exc)
        else:
            outcome = (future.set_result, result)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(deliver, *outcome)

    threading.Thread(target=work, daemon=True, name="env-call").start()
    return await future


class LocalEnvOpener:
    """The `EnvOpener` of `env.service: local`: each episode gets a fresh env from `create`.

    `create` (the env's factory with its config) runs in a worker thread, since building an
    env may load files; once an env it built runs its calls on the loop (`inline_calls`), the
    next ones are built there too. `call_timeout` bounds each call of the envs it opens
    (`LocalAsyncEnv`).
    """

    def __init__(self, create: Callable[[], Env], *, call_timeout: float | None = None):
        self.create = create
        self.call_timeout = call_timeout
        self._create_inline = False

    async def open(self) -> LocalAsyncEnv:
        env = self.create() if self._create_inline else await asyncio.to_thread(self.create)
        opened = LocalAsyncEnv(env, call_timeout=self.call_timeout)
        self._create_inline = opened.inline
        return opened

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
