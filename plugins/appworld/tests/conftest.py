"""Fixtures of the AppWorld plugin's tests: the venv, a world generated at test time, a server.

AppWorld's downloaded data cannot be fetched here (and may not be redistributed decrypted), so
the tests run on a world `beyondagent appworld generate` builds into a temporary directory from
the `appworld` package itself (real app databases, real API docs, real `evaluate_task`). The
AppWorld side runs only in the plugin's venv; this process (the main environment) never
imports `appworld`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["beyondagent_core.testing"]

# Short enough that the hung-cell test is quick, long enough for a reset on a busy 2-core machine.
CALL_TIMEOUT = 20


@pytest.fixture(scope="session")
def appworld_venv() -> Any:
    from beyondagent_plugin_appworld.commands import appworld_venv as build

    return build()


@pytest.fixture(scope="session")
def world_root(tmp_path_factory: pytest.TempPathFactory, appworld_venv: Any) -> Path:
    """A 4-task AppWorld world made with `beyondagent appworld generate` (one task of each kind)."""
    from beyondagent_core.cli import main

    root = tmp_path_factory.mktemp("appworld") / "root"
    assert main(["appworld", "generate", "--tasks", "4", "--out", str(root)]) == 0
    return root


@pytest.fixture(scope="session")
def server(world_root: Path, appworld_venv: Any) -> Iterator[Any]:
    """`beyondagent env serve --env appworld` in the AppWorld venv, with the plugin's serve args."""
    from beyondagent_core.envservice.launch import LaunchedServer
    from beyondagent_plugin_appworld import SERVE_ARGS

    args = [*SERVE_ARGS, "--call-timeout", str(CALL_TIMEOUT)]  # the later flag wins
    launched = LaunchedServer.start("appworld", {"root": str(world_root)}, args=args,
                                    python=str(appworld_venv.python), timeout=180)
    yield launched
    launched.stop()


class LoopThread:
    """One event loop on a thread, so synchronous code (the env contract suite) can use the async client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="appworld-tests-loop")
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 300) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()
