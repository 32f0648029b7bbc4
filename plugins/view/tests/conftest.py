"""The viewer's tests keep its private per-user folder (the index key, indexes of read-only runs)
in a temporary folder, never in the user's ~/.cache."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module", autouse=True)
def private_cache(private_cache_dir: str) -> Iterator[None]:
    # per module, not per session: a session-wide value stayed set for every test run after these
    # (another plugin's tests then looked for the venvs cache under the temporary folder)
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = private_cache_dir
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before
