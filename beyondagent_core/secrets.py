"""Secrets, kept out of every log, event, error, saved spec, checkpoint and state file.

Two kinds of secret are masked as `***`:

- values this process knows are secret, remembered where they enter: spec values resolved
  from environment variables, under secret-looking keys or in a plugin's settings
  (`parse_spec`), the LLM API key (`llm.py`), env-service tokens (`remember`);
- secrets recognised by their shape, known or not: a URL's userinfo (`user:pass@`), a token
  in its query (`?token=`, `api_key=`, `access_token=`...) or path (a Slack or Discord
  webhook, a Telegram bot token, a long random segment), every URL of a scheme that carries
  its credentials in the host (apprise's `slack://`, `ntfy://`, `json://`...), and an
  `Authorization` value echoed back (`Bearer ...`, `Basic <base64 of user:pass>`).

One mechanism, used everywhere: every structlog event passes through `redact_event` (console
and events.jsonl alike, tracebacks with `-v` too); the CLI redacts the errors it prints (and
their tracebacks); `Spec.redacted` (the saved spec, what lifecycle hooks and checkpoints get),
the exploration checkpoint's header, a failed episode's error and eval's endpoint description
go through `redact_value` / `redact`. A keyed value is masked whole when its key names a secret
(`is_secret_key`). Credentials seen in a URL are remembered from then on.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from typing import Any

MASK = "***"
MIN_LENGTH = 6  # shorter values ("0", "true", a port) would mask ordinary text
_known: set[str] = set()
_longest_first: tuple[str, ...] = ()  # _known, sorted once per change rather than per string
_lock = threading.Lock()


def remember(value: Any) -> None:
    """Treat `value` (a string of MIN_LENGTH or more characters) as secret from now on.

    A URL's credentials are remembered on their own too, and as the base64 a `Basic`
    header carries them in, so a server echoing them back in any form is masked.
    """
    if not isinstance(value, str) or len(value.strip()) < MIN_LENGTH:
        return
    _add({value.strip()})
    for credentials in _URL_CREDENTIALS.findall(value):
        _remember_credentials(credentials)


def redact(text: str) -> str:
    """`text` with every remembered secret and every secret-shaped part replaced by `***`."""
    if not isinstance(text, str) or not text:
        return text
    if "@" in text:  # credentials in a URL here are remembered first: their base64 may sit anywhere in `text`
        for credentials in _URL_CREDENTIALS.findall(text):
            _remember_credentials(credentials)
    return _mask_shapes(_mask_known(text))


def redact_value(value: Any, key: Any = None) -> Any:
    """`redact` through strings inside dicts, lists and tuples; a string under a secret-looking
    key (`is_secret_key`), or in a list or tuple under one (`api_keys: [...]`), is masked whole.
    Other values are returned as they are."""
    if isinstance(value, str):
        return MASK if value and key is not None and is_secret_key(key) else redact(value)
    if isinstance(value, dict):
        return {item_key: redact_value(item, item_key) for item_key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [redact_value(item, key) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, BaseException):
        return redact(f"{type(value).__name__}: {value}")
    return value


def redact_event(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: no secret reaches a log line or events.jsonl."""
    return {key: value if key == "exc_info" else redact_value(value, key) for key, value in event.items()}


def forget_all() -> None:
    """For tests: start from no secrets."""
    global _longest_first
    with _lock:
        _known.clear()
        _longest_first = ()


def _add(values: set[str]) -> None:
    global _longest_first
    if values <= _known:
        return
    with _lock:
        _known.update(values)
        _longest_first = tuple(sorted(_known, key=len, reverse=True))


# --- keys whose value is a secret ------------------------------------------------------------

_SECRET_KEY_PARTS = ("api_key", "apikey", "access_key", "private_key", "password", "passwd", "secret",
                     "credential", "authorization")


def is_secret_key(key: Any) -> bool:
    """Whether a mapping key names a secret: `api_key`, `hf_token`, `accessToken`, `password`,
    `Authorization`, `client_secret`... (not `tokenizer` or `max_tokens`)."""
    name = re.sub(r"[^a-z0-9]+", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(key)).lower())
    return name.endswith("token") or any(part in name for part in _SECRET_KEY_PARTS)


# --- remembered values -------------------------------------------------------------------------


def _mask_known(text: str) -> str:
    """Mask every occurrence of every remembered secret. Occurrences are found in the original
    text and merged before masking, so a secret containing or overlapping another (or itself)
    is masked whole: no part of either survives, whichever is masked first."""
    known = _longest_first
    spans: list[tuple[int, int]] = []
    for secret in known:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    if not spans:
        return text
    spans.sort()
    merged = [spans[0]]
    for start, end in spans[1:]:
        if start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    parts, position = [], 0
    for start, end in merged:
        parts += [text[position:start], MASK]
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _remember_credentials(credentials: str) -> None:
    """`user:pass` from a URL: the pair, the password, and the pair as a Basic header has it."""
    from urllib.parse import unquote

    user, _, password = credentials.partition(":")
    pairs = {credentials, f"{unquote(user)}:{unquote(password)}"}
    values = {password, unquote(password), *pairs, *(base64.b64encode(p.encode()).decode() for p in pairs)}
    _add({v for v in values if len(v) >= MIN_LENGTH and MASK not in v})


# --- secrets recognised by their shape ---------------------------------------------------------

# Schemes whose host is a place, not a credential: only their userinfo, query and token-like
# path parts are masked. Every other scheme (apprise's slack://, tgram://, ntfy://, json://,
# mailto://...) carries tokens or passwords in host and path, so all after `://` is masked.
_HOST_SCHEMES = frozenset({
    "http", "https", "ws", "wss", "ftp", "ftps", "sftp", "ssh", "git", "file", "unix", "tcp", "udp",
    "ray", "redis", "rediss", "grpc", "grpcs", "s3", "gs", "gcs", "hdfs", "az", "abfs", "abfss",
    "postgres", "postgresql", "mysql", "mongodb", "amqp", "amqps", "nats", "kafka",
})
_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]{0,30})://([^\s\"'<>`]*)")
_URL_CREDENTIALS = re.compile(r"://([^/\s\"'<>`@?#:]*:[^/\s\"'<>`@?#]+)@")
_URL_TRAILER = re.compile(r"[.,;:!?)\]}]+$")  # punctuation after a URL in prose is not part of it
_URL_PARTS = re.compile(r"(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?P<query>\?[^#]*)?(?P<fragment>#.*)?", re.S)
# Query parameters that hold a credential, besides those named like a secret key (`is_secret_key`).
_SECRET_PARAMS = frozenset({"key", "sig", "signature", "code", "auth", "pass", "pwd", "session", "sessionid", "sid",
                            "x_amz_signature", "x_amz_credential", "x_goog_signature", "x_goog_credential"})
# Path segments after one of these are webhook credentials (…/webhooks/<id>/<token>).
_WEBHOOK_MARKERS = frozenset({"webhook", "webhooks", "hooks"})
_SLACK_HOOKS = re.compile(r"(^|\.)hooks\.slack\.com$", re.I)
_TELEGRAM_BOT = re.compile(r"bot\d+:[\w\-]+")
# A run of 16+ letters and digits with both in it: an API key or token, not a word or a model name.
_RANDOM_PIECE = re.compile(r"(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{16,}")

_AUTHORIZATION = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)([\"']?\s*[:=]\s*[\"']?)"
    r"(?:(bearer|basic|token|digest)\s+)?([^\s\"',;})\]]+)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]+=*)")
_BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")


def mask_url(url: str) -> str:
    """One URL with its secret parts masked (see the module docstring)."""
    return _URL.sub(_masked_url, url)


def _mask_shapes(text: str) -> str:
    if "://" in text:
        text = _URL.sub(_masked_url, text)
    lowered = text.lower()
    if "authoriz" in lowered or "api-key" in lowered:
        text = _AUTHORIZATION.sub(_masked_authorization, text)
    if "bearer" in lowered:
        text = _BEARER.sub(lambda m: m[1] + MASK if _looks_like_token(m[2]) else m[0], text)
    if "basic" in lowered:
        text = _BASIC.sub(lambda m: m[1] + MASK if _is_basic_credentials(m[2]) else m[0], text)
    return text


def _masked_url(match: re.Match[str]) -> str:
    scheme, rest = match[1], match[2]
    trailer = _URL_TRAILER.search(rest)
    if trailer:
        rest, tail = rest[:trailer.start()], trailer[0]
    else:
        tail = ""
    if not rest or rest == MASK:
        return match[0]
    if scheme.lower() not in _HOST_SCHEMES:
        return f"{scheme}://{MASK}{tail}"
    parts = _URL_PARTS.match(rest)
    assert parts is not None  # every group is optional: it always matches
    authority = parts["authority"]
    if "@" in authority:
        authority = f"{MASK}@{authority.rpartition('@')[2]}"
    host = authority.rpartition("@")[2].partition(":")[0]
    path = _masked_path(parts["path"], slack=bool(_SLACK_HOOKS.search(host)))
    query = "?" + _masked_params(parts["query"][1:]) if parts["query"] else ""
    fragment = parts["fragment"] or ""
    if "=" in fragment:
        fragment = "#" + _masked_params(fragment[1:])
    return f"{scheme}://{authority}{path}{query}{fragment}{tail}"


def _masked_path(path: str, *, slack: bool) -> str:
    segments = path.split("/")
    after_marker = False
    for i, segment in enumerate(segments):
        if not segment or segment == MASK:
            continue
        if after_marker or _TELEGRAM_BOT.fullmatch(segment) or _RANDOM_PIECE.search(segment):
            segments[i] = "bot" + MASK if _TELEGRAM_BOT.fullmatch(segment) else MASK
        after_marker = after_marker or segment.lower() in _WEBHOOK_MARKERS or (slack and segment == "services")
    return "/".join(segments)


def _masked_params(query: str) -> str:
    pairs = []
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and value and value != MASK and (_is_secret_param(name) or _RANDOM_PIECE.search(value)):
            value = MASK
        pairs.append(f"{name}{eq}{value}")
    return "&".join(pairs)


def _is_secret_param(name: str) -> bool:
    normal = re.sub(r"[^a-z0-9]+", "_", name.lower())
    return normal in _SECRET_PARAMS or normal.endswith("key") or is_secret_key(name)


def _masked_authorization(match: re.Match[str]) -> str:
    if match[4] == MASK:
        return match[0]
    scheme = f"{match[3]} " if match[3] else ""
    return f"{match[1]}{match[2]}{scheme}{MASK}"


def _looks_like_token(value: str) -> bool:
    """A bearer token, not the next word of a sentence ("Bearer authentication")."""
    return len(value) >= 8 and (not value.isalpha() or not value[1:].islower())


def _is_basic_credentials(value: str) -> bool:
    """Whether `value` is base64 of `user:pass` (what a Basic header carries), not a word."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        text = decoded.decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return False
    return ":" in text and text.isprintable()
