"""Secret values this process knows, kept out of every log, event, error and saved spec.

Values are remembered where they enter: spec values resolved from environment variables or
under secret-looking keys (`parse_spec`), the LLM API key (`llm.py`), env-service tokens. Every
structlog event passes through `redact_event` (console and events.jsonl alike) and the CLI
redacts the errors it prints, so a key echoed back in a server's 401 body, or a URL with a
token inside an error, shows as `***`.
"""

from __future__ import annotations

import threading
from typing import Any

MASK = "***"
MIN_LENGTH = 6  # shorter values ("0", "true", a port) would mask ordinary text
_known: set[str] = set()
_lock = threading.Lock()


def remember(value: Any) -> None:
    """Treat `value` (a string of MIN_LENGTH or more characters) as secret from now on."""
    if isinstance(value, str) and len(value.strip()) >= MIN_LENGTH:
        with _lock:
            _known.add(value.strip())


def redact(text: str) -> str:
    """`text` with every remembered secret replaced by `***` (longest first)."""
    if not _known or not isinstance(text, str):
        return text
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_value(value: Any) -> Any:
    """`redact` through strings inside dicts, lists and tuples (other values as they are)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    if isinstance(value, BaseException):
        return redact(f"{type(value).__name__}: {value}")
    return value


def redact_event(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: no remembered secret reaches a log line or events.jsonl."""
    if not _known:
        return event
    return {key: value if key == "exc_info" else redact_value(value) for key, value in event.items()}


def forget_all() -> None:
    """For tests: start from no secrets."""
    with _lock:
        _known.clear()
