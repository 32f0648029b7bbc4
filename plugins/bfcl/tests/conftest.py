"""Fixtures of the BFCL plugin's tests: the venv, a launched env service, an event loop thread.

Everything is real: bfcl-eval's own data, backends and checkers, in the plugin's venv (built
once, cached by the core's venv mechanism); this process (the main environment) never imports
`bfcl_eval`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bfcl_testkit import LoopThread

pytest_plugins = ["beyondagent_core.testing"]


@pytest.fixture(scope="session")
def bfcl_venv() -> Any:
    from beyondagent_plugin_bfcl.venv import bfcl_venv as build

    return build()


@pytest.fixture(scope="session")
def server(bfcl_venv: Any) -> Iterator[Any]:
    """`beyondagent env serve --env bfcl` in the BFCL venv, with the plugin's serve args."""
    from beyondagent_plugin_bfcl import SERVE_ARGS

    from beyondagent_plugin_envservice.launch import LaunchedServer

    launched = LaunchedServer.start("bfcl", {}, args=[*SERVE_ARGS, "--call-timeout", "20"],
                                    python=str(bfcl_venv.python), timeout=180)
    yield launched
    launched.stop()


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.stop()
