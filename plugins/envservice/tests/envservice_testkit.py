"""Helpers for the environment service tests: a real server on loopback, and envs for fault injection.

`running_server(factory, ...)` serves an env factory with the real Starlette app and uvicorn
on a free loopback port in a background thread, and stops it (lifespan shutdown included) at
the end. `ToyEnv` is a tiny env whose behaviour a task chooses: `metadata.hang` (seconds
`step` sleeps), `metadata.fail` (`step` raises), `metadata.slow` (seconds every call sleeps);
`CLOSED` records every env closed, so tests can see that shutdown and reaping close them
(and `close_calls` how often one env was closed).
`toy_plugin()` registers it (and a task source-free env `toy`) as an inline plugin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx

from beyondagent_core import EnvReset, EnvSpec, EnvStep, Reward, Task, hookimpl
from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost
from beyondagent_core.serving import bind, url_of
from beyondagent_plugin_envservice.server import create_app, uvicorn_config

ROOT = Path(__file__).resolve().parents[3]  # the repository
CLOSED: list[str] = []
_lock = threading.Lock()


@attrs.define
class ToyConfig:
    max_steps: int = 3
    greeting: str = "hello"


class ToyEnv:
    """Counts steps; reward 1 per step; success once `max_steps` steps are taken."""

    def __init__(self, config: ToyConfig | None = None):
        self.config = config or ToyConfig()
        self.task: Task | None = None
        self.steps = 0
        self.closed = False
        self.close_calls = 0

    def reset(self, task: Task) -> EnvReset:
        self.task, self.steps = task, 0
        self._sleep("slow")
        if task.metadata.get("fail_reset"):
            raise RuntimeError("reset exploded\nsecond line of the message")
        query = task.query or f"{self.config.greeting} {task.task_id}"
        return EnvReset(messages=[{"role": "user", "content": query}], info={"metadata": dict(task.metadata)})

    def step(self, action: dict[str, Any]) -> EnvStep:
        self._sleep("slow")
        self._sleep("hang")
        if self.task is not None and self.task.metadata.get("fail"):
            raise RuntimeError("the toy env fails on purpose")  # an env bug
        if self.task is not None and self.task.metadata.get("reject"):
            raise ValueError(f"the toy env cannot take {action.get('content')!r}")  # the caller's input
        self.steps += 1
        done = self.steps >= self.config.max_steps
        return EnvStep(observation=[{"role": "user", "content": f"echo {action.get('content')}"}],
                       reward=1.0, terminated=done, info={"steps": self.steps})

    def evaluate(self) -> Reward:
        return Reward(score=float(self.steps), success=self.steps >= self.config.max_steps,
                      reason=f"{self.steps} steps", details={"steps": self.steps})

    def valid_actions(self) -> list[str]:
        return ["a", "b"]

    def task_ids(self, split: str) -> list[str]:
        if split not in ("train", "val"):
            raise ValueError(f"unknown split {split!r}")
        return [f"toy-{split}-{i}" for i in range(3)]

    def close(self) -> None:
        self.closed = True
        self.close_calls += 1
        with _lock:
            CLOSED.append(self.task.task_id if self.task else "?")

    def _sleep(self, key: str) -> None:
        seconds = self.task.metadata.get(key) if self.task is not None else None
        if seconds:
            time.sleep(float(seconds))


class ToyPlugin:
    @hookimpl
    def beyondagent_envs(self) -> list[EnvSpec]:
        return [EnvSpec(name="toy", factory=ToyEnv, config_cls=ToyConfig, summary="A test env (fault injection).")]


@attrs.define
class Served:
    url: str
    pool: InstancePool
    app: Any


@contextlib.contextmanager
def running_server(factory: Callable[[], Any] = ToyEnv, *, env_name: str = "toy", ttl: float = 600.0,
                   max_instances: int = 64, call_timeout: float = 10.0, open_timeout: float = 120.0,
                   token: str | None = None, max_body_bytes: int = 4 * 1024 * 1024, host: Any = None,
                   header_timeout: float = 10.0, body_timeout: float = 30.0,
                   max_connections: int = 1024) -> Iterator[Served]:
    """The real app and uvicorn on a free loopback port, in a thread, for the `with` block."""
    import uvicorn

    host = host if host is not None else ThreadHost(factory, threads=8)
    limits = PoolLimits(ttl=ttl, max_instances=max_instances, call_timeout=call_timeout, open_timeout=open_timeout)
    pool = InstancePool(host, limits, env_name=env_name)
    app = create_app(pool, token=token, max_body_bytes=max_body_bytes, body_timeout=body_timeout)
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn_config(app, graceful_s=2, header_timeout=header_timeout,
                                           max_connections=max_connections))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = url_of(sock)
    wait_healthy(url, timeout=30)
    try:
        yield Served(url, pool, app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def wait_healthy(url: str, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not become healthy in {timeout}s")
        time.sleep(0.05)


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.05) -> None:
    """Poll `predicate` until true (a deadline against hanging, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not become true")
        time.sleep(interval)


def cli_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEYONDAGENT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


@contextlib.contextmanager
def serve_subprocess(*args: str, env: dict[str, str] | None = None, log_path: Path) -> Iterator[tuple[str, Any]]:
    """`beyondagent env serve --port 0 ARGS` as a real child process; yields (url, Popen)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "beyondagent_core.cli", "env", "serve", "--port", "0", *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env or cli_environment(), cwd=ROOT)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None:
            for line in log_path.read_text().splitlines():
                if line.startswith("envservice listening on "):
                    url = line.split()[-1]
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError(log_path.read_text())
            time.sleep(0.05)
        wait_healthy(url, proc=proc)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
