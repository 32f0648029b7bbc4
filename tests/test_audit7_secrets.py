"""Log events are redacted by key too (audit 7): `redact_event` masks a value under a secret-looking key whole.

A short token nobody has remembered, under `api_key` or `hf_token`, is masked because of its key; the same
text under an ordinary key is left as it is (it is neither remembered nor secret-shaped), and `exc_info` is
passed through untouched for structlog to format. A remembered value is masked from `MIN_LENGTH` (6)
characters on, and not below.
"""

from __future__ import annotations

import pytest

from beyondagent_core import secrets


@pytest.fixture(autouse=True)
def no_remembered_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


def test_a_value_under_a_secret_key_is_masked_whole_in_a_log_event() -> None:
    event = {"event": "llm.ready", "api_key": "sk-short", "hf_token": "hf_abc123", "model": "sk-short",
             "nested": {"password": "hunter22", "user": "ada"}, "exc_info": True}
    assert secrets.redact_event(None, "info", event) == {
        "event": "llm.ready", "api_key": "***", "hf_token": "***", "model": "sk-short",
        "nested": {"password": "***", "user": "ada"}, "exc_info": True}


def test_a_remembered_value_of_min_length_is_masked_and_a_shorter_one_is_not() -> None:
    assert secrets.MIN_LENGTH == 6
    secrets.remember("q7z9x2")  # six characters: long enough
    secrets.remember("k3y5v")  # five: would mask ordinary text
    assert secrets.redact("token q7z9x2 and k3y5v") == "token *** and k3y5v"
