"""Thread-hosted env calls the pool gave up on: their env is closed once the call returns.

A thread cannot be stopped. When the pool times out a call of a `ThreadHost` env (504, the
instance marked broken), the call runs on in its worker thread and may return minutes later;
a `/create` that timed out while the env was being built may still build it. Nobody else
would ever close such an env: the pool never closes a broken instance (the close would only
queue behind the hung call), and the env a late build returns has no instance at all.

`CallTracker` counts the calls running on each env. `abandon(env)` marks the env, and it is
closed exactly once, on a worker thread, as soon as none of its calls runs: by the last one
as it returns, or at once when none is running. A build whose caller gave up (`Opening`)
closes the env it makes the same way. A call that had not started yet never runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import attrs

from beyondagent_plugin_envservice.protocol import one_line
from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.envservice")


class Abandoned(RuntimeError):
    """A call that was still queued when its env (or its build) was abandoned: it does not run."""


@attrs.define(eq=False)
class _Tracked:
    env: Any
    running: int = 0
    abandoned: bool = False


@attrs.define(eq=False)
class Opening:
    """One env being built: whether its caller gave up, and the env once built."""

    started: bool = False
    abandoned: bool = False
    env: Any = None


class CallTracker:
    """The calls running on each env, and the closing of abandoned envs (see the module docstring).

    `close_soon(fn)` runs `fn` on a worker thread (never on the event loop: a close may block).
    """

    def __init__(self, close_soon: Callable[[Callable[[], None]], None]):
        self._close_soon = close_soon
        self._lock = threading.Lock()
        self._envs: dict[int, _Tracked] = {}
        self.waiting = 0  # abandoned, a call of theirs still running
        self.closed = 0

    # --- on a worker thread --------------------------------------------------------------------

    def run(self, env: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """`fn(*args)`, a method of `env`, counted as running on `env`."""
        key = id(env)
        with self._lock:
            tracked = self._envs.get(key)
            if tracked is None:
                tracked = self._envs[key] = _Tracked(env)
            elif tracked.abandoned:
                raise Abandoned(f"{type(env).__name__} was abandoned after a hung call")
            tracked.running += 1
        try:
            return fn(*args)
        finally:
            with self._lock:
                tracked.running -= 1
                last = tracked.running == 0
                if last:
                    del self._envs[key]
                    if tracked.abandoned:
                        self.waiting -= 1
            if last and tracked.abandoned:
                self._close(env, "its hung call returned")

    def build(self, opening: Opening, factory: Callable[[], Any]) -> Any:
        """`factory()`; the env is closed here if its caller gave up meanwhile."""
        with self._lock:
            if opening.abandoned:
                raise Abandoned("the create was abandoned before its env was built")
            opening.started = True
        env = factory()
        with self._lock:
            late = opening.abandoned
            if late:
                self.waiting -= 1
            else:
                opening.env = env
        if late:
            self._close(env, "it was built after its create timed out")
        return env

    # --- on the event loop ---------------------------------------------------------------------

    def abandon(self, env: Any) -> None:
        """Close `env` once no call of it runs; no call queued on it starts."""
        with self._lock:
            tracked = self._envs.get(id(env))
            if tracked is not None and tracked.abandoned:
                return  # already abandoned: it is closed once
            if tracked is not None and tracked.running:
                tracked.abandoned = True  # the last running call closes it
                self.waiting += 1
                return
            self._envs[id(env)] = _Tracked(env, abandoned=True)  # a queued call of it must not start
        self._close_soon(lambda: self._close(env, "it was abandoned", forget=True))

    def abandon_open(self, opening: Opening) -> None:
        """The caller of a build gave up (it timed out or was cancelled): close what it builds."""
        with self._lock:
            opening.abandoned = True
            env, opening.env = opening.env, None
            if env is None and opening.started:
                self.waiting += 1  # still building: `build` closes it
        if env is not None:  # built, but the result never reached its caller
            self._close_soon(lambda: self._close(env, "it was built after its create timed out"))

    def stats(self) -> dict[str, int]:
        return {"abandoned_waiting": self.waiting, "abandoned_closed": self.closed}

    # --- helpers -------------------------------------------------------------------------------

    def _close(self, env: Any, why: str, *, forget: bool = False) -> None:
        try:
            env.close()
        except Exception as exc:  # noqa: BLE001 - nobody is waiting for this close: log it
            log.warning("envservice.abandoned_close_failed", env=type(env).__name__, error=one_line(exc))
        else:
            log.debug("envservice.abandoned_closed", env=type(env).__name__, why=why)
        with self._lock:
            self.closed += 1
            if forget and self._envs.get(id(env)) is not None and self._envs[id(env)].env is env:
                del self._envs[id(env)]
