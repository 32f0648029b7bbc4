"""A traceback written to `events.jsonl` is redacted like the rest of the line (eighth audit).

An event logged with `exc_info=True` (every `component.failed`) becomes the traceback text in the
file; the exception's message may hold a secret (a URL's credentials, a remembered key). The
file's line must mask it and keep the rest of the traceback, through the real structlog setup.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beyondagent_core import secrets
from beyondagent_core.logs import configure_logging, get_logger, log_events_to


@pytest.fixture(autouse=True)
def no_remembered_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


def test_a_traceback_in_events_jsonl_holds_no_secret(tmp_path: Path) -> None:
    configure_logging()
    log = get_logger("test.audit8.tracebacks")
    secrets.remember("remembered-key-9f8e7d")
    path = tmp_path / "events.jsonl"
    log_events_to(path)
    try:
        endpoint = "http://ada:pw-4c3b2a@gpu-box:8000/v1"
        try:
            raise ConnectionError(f"cannot reach {endpoint} with remembered-key-9f8e7d (plain-word-kept)")
        except ConnectionError:
            log.error("component.failed", action="training", exc_info=True)
    finally:
        log_events_to(None)
    text = path.read_text(encoding="utf-8")
    assert "pw-4c3b2a" not in text and "remembered-key-9f8e7d" not in text
    (line,) = [json.loads(line) for line in text.splitlines()]
    assert line["event"] == "component.failed" and line["action"] == "training"
    trace = line["exception"]
    assert trace.startswith("Traceback (most recent call last)") and "ConnectionError: cannot reach" in trace
    assert "***" in trace and "gpu-box:8000" in trace and "plain-word-kept" in trace
