"""Fixtures of the trinity plugin's tests: Trinity-RFT's venv (built once, cached).

trinity-rft needs transformers>=5.12.1 and verl 0.8, so everything that imports trinity runs as a
child process in the venv the plugin registers (`beyondagent_core.venvs`: built on first use, about
8 minutes, then reused; `scripts/test.sh` builds it first with `beyondagent venv build --all`).
Where pip cannot reach the package index to build it, those tests are skipped with the reason,
except where they must run: BEYONDAGENT_REQUIRE_TRINITY=1, or `CI` set, makes that a failure.
"""

from __future__ import annotations

import time

import pytest

from beyondagent_core.testing.must_run import skip_or_fail
from beyondagent_core.venvs import Venv, VenvBuildError


def cannot_run(reason: str) -> None:
    skip_or_fail(reason, "BEYONDAGENT_REQUIRE_TRINITY")


@pytest.fixture(scope="session")
def trinity_venv() -> Venv:
    from beyondagent_plugin_trinity.setup_command import ensure

    started = time.monotonic()
    try:
        venv = ensure()
    except VenvBuildError as exc:
        if "could not get a package from the index" in str(exc):
            cannot_run(f"building trinity's venv needs the package index: {exc}")
        raise
    print(f"trinity venv: {venv.path} (built in {venv.info().get('seconds')} s; ready after "
          f"{time.monotonic() - started:.1f} s here)")
    return venv
