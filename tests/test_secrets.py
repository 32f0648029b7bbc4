"""Secrets never reach the console, events.jsonl or printed errors (`beyondagent_core.secrets`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
from spec_files import write_basic_spec

from beyondagent_core import secrets
from beyondagent_core.logs import configure_logging, log_events_to


@pytest.fixture(autouse=True)
def no_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


@pytest.fixture
def logging_config():
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)  # the console logger must not keep writing to this test's capture


def test_remembered_values_are_masked_everywhere_in_an_event(tmp_path: Path, capsys, logging_config) -> None:
    secrets.remember("sk-live-0123456789")
    secrets.remember("abc")  # too short to be told apart from ordinary text: not masked
    configure_logging()
    log_events_to(tmp_path / "events.jsonl")
    try:
        structlog.get_logger("t").warning("llm.failed", error="401: invalid key sk-live-0123456789 (abc)",
                                          body={"headers": ["Bearer sk-live-0123456789"]})
    finally:
        log_events_to(None)
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert line["error"] == "401: invalid key *** (abc)" and line["body"] == {"headers": ["Bearer ***"]}
    assert "sk-live" not in capsys.readouterr().err


def test_a_value_from_an_environment_variable_is_not_printed_in_an_error(cli, tmp_path: Path) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=1, run_name="r")
    result = cli("validate", str(spec), "run.name=${oc.env:BA_SECRET_NAME}",
                 env={"BA_SECRET_NAME": "token-9f8e7d6c/oops"})
    assert result.code == 2
    assert "token-9f8e7d6c" not in result.text and "got '***'" in result.err


def test_the_llm_key_is_remembered_when_the_client_starts() -> None:
    import asyncio
    import os

    from beyondagent_core.llm import LLMConfig, OpenAIChat

    os.environ["BA_TEST_LLM_KEY"] = "sk-test-remembered-42"
    try:
        chat = OpenAIChat(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="BA_TEST_LLM_KEY",
                                    max_llm_retries=0, timeout=2))
        with pytest.raises(Exception):  # noqa: B017 - nothing listens there; only the side effect matters
            asyncio.run(chat.chat([{"role": "user", "content": "hi"}]))
    finally:
        del os.environ["BA_TEST_LLM_KEY"]
    assert secrets.redact("echo: sk-test-remembered-42") == "echo: ***"
