"""The console logger writes to `sys.stderr` as it is now, not as it was when logging was set up.

pytest's capsys (or an app embedding the CLI) swaps `sys.stderr` and closes the old stream; a
logger bound to it failed every later event with "I/O operation on closed file".
"""

from __future__ import annotations

import io
import sys

import pytest

from beyondagent_core.logs import configure_logging, get_logger


def test_a_swapped_and_closed_stderr_does_not_break_later_events(monkeypatch: pytest.MonkeyPatch) -> None:
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging()
    get_logger("beyondagent.test").info("console.first")
    assert "console.first" in first.getvalue()
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    get_logger("beyondagent.test").info("console.second")
    assert "console.second" in second.getvalue()
