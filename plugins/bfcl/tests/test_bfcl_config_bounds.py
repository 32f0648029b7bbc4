"""The BFCL env's call bounds at their edges (no venv needed): a stopped call's step takes up to twice
`max_call_seconds`, which must stay under the env service's 60 s call timeout, so 25 s is the most."""

from __future__ import annotations

import pytest
from beyondagent_plugin_bfcl.config import BFCLConfig


def test_max_call_seconds_stops_at_25() -> None:
    assert BFCLConfig(max_call_seconds=25).max_call_seconds == 25
    with pytest.raises(ValueError, match="60 s call timeout"):
        BFCLConfig(max_call_seconds=26)
    with pytest.raises(ValueError, match="max_call_seconds"):
        BFCLConfig(max_call_seconds=0.05)
