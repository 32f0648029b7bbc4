"""Fixtures of the AppWorld plugin's tests: the venv, a world generated at test time, a server.

AppWorld's downloaded data cannot be fetched here (and may not be redistributed decrypted), so
the tests run on a world `beyondagent appworld generate` builds into a temporary directory from
the `appworld` package itself (real app databases, real API docs, real `evaluate_task`). The
AppWorld side runs only in the plugin's venv; this process (the main environment) never
imports `appworld`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from appworld_testkit import CALL_TIMEOUT, CODE_TIMEOUT, LoopThread

pytest_plugins = ["beyondagent_core.testing"]


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
    from beyondagent_plugin_appworld import SERVE_ARGS

    from beyondagent_plugin_envservice.launch import LaunchedServer

    args = [*SERVE_ARGS, "--call-timeout", str(CALL_TIMEOUT)]  # the later flag wins
    launched = LaunchedServer.start("appworld", {"root": str(world_root), "code_timeout": CODE_TIMEOUT}, args=args,
                                    python=str(appworld_venv.python), timeout=180)
    yield launched
    launched.stop()


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()
