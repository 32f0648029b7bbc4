"""Secrets (`beyondagent_core.secrets`), class-wide: every form the module promises to mask, each limit on and past.

- `remember`: a value of MIN_LENGTH characters after stripping is remembered, one shorter is not, nor a
  non-string; a URL's credentials are remembered in each form a server may echo them in (the pair, the
  password alone when long enough, percent-decoded, as a Basic header's base64), a short password only
  inside its pair.
- shapes, each at its threshold: a path segment or query value of 16 random letters and digits (15 is
  not), a bearer token of 8 characters (7 is not; a capitalised or lower-case word is prose), a Basic
  value only when it decodes to `user:pass`, the query parameters named like credentials, a fragment's
  parameters, webhook paths (generic `hooks`, Slack's `services`, Telegram's bot token), a scheme of 31
  characters that carries its credentials in the host, punctuation after a URL kept outside it.
- `redact_value`/`redact_event`: the container kinds kept, an exception as its type and redacted text,
  the empty string and non-strings under a secret key, `exc_info` passed through; `is_secret_key`'s
  spellings (camelCase, dashes, upper case, `...token` at the end only).
"""

from __future__ import annotations

import base64

import pytest

from beyondagent_core import secrets
from beyondagent_core.secrets import MASK, MIN_LENGTH, is_secret_key, redact, redact_event, redact_value, remember


@pytest.fixture(autouse=True)
def no_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- remembered values ----------------------------------------------------------------------------


def test_a_value_is_remembered_stripped_from_min_length_on() -> None:
    assert MIN_LENGTH == 6
    remember("  k7q2z9  ")  # six once stripped
    remember("  k7q2z ")  # five once stripped
    remember(12345678)  # not text: nothing to remember
    assert redact("a k7q2z9 b k7q2z c 12345678") == "a *** b k7q2z c 12345678"
    remember("")
    remember(" " * 10)
    assert redact("a  b") == "a  b"  # nothing blank was remembered


def test_a_urls_credentials_are_remembered_in_every_form_a_server_may_echo() -> None:
    remember("json://bob:p%40ssw0rd@127.0.0.1:9/hook")
    for form in ("p%40ssw0rd", "p@ssw0rd", "bob:p%40ssw0rd", "bob:p@ssw0rd", b64("bob:p@ssw0rd"),
                 b64("bob:p%40ssw0rd")):
        assert redact(f"echo <{form}>") == "echo <***>", form


def test_a_short_password_is_masked_only_inside_its_pair() -> None:
    remember("http://alice:pw1@127.0.0.1/")
    assert redact("pw1 | alice:pw1 | " + b64("alice:pw1")) == "pw1 | *** | ***"


def test_credentials_seen_by_redact_are_remembered_for_later_text() -> None:
    assert redact("GET https://carol:hunter22@h/x") == "GET https://***@h/x"
    assert redact("later: hunter22 " + b64("carol:hunter22")) == "later: *** ***"


# --- secrets recognised by their shape -----------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # 16 letters and digits, both kinds: a token; 15, or letters only, are not
    ("https://h/x/abcdefghij123456", "https://h/x/***"),
    ("https://h/x/abcdefghij12345", "https://h/x/abcdefghij12345"),
    ("https://h/x/abcdefghijklmnopqrst", "https://h/x/abcdefghijklmnopqrst"),
    ("https://h/x/1234567890123456789", "https://h/x/1234567890123456789"),
    ("https://h/x?v=abcdefghij123456&w=2", "https://h/x?v=***&w=2"),
    ("https://h/x?v=abcdefghij12345", "https://h/x?v=abcdefghij12345"),
    # parameters named like credentials, whatever their value
    ("https://h/p?sig=1&code=2&subscription-key=3&q=4&pwd=5&X-Amz-Signature=6&page=7",
     "https://h/p?sig=***&code=***&subscription-key=***&q=4&pwd=***&X-Amz-Signature=***&page=7"),
    ("https://h/p?token=&q=1", "https://h/p?token=&q=1"),  # nothing to mask
    ("https://h/p#access_token=abc&state=1", "https://h/p#access_token=***&state=1"),
    ("https://h/p#section-2", "https://h/p#section-2"),
    # webhook paths: everything after the marker
    ("https://h/api/hooks/abc/def", "https://h/api/hooks/***/***"),
    ("https://h/webhook/abc", "https://h/webhook/***"),
    ("https://hooks.slack.com/services/A/B/C", "https://hooks.slack.com/services/***/***/***"),
    ("https://example.com/services/A/B", "https://example.com/services/A/B"),  # not Slack's host
    ("https://api.telegram.org/bot12:abc-def/getMe", "https://api.telegram.org/bot***/getMe"),
    # userinfo: only the part before the last @ is masked
    ("ssh://git:pw@x@github.com:22/r", "ssh://***@github.com:22/r"),
    # a scheme of another kind carries credentials in its host: all of it, up to prose punctuation
    ("ntfy://topic-x, then", "ntfy://***, then"),
    ("(see tgram://123/abc).", "(see tgram://***)."),
    ("a" + "b" * 30 + "://secretpath", "a" + "b" * 30 + "://***"),  # a 31-character scheme
    ("https://example.com/a.", "https://example.com/a."),
    ("x://", "x://"),
])
def test_each_secret_shape_at_its_threshold(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Bearer abc12345", "Bearer ***"),  # 8 characters: a token
    ("Bearer abc1234", "Bearer abc1234"),  # 7: too short to tell from prose
    ("Bearer Authentication", "Bearer Authentication"),  # a capitalised word
    ("bearer abcdefghij", "bearer abcdefghij"),  # a lower-case word
    ("Bearer ABCDEFGHIJ", "Bearer ***"),  # upper case: not a word
    ("Basic " + b64("user:pass"), "Basic ***"),
    ("Basic " + b64("hello"), "Basic " + b64("hello")),  # base64, but of no user:pass
    ("Basic usage", "Basic usage"),
    ("x-api-key: abc", "x-api-key: ***"),
    ("api-key=abc", "api-key=***"),
    ("Authorization: token abc", "Authorization: token ***"),
    ("Proxy-Authorization: Digest abc", "Proxy-Authorization: Digest ***"),
    ("'Authorization': '***'", "'Authorization': '***'"),
])
def test_authorization_values_and_their_nearest_prose(text: str, expected: str) -> None:
    assert redact(text) == expected


# --- values, events and keys -----------------------------------------------------------------------------


def test_redact_value_keeps_each_container_kind_and_masks_under_secret_keys() -> None:
    remember("sk-live-424242")
    assert redact_value(("a", "sk-live-424242")) == ("a", MASK)
    assert redact_value(["a", "sk-live-424242"]) == ["a", MASK]
    assert redact_value({"outer": {"client_secret": "short", "name": "short"}}) == {
        "outer": {"client_secret": MASK, "name": "short"}}
    assert redact_value({"password": ""}) == {"password": ""}  # nothing to hide
    assert redact_value({"api_key": 12345}) == {"api_key": 12345}  # not text
    assert redact_value("short", "token") == MASK and redact_value("short", None) == "short"
    # a list (or tuple) of keys under a secret-looking key is masked item by item, not passed through
    assert redact_value({"api_keys": ["key-one", "key-two"], "names": ["key-one"]}) == {
        "api_keys": [MASK, MASK], "names": ["key-one"]}
    assert redact_value(("short",), "passwords") == (MASK,)
    assert redact_value(ValueError("echo sk-live-424242")) == "ValueError: echo ***"
    assert redact(None) is None and redact("") == ""


def test_redact_event_masks_by_key_and_passes_exc_info_through() -> None:
    remember("sk-live-515151")
    error = ValueError("sk-live-515151")
    event = {"event": "x", "hf_token": "plain", "exc_info": error, "detail": ["sk-live-515151"]}
    assert redact_event(None, "error", event) == {"event": "x", "hf_token": MASK, "exc_info": error,
                                                  "detail": [MASK]}


@pytest.mark.parametrize(("key", "secret"), [
    ("api_key", True), ("apiKey", True), ("API_KEY", True), ("x-api-key", True), ("accessToken", True),
    ("hf-token", True), ("hf_token", True), ("token", True), ("clientSecret", True), ("db_password", True),
    ("passwd", True), ("private_key", True), ("privateKey", True), ("accessKeyId", True), ("aws_access_key_id", True), ("credentials", True),
    ("Authorization", True), ("tokenizer", False), ("max_tokens", False), ("tokens", False),
    ("token_budget", False), ("model", False), (3, False),
])
def test_which_keys_name_a_secret(key: object, secret: bool) -> None:
    assert is_secret_key(key) is secret
